// SPDX-License-Identifier: Apache-2.0

/// The request partitions' leases (PartitionLeaseStore) in two tables:
/// `partition_hubs`, the hubs alive (each row renewed with the hub's
/// leases), and `partition_leases`, a row per partition with its holder
/// and expiry ('' and 0: free). A takeover is an UPDATE of lapsed rows
/// under FOR UPDATE SKIP LOCKED, so two hubs never take the same one.
extension PostgresStore: PartitionLeaseStore {
    public func leasePartitions(hubID: String, count: Int, leaseMs: Int64, now given: Int64?) -> PartitionLeases? {
        precondition(count > 0 && count <= 64, "a partition mask has 64 bits")
        let round = attempt { c in
            try c.transaction { () throws -> PartitionLeases in
                // The database's clock, read when the round begins: every
                // hub's leases on one clock.
                let now =
                    try given
                    ?? c.first("SELECT (extract(epoch FROM clock_timestamp()) * 1000)::bigint", [], { $0.int(0) })
                    ?? 0
                let until = now + leaseMs
                try c.run(
                    """
                    INSERT INTO partition_hubs (hub_id, expires_at) VALUES (?, ?)
                    ON CONFLICT (hub_id) DO UPDATE SET expires_at = excluded.expires_at
                    """, [.text(hubID), .int(until)])
                try c.run("DELETE FROM partition_hubs WHERE expires_at <= ?", [.int(now)])
                let alive = try c.rows("SELECT hub_id FROM partition_hubs ORDER BY hub_id", [], { $0.text(0) ?? "" })
                let hubs = max(alive.count, 1)
                let rank = alive.firstIndex(of: hubID) ?? 0
                let share = count / hubs + (rank < count % hubs ? 1 : 0)
                try c.run(
                    """
                    INSERT INTO partition_leases (part, hub_id, expires_at)
                    SELECT g, '', 0 FROM generate_series(0, ?::int - 1) g ON CONFLICT (part) DO NOTHING
                    """, [.int(Int64(count))])
                var held: UInt64 = 0
                let renewed = try c.rows(
                    "UPDATE partition_leases SET expires_at = ? WHERE hub_id = ? AND part < ? RETURNING part",
                    [.int(until), .text(hubID), .int(Int64(count))], { $0.int(0) })
                for p in renewed { held |= 1 << UInt64(p) }
                let missing = share - held.nonzeroBitCount
                if missing > 0 {
                    let taken = try c.rows(
                        """
                        UPDATE partition_leases SET hub_id = ?, expires_at = ?
                        WHERE part IN (SELECT part FROM partition_leases WHERE expires_at <= ? AND part < ?
                                       ORDER BY part LIMIT ? FOR UPDATE SKIP LOCKED)
                          AND expires_at <= ?
                        RETURNING part
                        """,
                        [.text(hubID), .int(until), .int(now), .int(Int64(count)), .int(Int64(missing)), .int(now)],
                        { $0.int(0) })
                    for p in taken { held |= 1 << UInt64(p) }
                }
                return PartitionLeases(held: held, share: share, hubs: hubs)
            }
        }
        return try? round.get()
    }

    public func releasePartitions(hubID: String, mask: UInt64, leaving: Bool) -> Bool {
        let done = attempt { c in
            try c.transaction {
                if mask != 0 {
                    try c.run(
                        "UPDATE partition_leases SET hub_id = '', expires_at = 0 WHERE hub_id = ? AND ((?::bigint >> part::int) & 1) = 1",
                        [.text(hubID), .int(Int64(bitPattern: mask))])
                }
                if leaving { try c.run("DELETE FROM partition_hubs WHERE hub_id = ?", [.text(hubID)]) }
            }
        }
        return (try? done.get()) != nil
    }
}
