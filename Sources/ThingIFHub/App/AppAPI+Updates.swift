// SPDX-License-Identifier: Apache-2.0

import ThingIF

/// A single thing's update job, the operator's calls (docs/UPDATES.md §9):
/// create one (the manifest checked against the stored image, the offer
/// sent as an ordinary command), list and read them. The thing's own
/// requests for it are UpdateRequests'.
extension AppAPI {
    /// Who issues the offers: the hub for its operator (no user is told of
    /// the command's end; the job's reports are the outcome).
    public static let updateIssuer = "hub:updates"
    /// The trait alias of the offer's one action: reserved, so that no
    /// app's trait can be mistaken for it.
    public static let updateAlias = "_thingif"

    /// A new job ID: "u-" and 16 hex digits (an UpdateCoding name).
    public static func newUpdateJobID() -> String { "u-" + Platform.randomHex(bytes: 8) }

    /// POST …/things/{thingID}/updates with {"image": sha256, "manifest":
    /// base64 of the signed bytes, "signatures": [{kid, alg, sig}],
    /// "trialS"?, "timeToLive"?}. Checked in order, nothing stored before
    /// all passed: the thing (404), the image (400, 404), the offer's form
    /// as the thing parses it (400), the manifest against the image as
    /// manifest-check does (400, 422), the command's size (413); then the
    /// thing's open job (409 UPDATE_JOB_UNDER_WAY) and the insert, and the
    /// offer stored and sent as a trait command with the one action
    /// `_thingif`/`update`.
    public func createUpdateJob(thingID: String, form: JSON) -> Result<UpdateJobRecord, HubError> {
        guard form.isObject else { return .failure(.invalid("the body must be a JSON object")) }
        guard let thing = store.thing(id: thingID) else { return .failure(.thingNotFound(thingID)) }
        let jobID = Self.newUpdateJobID()
        let image: ImageRecord
        let offer: UpdateOffer
        switch checkedOffer(form: form, jobID: jobID) {
        case .failure(let e): return .failure(e)
        case .success(let (i, o)): (image, offer) = (i, o)
        }
        let expiresAt: Int64?
        switch options.lifetimes.expiry(form: form, now: Platform.epochMs()) {
        case .failure(let e): return .failure(e)
        case .success(let e): expiresAt = e
        }
        return startUpdateJob(
            jobID: jobID, thing: thing, image: image, offer: offer, trialGiven: form["trialS"] != nil,
            expiresAt: expiresAt)
    }

    /// The offer a form's "image", "manifest", "signatures" and "trialS"
    /// describe (a job's or a rollout's), for the job `jobID`: the image
    /// (400, 404), the offer's form as the thing parses it (400), the
    /// manifest against the image as manifest-check does (400, 422).
    func checkedOffer(form: JSON, jobID: String) -> Result<(ImageRecord, UpdateOffer), HubError> {
        guard let sha = form["image"]?.stringValue else {
            return .failure(.invalid("\"image\" is required: a stored image's sha256", field: "image"))
        }
        let image: ImageRecord
        switch self.image(sha256: sha) {
        case .failure(let e): return .failure(e)
        case .success(let r): image = r
        }
        // The offer as the thing will read it: every field's form checked
        // by the thing's own parser, then written again from what it read.
        let given = JSON.object()
        given.set("jobID", string: jobID)
        given.set("attempt", .int(1))
        for key in ["manifest", "signatures", "trialS"] { if let v = form[key] { given.set(key, v) } }
        let offer: UpdateOffer
        switch UpdateOffer.parse(given) {
        case .failure(let r):
            // The refusal's message starts with the field it names.
            let field = r.message.split(separator: ":", maxSplits: 1).first.map(String.init)
            return .failure(.invalid("the offer is malformed: \(r.message)", field: field))
        case .success(let o): offer = o
        }
        if case .failure(let e) = checkManifest(offer.manifest.bytes, image: image) { return .failure(e) }
        return .success((image, offer))
    }

    /// The one place a job is created, for POST …/updates and a rollout's
    /// release alike (`attempt`: a rollout member's retries count up): the
    /// command's size (413), the thing's open job (409
    /// UPDATE_JOB_UNDER_WAY) and the insert, then the offer stored and sent
    /// as a trait command with the one action `_thingif`/`update`.
    func startUpdateJob(
        jobID: String, attempt: Int = 1, thing: ThingRecord, image: ImageRecord, offer: UpdateOffer,
        trialGiven: Bool, expiresAt: Int64?
    ) -> Result<UpdateJobRecord, HubError> {
        let params = UpdateOffer.encode(
            jobID: jobID, attempt: attempt, manifest: offer.manifest.bytes, signatures: offer.signatures,
            trialSeconds: trialGiven ? offer.trialSeconds : nil)
        let command: Command
        switch CommandForm.deliverable(
            Command(
                id: CommandForm.newCommandID(), shape: .trait, issuer: Self.updateIssuer,
                groups: [
                    Command.Group(
                        alias: Self.updateAlias, entries: [.action(name: UpdateOffer.actionName, params: params)])
                ]))
        {
        case .failure(let e): return .failure(e)
        case .success(let c): command = c
        }
        let now = Platform.epochMs()
        let job = UpdateJobRecord(
            jobID: jobID, thingID: thing.thingID, image: image.sha256, version: offer.manifest.version,
            manifest: offer.manifest.bytes, blockSize: offer.manifest.blockSize, blocks: offer.manifest.blocks,
            attempt: attempt, commandID: command.id, createdAt: now, updatedAt: now)
        switch store.insertUpdateJob(job) {
        case nil: return .failure(.storage)
        case .noThing?: return .failure(.thingNotFound(thing.thingID))
        case .busy(let open)?: return .failure(Self.jobUnderWay(thing.thingID, open))
        case .created?: break
        }
        // The job first, so no offer goes out for a job the store refused;
        // an offer that cannot be stored takes its job back.
        guard
            delivery.stored(
                command, to: thing, issuer: Self.updateIssuer, installationID: nil, expiresAt: expiresAt) != nil
        else {
            _ = store.deleteUpdateJob(id: jobID)
            return .failure(.storage)
        }
        return .success(job)
    }

    static let jobUnderWayCode = "UPDATE_JOB_UNDER_WAY"

    static func jobUnderWay(_ thingID: String, _ open: String) -> HubError {
        HubError(409, jobUnderWayCode, "\(thingID) has the update job \(open), which is not final")
    }

    /// The thing's jobs, newest first; 404 for an unknown thing.
    public func updateJobs(thingID: String) -> Result<[UpdateJobRecord], HubError> {
        guard store.thing(id: thingID) != nil else { return .failure(.thingNotFound(thingID)) }
        return store.updateJobs(thingID: thingID).map { .success($0) } ?? .failure(.storage)
    }

    /// The job `jobID` of the thing; 404 UPDATE_JOB_NOT_FOUND for none and
    /// for another thing's.
    public func updateJob(thingID: String, jobID: String) -> Result<UpdateJobRecord, HubError> {
        switch store.updateJob(id: jobID) {
        case .found(let j) where j.thingID == thingID: return .success(j)
        case .found, .notFound: return .failure(.updateJobNotFound(jobID))
        case .failed: return .failure(.storage)
        }
    }

    /// POST …/things/{thingID}/updates/{jobID}/cancel: the operator gives
    /// up on a job before its install starts (no report, or ACCEPTED,
    /// DELAYED, DOWNLOADING, VERIFIED): CANCELLED `CANCELLED_BY_OPERATOR`
    /// in one conditional UPDATE (an INSTALLING report that came first
    /// wins), its offer's command cancelled, its rollout member CANCELLED
    /// (UpdateJobEnds). 409 UPDATE_TOO_LATE from INSTALLING on, 409
    /// UPDATE_JOB_ENDED for a final job, 404 for none.
    public func cancelUpdateJob(thingID: String, jobID: String) -> Result<UpdateJobRecord, HubError> {
        if case .failure(let e) = updateJob(thingID: thingID, jobID: jobID) { return .failure(e) }
        let ended = jobEnds.end(
            jobID, status: .cancelled, reason: Self.cancelledByOperator, from: UpdateStatus.beforeInstall)
        guard let ended else { return .failure(.storage) }
        if ended { events.event("update \(jobID) of \(thingID): cancelled by the operator") }
        let now: UpdateJobRecord
        switch updateJob(thingID: thingID, jobID: jobID) {
        case .failure(let e): return .failure(e)
        case .success(let j): now = j
        }
        if ended { return .success(now) }
        let status = now.status?.rawValue ?? "?"
        if now.isFinal {
            return .failure(HubError(409, "UPDATE_JOB_ENDED", "the update job \(jobID) ended: \(status)"))
        }
        return .failure(
            HubError(409, "UPDATE_TOO_LATE", "the update job \(jobID) is \(status): its install has started"))
    }

    static let cancelledByOperator = "CANCELLED_BY_OPERATOR"

    /// A job as the REST API answers it.
    public static func updateJobJSON(_ j: UpdateJobRecord) -> JSON {
        let o = JSON.object()
        o.set("jobID", string: j.jobID)
        o.set("thingID", string: j.thingID)
        o.set("image", string: j.image)
        o.set("version", string: j.version)
        o.set("attempt", .int(j.attempt))
        o.set("commandID", string: j.commandID)
        func optional(_ key: String, _ v: String?) { o.set(key, v.flatMap(JSON.string) ?? .null()) }
        func optional(_ key: String, _ v: Int64?) { o.set(key, v.map { JSON.int64($0) } ?? .null()) }
        optional("status", j.status?.rawValue)
        optional("seq", j.seq >= 0 ? j.seq : nil)
        optional("bytes", j.bytes)
        optional("of", j.of)
        optional("reason", j.reason)
        optional("step", j.step)
        optional("reportedVersion", j.reportedVersion)
        o.set("createdAt", .int64(j.createdAt))
        o.set("updatedAt", .int64(j.updatedAt))
        return o
    }
}
