// SPDX-License-Identifier: Apache-2.0

import ThingIF

/// MemoryStore's update jobs: one dictionary under the store's lock, so
/// the one-open-job check and the insert are one step.
extension MemoryStore {
    public func insertUpdateJob(_ job: UpdateJobRecord) -> UpdateJobInsert? {
        data.withLock { d in
            guard d.things[job.thingID] != nil else { return .noThing }
            if let open = d.updateJobs.values.first(where: { $0.thingID == job.thingID && !$0.isFinal }) {
                return .busy(jobID: open.jobID)
            }
            guard d.updateJobs[job.jobID] == nil else { return nil }
            d.updateJobs[job.jobID] = job
            return .created
        }
    }

    public func updateJob(id: String) -> StoreRead<UpdateJobRecord> {
        data.withLock { d in
            // A deleted thing's jobs went with it.
            guard let j = d.updateJobs[id], d.things[j.thingID] != nil else { return .notFound }
            return .found(j)
        }
    }

    public func deleteUpdateJob(id: String) -> Bool {
        data.withLock { d in d.updateJobs.removeValue(forKey: id) != nil }
    }

    public func updateJobs(thingID: String) -> [UpdateJobRecord]? {
        data.withLock { d in
            guard d.things[thingID] != nil else { return [] }
            return d.updateJobs.values.filter { $0.thingID == thingID }.sorted {
                ($0.createdAt, $0.jobID) > ($1.createdAt, $1.jobID)
            }
        }
    }

    public func applyUpdateReport(jobID: String, thingID: String, report: UpdateReport, now: Int64)
        -> UpdateReportApplied?
    {
        data.withLock { d in
            guard var j = d.updateJobs[jobID], j.thingID == thingID, d.things[thingID] != nil else { return .noJob }
            guard j.attempt == report.attempt else { return .otherAttempt(j.attempt) }
            guard report.seq > j.seq else { return .stale }
            j.apply(report, now: now)
            d.updateJobs[jobID] = j
            if report.status == .succeeded, let v = report.version { d.things[thingID]?.firmwareVersion = v }
            return .applied
        }
    }

    public func jobsOfExpiredOffers(limit: Int) -> [String]? {
        data.withLock { d in
            d.updateJobs.values.filter {
                $0.status == nil && d.things[$0.thingID] != nil && d.commands[$0.commandID]?.state == .expired
            }
            .sorted { ($0.createdAt, $0.jobID) < ($1.createdAt, $1.jobID) }.prefix(limit).map(\.jobID)
        }
    }
}

extension MemoryStore {
    public func updateJobStatuses() -> [String: Int]? {
        data.withLock { d in
            var counts: [String: Int] = [:]
            for j in d.updateJobs.values where d.things[j.thingID] != nil {
                counts[j.status?.rawValue ?? UpdateJobRecord.noStatus, default: 0] += 1
            }
            return counts
        }
    }
}

extension UpdateJobRecord {
    /// The report's fields, as the SQL stores' UPDATE writes them.
    mutating func apply(_ r: UpdateReport, now: Int64) {
        status = r.status
        seq = r.seq
        bytes = r.bytes
        of = r.of
        reason = r.reason
        step = r.step
        if let v = r.version { reportedVersion = v }
        updatedAt = now
    }
}
