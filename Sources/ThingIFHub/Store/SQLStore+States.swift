// SPDX-License-Identifier: Apache-2.0

import ThingIF

/// SQLStore's state (the statements SQLite and PostgreSQL share).
extension SQLStore {
    // MARK: state

    public func applyState(thingID: String, method: String, upload: String, at: Int64) -> String? {
        use(nil) { c in
            try c.transaction { () throws -> String? in
                // forUpdate: two hubs' PATCHes of one thing merge one after the other.
                guard
                    let row = try c.first(
                        "SELECT state, unpruned_samples FROM things WHERE thing_id = ?" + Self.dialect.forUpdate,
                        [.text(thingID)], { ($0.text(0), $0.int(1) + 1) })
                else { return nil }
                let (old, unpruned) = row
                let merged = StateMerge.apply(method: method, upload: upload, to: old)
                try c.run(
                    "UPDATE things SET state = ?, unpruned_samples = ? WHERE thing_id = ?",
                    [.text(merged), .int(unpruned), .text(thingID)])
                try c.run(
                    "INSERT INTO state_samples (thing_id, at, method, upload, state) VALUES (?, ?, ?, ?, ?)",
                    [.text(thingID), .int(at), .text(method), .text(upload), .text(merged)])
                try prune(c, thingID: thingID, at: at, unpruned: unpruned)
                return merged
            }
        }
    }

    /// Applies the retention to one thing's samples after a write, through
    /// the (thing_id, at) and (thing_id, id) indexes: by age on each write;
    /// by count once `unpruned` (the thing's uploads since the last time,
    /// this one included) reaches `StateRetention.pruneEvery`.
    func prune(_ c: Connection, thingID: String, at: Int64, unpruned: Int64) throws {
        if let oldest = StoreRules.oldestKept(retention, at: at) {
            try c.run("DELETE FROM state_samples WHERE thing_id = ? AND at < ?", [.text(thingID), .int(oldest)])
        }
        guard retention.maxSamples > 0, unpruned >= Int64(retention.pruneEvery) else { return }
        if let keep = try c.first(
            "SELECT id FROM state_samples WHERE thing_id = ? ORDER BY id DESC LIMIT 1 OFFSET ?",
            [.text(thingID), .int(Int64(retention.maxSamples - 1))], { $0.int(0) })
        {
            try c.run("DELETE FROM state_samples WHERE thing_id = ? AND id < ?", [.text(thingID), .int(keep)])
        }
        try c.run("UPDATE things SET unpruned_samples = 0 WHERE thing_id = ?", [.text(thingID)])
    }

    public func stateHistory(thingID: String, from: Int64, to: Int64) -> [StateSample] {
        use([]) {
            try $0.rows(
                StoreRows.sampleColumns + " WHERE thing_id = ? AND at >= ? AND at < ? ORDER BY id",
                [.text(thingID), .int(from), .int(to)], StoreRows.sample)
        }
    }

    public func stateHistoryPage(
        thingID: String, from: Int64, to: Int64, after: Int64, skip: Int, limit: Int, alias: String?,
        ranges: [StateRange]
    ) -> (samples: [StateSample], next: Int64?) {
        use(([], nil)) { c in
            let n = max(0, limit)
            let filter = StateRangeSQL.condition(Self.dialect, alias: alias, ranges)
            var rows = try c.rows(
                StoreRows.sampleColumns + " WHERE thing_id = ? AND id > ? AND at >= ? AND at < ?" + filter.sql
                    + " ORDER BY id LIMIT ? OFFSET ?",
                [.text(thingID), .int(after), .int(from), .int(to)] + filter.binds + [
                    .int(Int64(n + 1)), .int(Int64(max(0, skip)))
                ],
                StoreRows.sample)
            guard rows.count > n else { return (rows, nil) }
            rows.removeLast()
            return (rows, rows.last?.cursor ?? after)
        }
    }
}
