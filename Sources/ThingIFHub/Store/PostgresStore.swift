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
/// broken connection is re-established for the next call.
public final class PostgresStore: HubStore, SharedResultsFeed, @unchecked Sendable {
    /// The schema this code writes (thingif_schema.version).
    public static let schemaVersion: Int64 = 3

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
        [.column("commands", "expires_at"), .column("commands", "end_reason"), .index("commands_open")]
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

    // MARK: helpers

    /// Runs `body` on the connection; a storage error gives `fallback` (and
    /// a broken connection is reset for the next call).
    private func use<R>(_ fallback: R, _ body: (PostgresConnection) throws -> R) -> R {
        switch attempt(body) {
        case .success(let r): return r
        case .failure: return fallback
        }
    }

    /// Runs `body` on a connection of the pool; its error (or the pool's)
    /// comes back as the failure.
    private func attempt<R>(_ body: (PostgresConnection) throws -> R) -> Result<R, Error> {
        Result {
            try db.with { c in
                do { return try body(c) } catch {
                    c.resetIfBroken()
                    throw error
                }
            }
        }
    }

    /// The whole record of the thing the clause selects (without its state
    /// history). `lock` takes the row for the transaction (FOR UPDATE).
    private static func thing(
        _ c: PostgresConnection, where clause: String, _ value: String, lock: Bool = false
    ) throws -> ThingRecord? {
        try thing(c, where: clause, [.text(value)], lock: lock)
    }

    private static func thing(
        _ c: PostgresConnection, where clause: String, _ values: [SQLValue], lock: Bool = false
    ) throws -> ThingRecord? {
        // The clause is one of this file's constants; the value is bound.
        // One round trip: the installations and owners come as two lists
        // joined with control characters no ID or topic level can hold
        // (Topics.isSafeLevel; owners are "user:"/"group:" and a hub ID).
        try c.first(
            thingWithListsSQL + " WHERE " + clause + " LIMIT 1" + (lock ? " FOR UPDATE" : ""), values
        ) { r in
            var t = StoreRows.thing(r)
            for pair in Self.split(r.text(8), by: 0x1E) {
                let kv = Self.split(pair, by: 0x1F)
                if kv.count == 2 { t.installations[kv[0]] = kv[1] }
            }
            t.owners = Self.split(r.text(9), by: 0x1E)
            return t
        }
    }

    private static let thingWithListsSQL = """
        SELECT thing_id, vendor_thing_id, password_hash, thing_type, firmware_version,
               data_grouping_interval, state, created_at,
               (SELECT string_agg(i.installation_id || chr(31) || i.mqtt_topic, chr(30) ORDER BY i.id)
                  FROM thing_installations i WHERE i.thing_id = things.thing_id),
               (SELECT string_agg(o.owner, chr(30) ORDER BY o.id)
                  FROM thing_owners o WHERE o.thing_id = things.thing_id)
        FROM things
        """

    private static func split(_ s: String?, by byte: UInt8) -> [String] {
        guard let s, !s.isEmpty else { return [] }
        return s.utf8.split(separator: byte, omittingEmptySubsequences: false).map {
            String(decoding: $0, as: UTF8.self)
        }
    }

    private static func exists(_ c: PostgresConnection, thing id: String) throws -> Bool {
        try c.first("SELECT 1 FROM things WHERE thing_id = $1", [.text(id)]) { _ in true } ?? false
    }

    // MARK: tokens

    /// A new raw token for the subject; prunes expired and revoked ones.
    private func issue(_ c: PostgresConnection, kind: TokenKind, subject: String) throws -> String {
        let now = Platform.epochMs()
        try c.run("DELETE FROM tokens WHERE revoked = 1")
        try c.run("DELETE FROM tokens WHERE expires_at <> 0 AND expires_at <= $1", [.int(now)])
        let raw = HubIDs.token()
        try c.run(
            """
            INSERT INTO tokens (token_hash, kind, subject_id, created_at, expires_at, revoked)
            VALUES ($1, $2, $3, $4, $5, 0)
            """,
            [
                .text(Crypto.sha256Hex(raw)), .text(kind.rawValue), .text(subject), .int(now),
                .int(secrets.expiry(kind, now: now))
            ])
        return raw
    }

    /// The subject of a valid (known, unexpired, unrevoked) raw token.
    /// The rows of `token`'s live token of its kind: $1 its hash, $2 the
    /// kind, $3 now (tokenValues); a subquery, so that a request's subject
    /// is read in the same round trip as its token.
    private static let liveToken =
        "token_hash = $1 AND kind = $2 AND revoked = 0 AND (expires_at = 0 OR expires_at > $3)"

    private static func tokenValues(_ kind: TokenKind, _ token: String) -> [SQLValue] {
        [.text(Crypto.sha256Hex(token)), .text(kind.rawValue), .int(Platform.epochMs())]
    }

    public func issueToken(kind: TokenKind, subjectID: String) -> String? {
        use(nil) { c in
            try c.transaction { () throws -> String? in
                let table =
                    kind == .user
                    ? "SELECT 1 FROM users WHERE user_id = $1" : "SELECT 1 FROM things WHERE thing_id = $1"
                guard try c.first(table, [.text(subjectID)], { _ in true }) != nil else { return nil }
                return try issue(c, kind: kind, subject: subjectID)
            }
        }
    }

    public func revokeToken(_ token: String) -> Bool {
        use(false) { try SQLQueries.revokeToken($0, token) }
    }

    // MARK: things

    /// The KDF runs outside the connection's lock (and outside any
    /// transaction), so one onboarding never stalls the rest of the hub.
    public func registerThing(
        vendorThingID: String, password: String, thingType: String?, firmwareVersion: String?,
        dataGroupingInterval: String?
    ) -> Result<ThingRecord, RegisterError> {
        // A few rounds at most: only a concurrent first registration of the
        // same vendorThingID (on this hub or another) makes one repeat.
        for _ in 0..<4 {
            let found = attempt { try Self.thing($0, where: "vendor_thing_id = $1", vendorThingID) }
            guard case .success(let known) = found else { return .failure(.storage) }
            if let known {
                guard let h = known.passwordHash, PasswordHash.verify(password, h) else {
                    return .failure(.wrongPassword)
                }
                let r: Result<ThingRecord, RegisterError>? = use(.failure(.storage)) { c in
                    try c.transaction { () throws -> Result<ThingRecord, RegisterError>? in
                        // Still the hash that was verified? The row stays locked until COMMIT.
                        guard let t = try Self.thing(c, where: "thing_id = $1", known.thingID, lock: true),
                            t.passwordHash == h
                        else { return nil }
                        guard StoreRules.typeMatches(thingType, known: t.thingType) else { return .failure(.wrongType) }
                        try c.run(
                            """
                            UPDATE things SET thing_type = COALESCE(thing_type, $1),
                                firmware_version = COALESCE($2, firmware_version),
                                data_grouping_interval = COALESCE($3, data_grouping_interval)
                            WHERE thing_id = $4
                            """,
                            [.text(thingType), .text(firmwareVersion), .text(dataGroupingInterval), .text(t.thingID)])
                        guard var updated = try Self.thing(c, where: "thing_id = $1", t.thingID) else {
                            return .failure(.storage)
                        }
                        updated.accessToken = try issue(c, kind: .thing, subject: t.thingID)
                        return .success(updated)
                    }
                }
                if let r { return r }
                continue
            }
            let hash = PasswordHash.make(password, iterations: secrets.passwordIterations)
            let r: Result<ThingRecord, RegisterError>? = use(.failure(.storage)) { c in
                try c.transaction { () throws -> Result<ThingRecord, RegisterError>? in
                    var t = ThingRecord(
                        thingID: HubIDs.thingID(), vendorThingID: vendorThingID, passwordHash: hash,
                        thingType: thingType, firmwareVersion: firmwareVersion,
                        accessToken: "", dataGroupingInterval: dataGroupingInterval,
                        createdAt: Platform.epochMs())
                    // Another registration of the vendorThingID that committed
                    // first (any hub) wins: nothing is inserted, the next round
                    // finds its thing.
                    guard
                        try c.run(
                            """
                            INSERT INTO things (thing_id, vendor_thing_id, password_hash, thing_type, firmware_version,
                                data_grouping_interval, state, created_at)
                            VALUES ($1, $2, $3, $4, $5, $6, NULL, $7)
                            ON CONFLICT (vendor_thing_id) DO NOTHING
                            """,
                            [
                                .text(t.thingID), .text(vendorThingID), .text(hash), .text(thingType),
                                .text(firmwareVersion), .text(dataGroupingInterval), .int(t.createdAt)
                            ]) == 1
                    else { return nil }
                    t.accessToken = try issue(c, kind: .thing, subject: t.thingID)
                    return .success(t)
                }
            }
            if let r { return r }
        }
        return .failure(.storage)
    }

    public func thing(id: String) -> ThingRecord? {
        use(nil) { try Self.thing($0, where: "thing_id = $1", id) }
    }

    public func things(ownedBy owners: [String]) -> [ThingRecord] {
        guard !owners.isEmpty else { return [] }
        return use([]) { c in
            let marks = (1...owners.count).map { "$\($0)" }.joined(separator: ", ")
            let ids = try c.rows(
                "SELECT DISTINCT thing_id FROM thing_owners WHERE owner IN (\(marks)) ORDER BY thing_id",
                owners.map { SQLValue.text($0) }
            ) { $0.string(0) }
            return try ids.compactMap { try Self.thing(c, where: "thing_id = $1", $0) }
        }
    }

    public func thing(vendorThingID: String) -> ThingRecord? {
        use(nil) { try Self.thing($0, where: "vendor_thing_id = $1", vendorThingID) }
    }

    public func thing(accessToken: String) -> ThingRecord? {
        use(nil) {
            try Self.thing(
                $0, where: "thing_id IN (SELECT subject_id FROM tokens WHERE " + Self.liveToken + ")",
                Self.tokenValues(.thing, accessToken))
        }
    }

    public func thing(mqttTopic: String) -> ThingRecord? {
        use(nil) { c in
            // The thing that most recently took the topic.
            guard
                let id = try c.first(
                    "SELECT thing_id FROM thing_installations WHERE mqtt_topic = $1 ORDER BY id DESC LIMIT 1",
                    [.text(mqttTopic)], { $0.string(0) })
            else { return nil }
            return try Self.thing(c, where: "thing_id = $1", id)
        }
    }

    public func addInstallation(thingID: String, installationID: String, mqttTopic: String) -> Bool {
        use(false) { c in
            try c.transaction {
                guard try Self.exists(c, thing: thingID) else { return false }
                // Replaced, not updated: the new row gets the newest id.
                try c.run(
                    "DELETE FROM thing_installations WHERE thing_id = $1 AND installation_id = $2",
                    [.text(thingID), .text(installationID)])
                try c.run(
                    "INSERT INTO thing_installations (thing_id, installation_id, mqtt_topic) VALUES ($1, $2, $3)",
                    [.text(thingID), .text(installationID), .text(mqttTopic)])
                return true
            }
        }
    }

    public func installationsOldestFirst(thingID: String) -> [(installationID: String, mqttTopic: String)] {
        use([]) { c in
            var out: [(installationID: String, mqttTopic: String)] = []
            try c.query(
                "SELECT installation_id, mqtt_topic FROM thing_installations WHERE thing_id = $1 ORDER BY id",
                [.text(thingID)]
            ) { out.append(($0.string(0), $0.string(1))) }
            return out
        }
    }

    public func removeInstallation(thingID: String, installationID: String) -> Bool {
        use(false) { c in
            try c.run(
                "DELETE FROM thing_installations WHERE thing_id = $1 AND installation_id = $2",
                [.text(thingID), .text(installationID)]) == 1
        }
    }

    public func deleteThing(id: String) -> Bool {
        use(false) { try SQLQueries.deleteThing($0, id: id) }
    }

    public func setFirmwareVersion(thingID: String, _ version: String) -> Bool {
        use(false) { try SQLQueries.setFirmwareVersion($0, thingID: thingID, version) }
    }

    public func setThingType(thingID: String, _ thingType: String) -> Bool {
        use(false) { try SQLQueries.setThingType($0, thingID: thingID, thingType) }
    }

    public func addOwner(thingID: String, owner: String) -> Bool {
        use(false) { c in
            try c.transaction {
                guard try Self.exists(c, thing: thingID) else { return false }
                try c.run(
                    "INSERT INTO thing_owners (thing_id, owner) VALUES ($1, $2) ON CONFLICT DO NOTHING",
                    [.text(thingID), .text(owner)])
                return true
            }
        }
    }

    // MARK: state

    public func applyState(thingID: String, method: String, upload: String, at: Int64) -> String? {
        use(nil) { c in
            try c.transaction { () throws -> String? in
                // FOR UPDATE: two hubs' PATCHes of one thing merge one after the other.
                guard
                    let old = try c.first(
                        "SELECT state FROM things WHERE thing_id = $1 FOR UPDATE", [.text(thingID)], { $0.text(0) })
                else { return nil }
                let merged = StateMerge.apply(method: method, upload: upload, to: old)
                try c.run("UPDATE things SET state = $1 WHERE thing_id = $2", [.text(merged), .text(thingID)])
                try c.run(
                    "INSERT INTO state_samples (thing_id, at, method, upload, state) VALUES ($1, $2, $3, $4, $5)",
                    [.text(thingID), .int(at), .text(method), .text(upload), .text(merged)])
                try prune(c, thingID: thingID, at: at)
                return merged
            }
        }
    }

    /// The state merged from `old` in one statement that writes only if the
    /// row still holds `old` (no other upload came between), then the
    /// retention; else the locked read-merge-write of `applyState`.
    public func applyState(thingID: String, method: String, upload: String, at: Int64, after old: String?) -> String? {
        let merged = StateMerge.apply(method: method, upload: upload, to: old)
        let written: Bool? = use(nil) { c in
            let rows = try c.run(
                """
                WITH up AS (
                    UPDATE things SET state = $1 WHERE thing_id = $2 AND state IS NOT DISTINCT FROM $3
                    RETURNING thing_id)
                INSERT INTO state_samples (thing_id, at, method, upload, state)
                SELECT thing_id, $4, $5, $6, $1 FROM up
                """, [.text(merged), .text(thingID), .text(old), .int(at), .text(method), .text(upload)])
            guard rows == 1 else { return false }
            // Housekeeping: a failure here leaves it to the next upload.
            try? prune(c, thingID: thingID, at: at)
            return true
        }
        switch written {
        case true?: return merged
        case false?: return applyState(thingID: thingID, method: method, upload: upload, at: at)
        case nil: return nil
        }
    }

    /// Applies the retention to one thing's samples.
    private func prune(_ c: PostgresConnection, thingID: String, at: Int64) throws {
        if let oldest = StoreRules.oldestKept(retention, at: at) {
            try c.run("DELETE FROM state_samples WHERE thing_id = $1 AND at < $2", [.text(thingID), .int(oldest)])
        }
        if retention.maxSamples > 0,
            let keep = try c.first(
                "SELECT id FROM state_samples WHERE thing_id = $1 ORDER BY id DESC LIMIT 1 OFFSET $2",
                [.text(thingID), .int(Int64(retention.maxSamples - 1))], { $0.int(0) })
        {
            try c.run("DELETE FROM state_samples WHERE thing_id = $1 AND id < $2", [.text(thingID), .int(keep)])
        }
    }

    public func stateHistory(thingID: String, from: Int64, to: Int64) -> [StateSample] {
        use([]) { try SQLQueries.stateHistory($0, thingID: thingID, from: from, to: to) }
    }

    public func stateHistoryPage(thingID: String, from: Int64, to: Int64, after: Int64, limit: Int) -> (
        samples: [StateSample], next: Int64?
    ) {
        use(([], nil)) {
            try SQLQueries.stateHistoryPage($0, thingID: thingID, from: from, to: to, after: after, limit: limit)
        }
    }

    // MARK: commands

    public func insertCommand(_ command: CommandRecord) -> CommandRecord? {
        use(nil) { c in
            // seq is an identity; a commandID stored already (by any hub)
            // inserts nothing and returns no row.
            guard
                let seq = try c.first(
                    """
                    INSERT INTO commands (command_id, thing_id, issuer, issuing_installation_id, payload,
                        results, state, created_at, modified_at)
                    VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
                    ON CONFLICT (command_id) DO NOTHING
                    RETURNING seq
                    """,
                    [
                        .text(command.commandID), .text(command.thingID), .text(command.issuer),
                        .text(command.issuingInstallationID), .text(command.payload), .text(command.results),
                        .text(command.state.rawValue), .int(command.createdAt), .int(command.modifiedAt)
                    ],
                    { $0.int(0) })
            else { return nil }
            var stored = command
            stored.seq = seq
            return stored
        }
    }

    public func command(id: String) -> CommandRecord? {
        use(nil) { try SQLQueries.command($0, id: id) }
    }

    public func markDelivered(commandID: String, at: Int64) -> Bool {
        use(false) { try SQLQueries.markDelivered($0, commandID: commandID, at: at) }
    }

    public func recordResults(commandID: String, results: String, state: CommandState, at: Int64) -> Bool {
        use(false) { c in
            // The first results win, whichever hub stores them; the other
            // hubs hear of them (their event streams) when they commit.
            try c.rows(
                """
                WITH done AS (
                    UPDATE commands SET results = $1, state = $2, modified_at = $3, notify_due = $6
                    WHERE command_id = $4 AND results IS NULL RETURNING command_id
                )
                SELECT pg_notify('thingif_results', $5::text || ' ' || command_id) FROM done
                """,
                [
                    .text(results), .text(state.rawValue), .int(at), .text(commandID), .text(origin),
                    .int(at + StoreRules.notificationGraceMs)
                ], { _ in () }
            ).count == 1
        }
    }

    public func markNotified(commandID: String) -> Bool {
        use(false) { try SQLQueries.markNotified($0, commandID: commandID) }
    }

    public func claimUnnotified(now: Int64, leaseMs: Int64, limit: Int) -> [CommandRecord] {
        use([]) {
            try SQLQueries.claimUnnotified(
                $0, now: now, leaseMs: leaseMs, limit: limit, lock: " FOR UPDATE SKIP LOCKED")
        }
    }

    public func commands(thingID: String, afterSeq: Int64, limit: Int) -> [CommandRecord] {
        use([]) { try SQLQueries.commands($0, thingID: thingID, afterSeq: afterSeq, limit: limit) }
    }

    public func unansweredCommands(thingID: String) -> [CommandRecord] {
        use([]) { try SQLQueries.unansweredCommands($0, thingID: thingID) }
    }

    // MARK: command lifecycle

    public func setCommandExpiry(commandID: String, expiresAt: Int64) -> Bool {
        use(false) { try SQLQueries.setCommandExpiry($0, commandID: commandID, expiresAt: expiresAt) }
    }

    public func endCommand(commandID: String, state: CommandState, reason: String, at: Int64) -> Bool {
        use(false) { c in
            // As recordResults: the other hubs hear of it (their event streams).
            try c.rows(
                """
                WITH ended AS (
                    UPDATE commands SET state = $1, end_reason = $2, modified_at = $3, notify_due = $4
                    WHERE command_id = $5 AND \(SQLQueries.openCommand) RETURNING command_id
                )
                SELECT pg_notify('thingif_results', $6::text || ' ' || command_id) FROM ended
                """,
                [
                    .text(state.rawValue), .text(reason), .int(at), .int(at + StoreRules.notificationGraceMs),
                    .text(commandID), .text(origin)
                ], { _ in () }
            ).count == 1
        }
    }

    public func commandsDueToEnd(now: Int64, sentBefore: Int64?, deliveredBefore: Int64?, limit: Int)
        -> [CommandRecord]
    {
        use([]) {
            try SQLQueries.commandsDueToEnd(
                $0, now: now, sentBefore: sentBefore, deliveredBefore: deliveredBefore, limit: limit)
        }
    }

    // MARK: users

    public func createUser(loginName: String?, passwordHash: String?) -> UserRecord? {
        use(nil) { c in
            var u = UserRecord(
                userID: HubIDs.userID(), loginName: loginName, passwordHash: passwordHash,
                accessToken: "", createdAt: Platform.epochMs())
            return try c.transaction { () throws -> UserRecord? in
                // A taken loginName (by any hub) inserts nothing.
                guard
                    try c.run(
                        """
                        INSERT INTO users (user_id, login_name, password_hash, created_at) VALUES ($1, $2, $3, $4)
                        ON CONFLICT (login_name) DO NOTHING
                        """, [.text(u.userID), .text(loginName), .text(passwordHash), .int(u.createdAt)]) == 1
                else { return nil }
                u.accessToken = try issue(c, kind: .user, subject: u.userID)
                return u
            }
        }
    }

    public func setPasswordHash(userID: String, _ hash: String) -> Bool {
        use(false) { try SQLQueries.setPasswordHash($0, userID: userID, hash) }
    }

    public func user(id: String) -> UserRecord? {
        use(nil) { try SQLQueries.user($0, id: id) }
    }

    public func user(accessToken: String) -> UserRecord? {
        use(nil) { c in
            try c.first(
                StoreRows.userColumns + " WHERE user_id IN (SELECT subject_id FROM tokens WHERE " + Self.liveToken
                    + ") LIMIT 1", Self.tokenValues(.user, accessToken), StoreRows.user)
        }
    }

    public func user(loginName: String) -> UserRecord? {
        use(nil) { try SQLQueries.user($0, loginName: loginName) }
    }

    // MARK: groups

    private static func withMembers(_ c: PostgresConnection, _ g: GroupRecord) throws -> GroupRecord {
        var out = g
        out.members = try c.rows(
            "SELECT user_id FROM group_members WHERE group_id = $1 ORDER BY position", [.text(g.groupID)]
        ) { $0.string(0) }
        return out
    }

    public func createGroup(name: String, ownerUserID: String, members: [String]) -> GroupRecord? {
        use(nil) { try SQLQueries.createGroup($0, name: name, ownerUserID: ownerUserID, members: members) }
    }

    public func group(id: String) -> GroupRecord? {
        use(nil) { c in
            try c.first(StoreRows.groupColumns + " WHERE group_id = $1", [.text(id)], StoreRows.group).map {
                try Self.withMembers(c, $0)
            }
        }
    }

    public func groups(ofUser userID: String) -> [GroupRecord] {
        use([]) { c in
            // Ordered by groupID as MemoryStore does: COLLATE "C" is byte
            // order (String's <) whatever the database's locale.
            try c.rows(
                StoreRows.groupColumns + """
                     WHERE owner_user_id = $1
                       OR group_id IN (SELECT group_id FROM group_members WHERE user_id = $1)
                    ORDER BY group_id COLLATE "C"
                    """, [.text(userID)], StoreRows.group
            ).map { try Self.withMembers(c, $0) }
        }
    }

    // MARK: app installations

    public func addAppInstallation(userID: String, kind: AppInstallation.Kind, target: String?) -> AppInstallation? {
        use(nil) { try SQLQueries.addAppInstallation($0, userID: userID, kind: kind, target: target) }
    }

    public func appInstallation(id: String) -> AppInstallation? {
        use(nil) { try SQLQueries.appInstallation($0, id: id) }
    }

    public func appInstallations(userID: String) -> [AppInstallation] {
        use([]) { c in
            try c.rows(
                StoreRows.installationColumns + " WHERE user_id = $1 ORDER BY created_at, id", [.text(userID)],
                StoreRows.installation)
        }
    }

    public func countAppInstallations(kind: AppInstallation.Kind) -> Int {
        use(0) { try SQLQueries.countAppInstallations($0, kind: kind) }
    }

    public func removeAppInstallation(id: String, userID: String) -> Bool {
        use(false) { try SQLQueries.removeAppInstallation($0, id: id, userID: userID) }
    }

    // MARK: server triggers

    public func insertTrigger(_ t: ServerTriggerRecord) -> Bool {
        use(false) { c in
            try c.run(
                """
                INSERT INTO triggers (trigger_id, thing_id, definition, enabled, last_match, created_at)
                VALUES ($1, $2, $3, $4, $5, $6)
                ON CONFLICT (trigger_id) DO NOTHING
                """,
                [
                    .text(t.triggerID), .text(t.thingID), .text(t.definition), .int(t.enabled ? 1 : 0),
                    .int(t.lastMatch.map { $0 ? 1 : 0 }), .int(t.createdAt)
                ]) == 1
        }
    }

    public func trigger(id: String) -> ServerTriggerRecord? {
        use(nil) { try SQLQueries.trigger($0, id: id) }
    }

    public func triggers(thingID: String) -> [ServerTriggerRecord] {
        use([]) { try SQLQueries.triggers($0, thingID: thingID) }
    }

    public func allTriggers() -> [ServerTriggerRecord] {
        use([]) { try SQLQueries.allTriggers($0) }
    }

    public func updateTrigger(id: String, definition: String) -> Bool {
        use(false) { try SQLQueries.updateTrigger($0, id: id, definition: definition) }
    }

    public func setTriggerEnabled(id: String, enabled: Bool) -> Bool {
        use(false) { try SQLQueries.setTriggerEnabled($0, id: id, enabled: enabled) }
    }

    public func claimTrigger(id: String) -> Bool {
        use(false) { try SQLQueries.claimTrigger($0, id: id) }
    }

    public func setTriggerLastMatch(id: String, lastMatch: Bool?) -> Bool {
        use(false) { try SQLQueries.setTriggerLastMatch($0, id: id, lastMatch: lastMatch) }
    }

    public func deleteTrigger(id: String) -> Bool {
        use(false) { try SQLQueries.deleteTrigger($0, id: id) }
    }

    // MARK: thing automation

    public func automation(thingID: String) -> ThingAutomation? {
        use(nil) {
            try $0.first(StoreRows.automationColumns + " WHERE thing_id = $1", [.text(thingID)], StoreRows.automation)
        }
    }

    public func saveAutomation(thingID: String, config: String) -> ThingAutomation? {
        use(nil) { c in
            try c.transaction { () throws -> ThingAutomation? in
                guard try Self.exists(c, thing: thingID) else { return nil }
                return try c.first(
                    """
                    INSERT INTO thing_automation (thing_id, config, version) VALUES ($1, $2, 1)
                    ON CONFLICT (thing_id) DO UPDATE
                        SET config = excluded.config, version = thing_automation.version + 1, report = NULL
                    RETURNING version
                    """, [.text(thingID), .text(config)]
                ) {
                    ThingAutomation(thingID: thingID, config: config, version: $0.int(0))
                }
            }
        }
    }

    public func saveAutomationReport(thingID: String, report: String) -> Bool {
        use(false) { try SQLQueries.saveAutomationReport($0, thingID: thingID, report: report) }
    }
}
