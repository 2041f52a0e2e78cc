// SPDX-License-Identifier: Apache-2.0

/// Where an update job is, as its reports name it (docs/UPDATES.md §6).
public enum UpdateStatus: String, CaseIterable, Sendable {
    case accepted = "ACCEPTED"
    /// The installer's offer callback asked to be offered it again later.
    case delayed = "DELAYED"
    case rejected = "REJECTED"
    case downloading = "DOWNLOADING"
    /// Every block is held and the image's SHA-256 is the manifest's.
    case verified = "VERIFIED"
    case installing = "INSTALLING"
    case rebooting = "REBOOTING"
    /// Running the new image until the firmware confirms it.
    case trial = "TRIAL"
    /// The new image was confirmed good: the one status that counts as done.
    case succeeded = "SUCCEEDED"
    /// The thing runs the previous version again: the bootloader fell back,
    /// or the trial failed.
    case rolledBack = "ROLLED_BACK"
    case failed = "FAILED"
    case cancelled = "CANCELLED"

    /// Nothing more happens to the job.
    public var isFinal: Bool {
        switch self {
        case .rejected, .succeeded, .rolledBack, .failed, .cancelled: return true
        default: return false
        }
    }

    /// Whether the installer has been told to start: from then on a cancel
    /// is too late.
    public var installStarted: Bool {
        switch self {
        case .installing, .rebooting, .trial, .succeeded, .rolledBack: return true
        default: return false
        }
    }
}

/// One update job on the thing, as its journal holds it (UpdateJournal).
/// One job at a time: a new one is taken only when the last is final.
public struct UpdateJob {
    public let jobID: String
    public let attempt: Int
    /// The command that offered it (its `update` action).
    public let commandID: String
    /// The offer's parameters as received: the signed manifest and its
    /// signatures, kept so that a restart reads the same bytes.
    public let offer: UpdateOffer
    /// The version the thing ran when it took the job: running it after the
    /// reboot means the bootloader fell back.
    public let previousVersion: String
    public internal(set) var status: UpdateStatus
    /// The blocks made durable in the installer's sink.
    public internal(set) var durable: UpdateBlocks
    /// How many times the install was started (a power cut during one
    /// starts it again, a bounded number of times).
    public internal(set) var installStarts = 0
    /// How many times the new image has booted in its trial.
    public internal(set) var trialBoots = 0
    /// A final status's reason code and message.
    public internal(set) var reason: String?
    public internal(set) var message: String?
    /// Records the journal holds for the job: a report's sequence number is
    /// `records` × 1024 plus its place among the progress reports of that
    /// record, so that it grows across restarts (each record is durable
    /// before its report is sent) and the hub can drop older reports.
    public internal(set) var records = 1

    public var manifest: UpdateManifest { offer.manifest }
    public var targetVersion: String { offer.manifest.version }

    init(offer: UpdateOffer, commandID: String, previousVersion: String) {
        jobID = offer.jobID
        attempt = offer.attempt
        self.commandID = commandID
        self.offer = offer
        self.previousVersion = previousVersion
        status = .accepted
        durable = UpdateBlocks(count: offer.manifest.blocks)
    }

    /// The sequence number of the report of the job's latest record, plus
    /// `progress` (0 to 1023).
    public func sequence(progress: Int = 0) -> Int64 { Int64(records) * 1024 + Int64(min(max(progress, 0), 1023)) }
}

/// Why a job ended other than as the installer or the hub said: the reason
/// codes a restart gives (UpdateJournal.resume).
public enum UpdateEndReason: String, CaseIterable, Sendable {
    /// Power was cut during the install more than `UpdateJournal.maxInstallStarts` times.
    case installInterrupted = "INSTALL_INTERRUPTED"
    /// After the reboot the previous version runs: the bootloader fell back.
    case bootloaderFellBack = "BOOTLOADER_FELL_BACK"
    /// The previous version runs again after the new one's trial.
    case trialRolledBack = "TRIAL_ROLLED_BACK"
    /// After the reboot neither the target nor the previous version runs.
    case unexpectedVersion = "UNEXPECTED_VERSION"
}
