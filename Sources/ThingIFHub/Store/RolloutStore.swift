// SPDX-License-Identifier: Apache-2.0

import CThingIF
import ThingIF

/// Where a rollout is (docs/UPDATES.md §11).
public enum RolloutStatus: String, CaseIterable, Sendable {
    /// Its ticks release queued members.
    case running
    /// Nothing is released until it is resumed; offered members go on.
    case paused
    /// Every member is final.
    case completed
    /// Its abort criteria were met: nothing more is released, and offered
    /// jobs that had not started their install were ended.
    case aborted
    /// The operator cancelled it: as an abort, by hand.
    case cancelled

    /// Nothing more happens to it.
    public var isFinal: Bool { self == .completed || self == .aborted || self == .cancelled }
}

/// The things a rollout is for, resolved to its members at its creation.
/// Every criterion given must hold (an end node is a thing too).
public struct RolloutTarget: Sendable, Equatable {
    public var thingType: String?
    public var firmwareVersions: [String]?
    public var things: [String]?

    public init(thingType: String? = nil, firmwareVersions: [String]? = nil, things: [String]? = nil) {
        self.thingType = thingType
        self.firmwareVersions = firmwareVersions
        self.things = things
    }

    /// Whether the thing is one of the target's.
    public func matches(_ t: ThingRecord) -> Bool {
        if let thingType, t.thingType != thingType { return false }
        if let firmwareVersions, !firmwareVersions.contains(t.firmwareVersion ?? "\u{0}") { return false }
        if let things, !things.contains(t.thingID) { return false }
        return true
    }

    public var json: JSON {
        let o = JSON.object()
        if let thingType { o.set("thingType", string: thingType) }
        if let firmwareVersions {
            let a = JSON.array()
            for v in firmwareVersions { if let s = JSON.string(v) { a.append(s) } }
            o.set("firmwareVersions", a)
        }
        if let things {
            let a = JSON.array()
            for v in things { if let s = JSON.string(v) { a.append(s) } }
            o.set("things", a)
        }
        return o
    }

    public static func from(_ j: JSON) -> RolloutTarget {
        RolloutTarget(
            thingType: j["thingType"]?.stringValue,
            firmwareVersions: j["firmwareVersions"].map { $0.elements.compactMap(\.stringValue) },
            things: j["things"].map { $0.elements.compactMap(\.stringValue) })
    }
}

/// A rollout's exponential ramp: it starts at `startPerMinute` and the
/// rate grows by `factor` every `everyS` seconds from its creation, never
/// above its `ratePerMinute` (`RolloutRecord.rate(at:)`).
public struct RolloutRamp: Sendable, Equatable {
    public var startPerMinute: Int
    public var factor: Double
    public var everyS: Int

    public init(startPerMinute: Int, factor: Double, everyS: Int) {
        self.startPerMinute = startPerMinute
        self.factor = factor
        self.everyS = everyS
    }

    public var json: JSON {
        let o = JSON.object()
        o.set("startPerMinute", .int(startPerMinute))
        o.set("factor", JSON(owning: json_real(factor)))
        o.set("everyS", .int(everyS))
        return o
    }

    /// The stored form (`json`'s); nil for anything else.
    public static func from(_ j: JSON) -> RolloutRamp? {
        guard let s = j["startPerMinute"]?.intValue, let f = j["factor"].flatMap(number), let e = j["everyS"]?.intValue
        else { return nil }
        return RolloutRamp(startPerMinute: s, factor: f, everyS: e)
    }

    /// A JSON number (an integer or a real) as a Double.
    static func number(_ j: JSON) -> Double? {
        j.type == JSON_INTEGER || j.type == JSON_REAL ? json_number_value(j.raw) : nil
    }
}

/// A rollout as the hub keeps it: the offer it makes each member (the
/// image, the manifest's exact bytes, the signatures, the trial's
/// deadline), its pace, its abort criteria and its status.
public struct RolloutRecord: Sendable, Equatable {
    public var rolloutID: String
    public var image: String
    public var version: String
    public var manifest: [UInt8]
    /// The signatures as the offer carries them (a JSON array, compact).
    public var signatures: String
    public var trialS: Int?
    public var target: RolloutTarget
    public var ratePerMinute: Int
    public var maxInFlight: Int
    /// Abort criteria; nil failurePercent: never aborted by itself.
    public var abortFailurePercent: Int?
    public var abortMinExecuted: Int
    public var abortStatuses: [UpdateStatus]
    /// Seconds a member's job may stay not final before the hub ends it
    /// (FAILED TIMED_OUT, before its install only); nil: never.
    public var timeoutS: Int?
    /// New attempts a member whose job ends FAILED gets (0–3).
    public var retries: Int
    public var ramp: RolloutRamp?
    public var status: RolloutStatus
    /// Why it was aborted or cancelled.
    public var reason: String?
    public var createdAt: Int64
    public var updatedAt: Int64

    public init(
        rolloutID: String, image: String, version: String, manifest: [UInt8], signatures: String, trialS: Int?,
        target: RolloutTarget, ratePerMinute: Int, maxInFlight: Int, abortFailurePercent: Int?,
        abortMinExecuted: Int, abortStatuses: [UpdateStatus], timeoutS: Int? = nil, retries: Int = 0,
        ramp: RolloutRamp? = nil, status: RolloutStatus = .running, reason: String? = nil, createdAt: Int64,
        updatedAt: Int64
    ) {
        self.rolloutID = rolloutID
        self.image = image
        self.version = version
        self.manifest = manifest
        self.signatures = signatures
        self.trialS = trialS
        self.target = target
        self.ratePerMinute = ratePerMinute
        self.maxInFlight = maxInFlight
        self.abortFailurePercent = abortFailurePercent
        self.abortMinExecuted = abortMinExecuted
        self.abortStatuses = abortStatuses
        self.timeoutS = timeoutS
        self.retries = retries
        self.ramp = ramp
        self.status = status
        self.reason = reason
        self.createdAt = createdAt
        self.updatedAt = updatedAt
    }

    /// The most members released in the minute before `now` (ms): the
    /// ramp's rate by then (its start times its factor once per whole
    /// `everyS` since the creation), never above `ratePerMinute`.
    public func rate(at now: Int64) -> Int {
        guard let ramp else { return ratePerMinute }
        let steps = max(0, now - createdAt) / (Int64(ramp.everyS) * 1000)
        var r = Double(ramp.startPerMinute)
        var k: Int64 = 0
        while k < steps && r < Double(ratePerMinute) {
            r *= ramp.factor
            k += 1
        }
        return min(ratePerMinute, Int(r))
    }

    /// The statuses that count as failures by default.
    public static let defaultAbortStatuses: [UpdateStatus] = [.failed, .rolledBack]

    var abortStatusesText: String { abortStatuses.map(\.rawValue).joined(separator: ",") }

    static func abortStatuses(_ text: String) -> [UpdateStatus] {
        text.split(separator: ",").compactMap { UpdateStatus(rawValue: String($0)) }
    }
}

/// One thing of a rollout: `queued` (not released yet), `offered` (its job
/// was created and is not final), or its job's final status.
public struct RolloutMember: Sendable, Equatable {
    public static let queued = "queued"
    public static let offered = "offered"

    public var rolloutID: String
    public var thingID: String
    public var state: String
    public var jobID: String?
    /// When a tick released it (the rate's window), nil while queued.
    public var releasedAt: Int64?
    /// Its releases that reached a job (the job's `attempt` is this).
    public var attempts: Int

    public init(
        rolloutID: String, thingID: String, state: String, jobID: String? = nil, releasedAt: Int64? = nil,
        attempts: Int = 0
    ) {
        self.rolloutID = rolloutID
        self.thingID = thingID
        self.state = state
        self.jobID = jobID
        self.releasedAt = releasedAt
        self.attempts = attempts
    }

    /// Its job is final: the state is a final UpdateStatus.
    public var isFinal: Bool { UpdateStatus(rawValue: state)?.isFinal ?? false }
}

/// The hub's rollouts (docs/UPDATES.md §11). One part of HubStore (its
/// conventions hold: nil is a store that failed). Every change that two
/// hubs on one PostgreSQL could race on is one conditional statement or
/// one transaction with the rollout's row locked: a member is released
/// once, a status changes once.
public protocol RolloutStore: AnyObject, Sendable {
    /// Inserts the rollout and its members, the things that match its
    /// target now, in one transaction: their count (0: nothing inserted).
    func insertRollout(_ r: RolloutRecord) -> Int?
    func rollout(id: String) -> StoreRead<RolloutRecord>
    /// Every rollout, newest first.
    func rollouts() -> [RolloutRecord]?
    /// The rollouts whose ticks have work: running ones.
    func runningRolloutIDs() -> [String]?
    /// The members, by thingID.
    func rolloutMembers(id: String) -> [RolloutMember]?
    /// The members by state.
    func rolloutCounts(id: String) -> [String: Int]?
    /// Every rollout's members by state (/metrics).
    func rolloutMemberStates() -> [String: Int]?
    /// Sets the status to `to` when it is one of `from` (one conditional
    /// UPDATE): true when this call changed it.
    func setRolloutStatus(id: String, to: RolloutStatus, from: [RolloutStatus], reason: String?, now: Int64) -> Bool?
    /// One tick's releases, in one transaction with the rollout's row
    /// locked: while it runs, at most its rate (`RolloutRecord.rate(at:)`)
    /// released in the last minute and `maxInFlight` offered, the lowest
    /// thingIDs first, passing over things with a job under way. Each
    /// released member is `offered` with its `jobID` (made here, before
    /// its job exists) and one more attempt. The members released:
    /// (thingID, jobID, attempt).
    func releaseRolloutMembers(id: String, now: Int64) -> [RolloutRelease]?
    /// Sets a member's state when it is `from`; `queued` also clears its
    /// job and release time, and from `offered` takes its attempt back
    /// (the release reached no job). True when it changed.
    func setRolloutMember(id: String, thingID: String, state: String, from: String) -> Bool
    /// The member whose job this is, offered, takes the job's final status,
    /// or, FAILED with retries left while its rollout is running or
    /// paused, goes back to the queue for a new attempt: its rollout when
    /// this call changed it.
    func finishRolloutMember(jobID: String, status: UpdateStatus) -> String?
    /// Offered members whose job is final (a report applied by a hub that
    /// stopped before it finished the member): their jobs and statuses.
    func finalJobsOfOffered(id: String) -> [(jobID: String, status: UpdateStatus)]?
    /// Offered members released before `releasedBefore` (ms), by thingID:
    /// a tick's time-outs and the members whose job was never created.
    func offeredMembers(id: String, releasedBefore: Int64) -> [RolloutMember]?
    /// Ends a job the hub gives up on (`status` with `reason`, step "ended
    /// by the hub") when it has no report yet or its last report's status
    /// is one of `from`, in one conditional UPDATE (a report that came
    /// first, INSTALLING say, wins): true when this call ended it. Its seq
    /// stays, so the thing's own later reports still apply.
    func endUpdateJob(jobID: String, status: UpdateStatus, reason: String, from: [UpdateStatus], now: Int64) -> Bool?
}

extension RolloutStore {
    /// Ends a job CANCELLED with `reason` when its install has not started
    /// (no report, or ACCEPTED, DELAYED, DOWNLOADING, VERIFIED).
    public func endUpdateJobBeforeInstall(jobID: String, reason: String, now: Int64) -> Bool? {
        endUpdateJob(jobID: jobID, status: .cancelled, reason: reason, from: UpdateStatus.beforeInstall, now: now)
    }
}

extension UpdateStatus {
    /// The statuses before the install starts (a cancel is not too late).
    static let beforeInstall: [UpdateStatus] = [.accepted, .delayed, .downloading, .verified]
}

/// A member a tick released: its thing, its job (to create) and the job's attempt.
public typealias RolloutRelease = (thingID: String, jobID: String, attempt: Int)
