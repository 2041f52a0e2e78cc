// SPDX-License-Identifier: Apache-2.0

import ThingIF

/// One thing's update job as the hub keeps it (docs/UPDATES.md §9): what
/// was offered (the image, the manifest's exact bytes and layout, the
/// attempt, the offer's command) and the thing's last report applied.
/// The hub has no state of its own for a job: `status` is the last
/// report's, nil before any report.
public struct UpdateJobRecord: Sendable, Equatable {
    public var jobID: String
    public var thingID: String
    /// The image's SHA-256 (lowercase hex).
    public var image: String
    /// The manifest's version (the image's).
    public var version: String
    /// The signed manifest's exact bytes.
    public var manifest: [UInt8]
    public var blockSize: Int
    public var blocks: Int
    public var attempt: Int
    public var commandID: String
    /// The last report's, or nil.
    public var status: UpdateStatus?
    /// The last report's seq; -1 before any report (a report's is 0 or more).
    public var seq: Int64
    public var bytes: Int64?
    public var of: Int64?
    public var reason: String?
    public var step: String?
    /// The version the thing said it runs, in the last report that carried one.
    public var reportedVersion: String?
    public var createdAt: Int64
    public var updatedAt: Int64

    public init(
        jobID: String, thingID: String, image: String, version: String, manifest: [UInt8], blockSize: Int,
        blocks: Int, attempt: Int, commandID: String, status: UpdateStatus? = nil, seq: Int64 = -1,
        bytes: Int64? = nil, of: Int64? = nil, reason: String? = nil, step: String? = nil,
        reportedVersion: String? = nil, createdAt: Int64, updatedAt: Int64
    ) {
        self.jobID = jobID
        self.thingID = thingID
        self.image = image
        self.version = version
        self.manifest = manifest
        self.blockSize = blockSize
        self.blocks = blocks
        self.attempt = attempt
        self.commandID = commandID
        self.status = status
        self.seq = seq
        self.bytes = bytes
        self.of = of
        self.reason = reason
        self.step = step
        self.reportedVersion = reportedVersion
        self.createdAt = createdAt
        self.updatedAt = updatedAt
    }

    /// Nothing more happens to it: its last report's status is final.
    public var isFinal: Bool { status?.isFinal ?? false }

    /// The statuses that end a job, as SQL's list (the open jobs' check).
    static let finalStatusesSQL = UpdateStatus.allCases.filter(\.isFinal).map { "'\($0.rawValue)'" }.joined(
        separator: ", ")
}

/// What inserting a job did.
public enum UpdateJobInsert: Sendable, Equatable {
    case created
    /// The thing has a job that is not final: this one.
    case busy(jobID: String)
    /// There is no such thing.
    case noThing
}

/// What a report did to its job.
public enum UpdateReportApplied: Sendable, Equatable {
    case applied
    /// Its seq is not above the stored one: dropped.
    case stale
    /// No job of that ID for that thing.
    case noJob
    /// The job's attempt is another.
    case otherAttempt(Int)
}

/// The hub's update jobs (docs/UPDATES.md §9). One part of HubStore (its
/// conventions hold: nil is a store that failed). A thing has at most one
/// job that is not final: `insertUpdateJob` checks it and inserts in one
/// transaction (with the thing's row locked on PostgreSQL, so two hubs
/// creating a job for one thing at once make one).
public protocol UpdateJobStore: AnyObject, Sendable {
    func insertUpdateJob(_ job: UpdateJobRecord) -> UpdateJobInsert?
    func updateJob(id: String) -> StoreRead<UpdateJobRecord>
    /// Drops a job whose offer could not be stored (nothing was sent).
    func deleteUpdateJob(id: String) -> Bool
    /// A thing's jobs, newest first; nil when the store cannot read.
    func updateJobs(thingID: String) -> [UpdateJobRecord]?
    /// Applies a report to the job `jobID` of `thingID` when its attempt is
    /// the job's and its seq above the stored one (one conditional UPDATE:
    /// with several hubs on one database a late report never overwrites a
    /// newer one); a SUCCEEDED report also sets the thing's firmware
    /// version to its `version`, in the same transaction.
    func applyUpdateReport(jobID: String, thingID: String, report: UpdateReport, now: Int64) -> UpdateReportApplied?
    /// Every job by its status (`none`: no report yet), for /metrics.
    func updateJobStatuses() -> [String: Int]?
    /// Jobs with no report whose offer's command ended EXPIRED, oldest
    /// first, at most `limit`: a hub stopped between the command's end and
    /// the job's left them open (UpdateJobEnds.endExpiredOffers).
    func jobsOfExpiredOffers(limit: Int) -> [String]?
}

extension UpdateJobRecord {
    /// The status label of a job with no report yet (/metrics).
    static let noStatus = "none"
}
