import CSQLite
import ThingIF
#if canImport(Glibc)
    import Glibc
#endif

/// A HubStore in an SQLite file: the default of thingif-hub, for data that
/// outlives the process. Behaves exactly as MemoryStore (same IDs, same state
/// merge, same idempotency rules); one connection behind a lock makes every
/// method thread-safe, and a method that writes several rows does so in one
/// transaction. Storage failures never crash: they come back as nil, false or
/// `.failure(.storage)`.
public final class SQLiteStore: HubStore, @unchecked Sendable {
    /// The schema this code writes (PRAGMA user_version).
    public static let schemaVersion: Int64 = 6

    private let db: Locked<SQLiteConnection>
    public let path: String
    public let secrets: HubSecrets
    public let retention: StateRetention

    /// Opens (creating when needed) the database at `path`; ":memory:" gives
    /// a private in-memory database. Throws when the file cannot be opened,
    /// is not a database, or has a schema newer than this code. The file and
    /// its -wal and -shm files are made 0600 (owner only): they hold secrets.
    public convenience init(
        path: String, secrets: HubSecrets = HubSecrets(),
        retention: StateRetention = StateRetention()
    ) throws {
        try self.init(path: path, secrets: secrets, retention: retention, migrateTo: Self.schemaVersion)
    }

    /// `migrateTo` below schemaVersion leaves an older schema, for the migration tests.
    init(path: String, secrets: HubSecrets, retention: StateRetention, migrateTo: Int64) throws {
        self.path = path
        self.secrets = secrets
        self.retention = retention
        try Self.restrictFiles(path)
        let c = try SQLiteConnection(path: path)
        try c.exec("PRAGMA journal_mode=WAL")
        try c.exec("PRAGMA synchronous=NORMAL")
        // Off while migrating: a table rebuild drops and renames `things`.
        try c.exec("PRAGMA foreign_keys=OFF")
        try Self.migrate(c, to: migrateTo, secrets: secrets)
        try c.exec("PRAGMA foreign_keys=ON")
        db = Locked(c)
        // SQLite gives -wal and -shm the mode of the database file; set them
        // again in case an older hub made them with another.
        try Self.restrictFiles(path)
    }

    /// Creates the database file 0600 when missing (before SQLite does, with
    /// the umask's mode) and takes group and other access off it and its
    /// -wal and -shm files when present.
    private static func restrictFiles(_ path: String) throws {
        guard path != ":memory:", !path.hasPrefix("file:") else { return }
        let fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
        if fd >= 0 {
            defer { _ = Glibc.close(fd) }
            if fchmod(fd, 0o600) != 0 {
                throw SQLiteError(code: SQLITE_PERM, message: "cannot make \(path) 0600")
            }
        }
        // A path SQLite cannot open either (a directory, a missing folder)
        // fails in sqlite3_open_v2 with its own message.
        for suffix in ["-wal", "-shm"] {
            let p = path + suffix
            if access(p, F_OK) == 0, chmod(p, 0o600) != 0 {
                throw SQLiteError(code: SQLITE_PERM, message: "cannot make \(p) 0600")
            }
        }
    }

    /// Closes the connection; later calls fail as storage errors.
    public func close() { db.withLock { $0.close() } }

    // MARK: schema

    /// Migrations in order: entry i takes user_version i to i + 1 (a new
    /// database is made from StoreSchema at once). Version 1's `things` and
    /// `users` kept raw tokens; 2 -> 3 rebuilds them (migrateToHashedSecrets).
    static let migrations: [[StoreSchema.Step]] = [
        [
            .sql(
                """
                CREATE TABLE things (
                    thing_id TEXT PRIMARY KEY,
                    vendor_thing_id TEXT UNIQUE,
                    password TEXT,
                    thing_type TEXT,
                    firmware_version TEXT,
                    access_token TEXT NOT NULL UNIQUE,
                    data_grouping_interval TEXT,
                    state TEXT,
                    created_at INTEGER NOT NULL
                )
                """),
            .table("thing_installations"), .index("thing_installations_topic"), .table("thing_owners"),
            .table("state_samples"), .index("state_samples_thing_at"),
            .table("commands", without: ["notify_due", "expires_at", "end_reason"]), .index("commands_thing_seq"),
            .sql(
                """
                CREATE TABLE users (
                    user_id TEXT PRIMARY KEY,
                    login_name TEXT UNIQUE,
                    password_hash TEXT,
                    access_token TEXT NOT NULL UNIQUE,
                    created_at INTEGER NOT NULL
                )
                """),
            .table("groups"), .index("groups_owner"), .table("group_members"), .index("group_members_user"),
            .table("app_installations"), .index("app_installations_user")
        ],
        // 1 -> 2: server triggers and the things' automation config.
        [.table("triggers"), .index("triggers_thing"), .table("thing_automation", without: ["report"])],
        // 2 -> 3: hashed secrets: the tokens table, then the rest in code (migrateToHashedSecrets).
        [
            .table("tokens"), .index("tokens_subject"), .index("tokens_expiry"), .index("tokens_revoked"),
            .index("state_samples_thing_id")
        ],
        // 3 -> 4: the thing's report on its automation configuration.
        [.column("thing_automation", "report")],
        // 4 -> 5: when a command's notification may be claimed by a sweep
        // (rows from before are left NULL).
        [.column("commands", "notify_due"), .index("commands_notify_due")],
        // 5 -> 6: a command's expiry and why the hub ended it (CommandLifecycle).
        [.column("commands", "expires_at"), .column("commands", "end_reason"), .index("commands_open")]
    ]

    private static func migrate(_ c: SQLiteConnection, to target: Int64, secrets: HubSecrets) throws {
        try c.transaction {
            let found = try c.userVersion
            guard found <= schemaVersion else {
                throw SQLiteError(
                    code: SQLITE_ERROR,
                    message: "schema version \(found) is newer than this hub's \(schemaVersion)")
            }
            guard found < target else { return }
            if found == 0 && target == schemaVersion {
                for step in StoreSchema.createAll() { try c.exec(step.ddl(.sqlite)) }
            } else {
                for v in Int(found)..<Int(target) {
                    for step in migrations[v] { try c.exec(step.ddl(.sqlite)) }
                    if v == 2 {
                        try migrateToHashedSecrets(c, secrets: secrets)
                    }
                }
            }
            // PRAGMA takes no bound parameters; the value is this code's constant.
            try c.exec("PRAGMA user_version = \(target)")
            // Nothing may point at a missing thing after the rebuild.
            if try c.first("PRAGMA foreign_key_check", [], { _ in true }) != nil {
                throw SQLiteError(code: SQLITE_CONSTRAINT, message: "the migration broke a foreign key")
            }
        }
    }

    /// 2 -> 3: access tokens move to a `tokens` table as SHA-256 (hex), with
    /// expiry and revocation; things' passwords become KDF hashes; `things`
    /// and `users` are rebuilt without their raw-token columns.
    private static func migrateToHashedSecrets(_ c: SQLiteConnection, secrets: HubSecrets) throws {
        let now = Platform.epochMs()
        let things = try c.rows("SELECT thing_id, access_token, password FROM things", []) {
            ($0.string(0), $0.string(1), $0.text(2))
        }
        let users = try c.rows("SELECT user_id, access_token FROM users", []) { ($0.string(0), $0.string(1)) }
        try c.exec(StoreSchema.table("things").ddl(.sqlite, name: "things_new"))
        try c.exec(
            """
            INSERT INTO things_new (thing_id, vendor_thing_id, password_hash, thing_type, firmware_version,
                data_grouping_interval, state, created_at)
            SELECT thing_id, vendor_thing_id, NULL, thing_type, firmware_version, data_grouping_interval, state,
                created_at FROM things
            """)
        try c.exec("DROP TABLE things")
        try c.exec("ALTER TABLE things_new RENAME TO things")
        for (id, token, password) in things {
            if let password {
                try c.run(
                    "UPDATE things SET password_hash = ? WHERE thing_id = ?",
                    [.text(PasswordHash.make(password, iterations: secrets.passwordIterations)), .text(id)])
            }
            try insertToken(c, hash: Crypto.sha256Hex(token), kind: .thing, subject: id, now: now, secrets: secrets)
        }
        try c.exec(StoreSchema.table("users").ddl(.sqlite, name: "users_new"))
        try c.exec(
            """
            INSERT INTO users_new (user_id, login_name, password_hash, created_at)
            SELECT user_id, login_name, password_hash, created_at FROM users
            """)
        try c.exec("DROP TABLE users")
        try c.exec("ALTER TABLE users_new RENAME TO users")
        for (id, token) in users {
            try insertToken(c, hash: Crypto.sha256Hex(token), kind: .user, subject: id, now: now, secrets: secrets)
        }
    }

    private static func insertToken(
        _ c: SQLiteConnection, hash: String, kind: TokenKind, subject: String,
        now: Int64, secrets: HubSecrets
    ) throws {
        try c.run(
            """
            INSERT INTO tokens (token_hash, kind, subject_id, created_at, expires_at, revoked)
            VALUES (?, ?, ?, ?, ?, 0)
            """, [.text(hash), .text(kind.rawValue), .text(subject), .int(now), .int(secrets.expiry(kind, now: now))])
    }

    /// A new raw token for the subject; prunes expired and revoked ones.
    private func issue(_ c: SQLiteConnection, kind: TokenKind, subject: String) throws -> String {
        let now = Platform.epochMs()
        try c.run("DELETE FROM tokens WHERE revoked = 1")
        try c.run("DELETE FROM tokens WHERE expires_at <> 0 AND expires_at <= ?", [.int(now)])
        let raw = HubIDs.token()
        try Self.insertToken(c, hash: Crypto.sha256Hex(raw), kind: kind, subject: subject, now: now, secrets: secrets)
        return raw
    }

    /// The subject of a valid (known, unexpired, unrevoked) raw token.
    private static func subject(_ c: SQLiteConnection, kind: TokenKind, token: String) throws -> String? {
        try c.first(
            """
            SELECT subject_id FROM tokens
            WHERE token_hash = ? AND kind = ? AND revoked = 0 AND (expires_at = 0 OR expires_at > ?)
            """, [.text(Crypto.sha256Hex(token)), .text(kind.rawValue), .int(Platform.epochMs())]
        ) { $0.string(0) }
    }

    public func issueToken(kind: TokenKind, subjectID: String) -> String? {
        use(nil) { c in
            try c.transaction { () throws -> String? in
                let table =
                    kind == .user ? "SELECT 1 FROM users WHERE user_id = ?" : "SELECT 1 FROM things WHERE thing_id = ?"
                guard try c.first(table, [.text(subjectID)], { _ in true }) != nil else { return nil }
                return try issue(c, kind: kind, subject: subjectID)
            }
        }
    }

    public func revokeToken(_ token: String) -> Bool {
        use(false) { try SQLQueries.revokeToken($0, token) }
    }

    // MARK: helpers

    /// Runs `body` on the connection; a storage error gives `fallback`.
    private func use<R>(_ fallback: R, _ body: (SQLiteConnection) throws -> R) -> R {
        db.withLock { c in (try? body(c)) ?? fallback }
    }

    /// The whole record of the thing the clause selects (without its state
    /// history: stateHistory reads that, so lookups stay cheap).
    private static func thing(_ c: SQLiteConnection, where clause: String, _ value: String) throws -> ThingRecord? {
        // The clause is one of this file's constants; the value is bound.
        guard
            var t = try c.first(
                StoreRows.thingColumns + " WHERE " + clause + " LIMIT 1", [.text(value)], StoreRows.thing)
        else { return nil }
        let id = [SQLValue.text(t.thingID)]
        try c.query("SELECT installation_id, mqtt_topic FROM thing_installations WHERE thing_id = ?", id) {
            t.installations[$0.string(0)] = $0.string(1)
        }
        t.owners = try c.rows("SELECT owner FROM thing_owners WHERE thing_id = ? ORDER BY rowid", id) { $0.string(0) }
        return t
    }

    private static func exists(_ c: SQLiteConnection, thing id: String) throws -> Bool {
        try c.first("SELECT 1 FROM things WHERE thing_id = ?", [.text(id)]) { _ in true } ?? false
    }

    // MARK: things

    /// The KDF (a quarter second at the production cost) runs outside the
    /// connection's lock, so one onboarding never stalls the rest of the hub.
    public func registerThing(
        vendorThingID: String, password: String, thingType: String?, firmwareVersion: String?,
        dataGroupingInterval: String?
    ) -> Result<ThingRecord, RegisterError> {
        // A few rounds at most: only a concurrent first registration of the
        // same vendorThingID (another hub on the file too) makes one repeat.
        for _ in 0..<4 {
            let found: Result<ThingRecord?, SQLiteError> = db.withLock { c in
                do { return .success(try Self.thing(c, where: "vendor_thing_id = ?", vendorThingID)) } catch {
                    return .failure(error as? SQLiteError ?? SQLiteError(code: SQLITE_ERROR, message: "\(error)"))
                }
            }
            guard case .success(let known) = found else { return .failure(.storage) }
            if let known {
                guard let h = known.passwordHash, PasswordHash.verify(password, h) else {
                    return .failure(.wrongPassword)
                }
                let r: Result<ThingRecord, RegisterError>? = db.withLock { c in
                    do {
                        return try c.transaction { () throws -> Result<ThingRecord, RegisterError>? in
                            // Still the hash that was verified?
                            guard let t = try Self.thing(c, where: "thing_id = ?", known.thingID),
                                t.passwordHash == h
                            else { return nil }
                            if !StoreRules.typeMatches(thingType, known: t.thingType) { return .failure(.wrongType) }
                            try c.run(
                                """
                                UPDATE things SET thing_type = COALESCE(thing_type, ?),
                                    firmware_version = COALESCE(?, firmware_version),
                                    data_grouping_interval = COALESCE(?, data_grouping_interval)
                                WHERE thing_id = ?
                                """,
                                [
                                    .text(thingType), .text(firmwareVersion), .text(dataGroupingInterval),
                                    .text(t.thingID)
                                ])
                            guard var updated = try Self.thing(c, where: "thing_id = ?", t.thingID) else {
                                return .failure(.storage)
                            }
                            updated.accessToken = try issue(c, kind: .thing, subject: t.thingID)
                            return .success(updated)
                        }
                    } catch {
                        return .failure(.storage)
                    }
                }
                if let r { return r }
                continue
            }
            let hash = PasswordHash.make(password, iterations: secrets.passwordIterations)
            let r: Result<ThingRecord, RegisterError>? = db.withLock { c in
                do {
                    return try c.transaction { () throws -> Result<ThingRecord, RegisterError>? in
                        guard
                            try c.first(
                                "SELECT 1 FROM things WHERE vendor_thing_id = ?", [.text(vendorThingID)],
                                { _ in true }) == nil
                        else { return nil }
                        var t = ThingRecord(
                            thingID: HubIDs.thingID(), vendorThingID: vendorThingID, passwordHash: hash,
                            thingType: thingType, firmwareVersion: firmwareVersion,
                            accessToken: "", dataGroupingInterval: dataGroupingInterval,
                            createdAt: Platform.epochMs())
                        try c.run(
                            """
                            INSERT INTO things (thing_id, vendor_thing_id, password_hash, thing_type, firmware_version,
                                data_grouping_interval, state, created_at)
                            VALUES (?, ?, ?, ?, ?, ?, NULL, ?)
                            """,
                            [
                                .text(t.thingID), .text(vendorThingID), .text(hash), .text(thingType),
                                .text(firmwareVersion), .text(dataGroupingInterval), .int(t.createdAt)
                            ])
                        t.accessToken = try issue(c, kind: .thing, subject: t.thingID)
                        return .success(t)
                    }
                } catch {
                    return .failure(.storage)
                }
            }
            if let r { return r }
        }
        return .failure(.storage)
    }

    public func thing(id: String) -> ThingRecord? {
        use(nil) { try Self.thing($0, where: "thing_id = ?", id) }
    }

    public func thing(vendorThingID: String) -> ThingRecord? {
        use(nil) { try Self.thing($0, where: "vendor_thing_id = ?", vendorThingID) }
    }

    public func thing(accessToken: String) -> ThingRecord? {
        use(nil) { c in
            guard let id = try Self.subject(c, kind: .thing, token: accessToken) else { return nil }
            return try Self.thing(c, where: "thing_id = ?", id)
        }
    }

    public func thing(mqttTopic: String) -> ThingRecord? {
        use(nil) { c in
            // The thing that most recently took the topic.
            guard
                let id = try c.first(
                    """
                    SELECT thing_id FROM thing_installations WHERE mqtt_topic = ? ORDER BY rowid DESC LIMIT 1
                    """, [.text(mqttTopic)], { $0.string(0) })
            else { return nil }
            return try Self.thing(c, where: "thing_id = ?", id)
        }
    }

    public func addInstallation(thingID: String, installationID: String, mqttTopic: String) -> Bool {
        use(false) { c in
            try c.transaction {
                guard try Self.exists(c, thing: thingID) else { return false }
                // Replacing deletes the old row, so the new one gets the newest rowid.
                try c.run(
                    """
                    INSERT OR REPLACE INTO thing_installations (thing_id, installation_id, mqtt_topic)
                    VALUES (?, ?, ?)
                    """, [.text(thingID), .text(installationID), .text(mqttTopic)])
                return true
            }
        }
    }

    public func installationsOldestFirst(thingID: String) -> [(installationID: String, mqttTopic: String)] {
        use([]) { c in
            var out: [(installationID: String, mqttTopic: String)] = []
            try c.query(
                "SELECT installation_id, mqtt_topic FROM thing_installations WHERE thing_id = ? ORDER BY rowid",
                [.text(thingID)]
            ) { out.append(($0.string(0), $0.string(1))) }
            return out
        }
    }

    public func removeInstallation(thingID: String, installationID: String) -> Bool {
        use(false) { c in
            try c.run(
                "DELETE FROM thing_installations WHERE thing_id = ? AND installation_id = ?",
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
                    "INSERT OR IGNORE INTO thing_owners (thing_id, owner) VALUES (?, ?)",
                    [.text(thingID), .text(owner)])
                return true
            }
        }
    }

    public func things(ownedBy owners: [String]) -> [ThingRecord] {
        guard !owners.isEmpty else { return [] }
        return use([]) { c in
            let marks = Array(repeating: "?", count: owners.count).joined(separator: ", ")
            let ids = try c.rows(
                "SELECT DISTINCT thing_id FROM thing_owners WHERE owner IN (\(marks)) ORDER BY thing_id",
                owners.map { SQLValue.text($0) }
            ) { $0.string(0) }
            return try ids.compactMap { try Self.thing(c, where: "thing_id = ?", $0) }
        }
    }

    // MARK: state

    public func applyState(thingID: String, method: String, upload: String, at: Int64) -> String? {
        use(nil) { c in
            try c.transaction { () throws -> String? in
                guard
                    let old = try c.first(
                        "SELECT state FROM things WHERE thing_id = ?", [.text(thingID)],
                        { $0.text(0) })
                else { return nil }
                let merged = StateMerge.apply(method: method, upload: upload, to: old)
                try c.run("UPDATE things SET state = ? WHERE thing_id = ?", [.text(merged), .text(thingID)])
                try c.run(
                    "INSERT INTO state_samples (thing_id, at, method, upload, state) VALUES (?, ?, ?, ?, ?)",
                    [.text(thingID), .int(at), .text(method), .text(upload), .text(merged)])
                try prune(c, thingID: thingID, at: at)
                return merged
            }
        }
    }

    /// Applies the retention to one thing's samples (on each write, through
    /// the (thing_id, id) and (thing_id, at) indexes).
    private func prune(_ c: SQLiteConnection, thingID: String, at: Int64) throws {
        if let oldest = StoreRules.oldestKept(retention, at: at) {
            try c.run("DELETE FROM state_samples WHERE thing_id = ? AND at < ?", [.text(thingID), .int(oldest)])
        }
        if retention.maxSamples > 0,
            let keep = try c.first(
                """
                SELECT id FROM state_samples WHERE thing_id = ? ORDER BY id DESC LIMIT 1 OFFSET ?
                """, [.text(thingID), .int(Int64(retention.maxSamples - 1))], { $0.int(0) })
        {
            try c.run("DELETE FROM state_samples WHERE thing_id = ? AND id < ?", [.text(thingID), .int(keep)])
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
            // One statement: the next seq is computed and taken atomically
            // (the UNIQUE index makes MAX(seq) a lookup); a duplicate ID
            // inserts nothing and returns no row.
            guard
                let seq = try c.first(
                    """
                    INSERT INTO commands (command_id, seq, thing_id, issuer, issuing_installation_id, payload,
                        results, state, created_at, modified_at)
                    VALUES (?, (SELECT COALESCE(MAX(seq), 0) + 1 FROM commands), ?, ?, ?, ?, ?, ?, ?, ?)
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
            try c.run(
                """
                UPDATE commands SET results = ?, state = ?, modified_at = ?, notify_due = ?
                WHERE command_id = ? AND results IS NULL
                """,
                [
                    .text(results), .text(state.rawValue), .int(at), .int(at + StoreRules.notificationGraceMs),
                    .text(commandID)
                ]) == 1
        }
    }

    public func markNotified(commandID: String) -> Bool {
        use(false) { try SQLQueries.markNotified($0, commandID: commandID) }
    }

    public func claimUnnotified(now: Int64, leaseMs: Int64, limit: Int) -> [CommandRecord] {
        use([]) { try SQLQueries.claimUnnotified($0, now: now, leaseMs: leaseMs, limit: limit, lock: "") }
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
        use(false) { try SQLQueries.endCommand($0, commandID: commandID, state: state, reason: reason, at: at) }
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
            return try c.transaction {
                // A taken loginName hits the UNIQUE constraint: nothing is stored.
                try c.run(
                    """
                    INSERT INTO users (user_id, login_name, password_hash, created_at)
                    VALUES (?, ?, ?, ?)
                    """, [.text(u.userID), .text(loginName), .text(passwordHash), .int(u.createdAt)])
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
            guard let id = try Self.subject(c, kind: .user, token: accessToken) else { return nil }
            return try c.first(StoreRows.userColumns + " WHERE user_id = ?", [.text(id)], StoreRows.user)
        }
    }

    public func user(loginName: String) -> UserRecord? {
        use(nil) { try SQLQueries.user($0, loginName: loginName) }
    }

    // MARK: groups

    private static func members(_ c: SQLiteConnection, of groupID: String) throws -> [String] {
        try c.rows("SELECT user_id FROM group_members WHERE group_id = ? ORDER BY position", [.text(groupID)]) {
            $0.string(0)
        }
    }

    public func createGroup(name: String, ownerUserID: String, members: [String]) -> GroupRecord? {
        use(nil) { try SQLQueries.createGroup($0, name: name, ownerUserID: ownerUserID, members: members) }
    }

    public func group(id: String) -> GroupRecord? {
        use(nil) { c in
            guard
                let g = try c.first(StoreRows.groupColumns + " WHERE group_id = ?", [.text(id)], StoreRows.group)
            else { return nil }
            var out = g
            out.members = try Self.members(c, of: g.groupID)
            return out
        }
    }

    public func groups(ofUser userID: String) -> [GroupRecord] {
        use([]) { c in
            // Ordered by groupID as MemoryStore does (binary collation = String's <).
            let found = try c.rows(
                StoreRows.groupColumns + """
                     WHERE owner_user_id = ?
                       OR group_id IN (SELECT group_id FROM group_members WHERE user_id = ?)
                    ORDER BY group_id
                    """, [.text(userID), .text(userID)], StoreRows.group)
            return try found.map { g in
                var out = g
                out.members = try Self.members(c, of: g.groupID)
                return out
            }
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
                StoreRows.installationColumns + " WHERE user_id = ? ORDER BY created_at, rowid", [.text(userID)],
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
                INSERT INTO triggers (trigger_id, seq, thing_id, definition, enabled, last_match, created_at)
                VALUES (?, (SELECT COALESCE(MAX(seq), 0) + 1 FROM triggers), ?, ?, ?, ?, ?)
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

    /// One hub uses an SQLite file.
    public func holdsScheduleLease() -> Bool { true }

    public func setTriggerLastMatch(id: String, lastMatch: Bool?) -> Bool {
        use(false) { try SQLQueries.setTriggerLastMatch($0, id: id, lastMatch: lastMatch) }
    }

    public func deleteTrigger(id: String) -> Bool {
        use(false) { try SQLQueries.deleteTrigger($0, id: id) }
    }

    // MARK: thing automation

    public func automation(thingID: String) -> ThingAutomation? {
        use(nil) { c in
            try c.first(StoreRows.automationColumns + " WHERE thing_id = ?", [.text(thingID)], StoreRows.automation)
        }
    }

    public func saveAutomation(thingID: String, config: String) -> ThingAutomation? {
        use(nil) { c in
            try c.transaction { () throws -> ThingAutomation? in
                guard try Self.exists(c, thing: thingID) else { return nil }
                return try c.first(
                    """
                    INSERT INTO thing_automation (thing_id, config, version) VALUES (?, ?, 1)
                    ON CONFLICT (thing_id) DO UPDATE SET config = excluded.config, version = version + 1, report = NULL
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
