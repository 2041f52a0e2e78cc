// SPDX-License-Identifier: Apache-2.0

import ThingIF

/// Rollouts, the operator's calls and the hub's ticks (docs/UPDATES.md
/// §11): one image offered to the things a target names, released by
/// ticks at a rate and under a cap on the jobs in flight, each release a
/// job created as POST …/things/{thingID}/updates creates one
/// (`startUpdateJob`), aborted by its criteria after a report.
extension AppAPI {
    /// A new rollout ID: "r-" and 16 hex digits (an UpdateCoding name).
    public static func newRolloutID() -> String { "r-" + Platform.randomHex(bytes: 8) }

    /// Where the rollouts' lines go: the hub's events (CommandDelivery's).
    var events: HubEvents { delivery.events }

    /// How the hub ends a job itself (its row, its offer, its member).
    var jobEnds: UpdateJobEnds { UpdateJobEnds(store: store, delivery: delivery) }

    static let maxRolloutThings = 10_000
    static let maxRolloutRate = 100_000

    /// POST …/rollouts with {"image", "manifest", "signatures", "trialS"?,
    /// "target": {"thingType"?, "firmwareVersions"?, "things"?},
    /// "ratePerMinute", "maxInFlight", "abort"?: {"failurePercent",
    /// "minExecuted"?, "statuses"?}}. Checked in order, nothing stored
    /// before all passed: the form (400), the target's things (404), the
    /// offer as a job's (400, 404, 422); then the target resolved to its
    /// members (422 ROLLOUT_TARGET_EMPTY when none) in the insert's
    /// transaction.
    public func createRollout(form: JSON) -> Result<(RolloutRecord, Int), HubError> {
        guard form.isObject else { return .failure(.invalid("the body must be a JSON object")) }
        let target: RolloutTarget
        switch Self.rolloutTarget(form["target"]) {
        case .failure(let e): return .failure(e)
        case .success(let t): target = t
        }
        for id in target.things ?? [] where store.thing(id: id) == nil { return .failure(.thingNotFound(id)) }
        func count(_ key: String, _ range: ClosedRange<Int>, in o: JSON = form) -> Result<Int, HubError> {
            guard let n = o[key]?.intValue, range.contains(n) else {
                return .failure(
                    .invalid(
                        "\"\(key)\" must be an integer from \(range.lowerBound) to \(range.upperBound)", field: key))
            }
            return .success(n)
        }
        let rate: Int
        let cap: Int
        switch (count("ratePerMinute", 1...Self.maxRolloutRate), count("maxInFlight", 1...Self.maxRolloutThings)) {
        case (.failure(let e), _), (_, .failure(let e)): return .failure(e)
        case (.success(let r), .success(let c)): (rate, cap) = (r, c)
        }
        var percent: Int?
        var minExecuted = 1
        var statuses = RolloutRecord.defaultAbortStatuses
        if let abort = form["abort"] {
            guard abort.isObject else { return .failure(.invalid("\"abort\" must be an object", field: "abort")) }
            switch count("failurePercent", 1...100, in: abort) {
            case .failure(let e): return .failure(e)
            case .success(let p): percent = p
            }
            if abort["minExecuted"] != nil {
                switch count("minExecuted", 1...Self.maxRolloutThings, in: abort) {
                case .failure(let e): return .failure(e)
                case .success(let m): minExecuted = m
                }
            }
            if let list = abort["statuses"] {
                let named = list.elements.compactMap { $0.stringValue.flatMap(UpdateStatus.init(rawValue:)) }
                guard list.isArray, !named.isEmpty, named.count == list.count,
                    named.allSatisfy({ $0.isFinal && $0 != .succeeded })
                else {
                    return .failure(
                        .invalid(
                            "\"statuses\" must list final statuses other than SUCCEEDED (FAILED, ROLLED_BACK, …)",
                            field: "statuses"))
                }
                statuses = named
            }
        }
        var timeoutS: Int?
        if form["timeoutS"] != nil {
            switch count("timeoutS", 60...Self.maxRolloutTimeoutS) {
            case .failure(let e): return .failure(e)
            case .success(let t): timeoutS = t
            }
        }
        var retries = 0
        if form["retries"] != nil {
            switch count("retries", 0...Self.maxRolloutRetries) {
            case .failure(let e): return .failure(e)
            case .success(let n): retries = n
            }
        }
        var ramp: RolloutRamp?
        if let j = form["ramp"] {
            switch Self.rolloutRamp(j, rate: rate) {
            case .failure(let e): return .failure(e)
            case .success(let r): ramp = r
            }
        }
        let rolloutID = Self.newRolloutID()
        let image: ImageRecord
        let offer: UpdateOffer
        switch checkedOffer(form: form, jobID: rolloutID) {
        case .failure(let e): return .failure(e)
        case .success(let (i, o)): (image, offer) = (i, o)
        }
        let signatures =
            UpdateOffer.encode(jobID: rolloutID, attempt: 1, manifest: [], signatures: offer.signatures)[
                "signatures"]?.dump() ?? "[]"
        let now = Platform.epochMs()
        let record = RolloutRecord(
            rolloutID: rolloutID, image: image.sha256, version: offer.manifest.version,
            manifest: offer.manifest.bytes, signatures: signatures,
            trialS: form["trialS"] == nil ? nil : offer.trialSeconds, target: target, ratePerMinute: rate,
            maxInFlight: cap, abortFailurePercent: percent, abortMinExecuted: minExecuted, abortStatuses: statuses,
            timeoutS: timeoutS, retries: retries, ramp: ramp, createdAt: now, updatedAt: now)
        switch store.insertRollout(record) {
        case nil: return .failure(.storage)
        case 0?: return .failure(HubError(422, "ROLLOUT_TARGET_EMPTY", "the target matches no thing"))
        case let n?: return .success((record, n))
        }
    }

    static let maxRolloutTimeoutS = 7 * 86_400
    static let maxRolloutRetries = 3

    /// The ramp's form: {"startPerMinute": 1…ratePerMinute, "factor": a
    /// number above 1 and at most 10, "everyS": 10…86,400}.
    static func rolloutRamp(_ j: JSON, rate: Int) -> Result<RolloutRamp, HubError> {
        guard j.isObject else {
            return .failure(.invalid("\"ramp\" must be an object: startPerMinute, factor, everyS", field: "ramp"))
        }
        guard let start = j["startPerMinute"]?.intValue, (1...rate).contains(start) else {
            return .failure(
                .invalid(
                    "\"startPerMinute\" must be an integer from 1 to ratePerMinute (\(rate))", field: "startPerMinute"))
        }
        guard let factor = j["factor"].flatMap(RolloutRamp.number), factor > 1, factor <= 10 else {
            return .failure(.invalid("\"factor\" must be a number above 1 and at most 10", field: "factor"))
        }
        guard let every = j["everyS"]?.intValue, (10...86_400).contains(every) else {
            return .failure(.invalid("\"everyS\" must be an integer from 10 to 86400", field: "everyS"))
        }
        return .success(RolloutRamp(startPerMinute: start, factor: factor, everyS: every))
    }

    /// The target's form: an object with at least one criterion.
    static func rolloutTarget(_ j: JSON?) -> Result<RolloutTarget, HubError> {
        guard let j, j.isObject else {
            return .failure(.invalid("\"target\" is required: an object", field: "target"))
        }
        func strings(_ key: String, max: Int) -> Result<[String]?, HubError> {
            guard let v = j[key] else { return .success(nil) }
            let list = v.elements.compactMap(\.stringValue)
            guard v.isArray, (1...max).contains(list.count), list.count == v.count,
                list.allSatisfy({ (1...128).contains($0.utf8.count) })
            else {
                return .failure(.invalid("\"\(key)\" must be 1 to \(max) non-empty strings", field: key))
            }
            return .success(list)
        }
        var t = RolloutTarget()
        if let type = j["thingType"] {
            guard let s = type.stringValue, (1...128).contains(s.utf8.count) else {
                return .failure(.invalid("\"thingType\" must be a non-empty string", field: "thingType"))
            }
            t.thingType = s
        }
        switch (strings("firmwareVersions", max: 100), strings("things", max: maxRolloutThings)) {
        case (.failure(let e), _), (_, .failure(let e)): return .failure(e)
        case (.success(let v), .success(let th)): (t.firmwareVersions, t.things) = (v, th)
        }
        guard t.thingType != nil || t.firmwareVersions != nil || t.things != nil else {
            return .failure(
                .invalid("\"target\" must name thingType, firmwareVersions or things", field: "target"))
        }
        return .success(t)
    }

    public func rollouts() -> Result<[RolloutRecord], HubError> {
        store.rollouts().map { .success($0) } ?? .failure(.storage)
    }

    public func rollout(id: String) -> Result<RolloutRecord, HubError> {
        switch store.rollout(id: id) {
        case .found(let r): return .success(r)
        case .notFound: return .failure(Self.rolloutNotFound(id))
        case .failed: return .failure(.storage)
        }
    }

    public func rolloutMembers(id: String) -> Result<[RolloutMember], HubError> {
        if case .failure(let e) = rollout(id: id) { return .failure(e) }
        return store.rolloutMembers(id: id).map { .success($0) } ?? .failure(.storage)
    }

    public func rolloutCounts(id: String) -> Result<[String: Int], HubError> {
        store.rolloutCounts(id: id).map { .success($0) } ?? .failure(.storage)
    }

    static func rolloutNotFound(_ id: String) -> HubError {
        HubError(404, "ROLLOUT_NOT_FOUND", "no rollout \(id)")
    }

    /// What the operator may do to a rollout.
    public enum RolloutChange: String, Sendable {
        case pause, resume, cancel
    }

    /// pause (running), resume (paused), cancel (running or paused: the
    /// offered jobs that have not started their install are ended, as an
    /// abort ends them); 409 ROLLOUT_STATUS from another status.
    public func changeRollout(id: String, _ change: RolloutChange) -> Result<RolloutRecord, HubError> {
        let current: RolloutRecord
        switch rollout(id: id) {
        case .failure(let e): return .failure(e)
        case .success(let r): current = r
        }
        let (to, from): (RolloutStatus, [RolloutStatus])
        switch change {
        case .pause: (to, from) = (.paused, [.running])
        case .resume: (to, from) = (.running, [.paused])
        case .cancel: (to, from) = (.cancelled, [.running, .paused])
        }
        let reason = change == .cancel ? "cancelled by the operator" : nil
        switch store.setRolloutStatus(id: id, to: to, from: from, reason: reason, now: Platform.epochMs()) {
        case nil: return .failure(.storage)
        case false?:
            return .failure(
                HubError(
                    409, "ROLLOUT_STATUS", "the rollout \(id) is \(current.status.rawValue): no \(change.rawValue)"))
        case true?: break
        }
        Rollouts.event(events, "rollout \(id): \(to.rawValue)")
        if change == .cancel { Rollouts.endOffered(id, reason: "ROLLOUT_CANCELLED", ends: jobEnds) }
        return rollout(id: id)
    }

    /// How long a released member may stay without its job before a tick
    /// puts it back in the queue (its hub stopped between the release's
    /// commit and the job's creation).
    static let orphanReleaseMs: Int64 = 60_000

    /// One tick of every running rollout (thingif-hub runs it every
    /// second; tests call it with their own clock): members whose job a
    /// report ended elsewhere are settled, members whose job was never
    /// created put back in the queue, jobs past the rollout's time-out
    /// ended, then the queued ones released within the rate and the cap,
    /// each with its job created as a single job is. How many were
    /// released.
    @discardableResult
    public func rolloutTick(now: Int64 = Platform.epochMs()) -> Int {
        var released = 0
        let ends = jobEnds
        for id in store.runningRolloutIDs() ?? [] {
            for (jobID, status) in store.finalJobsOfOffered(id: id) ?? [] {
                Rollouts.finished(jobID: jobID, status: status, ends: ends)
            }
            requeueOrphans(id, now: now)
            guard case .found(let before) = store.rollout(id: id), before.status == .running else { continue }
            if let t = before.timeoutS {
                for m in store.offeredMembers(id: id, releasedBefore: now - Int64(t) * 1000) ?? [] {
                    guard let jobID = m.jobID,
                        ends.end(jobID, status: .failed, reason: "TIMED_OUT", from: UpdateStatus.beforeInstall) == true
                    else { continue }
                    Rollouts.event(events, "rollout \(id): job \(jobID) of \(m.thingID) timed out after \(t) s")
                }
            }
            // Read again: a time-out may have aborted it.
            guard case .found(let r) = store.rollout(id: id), r.status == .running else { continue }
            for m in store.releaseRolloutMembers(id: id, now: now) ?? [] {
                if release(r, m) { released += 1 }
            }
            Rollouts.completeIfDone(id, store: store, events: events)
        }
        return released
    }

    /// Offered members released over `orphanReleaseMs` ago whose job does
    /// not exist go back to the queue (their attempt taken back).
    private func requeueOrphans(_ id: String, now: Int64) {
        for m in store.offeredMembers(id: id, releasedBefore: now - Self.orphanReleaseMs) ?? [] {
            guard let jobID = m.jobID, case .notFound = store.updateJob(id: jobID),
                store.setRolloutMember(
                    id: id, thingID: m.thingID, state: RolloutMember.queued, from: RolloutMember.offered)
            else { continue }
            Rollouts.event(events, "rollout \(id): \(m.thingID) back in the queue, its job \(jobID) was never created")
        }
    }

    /// Creates a released member's job; a thing with a job under way (or a
    /// store that failed) goes back to the queue, an image gone fails it.
    private func release(_ r: RolloutRecord, _ m: RolloutRelease) -> Bool {
        let (id, thingID, jobID) = (r.rolloutID, m.thingID, m.jobID)
        func back() {
            _ = store.setRolloutMember(
                id: id, thingID: thingID, state: RolloutMember.queued, from: RolloutMember.offered)
        }
        guard let thing = store.thing(id: thingID) else { return false }
        let image: ImageRecord
        switch store.image(sha256: r.image) {
        case .failed:
            back()
            return false
        case .notFound:
            _ = store.setRolloutMember(
                id: id, thingID: thingID, state: UpdateStatus.failed.rawValue, from: RolloutMember.offered)
            Rollouts.event(events, "rollout \(id): \(thingID) not released, the image \(r.image) was deleted")
            Rollouts.checkAbort(id, ends: jobEnds)
            return false
        case .found(let i): image = i
        }
        let given = UpdateOffer.encode(
            jobID: jobID, attempt: m.attempt, manifest: r.manifest, signatures: [], trialSeconds: r.trialS)
        if case .success(let s) = JSON.parse(r.signatures) { given.set("signatures", s) }
        guard case .success(let offer) = UpdateOffer.parse(given) else {
            back()
            return false
        }
        switch startUpdateJob(
            jobID: jobID, attempt: m.attempt, thing: thing, image: image, offer: offer, trialGiven: r.trialS != nil,
            expiresAt: nil)
        {
        case .failure(let e):
            back()
            Rollouts.event(events, "rollout \(id): \(thingID) stays queued (\(e.code))")
            return false
        case .success:
            Rollouts.event(events, "rollout \(id): released \(thingID), job \(jobID) (attempt \(m.attempt))")
        }
        // Aborted or cancelled by another hub meanwhile: the job is ended as theirs were.
        if case .found(let now) = store.rollout(id: id), now.status != .running && now.status != .paused {
            Rollouts.endOffered(id, reason: "ROLLOUT_" + now.status.rawValue.uppercased(), ends: jobEnds)
        }
        return true
    }

    /// A rollout as the REST API answers it, with its members by state.
    public static func rolloutJSON(_ r: RolloutRecord, counts: [String: Int]) -> JSON {
        let o = JSON.object()
        o.set("rolloutID", string: r.rolloutID)
        o.set("image", string: r.image)
        o.set("version", string: r.version)
        o.set("status", string: r.status.rawValue)
        o.set("reason", r.reason.flatMap(JSON.string) ?? .null())
        o.set("target", r.target.json)
        o.set("ratePerMinute", .int(r.ratePerMinute))
        o.set("maxInFlight", .int(r.maxInFlight))
        o.set("trialS", r.trialS.map { JSON.int($0) } ?? .null())
        let abort = JSON.object()
        abort.set("failurePercent", r.abortFailurePercent.map { JSON.int($0) } ?? .null())
        abort.set("minExecuted", .int(r.abortMinExecuted))
        let statuses = JSON.array()
        for s in r.abortStatuses { if let v = JSON.string(s.rawValue) { statuses.append(v) } }
        abort.set("statuses", statuses)
        o.set("abort", abort)
        o.set("timeoutS", r.timeoutS.map { JSON.int($0) } ?? .null())
        o.set("retries", .int(r.retries))
        o.set("ramp", r.ramp?.json ?? .null())
        let c = JSON.object()
        for (state, n) in counts.sorted(by: { $0.key < $1.key }) { c.set(state, .int(n)) }
        o.set("counts", c)
        o.set("members", .int(counts.values.reduce(0, +)))
        o.set("createdAt", .int64(r.createdAt))
        o.set("updatedAt", .int64(r.updatedAt))
        return o
    }

    public static func rolloutMemberJSON(_ m: RolloutMember) -> JSON {
        let o = JSON.object()
        o.set("thingID", string: m.thingID)
        o.set("state", string: m.state)
        o.set("jobID", m.jobID.flatMap(JSON.string) ?? .null())
        o.set("releasedAt", m.releasedAt.map { JSON.int64($0) } ?? .null())
        o.set("attempts", .int(m.attempts))
        return o
    }
}

/// What a final report, a tick or the operator does to a rollout beyond
/// its own member: the abort criteria, the jobs an abort or a cancel
/// ends, and the completion. On the store and the command delivery alone
/// (UpdateJobEnds), so the thing's request lane (UpdateRequests) and the
/// app door call the same.
enum Rollouts {
    static func event(_ events: HubEvents, _ line: String) { events.event(line) }

    /// A job became final (a report, or the hub ended it): its member, if
    /// any, takes its status; then the rollout's criteria and completion.
    static func finished(jobID: String, status: UpdateStatus, ends: UpdateJobEnds) {
        guard let id = ends.store.finishRolloutMember(jobID: jobID, status: status) else { return }
        checkAbort(id, ends: ends)
        completeIfDone(id, store: ends.store, events: ends.events)
    }

    /// Aborts the rollout when at least `minExecuted` members are final
    /// and the failures' share (statuses in its list) reaches its
    /// threshold: recorded once (a conditional UPDATE from running or
    /// paused), then the offered jobs not installing yet are ended.
    static func checkAbort(_ id: String, ends: UpdateJobEnds) {
        let store = ends.store
        guard case .found(let r) = store.rollout(id: id), !r.status.isFinal, let percent = r.abortFailurePercent,
            let counts = store.rolloutCounts(id: id)
        else { return }
        let executed = counts.filter { UpdateStatus(rawValue: $0.key)?.isFinal ?? false }.values.reduce(0, +)
        let failures = counts.filter { k, _ in r.abortStatuses.contains { $0.rawValue == k } }.values.reduce(0, +)
        guard executed > 0, executed >= r.abortMinExecuted, failures * 100 >= percent * executed else { return }
        let reason =
            "\(failures) of \(executed) executed failed (\(failures * 100 / executed)%, the threshold \(percent)%)"
        guard
            store.setRolloutStatus(
                id: id, to: .aborted, from: [.running, .paused], reason: reason, now: Platform.epochMs()) == true
        else { return }
        event(ends.events, "rollout \(id): aborted, \(reason)")
        endOffered(id, reason: "ROLLOUT_ABORTED", ends: ends)
    }

    /// Ends every offered member's job that has not started its install
    /// (CANCELLED `reason`, its offer's command cancelled); the member
    /// takes CANCELLED. A thing asking for a block of it then gets 410 and
    /// ends it CANCELLED too.
    static func endOffered(_ id: String, reason: String, ends: UpdateJobEnds) {
        for m in ends.store.rolloutMembers(id: id) ?? [] where m.state == RolloutMember.offered {
            guard let jobID = m.jobID,
                ends.end(jobID, status: .cancelled, reason: reason, from: UpdateStatus.beforeInstall, member: false)
                    == true
            else { continue }
            _ = ends.store.setRolloutMember(
                id: id, thingID: m.thingID, state: UpdateStatus.cancelled.rawValue, from: RolloutMember.offered)
            event(ends.events, "rollout \(id): job \(jobID) of \(m.thingID) ended, \(reason)")
        }
    }

    /// Completed once no member is queued or offered.
    static func completeIfDone(_ id: String, store: HubStore, events: HubEvents) {
        guard let counts = store.rolloutCounts(id: id),
            (counts[RolloutMember.queued] ?? 0) + (counts[RolloutMember.offered] ?? 0) == 0
        else { return }
        if store.setRolloutStatus(
            id: id, to: .completed, from: [.running, .paused], reason: nil, now: Platform.epochMs())
            == true
        {
            event(events, "rollout \(id): completed")
        }
    }
}
