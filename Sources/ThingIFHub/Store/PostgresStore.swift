// SPDX-License-Identifier: Apache-2.0

import ThingIF

/// A HubStore in a PostgreSQL database, for several hubs that share one
/// (`--db postgres://…`). Behaves exactly as MemoryStore and SQLiteStore (the
/// same IDs, state merge, rules, row decoding: StoreRows, StoreRules,
/// StateMerge); each call borrows a connection of a small pool
/// (PostgresPool) for its statements, so every method is thread-safe and
/// calls from different threads run side by side, and a method that writes
/// several rows does so in one transaction.
///
/// Writes that hubs race on are decided by the database: results are kept
/// only when none are stored (`WHERE results IS NULL`), a commandID is a
/// primary key (`ON CONFLICT DO NOTHING`), a vendorThingID is UNIQUE (a
/// losing first registration finds the winner's thing and goes on with it),
/// a state upload locks the thing's row while it merges. Storage failures
/// never crash: they come back as nil, false or `.failure(.storage)`, and a
/// broken connection is re-established for the next call. The calls
/// themselves are SQLStore's, shared with SQLiteStore; this file keeps the
/// pool, the migrations and what only PostgreSQL does (a thing read in one
/// statement, results announced to the other hubs, the one-statement state
/// writes of StateWriteFastPaths, the schedule lease).
public final class PostgresStore: SQLStore, StateWriteFastPaths, SharedResultsFeed, @unchecked Sendable {
    static let dialect = SQLDialect.postgres

    /// The schema this code writes (thingif_schema.version).
    public static let schemaVersion: Int64 = 13

    private let db: PostgresPool
    /// The most connections a store opens (calls that overlap beyond them wait).
    public static let defaultConnections = 4
    /// For the listeners' connections; never printed (it may hold a password).
    private let url: String
    /// This store's name in its results notifications, to tell its own.
    private let origin = Platform.randomHex(bytes: 8)
    private let listeners = Locked<[PostgresListener]>([])
    /// The schedule lease's own connection, and whether it holds the lock.
    private let lease = Locked<(connection: PostgresConnection?, held: Bool)>((nil, false))
    /// The session advisory lock of the schedules (any constant of this
    /// application's own; "thingif" in ASCII).
    static let scheduleLockKey: Int64 = 0x7468_696e_6769_66
    /// host:port/dbname (without credentials).
    public let target: String
    public let secrets: HubSecrets
    public let retention: StateRetention

    /// Connects to `url` (postgres://user[:password]@host[:port]/dbname) and
    /// brings the schema up to date. Throws when the server cannot be
    /// reached (within `timeout` seconds) or refuses, or when the database
    /// has a schema newer than this code.
    public convenience init(
        url: String, secrets: HubSecrets = HubSecrets(), retention: StateRetention = StateRetention(),
        timeout: Int = 5, connections: Int = PostgresStore.defaultConnections
    ) throws {
        try self.init(
            url: url, secrets: secrets, retention: retention, timeout: timeout, connections: connections,
            migrateTo: Self.schemaVersion)
    }

    /// `migrateTo` below schemaVersion leaves an older schema, for the migration tests.
    init(
        url: String, secrets: HubSecrets, retention: StateRetention, timeout: Int,
        connections: Int = PostgresStore.defaultConnections, migrateTo: Int64
    ) throws {
        self.url = url
        self.secrets = secrets
        self.retention = retention
        let c = try PostgresConnection(url: url, timeout: timeout)
        target = c.target
        try Self.migrate(c, to: migrateTo)
        db = PostgresPool(first: c, url: url, timeout: timeout, capacity: connections)
    }

    /// One call per connection of the pool.
    public var concurrentCalls: Int { db.capacity }

    /// Whether `db` (the hub's --db) names a PostgreSQL database rather than an SQLite file.
    public static func isURL(_ db: String) -> Bool {
        db.hasPrefix("postgres://") || db.hasPrefix("postgresql://")
    }

    /// Closes the connection and stops the listeners; later calls fail as
    /// storage errors.
    public func close() {
        for l in listeners.withLock({ l in
            defer { l = [] }; return l
        }) { l.stop() }
        lease.withLock { l in
            l.connection?.close()
            l = (nil, false)
        }
        db.close()
    }

    /// The lock lives on a connection of its own, so that the store's
    /// connection can be reset without dropping it unnoticed. Held: checked
    /// with a round trip each call (a broken connection has lost the lock);
    /// not held: tried again (pg_try_advisory_lock does not wait).
    public func holdsScheduleLease() -> Bool {
        lease.withLock { l in
            if let c = l.connection {
                let alive = l.held ? ((try? c.first("SELECT 1") { _ in true }) ?? nil) != nil : !c.isBroken
                if !alive {
                    c.close()
                    l = (nil, false)
                }
            }
            if l.connection == nil { l.connection = try? PostgresConnection(url: url) }
            guard let c = l.connection else { return false }
            if !l.held {
                l.held =
                    (try? c.first("SELECT pg_try_advisory_lock(?::bigint)", [.int(Self.scheduleLockKey)]) {
                        $0.text(0) == "t"
                    }) ?? nil ?? false
            }
            return l.held
        }
    }

    /// Calls `handler` with the commandID of every command whose results
    /// another store (another hub) records on this database, on a thread and
    /// a connection of its own (LISTEN), until close(). recordResults
    /// announces them on the channel thingif_results as "{origin} {commandID}".
    public func listenForResults(_ handler: @escaping @Sendable (_ commandID: String) -> Void) throws {
        let origin = self.origin
        let l = try PostgresListener(url: url, listenSQL: "LISTEN thingif_results") { payload in
            guard let space = payload.firstIndex(of: " "), payload[..<space] != origin else { return }
            handler(String(payload[payload.index(after: space)...]))
        }
        guard l.start() else {
            l.stop()
            throw PostgresError(sqlState: "", message: "cannot start the listener thread")
        }
        listeners.withLock { $0.append(l) }
    }

    // MARK: schema

    /// Migrations in order: entry i takes the version i to i + 1. Version 1
    /// was all of StoreSchema but what the later ones add; a new database
    /// gets all of it at once, which comes to the same.
    static let migrations: [[StoreSchema.Step]] =
        [StoreSchema.createAll(except: laterMigrations.flatMap { $0 })]
        + laterMigrations

    private static let laterMigrations: [[StoreSchema.Step]] = [
        // 1 -> 2: when a command's notification may be claimed by a sweep
        // (rows from before are left NULL).
        [.column("commands", "notify_due"), .index("commands_notify_due")],
        // 2 -> 3: a command's expiry and why the hub ended it (CommandLifecycle).
        [.column("commands", "expires_at"), .column("commands", "end_reason"), .index("commands_open")],
        // 3 -> 4: uploads since the retention last ran (StateRetention.pruneEvery).
        [.column("things", "unpruned_samples")],
        // 4 -> 5: things' certificates and the revoked ones (the CRL).
        StoreSchema.certificateSteps,
        // 5 -> 6: things' layout and end nodes' gateway.
        StoreSchema.gatewaySteps,
        // 6 -> 7: firmware images and their chunks.
        StoreSchema.imageSteps,
        // 7 -> 8: update jobs.
        StoreSchema.updateJobSteps,
        // 8 -> 9: rollouts and their members.
        StoreSchema.rolloutSteps,
        // 9 -> 10: rollouts' time-outs, retries and ramp; members' attempts.
        StoreSchema.rolloutRetrySteps,
        // 10 -> 11: the trait registry.
        StoreSchema.traitSteps,
        // 11 -> 12: an image's chunks stay under its upload's key.
        StoreSchema.imageChunkKeySteps,
        // 12 -> 13: the request partitions' leases (HubPartitions).
        StoreSchema.partitionSteps
    ]

    /// Applies the missing migrations in one transaction. An advisory lock
    /// makes hubs that start together on a new database take turns: the
    /// first migrates, the others find the schema current.
    private static func migrate(_ c: PostgresConnection, to target: Int64) throws {
        try c.transaction {
            // 0x7468696e67696600: "thingif\0", the lock's key (held until COMMIT).
            try c.exec("SELECT pg_advisory_xact_lock(8388070228879828480)")
            try c.exec("CREATE TABLE IF NOT EXISTS thingif_schema (version BIGINT NOT NULL)")
            let found = try c.first("SELECT version FROM thingif_schema", [], { $0.int(0) })
            let current = found ?? 0
            guard current <= schemaVersion else {
                throw PostgresError(
                    sqlState: "",
                    message: "schema version \(current) of \(c.target) is newer than this hub's \(schemaVersion)")
            }
            guard current < target else { return }
            let steps =
                current == 0 && target == schemaVersion
                ? StoreSchema.createAll() : migrations[Int(current)..<Int(target)].flatMap { $0 }
            for step in steps { try c.exec(step.ddl(.postgres)) }
            if found == nil {
                try c.run("INSERT INTO thingif_schema (version) VALUES ($1)", [.int(target)])
            } else {
                try c.run("UPDATE thingif_schema SET version = $1", [.int(target)])
            }
        }
    }

    // MARK: SQLStore

    /// Runs `body` on a connection of the pool; its error (or the pool's)
    /// comes back as the failure, and a broken connection is reset for the
    /// next call.
    func attempt<R>(_ body: (PostgresConnection) throws -> R) -> Result<R, Error> {
        // Inside this thread's inOneTransaction: its connection; a failure undoes all of it.
        if let c = inTransaction.current {
            return Result {
                do { return try body(c) } catch {
                    c.spoil()
                    throw error
                }
            }
        }
        return Result {
            try db.with { c in
                do { return try body(c) } catch {
                    c.resetIfBroken()
                    throw error
                }
            }
        }
    }

    /// The connection of the transaction this thread is in (inOneTransaction).
    private let inTransaction = ThreadSlot<PostgresConnection>()

    /// Holds one connection of the pool for the whole body, in one
    /// transaction that every call in it joins (PostgresConnection's
    /// `sharedTransaction`): one COMMIT, one flush of the WAL. A call that
    /// fails in it undoes the whole body (`.undone`). Other threads' calls
    /// go on, on the pool's other connections; they wait only for rows the
    /// transaction has written, until its commit.
    public func inOneTransaction(_ body: () -> Void) -> OneTransaction {
        guard inTransaction.current == nil else { return .unsupported }
        let outcome = try? db.with { c in
            defer { c.resetIfBroken() }
            return try c.sharedTransaction { inTransaction.with(c, body) }
        }
        return outcome ?? .unsupported
    }

    static let hot = HotStatements(PostgresStore.self)

    /// The thing's record in one round trip (the prepared statement of the
    /// hot path: every request of a thing reads it).
    /// One round trip: the installations and owners come as two lists.
    static let thingWithListsSQL = """
        SELECT thing_id, vendor_thing_id, password_hash, thing_type, firmware_version,
               data_grouping_interval, state, created_at, layout_position, gateway_thing_id,
               (SELECT string_agg(i.installation_id || chr(31) || i.mqtt_topic, chr(30) ORDER BY i.id)
                  FROM thing_installations i WHERE i.thing_id = things.thing_id),
               (SELECT string_agg(o.owner, chr(30) ORDER BY o.id)
                  FROM thing_owners o WHERE o.thing_id = things.thing_id)
        FROM things
        """

    /// The UPDATE and the announcement in one statement: the other hubs
    /// hear "{origin} {commandID}" on thingif_results when it commits.
    func changeCommand(_ c: PostgresConnection, _ update: String, _ values: [SQLValue]) throws -> Bool {
        try c.rows(
            "WITH changed AS (" + update
                + " RETURNING command_id) SELECT pg_notify('thingif_results', ?::text || ' ' || command_id) FROM changed",
            values + [.text(origin)], { _ in () }
        ).count == 1
    }

    // MARK: state (StateWriteFastPaths)

    /// `putState` in one statement: the thing of the token (as
    /// `thingByToken` reads it), the UPDATE gated on the checks that
    /// authorisation makes and on the state it read, the sample, and the
    /// trigger probe of `applyState(after:)`. No row: nothing written.
    /// The token's three `?` come first, so they are numbered $1 to $3
    /// (`PostgresConnection.numbered`); the rest are written $4 to $8.
    static let putStateSQL =
        "WITH t AS (" + thingWithListsSQL + " WHERE " + isLiveTokenSubject("thing_id") + " LIMIT 1),"
            + """
             up AS (
                UPDATE things SET state = $5, unpruned_samples = unpruned_samples + 1
                WHERE thing_id = $4 AND thing_id = (SELECT thing_id FROM t)
                  AND state IS NOT DISTINCT FROM (SELECT state FROM t)
                  AND ($6::text IS NULL OR EXISTS (
                        SELECT 1 FROM thing_installations i WHERE i.thing_id = $4 AND i.mqtt_topic = $6))
                RETURNING thing_id, unpruned_samples),
            ins AS (
                INSERT INTO state_samples (thing_id, at, method, upload, state)
                SELECT thing_id, $7, 'PUT', $8, $5 FROM up RETURNING thing_id)
            SELECT t.*, up.unpruned_samples,
                   CASE WHEN EXISTS (SELECT 1 FROM triggers g WHERE g.thing_id = $4 AND g.enabled = 1)
                        THEN 1 ELSE 0 END
            FROM t, up, ins
            """

    public func putState(
        accessToken: String, thingID: String, clientID: String?, upload: String, state: String, at: Int64
    ) -> StoreRead<StatePut> {
        var values = Self.tokenValues(.thing, accessToken)
        values += [.text(thingID), .text(state), .text(clientID), .int(at), .text(upload)]
        return read { c in
            guard
                let (thing, unpruned, triggered) = try c.first(
                    Self.putStateSQL, values,
                    { row -> (ThingRecord, Int64, Bool) in
                        let rest = StoreRows.ShiftedRow(row, by: StoreRows.thingWithListsCount)
                        return (StoreRows.thingWithLists(row), rest.int(0), rest.int(1) != 0)
                    })
            else { return nil }
            // Housekeeping: a failure here leaves it to the next upload.
            try? prune(c, thingID: thingID, at: at, unpruned: unpruned)
            return StatePut(thing: thing, write: StateWrite(state: state, hasEnabledTrigger: triggered))
        }
    }

    /// The state merged from `old` in one statement that writes only if the
    /// row still holds `old` (no other upload came between), then the
    /// retention; else the locked read-merge-write of `applyState`. The
    /// statement also says whether the thing has an enabled trigger (an
    /// index probe on triggers_thing), which spares the trigger engine its
    /// read, a round trip, for a thing without one.
    public func applyState(thingID: String, method: String, upload: String, at: Int64, after old: String?)
        -> StateWrite?
    {
        let merged = StateMerge.apply(method: method, upload: upload, to: old)
        // nil: the store failed; written false: the state had changed meanwhile.
        let outcome: (written: Bool, triggered: Bool)? = use(nil) { c in
            guard
                let (unpruned, triggered) = try c.first(
                    """
                    WITH up AS (
                        UPDATE things SET state = $1, unpruned_samples = unpruned_samples + 1
                        WHERE thing_id = $2 AND state IS NOT DISTINCT FROM $3
                        RETURNING thing_id, unpruned_samples),
                    ins AS (
                        INSERT INTO state_samples (thing_id, at, method, upload, state)
                        SELECT thing_id, $4, $5, $6, $1 FROM up RETURNING thing_id)
                    SELECT up.unpruned_samples,
                           CASE WHEN EXISTS (SELECT 1 FROM triggers t WHERE t.thing_id = $2 AND t.enabled = 1)
                                THEN 1 ELSE 0 END
                    FROM up, ins
                    """, [.text(merged), .text(thingID), .text(old), .int(at), .text(method), .text(upload)],
                    { ($0.int(0), $0.int(1) != 0) })
            else { return (false, false) }
            // Housekeeping: a failure here leaves it to the next upload.
            try? prune(c, thingID: thingID, at: at, unpruned: unpruned)
            return (true, triggered)
        }
        guard let outcome else { return nil }
        guard outcome.written else {
            return applyState(thingID: thingID, method: method, upload: upload, at: at).map { StateWrite(state: $0) }
        }
        return StateWrite(state: merged, hasEnabledTrigger: outcome.triggered)
    }
}
