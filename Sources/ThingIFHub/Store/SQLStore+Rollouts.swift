// SPDX-License-Identifier: Apache-2.0

import ThingIF

/// SQLStore's rollouts (the statements SQLite and PostgreSQL share): a row
/// each in rollouts, a row per member in rollout_members. With several
/// hubs on one PostgreSQL, a tick's releases are one transaction with the
/// rollout's row locked (so two hubs' ticks take turns, and neither passes
/// the rate or the cap), each release a conditional UPDATE (`state =
/// 'queued'`), and a status change one conditional UPDATE.
extension SQLStore {
    static var rolloutColumns: String {
        "SELECT rollout_id, image, version, manifest, signatures, trial_s, target, rate_per_minute, max_in_flight,"
            + " abort_failure_percent, abort_min_executed, abort_statuses, status, reason, created_at, updated_at,"
            + " timeout_s, retries, ramp FROM rollouts"
    }

    static func rolloutRow(_ r: Connection.Row) -> RolloutRecord {
        RolloutRecord(
            rolloutID: r.string(0), image: r.string(1), version: r.string(2), manifest: r.bytes(3),
            signatures: r.string(4), trialS: r.isNull(5) ? nil : Int(r.int(5)),
            target: (try? JSON.parse(r.string(6)).get()).map(RolloutTarget.from) ?? RolloutTarget(),
            ratePerMinute: Int(r.int(7)), maxInFlight: Int(r.int(8)),
            abortFailurePercent: r.isNull(9) ? nil : Int(r.int(9)), abortMinExecuted: Int(r.int(10)),
            abortStatuses: RolloutRecord.abortStatuses(r.string(11)), timeoutS: r.isNull(16) ? nil : Int(r.int(16)),
            retries: Int(r.int(17)),
            ramp: r.text(18).flatMap { try? JSON.parse($0).get() }.flatMap(RolloutRamp.from),
            status: RolloutStatus(rawValue: r.string(12)) ?? .cancelled, reason: r.text(13), createdAt: r.int(14),
            updatedAt: r.int(15))
    }

    static var memberColumns: String {
        "SELECT rollout_id, thing_id, state, job_id, released_at, attempts FROM rollout_members"
    }

    static func memberRow(_ r: Connection.Row) -> RolloutMember {
        RolloutMember(
            rolloutID: r.string(0), thingID: r.string(1), state: r.string(2), jobID: r.text(3),
            releasedAt: r.isNull(4) ? nil : r.int(4), attempts: Int(r.int(5)))
    }

    /// The target's criteria as a WHERE clause on things, and its values.
    static func targetClause(_ t: RolloutTarget) -> (String, [SQLValue]) {
        var clauses: [String] = []
        var values: [SQLValue] = []
        if let type = t.thingType {
            clauses.append("thing_type = ?")
            values.append(.text(type))
        }
        if let versions = t.firmwareVersions {
            clauses.append("firmware_version IN (" + versions.map { _ in "?" }.joined(separator: ", ") + ")")
            values += versions.map { .text($0) }
        }
        if let things = t.things {
            clauses.append("thing_id IN (" + things.map { _ in "?" }.joined(separator: ", ") + ")")
            values += things.map { .text($0) }
        }
        return (clauses.isEmpty ? "1 = 1" : clauses.joined(separator: " AND "), values)
    }

    public func insertRollout(_ r: RolloutRecord) -> Int? {
        use(nil) { c in
            try c.transaction { () throws -> Int in
                let (clause, values) = Self.targetClause(r.target)
                let things = try c.rows("SELECT thing_id FROM things WHERE " + clause, values) { $0.string(0) }
                guard !things.isEmpty else { return 0 }
                try c.run(
                    "INSERT INTO rollouts (rollout_id, image, version, manifest, signatures, trial_s, target,"
                        + " rate_per_minute, max_in_flight, abort_failure_percent, abort_min_executed,"
                        + " abort_statuses, status, reason, created_at, updated_at, timeout_s, retries, ramp)"
                        + " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    [
                        .text(r.rolloutID), .text(r.image), .text(r.version), .bytes(r.manifest),
                        .text(r.signatures), .int(r.trialS.map(Int64.init)), .text(r.target.json.dump()),
                        .int(Int64(r.ratePerMinute)), .int(Int64(r.maxInFlight)),
                        .int(r.abortFailurePercent.map(Int64.init)), .int(Int64(r.abortMinExecuted)),
                        .text(r.abortStatusesText), .text(r.status.rawValue), .text(r.reason), .int(r.createdAt),
                        .int(r.updatedAt), .int(r.timeoutS.map(Int64.init)), .int(Int64(r.retries)),
                        .text(r.ramp?.json.dump())
                    ])
                try c.run(
                    "INSERT INTO rollout_members (rollout_id, thing_id, state) SELECT ?, thing_id, ? FROM things"
                        + " WHERE " + clause, [.text(r.rolloutID), .text(RolloutMember.queued)] + values)
                return things.count
            }
        }
    }

    public func rollout(id: String) -> StoreRead<RolloutRecord> {
        read { c in try c.first(Self.rolloutColumns + " WHERE rollout_id = ?", [.text(id)], Self.rolloutRow) }
    }

    public func rollouts() -> [RolloutRecord]? {
        try? attempt { c in
            try c.rows(Self.rolloutColumns + " ORDER BY created_at DESC, rollout_id DESC", [], Self.rolloutRow)
        }.get()
    }

    public func runningRolloutIDs() -> [String]? {
        try? attempt { c in
            try c.rows(
                "SELECT rollout_id FROM rollouts WHERE status = ? ORDER BY rollout_id",
                [.text(RolloutStatus.running.rawValue)]
            ) { $0.string(0) }
        }.get()
    }

    public func rolloutMembers(id: String) -> [RolloutMember]? {
        try? attempt { c in
            try c.rows(Self.memberColumns + " WHERE rollout_id = ? ORDER BY thing_id", [.text(id)], Self.memberRow)
        }.get()
    }

    public func rolloutCounts(id: String) -> [String: Int]? {
        try? attempt { c in
            var counts: [String: Int] = [:]
            for (state, n) in try c.rows(
                "SELECT state, COUNT(*) FROM rollout_members WHERE rollout_id = ? GROUP BY state", [.text(id)],
                { ($0.string(0), Int($0.int(1))) })
            {
                counts[state] = n
            }
            return counts
        }.get()
    }

    public func rolloutMemberStates() -> [String: Int]? {
        try? attempt { c in
            var counts: [String: Int] = [:]
            for (state, n) in try c.rows(
                "SELECT state, COUNT(*) FROM rollout_members GROUP BY state", [], { ($0.string(0), Int($0.int(1))) })
            {
                counts[state] = n
            }
            return counts
        }.get()
    }

    public func setRolloutStatus(id: String, to: RolloutStatus, from: [RolloutStatus], reason: String?, now: Int64)
        -> Bool?
    {
        use(nil) { c in
            try c.run(
                "UPDATE rollouts SET status = ?, reason = COALESCE(?, reason), updated_at = ? WHERE rollout_id = ?"
                    + " AND status IN (" + from.map { "'\($0.rawValue)'" }.joined(separator: ", ") + ")",
                [.text(to.rawValue), .text(reason), .int(now), .text(id)]) == 1
        }
    }

    public func releaseRolloutMembers(id: String, now: Int64) -> [RolloutRelease]? {
        use(nil) { c in
            try c.transaction { () throws -> [RolloutRelease] in
                guard
                    let r = try c.first(
                        Self.rolloutColumns + " WHERE rollout_id = ?" + Self.dialect.forUpdate, [.text(id)],
                        Self.rolloutRow),
                    r.status == .running
                else { return [] }
                let recent =
                    try c.first(
                        "SELECT COUNT(*) FROM rollout_members WHERE rollout_id = ? AND released_at > ?",
                        [.text(id), .int(now - 60_000)], { Int($0.int(0)) }) ?? 0
                let inFlight =
                    try c.first(
                        "SELECT COUNT(*) FROM rollout_members WHERE rollout_id = ? AND state = ?",
                        [.text(id), .text(RolloutMember.offered)], { Int($0.int(0)) }) ?? 0
                let room = min(r.rate(at: now) - recent, r.maxInFlight - inFlight)
                guard room > 0 else { return [] }
                let candidates = try c.rows(
                    "SELECT m.thing_id, m.attempts FROM rollout_members m WHERE m.rollout_id = ? AND m.state = ?"
                        + " AND NOT EXISTS (SELECT 1 FROM update_jobs j WHERE j.thing_id = m.thing_id"
                        + " AND (j.status IS NULL OR j.status NOT IN (" + UpdateJobRecord.finalStatusesSQL + ")))"
                        + " ORDER BY m.thing_id LIMIT ?", [.text(id), .text(RolloutMember.queued), .int(Int64(room))]
                ) { ($0.string(0), Int($0.int(1))) }
                var released: [RolloutRelease] = []
                for (thing, attempts) in candidates {
                    let jobID = AppAPI.newUpdateJobID()
                    let changed = try c.run(
                        "UPDATE rollout_members SET state = ?, job_id = ?, released_at = ?, attempts = attempts + 1"
                            + " WHERE rollout_id = ? AND thing_id = ? AND state = ?",
                        [
                            .text(RolloutMember.offered), .text(jobID), .int(now), .text(id), .text(thing),
                            .text(RolloutMember.queued)
                        ])
                    if changed == 1 { released.append((thing, jobID, attempts + 1)) }
                }
                return released
            }
        }
    }

    public func setRolloutMember(id: String, thingID: String, state: String, from: String) -> Bool {
        use(false) { c in
            var clear = state == RolloutMember.queued ? ", job_id = NULL, released_at = NULL" : ""
            if state == RolloutMember.queued && from == RolloutMember.offered {
                clear += ", attempts = CASE WHEN attempts > 0 THEN attempts - 1 ELSE 0 END"
            }
            return try c.run(
                "UPDATE rollout_members SET state = ?" + clear + " WHERE rollout_id = ? AND thing_id = ? AND state = ?",
                [.text(state), .text(id), .text(thingID), .text(from)]) == 1
        }
    }

    public func finishRolloutMember(jobID: String, status: UpdateStatus) -> String? {
        use(nil) { c in
            try c.transaction { () throws -> String? in
                guard
                    let (id, retry) = try c.first(
                        "SELECT m.rollout_id, CASE WHEN m.attempts <= r.retries AND r.status IN (?, ?) THEN 1 ELSE 0 END"
                            + " FROM rollout_members m"
                            + " JOIN rollouts r ON r.rollout_id = m.rollout_id WHERE m.job_id = ? AND m.state = ?",
                        [
                            .text(RolloutStatus.running.rawValue), .text(RolloutStatus.paused.rawValue),
                            .text(jobID), .text(RolloutMember.offered)
                        ], { ($0.string(0), $0.int(1) != 0) })
                else { return nil }
                // A FAILED job with retries left: the member is queued for its next attempt.
                let changed =
                    status == .failed && retry
                    ? try c.run(
                        "UPDATE rollout_members SET state = ?, job_id = NULL, released_at = NULL WHERE job_id = ?"
                            + " AND state = ?",
                        [.text(RolloutMember.queued), .text(jobID), .text(RolloutMember.offered)])
                    : try c.run(
                        "UPDATE rollout_members SET state = ? WHERE job_id = ? AND state = ?",
                        [.text(status.rawValue), .text(jobID), .text(RolloutMember.offered)])
                return changed == 1 ? id : nil
            }
        }
    }

    public func finalJobsOfOffered(id: String) -> [(jobID: String, status: UpdateStatus)]? {
        try? attempt { c in
            try c.rows(
                "SELECT j.job_id, j.status FROM rollout_members m JOIN update_jobs j ON j.job_id = m.job_id"
                    + " WHERE m.rollout_id = ? AND m.state = ? AND j.status IN (" + UpdateJobRecord.finalStatusesSQL
                    + ") ORDER BY m.thing_id", [.text(id), .text(RolloutMember.offered)]
            ) { ($0.string(0), UpdateStatus(rawValue: $0.string(1)) ?? .failed) }
        }.get()
    }

    public func offeredMembers(id: String, releasedBefore: Int64) -> [RolloutMember]? {
        try? attempt { c in
            try c.rows(
                Self.memberColumns + " WHERE rollout_id = ? AND state = ? AND released_at < ? ORDER BY thing_id",
                [.text(id), .text(RolloutMember.offered), .int(releasedBefore)], Self.memberRow)
        }.get()
    }

    public func endUpdateJob(jobID: String, status: UpdateStatus, reason: String, from: [UpdateStatus], now: Int64)
        -> Bool?
    {
        let before =
            from.isEmpty ? "" : " OR status IN (" + from.map { "'\($0.rawValue)'" }.joined(separator: ", ") + ")"
        return use(nil) { c in
            try c.run(
                "UPDATE update_jobs SET status = ?, reason = ?, step = ?, updated_at = ? WHERE job_id = ?"
                    + " AND (status IS NULL" + before + ")",
                [.text(status.rawValue), .text(reason), .text("ended by the hub"), .int(now), .text(jobID)]) == 1
        }
    }
}
