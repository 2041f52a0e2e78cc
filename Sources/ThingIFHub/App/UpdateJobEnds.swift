// SPDX-License-Identifier: Apache-2.0

import Dispatch
import ThingIF

/// The one way the hub ends an update job itself (docs/UPDATES.md §9,
/// §11): a rollout's abort or cancel, the operator's cancel of one job, an
/// offer that expired unanswered, a member's time-out. The job's row by
/// one conditional UPDATE (a report that came first wins), then the
/// offer's command cancelled through the command lifecycle's own cancel
/// (CommandDelivery.startCancel: held, it is never published; delivered,
/// the thing's library drops it unless it has started it), then the
/// rollout member, if any, takes the job's status (its abort criteria and
/// completion checked). Shared by the app door and the thing's request
/// lane (a report that aborts a rollout).
struct UpdateJobEnds: Sendable {
    let store: HubStore
    let delivery: CommandDelivery

    var events: HubEvents { delivery.events }

    /// Ends job `jobID` with `status` and `reason` when it has no report
    /// yet or its last report's status is one of `from`: true when this
    /// call ended it, false when it was not in those (or is no more), nil
    /// when the store failed. `member`: whether its rollout member is
    /// moved here (false for a caller that moves it itself).
    @discardableResult
    func end(_ jobID: String, status: UpdateStatus, reason: String, from: [UpdateStatus], member: Bool = true)
        -> Bool?
    {
        guard
            let ended = store.endUpdateJob(
                jobID: jobID, status: status, reason: reason, from: from, now: Platform.epochMs())
        else { return nil }
        guard ended else { return false }
        if case .found(let job) = store.updateJob(id: jobID) { cancelOffer(job) }
        if member { Rollouts.finished(jobID: jobID, status: status, ends: self) }
        return true
    }

    /// The job's offer command, while it is open, cancelled as an app's
    /// cancel is (no wait for the thing's answer: the job is final, and
    /// its next block request is 410 whatever the thing does).
    func cancelOffer(_ job: UpdateJobRecord) {
        guard let c = delivery.store.command(id: job.commandID), c.results == nil, c.state.isOpen else { return }
        _ = delivery.startCancel(c)
        events.event("update \(job.jobID) of \(job.thingID): its offer \(c.commandID) cancelled")
    }

    /// The reason of a job whose offer expired unanswered.
    static let offerExpired = "OFFER_EXPIRED"

    /// The offer's command ended without results: EXPIRED (its
    /// `timeToLive`, or undelivered or unanswered past the lifecycle's
    /// bounds) ends its job FAILED `OFFER_EXPIRED` when the thing never
    /// reported on it (a thing that reported has the job in its journal
    /// and goes on); the thing may then get a new job. CANCELLED is the
    /// hub's own cancel of a job it ended already.
    func offerEnded(_ c: CommandRecord) {
        guard c.state == .expired, let jobID = Self.jobID(ofOffer: c.payload),
            end(jobID, status: .failed, reason: Self.offerExpired, from: []) == true
        else { return }
        events.event("update \(jobID) of \(c.thingID): FAILED, its offer \(c.commandID) \(c.endReason ?? "expired")")
    }

    /// Ends the jobs `offerEnded` missed: a hub stopped between an offer's
    /// command ending EXPIRED and its job's end leaves the job open with no
    /// report, and nothing ends that command again. Run at the hub's start
    /// and every minute (another hub may have stopped), in batches; how
    /// many it ended.
    @discardableResult
    func endExpiredOffers(batch: Int = 100) -> Int {
        var ended = 0
        while let jobs = store.jobsOfExpiredOffers(limit: batch), !jobs.isEmpty {
            var now = 0
            for jobID in jobs where end(jobID, status: .failed, reason: Self.offerExpired, from: []) == true {
                events.event("update \(jobID): FAILED, its offer expired while no hub ended the job")
                now += 1
            }
            ended += now
            // None of them ended here (another hub did, or the store
            // fails): the next run sees what is left.
            guard now > 0, jobs.count == batch else { break }
        }
        return ended
    }

    /// The job ID of an offer's command (`{"actions":[{"_thingif":[{"update":{"jobID":…}}]}]}`).
    static func jobID(ofOffer payload: String) -> String? {
        guard case .success(let j) = JSON.parse(payload) else { return nil }
        return j["actions"]?.elements.first?[AppAPI.updateAlias]?.elements.first?[UpdateOffer.actionName]?["jobID"]?
            .stringValue
    }

    /// Wires `offerEnded` to the delivery's ends of offers, off the
    /// caller's thread: an end may come under a thing's command gate
    /// (CommandDelivery.resendToEndNode), and the job's end may cancel
    /// other offers (an abort), each under its own thing's gate.
    static func watchOffers(store: HubStore, delivery: CommandDelivery) {
        delivery.offerEnded.withLock {
            $0 = { [unowned delivery] c in
                let ends = UpdateJobEnds(store: store, delivery: delivery)
                DispatchQueue.global().async { ends.offerEnded(c) }
            }
        }
    }
}
