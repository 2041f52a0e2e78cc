// SPDX-License-Identifier: Apache-2.0

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
/// `.failure(.storage)`. The calls themselves are SQLStore's, shared with
/// PostgresStore; this file keeps the file, its lock and its migrations.
public final class SQLiteStore: SQLStore, @unchecked Sendable {
    static let dialect = SQLDialect.sqlite

    /// The schema this code writes (PRAGMA user_version).
    public static let schemaVersion: Int64 = 16

    private let db: Locked<SQLiteConnection>
    /// Checkpoints the WAL off the request path (nil in memory).
    let checkpointer: SQLiteCheckpointer?
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
    init(
        path: String, secrets: HubSecrets, retention: StateRetention, migrateTo: Int64,
        checkpointPages: Int32 = SQLiteCheckpointer.defaultPages
    ) throws {
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
        if path != ":memory:", !path.hasPrefix("file:") {
            let checkpointer = SQLiteCheckpointer(path: path, pages: checkpointPages)
            c.checkpoint(by: checkpointer)
            _ = checkpointer.start()
            self.checkpointer = checkpointer
        } else {
            checkpointer = nil
        }
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

    /// Closes the connection; later calls fail as storage errors. The
    /// checkpointer's connection closes first, so that the hub's, the last,
    /// checkpoints the whole log and removes it, as SQLite does.
    public func close() {
        checkpointer?.close()
        db.withLock { $0.close() }
    }

    deinit { checkpointer?.close() }

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
        [.column("commands", "expires_at"), .column("commands", "end_reason"), .index("commands_open")],
        // 6 -> 7: uploads since the retention last ran (StateRetention.pruneEvery).
        [.column("things", "unpruned_samples")],
        // 7 -> 8: things' certificates and the revoked ones (the CRL).
        StoreSchema.certificateSteps,
        // 8 -> 9: things' layout and end nodes' gateway.
        StoreSchema.gatewaySteps,
        // 9 -> 10: firmware images and their chunks.
        StoreSchema.imageSteps,
        // 10 -> 11: update jobs.
        StoreSchema.updateJobSteps,
        // 11 -> 12: rollouts and their members.
        StoreSchema.rolloutSteps,
        // 12 -> 13: rollouts' time-outs, retries and ramp; members' attempts.
        StoreSchema.rolloutRetrySteps,
        // 13 -> 14: the trait registry.
        StoreSchema.traitSteps,
        // 14 -> 15: an image's chunks stay under its upload's key.
        StoreSchema.imageChunkKeySteps,
        // 15 -> 16: the request partitions' leases (HubPartitions).
        StoreSchema.partitionSteps
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
        try c.exec(
            StoreSchema.table("things").ddl(
                .sqlite, name: "things_new", without: ["unpruned_samples", "layout_position", "gateway_thing_id"]))
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
            try insertToken(c, hash: LibCrypto.sha256Hex(token), kind: .thing, subject: id, now: now, secrets: secrets)
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
            try insertToken(c, hash: LibCrypto.sha256Hex(token), kind: .user, subject: id, now: now, secrets: secrets)
        }
    }

    // MARK: SQLStore

    func attempt<R>(_ body: (SQLiteConnection) throws -> R) -> Result<R, Error> {
        // Inside this thread's inOneTransaction: its connection, whose lock it holds.
        if let c = inTransaction.current { return Result { try body(c) } }
        return db.withLock { c in Result { try body(c) } }
    }

    /// The connection of the transaction this thread is in (inOneTransaction).
    private let inTransaction = ThreadSlot<SQLiteConnection>()

    /// One connection behind a lock: one call at a time.
    public var concurrentCalls: Int { 1 }

    /// Holds the connection's lock for the whole body, in one of its
    /// transactions: each call in it shares the transaction's locks and
    /// its commit (each call's own transaction is a savepoint of it). A
    /// body that throws nothing cannot roll back; a failed commit rolls
    /// back what is left.
    public func inOneTransaction(_ body: () -> Void) -> OneTransaction {
        guard inTransaction.current == nil else { return .unsupported }
        return db.withLock { c in
            var ran = false
            do {
                try c.transaction {
                    ran = true
                    inTransaction.with(c, body)
                }
                return .committed
            } catch {
                return ran ? .failed : .unsupported
            }
        }
    }

    static let hot = HotStatements(SQLiteStore.self)

    /// One statement (three before: each statement outside a transaction
    /// takes and drops SQLite's read lock, and the thing read is on every
    /// request of a thing). group_concat has no ORDER BY before SQLite
    /// 3.44: the owners come from an ordered subquery, which SQLite does
    /// not flatten into an aggregate (flattening rule 16), so their order
    /// is the rowid's; installations are a map.
    static let thingWithListsSQL = """
        SELECT thing_id, vendor_thing_id, password_hash, thing_type, firmware_version,
               data_grouping_interval, state, created_at, layout_position, gateway_thing_id,
               (SELECT group_concat(i.installation_id || char(31) || i.mqtt_topic, char(30))
                  FROM thing_installations i WHERE i.thing_id = things.thing_id),
               (SELECT group_concat(o.owner, char(30))
                  FROM (SELECT owner FROM thing_owners WHERE thing_id = things.thing_id ORDER BY rowid) o)
        FROM things
        """

    /// One hub uses an SQLite file: nobody else to tell.
    func changeCommand(_ c: SQLiteConnection, _ update: String, _ values: [SQLValue]) throws -> Bool {
        try c.run(update, values) == 1
    }

    /// One hub uses an SQLite file.
    public func holdsScheduleLease() -> Bool { true }
}
