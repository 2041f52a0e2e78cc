// SPDX-License-Identifier: Apache-2.0

import ThingIF

/// SQLStore's update jobs (the statements SQLite and PostgreSQL share): a
/// row each in update_jobs. A report is applied by one conditional UPDATE
/// (`seq < ?`), so with several hubs on one database a late report never
/// overwrites a newer one, whichever hub applies it.
extension SQLStore {
    static var updateJobColumns: String {
        "SELECT job_id, thing_id, image, version, manifest, block_size, blocks, attempt, command_id, status, seq,"
            + " bytes, of_bytes, reason, step, reported_version, created_at, updated_at FROM update_jobs"
    }

    static func updateJobRow(_ r: Connection.Row) -> UpdateJobRecord {
        UpdateJobRecord(
            jobID: r.string(0), thingID: r.string(1), image: r.string(2), version: r.string(3), manifest: r.bytes(4),
            blockSize: Int(r.int(5)), blocks: Int(r.int(6)), attempt: Int(r.int(7)), commandID: r.string(8),
            status: r.text(9).flatMap(UpdateStatus.init(rawValue:)), seq: r.int(10),
            bytes: r.isNull(11) ? nil : r.int(11), of: r.isNull(12) ? nil : r.int(12), reason: r.text(13),
            step: r.text(14), reportedVersion: r.text(15), createdAt: r.int(16), updatedAt: r.int(17))
    }

    /// One transaction: the thing's row (locked on PostgreSQL, so two hubs
    /// creating a job for one thing take turns), its open job if any, then
    /// the insert.
    public func insertUpdateJob(_ job: UpdateJobRecord) -> UpdateJobInsert? {
        use(nil) { c in
            try c.transaction { () throws -> UpdateJobInsert in
                guard
                    try c.first(
                        "SELECT 1 FROM things WHERE thing_id = ?" + Self.dialect.forUpdate, [.text(job.thingID)],
                        { _ in true }) != nil
                else { return .noThing }
                let open = try c.first(
                    "SELECT job_id FROM update_jobs WHERE thing_id = ? AND (status IS NULL OR status NOT IN ("
                        + UpdateJobRecord.finalStatusesSQL + ")) LIMIT 1", [.text(job.thingID)]
                ) { $0.string(0) }
                if let open { return .busy(jobID: open) }
                try c.run(
                    "INSERT INTO update_jobs (job_id, thing_id, image, version, manifest, block_size, blocks, attempt,"
                        + " command_id, status, seq, bytes, of_bytes, reason, step, reported_version, created_at,"
                        + " updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    [
                        .text(job.jobID), .text(job.thingID), .text(job.image), .text(job.version),
                        .bytes(job.manifest), .int(Int64(job.blockSize)), .int(Int64(job.blocks)),
                        .int(Int64(job.attempt)), .text(job.commandID), .text(job.status?.rawValue), .int(job.seq),
                        .int(job.bytes), .int(job.of), .text(job.reason), .text(job.step),
                        .text(job.reportedVersion), .int(job.createdAt), .int(job.updatedAt)
                    ])
                return .created
            }
        }
    }

    public func updateJob(id: String) -> StoreRead<UpdateJobRecord> {
        read { c in try c.first(Self.updateJobColumns + " WHERE job_id = ?", [.text(id)], Self.updateJobRow) }
    }

    public func deleteUpdateJob(id: String) -> Bool {
        use(false) { c in try c.run("DELETE FROM update_jobs WHERE job_id = ?", [.text(id)]) == 1 }
    }

    public func updateJobs(thingID: String) -> [UpdateJobRecord]? {
        try? attempt { c in
            try c.rows(
                Self.updateJobColumns + " WHERE thing_id = ? ORDER BY created_at DESC, job_id DESC",
                [.text(thingID)], Self.updateJobRow)
        }.get()
    }

    /// The UPDATE applies only a report of the job's attempt whose seq is
    /// above the stored one; when it changed nothing, a read says why.
    public func applyUpdateReport(jobID: String, thingID: String, report r: UpdateReport, now: Int64)
        -> UpdateReportApplied?
    {
        use(nil) { c in
            try c.transaction { () throws -> UpdateReportApplied in
                let changed = try c.run(
                    "UPDATE update_jobs SET status = ?, seq = ?, bytes = ?, of_bytes = ?, reason = ?, step = ?,"
                        + " reported_version = COALESCE(?, reported_version), updated_at = ?"
                        + " WHERE job_id = ? AND thing_id = ? AND attempt = ? AND seq < ?",
                    [
                        .text(r.status.rawValue), .int(r.seq), .int(r.bytes), .int(r.of), .text(r.reason),
                        .text(r.step), .text(r.version), .int(now), .text(jobID), .text(thingID),
                        .int(Int64(r.attempt)), .int(r.seq)
                    ])
                if changed == 1 {
                    if r.status == .succeeded, let v = r.version {
                        try c.run(
                            "UPDATE things SET firmware_version = ? WHERE thing_id = ?", [.text(v), .text(thingID)])
                    }
                    return .applied
                }
                guard
                    let attempt = try c.first(
                        "SELECT attempt FROM update_jobs WHERE job_id = ? AND thing_id = ?",
                        [.text(jobID), .text(thingID)], { Int($0.int(0)) })
                else { return .noJob }
                return attempt == r.attempt ? .stale : .otherAttempt(attempt)
            }
        }
    }

    public func updateJobStatuses() -> [String: Int]? {
        try? attempt { c in
            var counts: [String: Int] = [:]
            for (status, n) in try c.rows(
                "SELECT COALESCE(status, ?), COUNT(*) FROM update_jobs GROUP BY 1", [.text(UpdateJobRecord.noStatus)],
                { ($0.string(0), Int($0.int(1))) })
            {
                counts[status] = n
            }
            return counts
        }.get()
    }

    public func jobsOfExpiredOffers(limit: Int) -> [String]? {
        try? attempt { c in
            try c.rows(
                "SELECT j.job_id FROM update_jobs j JOIN commands c ON c.command_id = j.command_id"
                    + " WHERE j.status IS NULL AND c.state = ? ORDER BY j.created_at, j.job_id LIMIT ?",
                [.text(CommandState.expired.rawValue), .int(Int64(limit))], { $0.string(0) })
        }.get()
    }
}
