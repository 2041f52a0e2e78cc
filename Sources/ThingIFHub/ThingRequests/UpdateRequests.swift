// SPDX-License-Identifier: Apache-2.0

import ThingIF

/// A thing's requests for its update job (docs/UPDATES.md §7, §9), after
/// things/{thingID}/ (UpdatePath): its reports, applied by seq, and the
/// job's hash pages and blocks, read on UpdateServing's pool within its
/// bounds. The path's thingID must be the caller's own (no end node's:
/// the thing asks for itself); a job that does not exist and another
/// thing's get the same 404, so a thing learns nothing of other jobs.
final class UpdateRequests: @unchecked Sendable {
    let store: HubStore
    let events: HubEvents
    let jobEnds: UpdateJobEnds
    let authorization: RequestAuthorization
    let serving: UpdateServing
    let metrics: HubMetrics

    init(
        store: HubStore, delivery: CommandDelivery, authorization: RequestAuthorization, serving: UpdateServing,
        metrics: HubMetrics
    ) {
        self.store = store
        self.events = delivery.events
        self.jobEnds = UpdateJobEnds(store: store, delivery: delivery)
        self.authorization = authorization
        self.serving = serving
        self.metrics = metrics
    }

    static let octets = "application/octet-stream"

    /// What a block or hash-page read needs, checked on the request lane.
    struct Read {
        let job: UpdateJobRecord
        let part: RequestRoute.UpdatePart
        /// The most bytes it sends (the budget's cost).
        let cost: Int
    }

    /// What `check` found: the read to make, or the answer now.
    enum Checked {
        case read(Read)
        case refused(KiiResponse)
    }

    /// PUT updates/{jobID}: 204 applied or dropped (a seq not above the
    /// stored one), 400 malformed, 404 no such job of this thing, 409
    /// another attempt.
    func report(_ req: KiiRequest, thingID: String, jobID: String, clientID: String?) -> KiiResponse {
        guard req.method == "PUT" else { return Self.noRequest(req, thingID: thingID, .report(jobID: jobID)) }
        if case .failure(let r) = authorization.authorized(req, thingID: thingID, clientID: clientID, endNodes: false) {
            return r
        }
        let report: UpdateReport
        switch UpdateReport.parse(req.body) {
        case .failure(let r): return .refusal(400, "INVALID_INPUT_DATA", "the report is malformed: \(r.message)")
        case .success(let r): report = r
        }
        switch store.applyUpdateReport(jobID: jobID, thingID: thingID, report: report, now: Platform.epochMs()) {
        case nil: return .storageFailed
        case .noJob?: return .refusal(HubError.updateJobNotFound(jobID))
        case .otherAttempt(let a)?:
            return .refusal(
                409, "UPDATE_ATTEMPT_MISMATCH", "the report is of attempt \(report.attempt); the job's is \(a)")
        case .stale?:
            // Answered 204 all the same: the thing's outbox stops sending it.
            events.event("update \(jobID) of \(thingID): report seq \(report.seq) dropped (not above the stored one)")
            return .answer(204)
        case .applied?:
            events.event(
                "update \(jobID) of \(thingID): \(report.status.rawValue) seq \(report.seq)"
                    + (report.reason.map { " " + $0 } ?? ""))
            if report.status == .succeeded, let v = report.version {
                events.event("firmware version of \(thingID): \(v)")
            }
            // A rollout's member: its state, then the rollout's abort criteria.
            if report.status.isFinal {
                Rollouts.finished(jobID: jobID, status: report.status, ends: jobEnds)
            }
            return .answer(204)
        }
    }

    /// GET updates/{jobID}/hashes/{page} or …/blocks/{n}: the checks that
    /// need no image bytes (who asks, the job, its end, the range), on the
    /// request lane; the read itself is `read`'s.
    func check(
        _ req: KiiRequest, thingID: String, jobID: String, _ part: RequestRoute.UpdatePart, clientID: String?
    ) -> Checked {
        let path: UpdatePath
        switch part {
        case .report: path = .report(jobID: jobID)
        case .hashes(let p): path = .hashes(jobID: jobID, page: p)
        case .block(let n): path = .block(jobID: jobID, n: n)
        }
        guard req.method == "GET", part != .report else { return .refused(Self.noRequest(req, thingID: thingID, path)) }
        if case .failure(let r) = authorization.authorized(req, thingID: thingID, clientID: clientID, endNodes: false) {
            return .refused(r)
        }
        let job: UpdateJobRecord
        switch store.updateJob(id: jobID) {
        case .failed: return .refused(.storageFailed)
        case .found(let j) where j.thingID == thingID: job = j
        case .found, .notFound: return .refused(.refusal(HubError.updateJobNotFound(jobID)))
        }
        if job.isFinal {
            return .refused(
                .refusal(410, "UPDATE_JOB_ENDED", "the update job \(job.jobID) ended: \(job.status?.rawValue ?? "")"))
        }
        switch part {
        case .block(let n):
            guard n < job.blocks else {
                return .refused(
                    .refusal(404, "UPDATE_BLOCK_NOT_FOUND", "the job's image has \(job.blocks) blocks; no block \(n)"))
            }
            return .read(Read(job: job, part: part, cost: job.blockSize))
        case .hashes(let page):
            let first = page * UpdatePath.hashesPerPage
            guard first < job.blocks else {
                return .refused(
                    .refusal(
                        404, "UPDATE_PAGE_NOT_FOUND", "the job's hash list has \(job.blocks) hashes; no page \(page)"))
            }
            let count = min(UpdatePath.hashesPerPage, job.blocks - first)
            return .read(Read(job: job, part: part, cost: count * UpdateCoding.sha256Bytes))
        case .report:
            return .refused(Self.noRequest(req, thingID: thingID, path))
        }
    }

    /// The bytes of a checked read: a block of the job's image at the
    /// manifest's block size (one chunk row), or a page of its block hash
    /// list (computed from the chunks once, then kept).
    func read(_ r: Read) -> KiiResponse {
        let image: ImageRecord
        switch store.image(sha256: r.job.image) {
        case .failed: return .storageFailed
        case .notFound:
            return .refusal(410, "UPDATE_JOB_ENDED", "the image of the update job \(r.job.jobID) was deleted")
        case .found(let i): image = i
        }
        switch r.part {
        case .block(let n):
            guard let bytes = store.imageBlock(image, blockSize: r.job.blockSize, n: n) else { return .storageFailed }
            metrics.updateBytesServed.increment(by: Int64(bytes.count))
            return KiiResponse(status: 200, headers: [("Content-Type", Self.octets)], body: bytes)
        case .hashes(let page):
            guard let list = store.blockHashList(image, blockSize: r.job.blockSize),
                list.count == r.job.blocks * UpdateCoding.sha256Bytes
            else { return .storageFailed }
            let first = page * UpdatePath.hashesPerPage * UpdateCoding.sha256Bytes
            let end = min(list.count, first + UpdatePath.hashesPerPage * UpdateCoding.sha256Bytes)
            metrics.updateBytesServed.increment(by: Int64(end - first))
            return KiiResponse(status: 200, headers: [("Content-Type", Self.octets)], body: Array(list[first..<end]))
        case .report:
            return .storageFailed
        }
    }

    /// 429: a bound of UpdateServing refused the read (counted as
    /// refused_total{defence="update_busy"}).
    func busy() -> KiiResponse {
        metrics.refused("update_busy")
        return .refusal(
            429, "TOO_MANY_REQUESTS", "the hub serves no more blocks now; ask again after the request timeout")
    }

    /// The router's answer to a method the path does not take.
    static func noRequest(_ req: KiiRequest, thingID: String, _ path: UpdatePath) -> KiiResponse {
        .refusal(404, "NOT_FOUND", "no \(req.method) \(path.path(thingID: thingID))")
    }
}
