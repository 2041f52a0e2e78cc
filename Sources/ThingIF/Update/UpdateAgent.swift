// SPDX-License-Identifier: Apache-2.0

import CThingIF

/// The thing's side of an update job, from the offer to the final report
/// (docs/UPDATES.md §6–§7, §9): the offer checked and put to the installer,
/// the job taken in the journal, the hash list and the blocks fetched over
/// the request channel (not through the outbox: a lost request is asked
/// again after the request timeout), each block checked before the sink gets
/// it, the checkpoints, the install, the reboot and the trial. Every report
/// goes through the outbox, after the record it reports is durable.
///
/// Threads: the loop thread runs every method but the mailbox's
/// (`installed`, `confirm`, `reject`), which any thread may call; the loop
/// takes what they left at its next turn (`tick`).
final class UpdateAgent {
    /// The reserved alias of the update offer's action: an ordinary command
    /// in trait form, `{"_thingif":[{"update":{offer}}]}`.
    static let alias = "_thingif"
    /// Block requests in flight at most, and blocks a checkpoint.
    static let window = 4
    static let checkpointBlocks = 16
    /// A bad hash list this many times fails the job.
    static let maxBadLists = 3

    /// What the other threads leave for the loop, and the job as the loop
    /// last left it (for the calls of other threads).
    struct Mailbox {
        var installed: (ok: Bool, message: String?)?
        /// The running install's outcome was told (once per install start).
        var installTold = false
        var confirmed = false
        var rejected: String?
        var status: UpdateStatus?
        var held = 0
        var blocks = 0
    }

    private enum Pending {
        case page(Int)
        case block(Int)
    }

    private struct Request {
        let id: String
        let what: Pending
        let sentAt: Int64
    }

    let installer: UpdateInstaller
    let journal: UpdateJournal
    let mailbox = Locked(Mailbox())
    private unowned(unsafe) let thing: Thing
    private var resumed = false
    /// The hash list's pages as they arrive, then the download.
    private var pages: [[UInt8]?] = []
    private var badLists = 0
    private var download: UpdateDownload?
    private var requests: [Request] = []
    /// The trial's deadline (monotonic ms), once it runs.
    private var trialDeadline: Int64?
    /// The install was started and its outcome not yet told.
    private var installing = false

    init(thing: Thing, installer: UpdateInstaller, journal: UpdateJournal) {
        self.thing = thing
        self.installer = installer
        self.journal = journal
        publishStatus()
        if journal.passedOver > 0 {
            thing.logger.warning(
                "passed over \(journal.passedOver) records of \(thing.storage.path(UpdateJournal.fileName)) that are not of its form"
            )
        }
    }

    /// The job's status for the other threads' calls.
    func publishStatus() {
        let j = journal.job
        mailbox.withLock {
            $0.status = j?.status
            $0.held = j?.durable.held ?? 0
            $0.blocks = j?.manifest.blocks ?? 0
        }
    }

    private var handle: OpaquePointer { OpaquePointer(Unmanaged.passUnretained(thing).toOpaque()) }
    private var log: Logger { thing.logger }

    /// The trust the thing has now: its own record (what confirmed images
    /// changed) with the firmware's trust file.
    var trust: TrustRing { journal.trust.map { $0.merged(with: installer.factoryTrust) } ?? installer.factoryTrust }

    // MARK: the offer (an action of a command, loop thread)

    /// The `update` action: checked, put to the installer, and the job
    /// taken (synced) before the action's result is returned, so before the
    /// command is recorded done.
    func offer(_ call: ActionCall) -> ActionResult {
        defer { publishStatus() }
        let jobID = call.params["jobID"]?.stringValue.flatMap { UpdateCoding.isName($0) ? $0 : nil }
        let offer: UpdateOffer
        switch UpdateOffer.parse(call.params) {
        case .failure(let e): return refuse(call, jobID: jobID, attempt: nil, e.code.rawValue, e.message)
        case .success(let o): offer = o
        }
        if let j = journal.job, j.jobID.equals(offer.jobID), j.attempt == offer.attempt {
            log.info("update job \(offer.jobID) offered again: it is \(j.status.rawValue)")
            return accepted(call, j)
        }
        if let j = journal.job, !j.status.isFinal {
            return refuse(
                call, jobID: offer.jobID, attempt: offer.attempt, "BUSY", str("job \(j.jobID) is under way"))
        }
        let ring = trust
        if case .failure(let e) = ring.verify(offer.manifest, offer.signatures) {
            return refuse(call, jobID: offer.jobID, attempt: offer.attempt, e.code.rawValue, e.message)
        }
        if case .failure(let e) = ring.check(offer.manifest, thingType: installer.thingType) {
            return refuse(call, jobID: offer.jobID, attempt: offer.attempt, e.code.rawValue, e.message)
        }
        let candidate = UpdateJob(offer: offer, commandID: call.command.id, previousVersion: installer.runningVersion)
        switch installer.offer(handle, candidate) {
        case .accept: break
        case .later(let why):
            report(jobID: offer.jobID, attempt: offer.attempt, seq: 0, status: .delayed, step: why, reason: "DEFERRED")
            return result(call, ok: false, status: .delayed, reason: "DEFERRED", message: why, jobID: offer.jobID)
        case .refuse(let why):
            return refuse(call, jobID: offer.jobID, attempt: offer.attempt, "INSTALLER_REFUSED", why)
        }
        guard installer.prepare(size: offer.manifest.size) else {
            return refuse(
                call, jobID: offer.jobID, attempt: offer.attempt, "STORAGE",
                str("cannot write \(installer.imagePath)"))
        }
        switch journal.take(offer, commandID: call.command.id, runningVersion: installer.runningVersion) {
        case .taken(let j):
            log.info(
                "took update job \(j.jobID): \(j.manifest.updateID) \(j.targetVersion), \(j.manifest.blocks) blocks")
            reportJob(j, .accepted)
            startDownload(j)
            return accepted(call, j)
        case .known(let j):
            return accepted(call, j)
        case .busy(let j):
            return refuse(
                call, jobID: offer.jobID, attempt: offer.attempt, "BUSY", str("job \(j.jobID) is under way"))
        case .ioError:
            return refuse(
                call, jobID: offer.jobID, attempt: offer.attempt, "STORAGE",
                str("cannot write \(thing.storage.path(UpdateJournal.fileName))"))
        }
    }

    /// The thing has no installer: the offer fails, clearly.
    static func noInstaller(_ call: ActionCall) -> ActionResult {
        let data = JSON.object()
        data.set("reason", string: "NO_INSTALLER")
        return ActionResult(
            name: call.name, succeeded: false,
            errorMessage: "NO_INSTALLER: this thing takes no updates (no thingif_set_installer())", data: data)
    }

    private func accepted(_ call: ActionCall, _ j: UpdateJob) -> ActionResult {
        result(call, ok: true, status: j.status, reason: nil, message: nil, jobID: j.jobID)
    }

    private func refuse(_ call: ActionCall, jobID: String?, attempt: Int?, _ reason: String, _ message: String)
        -> ActionResult
    {
        log.warning("refused update job \(jobID ?? "?"): \(reason): \(message)")
        if let jobID, let attempt {
            report(jobID: jobID, attempt: attempt, seq: 0, status: .rejected, step: message, reason: reason)
        }
        return result(call, ok: false, status: .rejected, reason: reason, message: message, jobID: jobID)
    }

    private func result(
        _ call: ActionCall, ok: Bool, status: UpdateStatus, reason: String?, message: String?, jobID: String?
    ) -> ActionResult {
        let data = JSON.object()
        if let jobID { data.set("jobID", string: jobID) }
        data.set("status", string: status.rawValue)
        if let reason { data.set("reason", string: reason) }
        let text = message.map { m in reason.map { str("\($0): \(m)") } ?? m }
        return ActionResult(name: call.name, succeeded: ok, errorMessage: ok ? nil : text, data: data)
    }

    // MARK: the loop's turn

    /// Every loop turn: what a restart left (once), what other threads
    /// told, the trial's deadline, the requests due.
    func tick(now: Int64, connected: Bool, timeoutMs: Int) {
        if !resumed {
            resumed = true
            resume(now: now)
        }
        defer { publishStatus() }
        let mail = mailbox.withLock { m -> Mailbox in
            defer {
                m.installed = nil
                m.confirmed = false
                m.rejected = nil
            }
            return m
        }
        if let done = mail.installed { installDone(done.ok, done.message) }
        if let why = mail.rejected { rollback(why) }
        if mail.confirmed {
            // A confirmation waits for the connection.
            if connected { confirm() } else { mailbox.withLock { $0.confirmed = true } }
        }
        if let deadline = trialDeadline, now >= deadline, journal.job?.status == .trial {
            rollback(str("not confirmed within \(journal.job?.offer.trialSeconds ?? 0) s"))
        }
        guard connected else { return }
        expire(now: now, timeoutMs: timeoutMs)
        send(now: now)
    }

    /// Where the journal says the job was when the thing stopped.
    private func resume(now: Int64) {
        let outcome = journal.resume(runningVersion: installer.runningVersion, maxTrialBoots: installer.maxTrialBoots)
        guard let j = journal.job else { return }
        switch outcome {
        case .idle:
            // A final job's report again, the same seq: a cut between its
            // record and the outbox would lose it, and the hub drops a copy.
            guard j.status.isFinal else { return }
            reportJob(j, j.status, reason: j.reason, step: j.message)
            // The slot of an install given up on booted all the same (a cut
            // came before the rollback below): dropped now.
            if gaveUp(j), installer.runningVersion.equals(j.targetVersion) { dropInstall(j) }
        case .download:
            log.info("update job \(j.jobID): \(j.durable.held) of \(j.manifest.blocks) blocks held; fetching the rest")
            startDownload(j)
        case .verify:
            verified()
        case .install(let start):
            log.warning(
                "update job \(j.jobID): the install was cut off; starting it again (\(start) of \(UpdateJournal.maxInstallStarts))"
            )
            startInstall()
        case .trial(let boot):
            log.info(
                "update job \(j.jobID): \(j.targetVersion) runs, trial boot \(boot); waiting for thingif_update_confirm()"
            )
            trialDeadline = now + Int64(j.offer.trialSeconds) * 1000
            reportJob(j, .trial, step: str("trial boot \(boot)"))
        case .rollback:
            rollback(str("booted more than \(installer.maxTrialBoots) times in its trial"))
        case .ended(let status):
            log.warning("update job \(j.jobID) ended \(status.rawValue): \(j.message ?? "")")
            reportJob(j, status, reason: j.reason, step: j.message)
            if gaveUp(j) { dropInstall(j) }
        case .ioError:
            log.error("cannot write \(thing.storage.path(UpdateJournal.fileName)); update job \(j.jobID) waits")
            resumed = false
        }
    }

    // MARK: the download

    private func startDownload(_ j: UpdateJob) {
        let count = (j.manifest.blocks + UpdatePath.hashesPerPage - 1) / UpdatePath.hashesPerPage
        pages = [[UInt8]?](repeating: nil, count: count)
        download = nil
        requests.removeAll()
    }

    /// Requests not answered within the timeout are forgotten: asked again.
    private func expire(now: Int64, timeoutMs: Int) {
        requests.removeAll { r in
            guard now - r.sentAt >= Int64(timeoutMs) else { return false }
            if case .block(let n) = r.what { download?.timedOut(block: n) }
            return true
        }
    }

    private func send(now: Int64) {
        guard let j = journal.job, j.status == .accepted || j.status == .downloading else { return }
        var due: [Pending] = []
        if var d = download {
            due = d.requests().map { .block($0) }
            download = d
        } else {
            for (i, p) in pages.enumerated() where p == nil && requests.count + due.count < UpdateAgent.window {
                if !requests.contains(where: { if case .page(i) = $0.what { return true } else { return false } }) {
                    due.append(.page(i))
                }
            }
        }
        for what in due {
            let path: UpdatePath
            switch what {
            case .page(let i): path = .hashes(jobID: j.jobID, page: i)
            case .block(let n): path = .block(jobID: j.jobID, n: n)
            }
            guard let thingID = thing.thingID,
                let id = thing.pipeline.sendTransient(method: "GET", path: path.path(thingID: thingID))
            else {
                if case .block(let n) = what { download?.timedOut(block: n) }
                continue
            }
            requests.append(Request(id: id, what: what, sentAt: now))
        }
    }

    /// A reply to one of the agent's requests; false when it is not one.
    func replied(_ requestID: String, _ reply: KiiResponse) -> Bool {
        guard let at = requests.firstIndex(where: { $0.id.equals(requestID) }) else { return false }
        let r = requests[at]
        guard let j = journal.job, !j.status.isFinal else {
            requests.remove(at: at)
            return true
        }
        if reply.isWorthRetrying {
            // Left in flight: asked again once the timeout passes (the
            // slowing down a 429 asks for).
            log.debug("update job \(j.jobID): the framework answered \(reply.status); asking again later")
            return true
        }
        requests.remove(at: at)
        guard reply.isSuccess else {
            let ended = reply.status == 410
            end(
                ended ? .cancelled : .failed, ended ? "ENDED_BY_FRAMEWORK" : "NOT_SERVED",
                str("the framework answered \(reply.status) \(reply.bodyText)"))
            return true
        }
        switch r.what {
        case .page(let i): page(i, reply.body, j)
        case .block(let n): block(n, reply.body, j)
        }
        return true
    }

    private func page(_ i: Int, _ bytes: [UInt8], _ j: UpdateJob) {
        guard download == nil, i < pages.count else { return }
        pages[i] = bytes
        for p in pages where p == nil { return }
        var list: [UInt8] = []
        list.reserveCapacity(j.manifest.blocks * UpdateCoding.sha256Bytes)
        for p in pages { list += p! }
        switch BlockHashList.verify(list, for: j.manifest) {
        case .success(let hashes):
            download = UpdateDownload(
                manifest: j.manifest, hashes: hashes, durable: j.durable, window: UpdateAgent.window,
                checkpointBlocks: UpdateAgent.checkpointBlocks)
            if j.durable.isComplete { verified() }
        case .failure(let e):
            badLists += 1
            log.warning("update job \(j.jobID): \(e.message) (copy \(badLists) of \(UpdateAgent.maxBadLists))")
            if badLists >= UpdateAgent.maxBadLists {
                end(.failed, e.code.rawValue, e.message)
            } else {
                startDownload(j)
            }
        }
    }

    private func block(_ n: Int, _ bytes: [UInt8], _ j: UpdateJob) {
        guard var d = download else { return }
        let arrival = bytes.withUnsafeBytes { d.arrived(block: n, $0) }
        download = d
        switch arrival {
        case .ignore:
            return
        case .refetch(let e):
            log.warning("update job \(j.jobID): block \(n): \(e.message); asking for it again")
        case .fail(let e):
            end(.failed, e.code.rawValue, str("block \(n): \(e.message)"))
        case .write(let offset):
            let ok = bytes.withUnsafeBytes { installer.write(handle, offset: offset, $0) }
            guard ok else {
                end(.failed, "SINK_FAILED", str("the installer could not write block \(n)"))
                return
            }
            if d.wrote(block: n) {
                download = d
                checkpoint(j)
            } else {
                download = d
            }
        }
    }

    /// The sink flushed, then the blocks recorded: a cut after the flush
    /// and before the record costs those blocks, fetched again.
    private func checkpoint(_ j: UpdateJob) {
        guard var d = download else { return }
        guard installer.flush(handle) else {
            end(.failed, "SINK_FAILED", "the installer could not flush the image")
            return
        }
        let blocks = d.takeCheckpoint()
        download = d
        guard journal.checkpoint(blocks), let now = journal.job else {
            log.error("cannot write \(thing.storage.path(UpdateJournal.fileName)); the blocks are fetched again")
            return
        }
        let held = min(Int64(now.durable.held) * Int64(now.manifest.blockSize), now.manifest.size)
        reportJob(now, .downloading, bytes: held, of: now.manifest.size)
        if d.isComplete { verified() }
    }

    // MARK: install, reboot, trial

    /// Every block is held, each checked against the signed list.
    private func verified() {
        download = nil
        requests.removeAll()
        guard journal.enter(.verified), let j = journal.job else {
            log.error(
                "cannot write \(thing.storage.path(UpdateJournal.fileName)); the install waits for the next start")
            return
        }
        reportJob(j, .verified)
        guard journal.enter(.installing, installStart: 1) else { return }
        startInstall()
    }

    private func startInstall() {
        guard let j = journal.job else { return }
        reportJob(j, .installing, step: str("install start \(j.installStarts)"))
        installing = true
        // The installer may tell its outcome from inside the callback.
        mailbox.withLock { $0.installTold = false }
        publishStatus()
        if !installer.install(handle, j) {
            installing = false
            end(.failed, "INSTALL_FAILED", "the installer could not start")
        }
    }

    private func installDone(_ ok: Bool, _ message: String?) {
        guard installing, journal.job?.status == .installing else { return }
        installing = false
        guard ok else {
            end(.failed, "INSTALL_FAILED", message ?? "the installer failed")
            return
        }
        guard journal.enter(.rebooting), let j = journal.job else {
            log.error("cannot write \(thing.storage.path(UpdateJournal.fileName)); not rebooting")
            return
        }
        reportJob(j, .rebooting)
        log.info("update job \(j.jobID): installed; rebooting into \(j.targetVersion)")
        installer.reboot(handle)
    }

    private func confirm() {
        guard let j = journal.job, j.status == .trial else { return }
        guard installer.commit(handle) else {
            log.warning("update job \(j.jobID): the installer could not commit; the trial goes on")
            return
        }
        trialDeadline = nil
        guard journal.confirmTrust(trust.confirming(j.manifest)), journal.finish(.succeeded),
            let done = journal.job
        else {
            log.error("cannot write \(thing.storage.path(UpdateJournal.fileName)); the confirmation waits")
            mailbox.withLock { $0.confirmed = true }
            return
        }
        log.info("update job \(j.jobID) succeeded: \(installer.runningVersion) confirmed")
        reportJob(done, .succeeded)
    }

    /// The install was cut off too often: the job is FAILED, and what the
    /// installer may have made bootable must not boot.
    private func gaveUp(_ j: UpdateJob) -> Bool {
        j.status == .failed && (j.reason ?? "").equals(UpdateEndReason.installInterrupted.rawValue)
    }

    private func dropInstall(_ j: UpdateJob) {
        log.warning("update job \(j.jobID): the install was given up; the installer drops it (rollback)")
        installer.rollback(handle)
    }

    private func rollback(_ why: String) {
        guard let j = journal.job, j.status == .trial else { return }
        trialDeadline = nil
        log.warning("update job \(j.jobID): rolling back: \(why)")
        installer.rollback(handle)
    }

    /// Ends the job (a final status), synced, then reports it.
    private func end(_ status: UpdateStatus, _ reason: String, _ message: String) {
        download = nil
        requests.removeAll()
        guard let j = journal.job, !j.status.isFinal else { return }
        guard journal.finish(status, reason: reason, message: message), let done = journal.job else {
            log.error("cannot write \(thing.storage.path(UpdateJournal.fileName)); job \(j.jobID) not ended")
            return
        }
        log.warning("update job \(j.jobID) ended \(status.rawValue) \(reason): \(message)")
        reportJob(done, status, reason: reason, step: message)
    }

    // MARK: reports

    private func reportJob(
        _ j: UpdateJob, _ status: UpdateStatus, bytes: Int64? = nil, of: Int64? = nil, reason: String? = nil,
        step: String? = nil
    ) {
        report(
            jobID: j.jobID, attempt: j.attempt, seq: j.sequence(), status: status, bytes: bytes, of: of, step: step,
            reason: reason, version: status == .succeeded ? installer.runningVersion : nil)
    }

    private func report(
        jobID: String, attempt: Int, seq: Int64, status: UpdateStatus, bytes: Int64? = nil, of: Int64? = nil,
        step: String? = nil, reason: String? = nil, version: String? = nil
    ) {
        guard let thingID = thing.thingID else { return }
        let clipped = step.map { s in
            s.utf8.count <= UpdateReport.maxStep
                ? s : String(decoding: Array(s.utf8.prefix(UpdateReport.maxStep - 8)), as: UTF8.self) + "..."
        }
        let r = UpdateReport(
            attempt: attempt, seq: seq, status: status, bytes: bytes, of: of, step: clipped,
            reason: reason.flatMap { UpdateReport.isReason($0) ? $0 : nil }, version: version)
        _ = thing.sendRequest(
            method: "PUT", path: UpdatePath.report(jobID: jobID).path(thingID: thingID),
            contentType: MediaType.json, body: r.encode(),
            what: str("update report \(status.rawValue) of job \(jobID)"),
            kind: .other)
    }
}
