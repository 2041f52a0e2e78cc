// SPDX-License-Identifier: Apache-2.0

import ThingIF

/// MemoryStore's rollouts: dictionaries under the store's lock, so every
/// check and its change are one step. A deleted thing's members are
/// passed over (as its jobs are), as the SQL stores' cascade drops them.
extension MemoryStore {
    public func insertRollout(_ r: RolloutRecord) -> Int? {
        data.withLock { d in
            guard d.rollouts[r.rolloutID] == nil else { return nil }
            let things = d.things.values.filter { r.target.matches($0) }.map(\.thingID).sorted()
            guard !things.isEmpty else { return 0 }
            d.rollouts[r.rolloutID] = r
            var members: [String: RolloutMember] = [:]
            for t in things {
                members[t] = RolloutMember(rolloutID: r.rolloutID, thingID: t, state: RolloutMember.queued)
            }
            d.rolloutMembers[r.rolloutID] = members
            return things.count
        }
    }

    public func rollout(id: String) -> StoreRead<RolloutRecord> {
        data.withLock { d in d.rollouts[id].map { .found($0) } ?? .notFound }
    }

    public func rollouts() -> [RolloutRecord]? {
        data.withLock { d in
            d.rollouts.values.sorted { ($0.createdAt, $0.rolloutID) > ($1.createdAt, $1.rolloutID) }
        }
    }

    public func runningRolloutIDs() -> [String]? {
        data.withLock { d in d.rollouts.values.filter { $0.status == .running }.map(\.rolloutID).sorted() }
    }

    /// The members whose thing is still there.
    private static func members(_ d: Data, _ id: String) -> [RolloutMember] {
        (d.rolloutMembers[id] ?? [:]).values.filter { d.things[$0.thingID] != nil }.sorted {
            $0.thingID < $1.thingID
        }
    }

    public func rolloutMembers(id: String) -> [RolloutMember]? {
        data.withLock { d in Self.members(d, id) }
    }

    public func rolloutCounts(id: String) -> [String: Int]? {
        data.withLock { d in
            var counts: [String: Int] = [:]
            for m in Self.members(d, id) { counts[m.state, default: 0] += 1 }
            return counts
        }
    }

    public func rolloutMemberStates() -> [String: Int]? {
        data.withLock { d in
            var counts: [String: Int] = [:]
            for id in d.rolloutMembers.keys { for m in Self.members(d, id) { counts[m.state, default: 0] += 1 } }
            return counts
        }
    }

    public func setRolloutStatus(id: String, to: RolloutStatus, from: [RolloutStatus], reason: String?, now: Int64)
        -> Bool?
    {
        data.withLock { d in
            guard var r = d.rollouts[id], from.contains(r.status) else { return false }
            r.status = to
            if let reason { r.reason = reason }
            r.updatedAt = now
            d.rollouts[id] = r
            return true
        }
    }

    public func releaseRolloutMembers(id: String, now: Int64) -> [RolloutRelease]? {
        data.withLock { d in
            guard let r = d.rollouts[id], r.status == .running else { return [] }
            let members = Self.members(d, id)
            let recent = members.filter { ($0.releasedAt ?? Int64.min) > now - 60_000 }.count
            let inFlight = members.filter { $0.state == RolloutMember.offered }.count
            var room = min(r.rate(at: now) - recent, r.maxInFlight - inFlight)
            var released: [RolloutRelease] = []
            for var m in members where room > 0 && m.state == RolloutMember.queued {
                let busy = d.updateJobs.values.contains { $0.thingID == m.thingID && !$0.isFinal }
                if busy { continue }
                let jobID = AppAPI.newUpdateJobID()
                m.state = RolloutMember.offered
                m.jobID = jobID
                m.releasedAt = now
                m.attempts += 1
                d.rolloutMembers[id]?[m.thingID] = m
                released.append((m.thingID, jobID, m.attempts))
                room -= 1
            }
            return released
        }
    }

    public func setRolloutMember(id: String, thingID: String, state: String, from: String) -> Bool {
        data.withLock { d in
            guard var m = d.rolloutMembers[id]?[thingID], m.state == from else { return false }
            m.state = state
            if state == RolloutMember.queued {
                m.jobID = nil
                m.releasedAt = nil
                if from == RolloutMember.offered { m.attempts = max(0, m.attempts - 1) }
            }
            d.rolloutMembers[id]?[thingID] = m
            return true
        }
    }

    public func finishRolloutMember(jobID: String, status: UpdateStatus) -> String? {
        data.withLock { d in
            for (id, members) in d.rolloutMembers {
                guard var m = members.values.first(where: { $0.jobID == jobID }) else { continue }
                guard m.state == RolloutMember.offered else { return nil }
                let live = d.rollouts[id].map { $0.status == .running || $0.status == .paused } ?? false
                if status == .failed && live && m.attempts <= (d.rollouts[id]?.retries ?? 0) {
                    // Retries left: queued for its next attempt.
                    m.state = RolloutMember.queued
                    m.jobID = nil
                    m.releasedAt = nil
                } else {
                    m.state = status.rawValue
                }
                d.rolloutMembers[id]?[m.thingID] = m
                return id
            }
            return nil
        }
    }

    public func finalJobsOfOffered(id: String) -> [(jobID: String, status: UpdateStatus)]? {
        data.withLock { d in
            Self.members(d, id).compactMap { m -> (jobID: String, status: UpdateStatus)? in
                guard m.state == RolloutMember.offered, let jobID = m.jobID, let j = d.updateJobs[jobID], j.isFinal,
                    let s = j.status
                else { return nil }
                return (jobID, s)
            }
        }
    }

    public func offeredMembers(id: String, releasedBefore: Int64) -> [RolloutMember]? {
        data.withLock { d in
            Self.members(d, id).filter {
                $0.state == RolloutMember.offered && ($0.releasedAt ?? Int64.max) < releasedBefore
            }
        }
    }

    public func endUpdateJob(jobID: String, status: UpdateStatus, reason: String, from: [UpdateStatus], now: Int64)
        -> Bool?
    {
        data.withLock { d in
            guard var j = d.updateJobs[jobID] else { return false }
            if let s = j.status, !from.contains(s) { return false }
            j.status = status
            j.reason = reason
            j.step = "ended by the hub"
            j.updatedAt = now
            d.updateJobs[jobID] = j
            return true
        }
    }
}
