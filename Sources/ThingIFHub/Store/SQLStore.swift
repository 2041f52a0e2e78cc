// SPDX-License-Identifier: Apache-2.0

import ThingIF

/// What SQLiteConnection and PostgresConnection both offer. Statements are
/// written with `?` placeholders; PostgresConnection numbers them ($1, $2 …).
protocol SQLConnection: AnyObject {
    associatedtype Row: StoreRow
    /// Runs a statement with bound values, calling `row` for every result row.
    func query(_ sql: String, _ values: [SQLValue], row: (Row) throws -> Void) throws
    /// Runs a statement; returns the rows it changed.
    @discardableResult func run(_ sql: String, _ values: [SQLValue]) throws -> Int
    /// Runs `body` in a transaction; rolls back when it throws.
    func transaction<R>(_ body: () throws -> R) throws -> R
}

extension SQLConnection {
    /// All rows mapped by `map`.
    func rows<T>(_ sql: String, _ values: [SQLValue] = [], _ map: (Row) throws -> T) throws -> [T] {
        var out: [T] = []
        try query(sql, values) { out.append(try map($0)) }
        return out
    }

    /// The first row mapped by `map`, nil for none.
    func first<T>(_ sql: String, _ values: [SQLValue] = [], _ map: (Row) throws -> T) throws -> T? {
        var out: T?
        try query(sql, values) { r in if out == nil { out = try map(r) } }
        return out
    }
}

/// What SQL says differently in the two dialects, as fragments the shared
/// statements take (string literals: nothing is built per call).
extension SQLDialect {
    /// The column that orders a table's rows by insertion (StoreSchema's
    /// `ordered` tables).
    var insertionOrder: String { self == .sqlite ? "rowid" : "id" }

    /// How a sequence column gets its next value: SQLite (one writer) takes
    /// MAX + 1 in the INSERT; PostgreSQL's is an identity and not written.
    func sequence(_ table: String) -> (column: String, value: String) {
        switch (self, table) {
        case (.sqlite, "triggers"): return ("seq, ", "(SELECT COALESCE(MAX(seq), 0) + 1 FROM triggers), ")
        case (.sqlite, _): return ("seq, ", "(SELECT COALESCE(MAX(seq), 0) + 1 FROM commands), ")
        case (.postgres, _): return ("", "")
        }
    }

    /// Locks the rows a SELECT reads until COMMIT (PostgreSQL: two hubs'
    /// writes of one row take turns); SQLite's write transaction holds the
    /// whole file already.
    var forUpdate: String { self == .sqlite ? "" : " FOR UPDATE" }

    /// As forUpdate, and passes over rows another transaction holds (the
    /// sweeps of other hubs).
    var skipLocked: String { self == .sqlite ? "" : " FOR UPDATE SKIP LOCKED" }

    /// Byte order for an ORDER BY of IDs (String's <): SQLite's default
    /// collation is binary, PostgreSQL's follows the database's locale.
    var byteOrder: String { self == .sqlite ? "" : #" COLLATE "C""# }

    /// A thing's samples in [from, to) with one field of their state read,
    /// for the aggregations (StateAggregates.swift): columns id, at,
    /// method, upload, state, `b` the sample's bucket (at - (at - ?) % ?),
    /// `t` the field's JSON type ('null' for null, NULL when absent) and
    /// `n` its value when it is a number (NULL otherwise). SQLite reads the
    /// field by a JSON path (json_type and json_extract, bound twice);
    /// PostgreSQL by jsonb keys, each bound as text.
    func stateFieldRows(aliased: Bool, filter: String = "") -> String {
        let sample = "id, at, method, upload, state, at - (at - ?) % ? AS b"
        let range = "FROM state_samples WHERE thing_id = ? AND at >= ? AND at < ?" + filter
        switch self {
        case .sqlite:
            return """
                SELECT id, at, method, upload, state, b, t, CASE WHEN t IN ('integer', 'real') THEN x END AS n
                FROM (SELECT \(sample), json_type(state, ?) AS t, json_extract(state, ?) AS x \(range)) f
                """
        case .postgres:
            let keys = aliased ? "-> ?::text -> ?::text" : "-> ?::text"
            return """
                SELECT id, at, method, upload, state, b, jsonb_typeof(v) AS t,
                CASE WHEN jsonb_typeof(v) = 'number' THEN v::numeric END AS n
                FROM (SELECT \(sample), state::jsonb \(keys) AS v \(range)) f
                """
        }
    }

    /// The bound keys of `stateFieldRows`: SQLite's path twice, or
    /// PostgreSQL's keys.
    func stateFieldKeys(alias: String?, field: String) -> [SQLValue] {
        switch self {
        case .sqlite:
            let path = StateAggregateSQL.path(alias: alias, field: field)
            return [.text(path), .text(path)]
        case .postgres: return (alias.map { [$0] } ?? []).map { .text($0) } + [.text(field)]
        }
    }

    /// The field's value where it is a JSON number, else NULL (a CASE, so
    /// that no other value is ever cast). Binds: `stateFieldNumberKeys`.
    func stateFieldNumber(aliased: Bool) -> String {
        switch self {
        case .sqlite: return "CASE WHEN json_type(state, ?) IN ('integer', 'real') THEN json_extract(state, ?) END"
        case .postgres:
            let v = "state::jsonb " + (aliased ? "-> ?::text -> ?::text" : "-> ?::text")
            return "CASE WHEN jsonb_typeof(\(v)) = 'number' THEN (\(v))::numeric END"
        }
    }

    /// The bound keys of `stateFieldNumber`.
    func stateFieldNumberKeys(alias: String?, field: String) -> [SQLValue] {
        let keys = stateFieldKeys(alias: alias, field: field)
        return self == .sqlite ? keys : keys + keys
    }

    /// A number bound as text (the limit of a range clause).
    var boundNumber: String { self == .sqlite ? "CAST(? AS REAL)" : "?::numeric" }

    /// A SUM that cannot fail: SQLite's SUM stops the statement on an
    /// integer overflow, so it sums in doubles (TOTAL, NULL without
    /// numbers); PostgreSQL's numeric sum is exact.
    func sum(_ x: String) -> String {
        self == .sqlite ? "CASE WHEN COUNT(\(x)) > 0 THEN TOTAL(\(x)) END" : "SUM(\(x))"
    }
}

/// A HubStore on SQL, written once: SQLiteStore and PostgresStore supply a
/// connection (`attempt`: the one behind a lock, or one of a pool), their
/// dialect and the schema's migrations, and keep only what truly differs
/// (reading a thing with its lists, announcing results to other hubs,
/// PostgreSQL's one-statement state writes and schedule lease). Every
/// method here is the same SQL on both, the joined reads of
/// StoreFastPaths included; it is generic over the store, so each store's
/// calls are compiled for its own connection (no existential on the way
/// to the database).
protocol SQLStore: HubStore, StoreFastPaths {
    associatedtype Connection: SQLConnection
    static var dialect: SQLDialect { get }
    var retention: StateRetention { get }
    /// Runs `body` on a connection; its error (or the connection's) comes
    /// back as the failure.
    func attempt<R>(_ body: (Connection) throws -> R) -> Result<R, Error>
    /// The SELECT of a thing's whole record in one row (without its state
    /// history, so lookups stay cheap): its columns, then its installations
    /// and owners as two lists (StoreRows.thingWithLists); FROM things,
    /// without a WHERE. Each dialect aggregates in its own way.
    static var thingWithListsSQL: String { get }
    /// The statements of every command, made once for the store's type
    /// (`HotStatements(Self.self)`).
    static var hot: HotStatements { get }
    /// Runs `update`, an UPDATE of at most one command; true when it
    /// changed it. PostgresStore also announces the commandID to the other
    /// hubs on the database (their event streams) when it commits.
    func changeCommand(_ c: Connection, _ update: String, _ values: [SQLValue]) throws -> Bool
}

extension SQLStore {
    /// Runs `body` on a connection: a row is `.found`, nil `.notFound`, and a
    /// storage error `.failed`.
    func read<R>(_ body: (Connection) throws -> R?) -> StoreRead<R> {
        switch attempt(body) {
        case .success(let r?): return .found(r)
        case .success(nil): return .notFound
        case .failure: return .failed
        }
    }

    /// Runs `body` on a connection; a storage error gives `fallback`.
    func use<R>(_ fallback: R, _ body: (Connection) throws -> R) -> R {
        switch attempt(body) {
        case .success(let r): return r
        case .failure: return fallback
        }
    }

    /// The whole record of the thing the clause selects; `lock` takes its
    /// row for the transaction (forUpdate). The clause is one of
    /// SQLStore's constants; the values are bound.
    static func thing(_ c: Connection, where clause: String, _ values: [SQLValue], lock: Bool) throws -> ThingRecord? {
        try c.first(
            thingWithListsSQL + " WHERE " + clause + " LIMIT 1" + (lock ? dialect.forUpdate : ""), values,
            StoreRows.thingWithLists)
    }

    static func thing(_ c: Connection, where clause: String, _ value: String, lock: Bool = false) throws
        -> ThingRecord?
    {
        try thing(c, where: clause, [.text(value)], lock: lock)
    }

    static func exists(_ c: Connection, thing id: String) throws -> Bool {
        try c.first("SELECT 1 FROM things WHERE thing_id = ?", [.text(id)]) { _ in true } ?? false
    }

    // MARK: tokens

    /// Stores a token's hash (also the SQLite migration to hashed secrets).
    static func insertToken(
        _ c: Connection, hash: String, kind: TokenKind, subject: String, now: Int64, secrets: HubSecrets
    ) throws {
        try c.run(
            """
            INSERT INTO tokens (token_hash, kind, subject_id, created_at, expires_at, revoked)
            VALUES (?, ?, ?, ?, ?, 0)
            """, [.text(hash), .text(kind.rawValue), .text(subject), .int(now), .int(secrets.expiry(kind, now: now))])
    }

    /// A new raw token for the subject; prunes expired and revoked ones.
    func issue(_ c: Connection, kind: TokenKind, subject: String) throws -> String {
        let now = Platform.epochMs()
        try c.run("DELETE FROM tokens WHERE revoked = 1", [])
        try c.run("DELETE FROM tokens WHERE expires_at <> 0 AND expires_at <= ?", [.int(now)])
        let raw = HubIDs.token()
        try Self.insertToken(
            c, hash: LibCrypto.sha256Hex(raw), kind: kind, subject: subject, now: now, secrets: secrets)
        return raw
    }

    /// `column` is the subject of a live (known, unexpired, unrevoked)
    /// token of a kind, through a subquery (tokenValues bind it), so that a
    /// request's subject is read in the same round trip as its token. The
    /// hash is the key, so there is at most one: a scalar subquery, not an
    /// IN (for which SQLite builds a temporary table on every read).
    static func isLiveTokenSubject(_ column: String) -> String {
        column + " = (SELECT subject_id FROM tokens WHERE token_hash = ? AND kind = ? AND revoked = 0"
            + " AND (expires_at = 0 OR expires_at > ?))"
    }

    static func tokenValues(_ kind: TokenKind, _ token: String) -> [SQLValue] {
        [.text(LibCrypto.sha256Hex(token)), .text(kind.rawValue), .int(Platform.epochMs())]
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
        use(false) {
            try $0.run(
                "UPDATE tokens SET revoked = 1 WHERE token_hash = ? AND revoked = 0",
                [.text(LibCrypto.sha256Hex(token))])
                == 1
        }
    }

}

/// The statements every command runs, made once for a store's type: they
/// depend on its dialect and its thing read, and made on every call they
/// were concatenated, then hashed and compared as the key of the
/// connection's prepared statements, each time.
struct HotStatements: Sendable {
    /// The REST caller (a user by token) and, beside it, the thing.
    let userAndThing: String
    /// A thing by its token.
    let thingByToken: String
    /// A thing by its token, a command (its own or, for a gateway, one of
    /// its end nodes' now), and the command's targets (`thing(accessToken:command:)`).
    let thingAndCommand: String
    /// A command, numbered in the statement; nothing for a commandID stored already.
    let insertCommand: String

    init<Store: SQLStore>(_: Store.Type) {
        let thing = Store.thingWithListsSQL
        userAndThing =
            "SELECT u.*, t.* FROM (" + StoreRows.userColumns + " WHERE " + Store.isLiveTokenSubject("user_id")
            + " LIMIT 1) u LEFT JOIN (" + thing + " WHERE thing_id = ?) t ON 1 = 1"
        thingByToken = thing + " WHERE " + Store.isLiveTokenSubject("thing_id") + " LIMIT 1"
        thingAndCommand =
            "SELECT t.*, c.*, " + StoreRows.installationFields + " FROM (" + thing
            + " WHERE " + Store.isLiveTokenSubject("thing_id") + " LIMIT 1) t LEFT JOIN (" + StoreRows.commandColumns
            + " WHERE command_id = ?) c ON (c.thing_id = t.thing_id OR (t.layout_position = '"
            + LayoutPosition.gateway.rawValue + "' AND EXISTS (SELECT 1 FROM things e WHERE e.thing_id = c.thing_id"
            + " AND e.gateway_thing_id = t.thing_id AND e.layout_position = '" + LayoutPosition.endNode.rawValue
            + "'))) LEFT JOIN app_installations i"
            + " ON substr(c.issuer, 1, 5) = 'user:' AND "
            + Store.toldInstallations(user: "substr(c.issuer, 6)", issuing: "c.issuing_installation_id")
            + " ORDER BY i.created_at, i." + Store.dialect.insertionOrder
        let seq = Store.dialect.sequence("commands")
        insertCommand =
            "INSERT INTO commands (command_id, " + seq.column
            + "thing_id, issuer, issuing_installation_id, payload, results, state, created_at, modified_at,"
            + " expires_at) VALUES (?, " + seq.value
            + "?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (command_id) DO NOTHING RETURNING seq"
    }
}
