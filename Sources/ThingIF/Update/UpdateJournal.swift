// SPDX-License-Identifier: Apache-2.0

/// The update job's own journal, `update.jsonl` in the storage directory:
/// what the thing has of its one job, so that any power cut resumes it
/// (docs/UPDATES.md §6). Every record is synced before what it records is
/// reported or acted on; a torn last line is skipped when read back.
///
///     {"u":job,"o":{offer},"c":commandID,"prev":"1.0.0"}   taken (before the offer's command is done)
///     {"u":job,"w":[[first,last],…]}                       blocks made durable in the sink since the last one
///     {"u":job,"p":"VERIFIED"}                             every block held, the image's hash checked
///     {"u":job,"p":"INSTALLING","i":k}                     before the installer is started the k-th time
///     {"u":job,"p":"REBOOTING"}                            before the reboot
///     {"u":job,"p":"TRIAL","b":boots}                      at every boot of the trial
///     {"u":job,"p":"SUCCEEDED"|…,"r":code,"m":message}     final
///     {"k":{trust record}}                                 the thing's trust, once an image is confirmed good
///
/// A compacted file holds one record of each kind, the last with `"q"`: the
/// job's record count, from which report sequence numbers go on.
///
/// A record that is not of this form, or names another job than the one
/// taken last, is passed over (and counted). Not thread-safe: the loop
/// thread owns it.
final class UpdateJournal {
    static let fileName = "update.jsonl"
    /// A power cut during the install starts it again at most this many
    /// times in all (Mender's loop guard, smaller).
    static let maxInstallStarts = 3
    /// The largest count a record may hold (install starts, trial boots,
    /// records): far above any real job, and far from overflowing.
    static let maxCount = 1 << 30

    private let journal: Journal
    private(set) var job: UpdateJob?
    /// The thing's own trust record (TrustRing), as the last confirmed image left it.
    private(set) var trust: TrustRing?
    /// Records read back that were not of the journal's form.
    private(set) var passedOver = 0

    init(storage: Storage) {
        journal = Journal(storage: storage, name: UpdateJournal.fileName)
        for r in journal.load() { replay(r) }
    }

    /// False: the storage is volatile (THINGIF_OPT_DURABILITY none).
    var durable: Bool {
        get { journal.durable }
        set { journal.durable = newValue }
    }

    private func replay(_ r: JSON) {
        if let k = r["k"] {
            guard k.isObject, case .success(let ring) = TrustRing.parse(k.dumpBytes()) else {
                passedOver += 1
                return
            }
            trust = ring
            return
        }
        guard let id = r["u"]?.stringValue else {
            passedOver += 1
            return
        }
        if let o = r["o"] {
            guard case .success(let offer) = UpdateOffer.parse(o), offer.jobID.equals(id),
                let command = r["c"]?.stringValue, let prev = r["prev"]?.stringValue
            else {
                passedOver += 1
                return
            }
            job = UpdateJob(offer: offer, commandID: command, previousVersion: prev)
            if let q = r["q"]?.intValue, q > 1, q <= UpdateJournal.maxCount { job?.records = q }
            return
        }
        guard var j = job, j.jobID.equals(id), !j.status.isFinal else {
            passedOver += 1
            return
        }
        if let w = r["w"] {
            guard j.durable.insert(ranges: w) else {
                passedOver += 1
                return
            }
            if j.status == .accepted { j.status = .downloading }
        } else if let p = r["p"]?.stringValue, let status = UpdateStatus(named: p) {
            // INSTALLING names its start and TRIAL its boot; a compacted
            // record of a later status carries them too.
            guard let start = count(r["i"], required: status == .installing, else: j.installStarts),
                let boot = count(r["b"], required: status == .trial, else: j.trialBoots)
            else {
                passedOver += 1
                return
            }
            j.installStarts = start
            j.trialBoots = boot
            if status.isFinal {
                j.reason = r["r"]?.stringValue
                j.message = r["m"]?.stringValue
            }
            j.status = status
        } else {
            passedOver += 1
            return
        }
        j.records += 1
        if let q = r["q"]?.intValue, q > j.records, q <= UpdateJournal.maxCount { j.records = q }
        job = j
    }

    /// A record's count field (1 or more): `current` when absent and not
    /// `required`, nil when it is not a count.
    private func count(_ v: JSON?, required: Bool, else current: Int) -> Int? {
        guard let v else { return required ? nil : current }
        guard let n = v.intValue, n >= 1, n <= UpdateJournal.maxCount else { return nil }
        return n
    }

    /// Appends `r` synced, and applies it as a restart would read it.
    private func write(_ r: JSON) -> Bool {
        guard journal.append(r, sync: true) else { return false }
        replay(r)
        return true
    }

    private func record(_ j: UpdateJob) -> JSON {
        let r = JSON.object()
        r.set("u", string: j.jobID)
        return r
    }

    enum TakeOutcome {
        case taken(UpdateJob)
        /// The same job and attempt again (a command sent again): as it is.
        case known(UpdateJob)
        /// Another job is under way.
        case busy(UpdateJob)
        case ioError
    }

    /// Takes the job `offer` offers, synced: before the command that offers
    /// it is recorded done, so a cut between them leaves a job whose
    /// command reads "interrupted", which the hub offers again.
    func take(_ offer: UpdateOffer, commandID: String, runningVersion: String) -> TakeOutcome {
        if let j = job {
            if j.jobID.equals(offer.jobID) && j.attempt == offer.attempt { return .known(j) }
            if !j.status.isFinal { return .busy(j) }
        }
        // A new job: what the journal held of the last one is only its
        // final status, which its reports have carried; compact first so
        // that the file holds one job.
        if job != nil, !compact(keepingJob: false) { return .ioError }
        let r = JSON.object()
        r.set("u", string: offer.jobID)
        r.set(
            "o",
            UpdateOffer.encode(
                jobID: offer.jobID, attempt: offer.attempt, manifest: offer.manifest.bytes,
                signatures: offer.signatures, trialSeconds: offer.trialSeconds))
        r.set("c", string: commandID)
        r.set("prev", string: runningVersion)
        guard write(r), let j = job else { return .ioError }
        return .taken(j)
    }

    /// Records `blocks` (made durable in the sink: its flush returned)
    /// as held, synced. Called at each checkpoint.
    func checkpoint(_ blocks: [Int]) -> Bool {
        guard let j = job, !j.status.isFinal else { return false }
        guard !blocks.isEmpty else { return true }
        let r = record(j)
        r.set("w", UpdateBlocks.encode(UpdateBlocks.ranges(of: UpdateBlocks.ascending(blocks))))
        return write(r)
    }

    /// Moves the job to `status` (not a final one), synced.
    func enter(_ status: UpdateStatus, installStart: Int? = nil, trialBoot: Int? = nil) -> Bool {
        guard let j = job, !j.status.isFinal, !status.isFinal else { return false }
        let r = record(j)
        r.set("p", string: status.rawValue)
        if let installStart { r.set("i", .int(installStart)) }
        if let trialBoot { r.set("b", .int(trialBoot)) }
        return write(r)
    }

    /// Ends the job with `status` (a final one), synced.
    func finish(_ status: UpdateStatus, reason: String? = nil, message: String? = nil) -> Bool {
        guard let j = job, !j.status.isFinal, status.isFinal else { return false }
        let r = record(j)
        r.set("p", string: status.rawValue)
        if let reason { r.set("r", string: reason) }
        if let message, let m = JSON.string(message) { r.set("m", m) }
        return write(r)
    }

    /// Records the thing's trust as confirming the job's image leaves it,
    /// synced: before the job is recorded SUCCEEDED.
    func confirmTrust(_ ring: TrustRing) -> Bool {
        guard case .success(let k) = JSON.parse(ring.encode()) else { return false }
        let r = JSON.object()
        r.set("k", k)
        return write(r)
    }

    /// Rewrites the file as its state: the trust record and the job
    /// (its offer, its durable blocks in one record, its status).
    @discardableResult
    func compact(keepingJob: Bool = true) -> Bool {
        var lines: [JSON] = []
        if let trust, case .success(let k) = JSON.parse(trust.encode()) {
            let r = JSON.object()
            r.set("k", k)
            lines.append(r)
        }
        if keepingJob, let j = job {
            let taken = JSON.object()
            taken.set("u", string: j.jobID)
            taken.set(
                "o",
                UpdateOffer.encode(
                    jobID: j.jobID, attempt: j.attempt, manifest: j.manifest.bytes, signatures: j.offer.signatures,
                    trialSeconds: j.offer.trialSeconds))
            taken.set("c", string: j.commandID)
            taken.set("prev", string: j.previousVersion)
            lines.append(taken)
            if j.durable.held > 0 {
                let w = record(j)
                w.set("w", UpdateBlocks.encode(j.durable.ranges))
                lines.append(w)
            }
            if j.status != .accepted {
                let p = record(j)
                p.set("p", string: j.status.rawValue)
                if j.installStarts > 0 { p.set("i", .int(j.installStarts)) }
                if j.trialBoots > 0 { p.set("b", .int(j.trialBoots)) }
                if let reason = j.reason { p.set("r", string: reason) }
                if let message = j.message, let m = JSON.string(message) { p.set("m", m) }
                lines.append(p)
            }
        }
        if keepingJob, let j = job, let last = lines.last {
            // The job's record count, so that report sequence numbers go on
            // growing after a compaction.
            last.set("q", .int(j.records))
        }
        guard journal.rewrite(lines) else { return false }
        if !keepingJob { job = nil }
        return true
    }
}

/// What the thing does with its job when it starts again
/// (UpdateJournal.resume).
enum UpdateResume: Equatable {
    /// No job, or a final one (its report is sent again).
    case idle
    /// Go on asking for the blocks not yet durable.
    case download
    /// Every block is durable: check the image's hash.
    case verify
    /// Start the installer, for the `start`-th time.
    case install(start: Int)
    /// The new image runs, boot `boot` of its trial: it must be confirmed.
    case trial(boot: Int)
    /// The trial has booted more than it may: roll back.
    case rollback
    /// The restart ended the job with this status: report it.
    case ended(UpdateStatus)
    /// The journal could not be written.
    case ioError
}

extension UpdateJournal {
    /// Reads where the job was when the thing stopped and records where it
    /// goes now (synced), as the running version says:
    /// - during the download: on with the missing blocks (or the hash check);
    /// - verified or installing: the install (again), at most
    ///   `maxInstallStarts` starts in all, then FAILED;
    /// - rebooting: the target version means the trial's first boot, the
    ///   previous one ROLLED_BACK (the bootloader fell back), any other FAILED;
    /// - in the trial: the next boot, or a rollback past `maxTrialBoots`; the
    ///   previous version running means ROLLED_BACK.
    func resume(runningVersion: String, maxTrialBoots: Int) -> UpdateResume {
        guard let j = job, !j.status.isFinal else { return .idle }
        let onTarget = runningVersion.equals(j.targetVersion)
        let onPrevious = runningVersion.equals(j.previousVersion)
        switch j.status {
        case .accepted, .delayed, .downloading:
            return j.durable.isComplete ? .verify : .download
        case .verified, .installing:
            let next = j.status == .verified ? 1 : j.installStarts + 1
            guard next <= UpdateJournal.maxInstallStarts else {
                return end(
                    .failed, .installInterrupted,
                    str("the install was cut off \(UpdateJournal.maxInstallStarts) times"))
            }
            return enter(.installing, installStart: next) ? .install(start: next) : .ioError
        case .rebooting, .trial:
            if onTarget {
                let boot = j.status == .trial ? j.trialBoots + 1 : 1
                guard enter(.trial, trialBoot: boot) else { return .ioError }
                return boot > maxTrialBoots ? .rollback : .trial(boot: boot)
            }
            if onPrevious {
                return end(
                    .rolledBack, j.status == .rebooting ? .bootloaderFellBack : .trialRolledBack,
                    str("running \(runningVersion) again, not \(j.targetVersion)"))
            }
            return end(
                .failed, .unexpectedVersion,
                str("running \(runningVersion): neither \(j.targetVersion) nor \(j.previousVersion)"))
        case .rejected, .succeeded, .rolledBack, .failed, .cancelled:
            return .idle
        }
    }

    private func end(_ status: UpdateStatus, _ reason: UpdateEndReason, _ message: String) -> UpdateResume {
        finish(status, reason: reason.rawValue, message: message) ? .ended(status) : .ioError
    }
}
