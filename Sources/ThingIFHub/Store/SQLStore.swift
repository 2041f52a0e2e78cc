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

    // MARK: things

    /// The KDF (a quarter second at the production cost) runs outside any
    /// connection and transaction, so one onboarding never stalls the rest
    /// of the hub. Writes that hubs race on are decided by the database: a
    /// vendorThingID is UNIQUE, so a losing first registration inserts
    /// nothing and the next round finds the winner's thing.
    public func registerThing(
        vendorThingID: String, password: String, thingType: String?, firmwareVersion: String?,
        dataGroupingInterval: String?, layoutPosition: LayoutPosition?
    ) -> Result<ThingRecord, RegisterError> {
        if layoutPosition == .endNode { return .failure(.wrongLayout) }
        // A few rounds at most: only a concurrent first registration of the
        // same vendorThingID (on this hub or another) makes one repeat.
        for _ in 0..<4 {
            let found = attempt { try Self.thing($0, where: "vendor_thing_id = ?", vendorThingID) }
            guard case .success(let known) = found else { return .failure(.storage) }
            if let known {
                guard let h = known.passwordHash, PasswordHash.verify(password, h) else {
                    return .failure(.wrongPassword)
                }
                let r: Result<ThingRecord, RegisterError>? = use(.failure(.storage)) { c in
                    try c.transaction { () throws -> Result<ThingRecord, RegisterError>? in
                        // Still the hash that was verified? The row stays locked until COMMIT.
                        guard let t = try Self.thing(c, where: "thing_id = ?", known.thingID, lock: true),
                            t.passwordHash == h
                        else { return nil }
                        guard StoreRules.typeMatches(thingType, known: t.thingType) else { return .failure(.wrongType) }
                        if t.layoutPosition == .endNode || layoutPosition.map({ $0 != t.layoutPosition }) == true {
                            return .failure(.wrongLayout)
                        }
                        try c.run(
                            """
                            UPDATE things SET thing_type = COALESCE(thing_type, ?),
                                firmware_version = COALESCE(?, firmware_version),
                                data_grouping_interval = COALESCE(?, data_grouping_interval)
                            WHERE thing_id = ?
                            """,
                            [.text(thingType), .text(firmwareVersion), .text(dataGroupingInterval), .text(t.thingID)])
                        guard var updated = try Self.thing(c, where: "thing_id = ?", t.thingID) else {
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
                        createdAt: Platform.epochMs(), layoutPosition: layoutPosition ?? .standalone)
                    guard
                        try c.run(
                            """
                            INSERT INTO things (thing_id, vendor_thing_id, password_hash, thing_type, firmware_version,
                                data_grouping_interval, state, created_at, layout_position)
                            VALUES (?, ?, ?, ?, ?, ?, NULL, ?, ?)
                            ON CONFLICT (vendor_thing_id) DO NOTHING
                            """,
                            [
                                .text(t.thingID), .text(vendorThingID), .text(hash), .text(thingType),
                                .text(firmwareVersion), .text(dataGroupingInterval), .int(t.createdAt),
                                .text(t.layoutPosition.rawValue)
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
        use(nil) { try Self.thing($0, where: "thing_id = ?", id) }
    }

    public func thing(vendorThingID: String) -> ThingRecord? {
        use(nil) { try Self.thing($0, where: "vendor_thing_id = ?", vendorThingID) }
    }

    public func thingRead(id: String) -> StoreRead<ThingRecord> {
        read { try Self.thing($0, where: "thing_id = ?", id) }
    }

    public func thingRead(accessToken: String) -> StoreRead<ThingRecord> {
        read { try $0.first(Self.hot.thingByToken, Self.tokenValues(.thing, accessToken), StoreRows.thingWithLists) }
    }

    /// One statement: the thing of the token, the command joined to it by
    /// its ID and the thing's (its columns NULL when there is none), and,
    /// for a command a user issued, the installations it tells, one row each.
    public func thing(accessToken: String, command commandID: String) -> StoreRead<ThingAndCommand> {
        read { c in
            var out: ThingAndCommand?
            try c.query(Self.hot.thingAndCommand, Self.tokenValues(.thing, accessToken) + [.text(commandID)]) { row in
                if out == nil {
                    let command = StoreRows.ShiftedRow(row, by: StoreRows.thingWithListsCount)
                    let read = command.isNull(0) ? nil : StoreRows.command(command)
                    out = ThingAndCommand(
                        thing: StoreRows.thingWithLists(row), command: read,
                        targets: read?.issuer?.hasPrefix("user:") == true ? [] : nil)
                }
                let installation = StoreRows.ShiftedRow(
                    row, by: StoreRows.thingWithListsCount + StoreRows.commandCount)
                if !installation.isNull(0) { out?.targets?.append(StoreRows.installation(installation)) }
            }
            return out
        }
    }

    public func thing(mqttTopic: String) -> ThingRecord? {
        use(nil) { c in
            // The thing that most recently took the topic.
            guard
                let id = try c.first(
                    "SELECT thing_id FROM thing_installations WHERE mqtt_topic = ? ORDER BY "
                        + Self.dialect.insertionOrder + " DESC LIMIT 1", [.text(mqttTopic)], { $0.string(0) })
            else { return nil }
            return try Self.thing(c, where: "thing_id = ?", id)
        }
    }

    public func things(ownedBy owners: [String]) -> [ThingRecord] {
        guard !owners.isEmpty else { return [] }
        return use([]) { c in
            let marks = Array(repeating: "?", count: owners.count).joined(separator: ", ")
            let ids = try c.rows(
                // Each thing once, by thingID (GROUP BY: PostgreSQL takes no
                // COLLATE in the ORDER BY of a SELECT DISTINCT).
                "SELECT thing_id FROM thing_owners WHERE owner IN (\(marks)) GROUP BY thing_id ORDER BY thing_id"
                    + Self.dialect.byteOrder, owners.map { SQLValue.text($0) }
            ) { $0.string(0) }
            return try ids.compactMap { try Self.thing(c, where: "thing_id = ?", $0) }
        }
    }

    /// Runs `body` in a transaction if the thing exists; false when it does
    /// not or the store fails.
    func ifThingExists(_ thingID: String, _ body: (Connection) throws -> Void) -> Bool {
        use(false) { c in
            try c.transaction {
                guard try Self.exists(c, thing: thingID) else { return false }
                try body(c)
                return true
            }
        }
    }

    public func addInstallation(thingID: String, installationID: String, mqttTopic: String) -> Bool {
        ifThingExists(thingID) { c in
            // Replaced, not updated: the new row comes last in insertion order.
            try c.run(
                "DELETE FROM thing_installations WHERE thing_id = ? AND installation_id = ?",
                [.text(thingID), .text(installationID)])
            try c.run(
                "INSERT INTO thing_installations (thing_id, installation_id, mqtt_topic) VALUES (?, ?, ?)",
                [.text(thingID), .text(installationID), .text(mqttTopic)])
        }
    }

    public func installationsOldestFirst(thingID: String) -> [(installationID: String, mqttTopic: String)] {
        use([]) { c in
            var out: [(installationID: String, mqttTopic: String)] = []
            try c.query(
                "SELECT installation_id, mqtt_topic FROM thing_installations WHERE thing_id = ? ORDER BY "
                    + Self.dialect.insertionOrder, [.text(thingID)]
            ) { out.append(($0.string(0), $0.string(1))) }
            return out
        }
    }

    public func removeInstallation(thingID: String, installationID: String) -> Bool {
        use(false) { c in
            try c.transaction {
                guard
                    try c.run(
                        "DELETE FROM thing_installations WHERE thing_id = ? AND installation_id = ?",
                        [.text(thingID), .text(installationID)]) == 1
                else { return false }
                try Self.revokeCertificates(c, of: "thing_id = ? AND installation_id = ?", [thingID, installationID])
                return true
            }
        }
    }

    // MARK: things' certificates

    /// Moves the recorded certificates the clause selects (of one thing, or
    /// of one of its installations) to the revoked list: one rule for
    /// deleting a thing and retiring an installation. Expired ones are only
    /// deleted (no broker accepts them any more).
    static func revokeCertificates(_ c: Connection, of clause: String, _ values: [String]) throws {
        let now = Platform.epochMs()
        let bound = values.map { SQLValue.text($0) }
        try c.run(
            "INSERT INTO revoked_certificates (serial, revoked_at, not_after) SELECT serial, ?, not_after"
                + " FROM thing_certificates WHERE " + clause + " AND not_after > ? ON CONFLICT (serial) DO NOTHING",
            [.int(now)] + bound + [.int(now)])
        try c.run("DELETE FROM thing_certificates WHERE " + clause, bound)
    }

    public func recordCertificate(thingID: String, installationID: String, serial: String, notAfter: Int64) -> Bool {
        ifThingExists(thingID) { c in
            try c.run(
                "INSERT INTO thing_certificates (serial, thing_id, installation_id, not_after, issued_at)"
                    + " VALUES (?, ?, ?, ?, ?)",
                [.text(serial), .text(thingID), .text(installationID), .int(notAfter), .int(Platform.epochMs())])
        }
    }

    public func gatewayCertificateTopics() -> [String]? {
        // Deduplicated and sorted here: one installation may hold several
        // certificates, and PostgreSQL takes no ORDER BY … COLLATE on a DISTINCT.
        (try? attempt { c in
            try c.rows(
                "SELECT i.mqtt_topic FROM thing_installations i"
                    + " JOIN things t ON t.thing_id = i.thing_id"
                    + " JOIN thing_certificates c ON c.thing_id = i.thing_id AND c.installation_id = i.installation_id"
                    + " WHERE t.layout_position = ?",
                [.text(LayoutPosition.gateway.rawValue)]
            ) { $0.string(0) }
        }.get()).map { Array(Set($0)).sorted() }
    }

    public func revokedCertificates(now: Int64) -> [RevokedCertificate]? {
        switch attempt({ c in
            try c.transaction { () throws -> [RevokedCertificate] in
                try c.run("DELETE FROM revoked_certificates WHERE not_after <= ?", [.int(now)])
                try c.run("DELETE FROM thing_certificates WHERE not_after <= ?", [.int(now)])
                return try c.rows(
                    "SELECT serial, revoked_at, not_after FROM revoked_certificates ORDER BY serial"
                        + Self.dialect.byteOrder, []
                ) { RevokedCertificate(serial: $0.string(0), revokedAt: $0.int(1), notAfter: $0.int(2)) }
            }
        }) {
        case .success(let list): return list
        case .failure: return nil
        }
    }

    /// In one transaction: a gateway's end nodes, then the thing. The
    /// thing's row is locked first, as onboardEndNode locks its gateway's,
    /// so an end node onboarded meanwhile is either deleted too or refused
    /// (no gateway any more).
    public func deleteThing(id: String) -> Bool {
        use(false) { c in
            try c.transaction {
                guard
                    try c.first(
                        "SELECT 1 FROM things WHERE thing_id = ?" + Self.dialect.forUpdate, [.text(id)], { _ in true })
                        != nil
                else { return false }
                let endNodes = try c.rows("SELECT thing_id FROM things WHERE gateway_thing_id = ?", [.text(id)]) {
                    $0.string(0)
                }
                for e in endNodes { _ = try Self.delete(c, thing: e) }
                return try Self.delete(c, thing: id)
            }
        }
    }

    /// Deletes one thing, children first; the tables without a foreign key
    /// on the thing (commands, triggers, tokens) are the reason it is
    /// spelled out rather than left to ON DELETE CASCADE.
    /// True when it deleted the thing's row.
    static func delete(_ c: Connection, thing id: String) throws -> Bool {
        let t: [SQLValue] = [.text(id)]
        try revokeCertificates(c, of: "thing_id = ?", [id])
        for table in [
            "commands", "triggers", "thing_automation", "state_samples", "thing_installations", "thing_owners"
        ] {
            try c.run("DELETE FROM " + table + " WHERE thing_id = ?", t)
        }
        try c.run("DELETE FROM tokens WHERE kind = ? AND subject_id = ?", [.text(TokenKind.thing.rawValue), .text(id)])
        return try c.run("DELETE FROM things WHERE thing_id = ?", t) == 1
    }

    // MARK: gateways' end nodes

    /// The refusal the thing `id` calls for as a gateway, nil when it is
    /// one; `lock` holds its row until COMMIT (forUpdate), which is what
    /// makes onboardings onto one gateway take turns.
    static func gatewayRefusal(_ c: Connection, _ id: String, lock: Bool) throws -> EndNodeOnboarding? {
        guard
            let layout = try c.first(
                "SELECT layout_position FROM things WHERE thing_id = ?" + (lock ? dialect.forUpdate : ""),
                [.text(id)], { $0.string(0) })
        else { return .noGateway }
        return layout == LayoutPosition.gateway.rawValue ? nil : .notAGateway
    }

    /// As registerThing: the KDF runs outside any transaction, and a losing
    /// first registration of the vendorThingID (UNIQUE) makes the next
    /// round find the winner's thing. The gateway is read once before, so
    /// that a request for a missing gateway costs no KDF.
    public func onboardEndNode(
        gatewayThingID: String, vendorThingID: String, password: String, thingType: String?,
        firmwareVersion: String?, owners: [String], maxEndNodes: Int
    ) -> EndNodeOnboarding {
        func addOwners(_ c: Connection, _ thingID: String) throws {
            for o in owners {
                try c.run(
                    "INSERT INTO thing_owners (thing_id, owner) VALUES (?, ?) ON CONFLICT DO NOTHING",
                    [.text(thingID), .text(o)])
            }
        }
        for _ in 0..<4 {
            let found = attempt { c in
                (
                    try Self.gatewayRefusal(c, gatewayThingID, lock: false),
                    try Self.thing(c, where: "vendor_thing_id = ?", vendorThingID)
                )
            }
            guard case .success(let (refusal, known)) = found else { return .storage }
            if let refusal { return refusal }
            if let known {
                guard let h = known.passwordHash, PasswordHash.verify(password, h) else { return .wrongPassword }
                let r: EndNodeOnboarding? = use(.storage) { c in
                    try c.transaction { () throws -> EndNodeOnboarding? in
                        if let refusal = try Self.gatewayRefusal(c, gatewayThingID, lock: true) { return refusal }
                        // Still the hash that was verified? The row stays locked until COMMIT.
                        guard let t = try Self.thing(c, where: "thing_id = ?", known.thingID, lock: true),
                            t.passwordHash == h
                        else { return nil }
                        guard t.layoutPosition == .endNode, let g = t.gatewayThingID else { return .notAnEndNode }
                        guard g == gatewayThingID else { return .otherGateway(g) }
                        guard StoreRules.typeMatches(thingType, known: t.thingType) else { return .wrongType }
                        try c.run(
                            """
                            UPDATE things SET thing_type = COALESCE(thing_type, ?),
                                firmware_version = COALESCE(?, firmware_version)
                            WHERE thing_id = ?
                            """, [.text(thingType), .text(firmwareVersion), .text(t.thingID)])
                        try addOwners(c, t.thingID)
                        guard var updated = try Self.thing(c, where: "thing_id = ?", t.thingID) else { return .storage }
                        updated.accessToken = try issue(c, kind: .thing, subject: t.thingID)
                        return .onboarded(updated, created: false)
                    }
                }
                if let r { return r }
                continue
            }
            let hash = PasswordHash.make(password, iterations: secrets.passwordIterations)
            let r: EndNodeOnboarding? = use(.storage) { c in
                try c.transaction { () throws -> EndNodeOnboarding? in
                    if let refusal = try Self.gatewayRefusal(c, gatewayThingID, lock: true) { return refusal }
                    // Counted under the gateway's lock: no other onboarding
                    // onto it can add one before this commits.
                    guard try Self.endNodeCount(c, gatewayThingID) < maxEndNodes else { return .tooManyEndNodes }
                    let id = HubIDs.thingID()
                    guard
                        try c.run(
                            """
                            INSERT INTO things (thing_id, vendor_thing_id, password_hash, thing_type, firmware_version,
                                data_grouping_interval, state, created_at, layout_position, gateway_thing_id)
                            VALUES (?, ?, ?, ?, ?, NULL, NULL, ?, ?, ?)
                            ON CONFLICT (vendor_thing_id) DO NOTHING
                            """,
                            [
                                .text(id), .text(vendorThingID), .text(hash), .text(thingType), .text(firmwareVersion),
                                .int(Platform.epochMs()), .text(LayoutPosition.endNode.rawValue), .text(gatewayThingID)
                            ]) == 1
                    else { return nil }
                    try addOwners(c, id)
                    guard var t = try Self.thing(c, where: "thing_id = ?", id) else { return .storage }
                    t.accessToken = try issue(c, kind: .thing, subject: id)
                    return .onboarded(t, created: true)
                }
            }
            if let r { return r }
        }
        return .storage
    }

    static func endNodeCount(_ c: Connection, _ gatewayThingID: String) throws -> Int {
        Int(
            try c.first("SELECT COUNT(*) FROM things WHERE gateway_thing_id = ?", [.text(gatewayThingID)]) {
                $0.int(0)
            } ?? 0)
    }

    /// One statement through things_gateway; one row more than the page
    /// tells whether more follow. thing_id in byte order, as MemoryStore
    /// compares it.
    public func endNodes(gatewayThingID: String, after: EndNodeCursor?, limit: Int)
        -> (endNodes: [ThingRecord], next: EndNodeCursor?)?
    {
        // Capped so that the page and its one more row make an Int64.
        let n = max(1, min(limit, Int(Int32.max)))
        // Before every end node: no thingID is empty.
        let from = after ?? EndNodeCursor(createdAt: .min, thingID: "")
        let page = attempt { c in
            try c.rows(
                Self.thingWithListsSQL
                    + " WHERE gateway_thing_id = ? AND (created_at > ? OR (created_at = ? AND thing_id"
                    + Self.dialect.byteOrder + " > ?)) ORDER BY created_at, thing_id" + Self.dialect.byteOrder
                    + " LIMIT ?",
                [
                    .text(gatewayThingID), .int(from.createdAt), .int(from.createdAt), .text(from.thingID),
                    .int(Int64(n) + 1)
                ], StoreRows.thingWithLists)
        }
        guard case .success(var rows) = page else { return nil }
        guard rows.count > n else { return (rows, nil) }
        rows.removeLast()
        return (rows, rows.last.map(EndNodeCursor.init))
    }

    public func endNodeCount(gatewayThingID: String) -> Int? {
        try? attempt { try Self.endNodeCount($0, gatewayThingID) }.get()
    }

    /// Through things_gateway: only the end nodes' entries are read.
    public func endNodeTotal() -> Int? {
        try? attempt { c in
            Int(try c.first("SELECT COUNT(*) FROM things WHERE gateway_thing_id IS NOT NULL", []) { $0.int(0) } ?? 0)
        }.get()
    }

    public func setFirmwareVersion(thingID: String, _ version: String) -> Bool {
        use(false) {
            try $0.run("UPDATE things SET firmware_version = ? WHERE thing_id = ?", [.text(version), .text(thingID)])
                == 1
        }
    }

    public func setThingType(thingID: String, _ thingType: String) -> Bool {
        use(false) {
            try $0.run("UPDATE things SET thing_type = ? WHERE thing_id = ?", [.text(thingType), .text(thingID)]) == 1
        }
    }

    public func setVendorThingID(thingID: String, vendorThingID: String, passwordHash: String)
        -> VendorThingIDChange
    {
        let r: VendorThingIDChange? = use(nil) { c in
            try c.transaction { () throws -> VendorThingIDChange in
                if let other = try Self.thing(c, where: "vendor_thing_id = ?", vendorThingID),
                    other.thingID != thingID
                {
                    return .taken
                }
                return try c.run(
                    "UPDATE things SET vendor_thing_id = ?, password_hash = ? WHERE thing_id = ?",
                    [.text(vendorThingID), .text(passwordHash), .text(thingID)]) == 1 ? .changed : .noThing
            }
        }
        // A write that lost a race for the same vendorThingID breaks the
        // UNIQUE constraint: taken, as it would have been a moment later.
        if r == nil, let other = thing(vendorThingID: vendorThingID), other.thingID != thingID { return .taken }
        return r ?? .storage
    }

    public func addOwner(thingID: String, owner: String) -> Bool {
        ifThingExists(thingID) {
            try $0.run(
                "INSERT INTO thing_owners (thing_id, owner) VALUES (?, ?) ON CONFLICT DO NOTHING",
                [.text(thingID), .text(owner)])
        }
    }

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
        thingID: String, from: Int64, to: Int64, after: Int64, limit: Int, alias: String?, ranges: [StateRange]
    ) -> (samples: [StateSample], next: Int64?) {
        use(([], nil)) { c in
            let n = max(0, limit)
            let filter = StateRangeSQL.condition(Self.dialect, alias: alias, ranges)
            var rows = try c.rows(
                StoreRows.sampleColumns + " WHERE thing_id = ? AND id > ? AND at >= ? AND at < ?" + filter.sql
                    + " ORDER BY id LIMIT ?",
                [.text(thingID), .int(after), .int(from), .int(to)] + filter.binds + [.int(Int64(n + 1))],
                StoreRows.sample)
            guard rows.count > n else { return (rows, nil) }
            rows.removeLast()
            return (rows, rows.last?.cursor ?? after)
        }
    }

    // MARK: commands

    public func insertCommand(_ command: CommandRecord) -> CommandRecord? {
        use(nil) { c in
            // One statement: the seq is taken atomically; a commandID stored
            // already (by any hub) inserts nothing and returns no row.
            guard
                let n = try c.first(
                    Self.hot.insertCommand,
                    [
                        .text(command.commandID), .text(command.thingID), .text(command.issuer),
                        .text(command.issuingInstallationID), .text(command.payload), .text(command.results),
                        .text(command.state.rawValue), .int(command.createdAt), .int(command.modifiedAt),
                        .int(command.expiresAt)
                    ],
                    { $0.int(0) })
            else { return nil }
            var stored = command
            stored.seq = n
            return stored
        }
    }

    public func command(id: String) -> CommandRecord? {
        use(nil) { try $0.first(StoreRows.commandColumns + " WHERE command_id = ?", [.text(id)], StoreRows.command) }
    }

    public func markDelivered(commandIDs: [String], at: Int64) -> Set<String> {
        var marked = Set<String>()
        for part in StoreRules.batches(commandIDs) {
            marked.formUnion(
                use([]) {
                    try $0.rows(
                        "UPDATE commands SET state = ?, modified_at = ? WHERE command_id IN "
                            + StoreRules.placeholders(part.count) + " AND " + StoreSchema.openCommand
                            + " RETURNING command_id",
                        [.text(CommandState.delivered.rawValue), .int(at)] + part.map { .text($0) }
                    ) { $0.string(0) }
                })
        }
        return marked
    }

    public func recordResults(commandID: String, results: String, state: CommandState, at: Int64, swept: Bool)
        -> Bool
    {
        use(false) {
            // The first results win, whichever hub stores them.
            try changeCommand(
                $0,
                """
                UPDATE commands SET results = ?, state = ?, modified_at = ?, notify_due = ?
                WHERE command_id = ? AND results IS NULL
                """,
                [
                    .text(results), .text(state.rawValue), .int(at),
                    .int(swept ? at + StoreRules.notificationGraceMs : nil),
                    .text(commandID)
                ])
        }
    }

    public func markUndelivered(commandID: String, at: Int64) -> Bool {
        use(false) {
            try $0.run(
                "UPDATE commands SET state = ?, modified_at = ? WHERE command_id = ? AND state = ? AND results IS NULL",
                [
                    .text(CommandState.sending.rawValue), .int(at), .text(commandID),
                    .text(CommandState.delivered.rawValue)
                ]) == 1
        }
    }

    public func markNotified(commandIDs: [String]) -> Int {
        StoreRules.batches(commandIDs).reduce(0) { n, part in
            n
                + use(0) {
                    try $0.run(
                        "UPDATE commands SET notify_due = NULL WHERE command_id IN "
                            + StoreRules.placeholders(part.count) + " AND notify_due IS NOT NULL",
                        part.map { .text($0) })
                }
        }
    }

    public func claimUnnotified(now: Int64, leaseMs: Int64, limit: Int) -> [CommandRecord] {
        use([]) {
            try $0.rows(
                """
                UPDATE commands SET notify_due = ? WHERE command_id IN (
                    SELECT command_id FROM commands WHERE notify_due <= ? ORDER BY notify_due LIMIT ?
                """ + Self.dialect.skipLocked + ") RETURNING " + StoreRows.commandFields,
                [.int(now + max(0, leaseMs)), .int(now), .int(Int64(max(0, limit)))], StoreRows.command
            ).sorted { $0.seq < $1.seq }
        }
    }

    public func commands(thingID: String, afterSeq: Int64, limit: Int) -> [CommandRecord] {
        use([]) {
            try $0.rows(
                StoreRows.commandColumns + " WHERE thing_id = ? AND seq > ? ORDER BY seq LIMIT ?",
                [.text(thingID), .int(afterSeq), .int(Int64(max(0, limit)))], StoreRows.command)
        }
    }

    public func unansweredCommands(thingID: String) -> [CommandRecord] {
        use([]) {
            try $0.rows(
                StoreRows.commandColumns + " WHERE thing_id = ? AND results IS NULL ORDER BY seq", [.text(thingID)],
                StoreRows.command)
        }
    }

    // MARK: command lifecycle

    public func setCommandExpiry(commandID: String, expiresAt: Int64) -> Bool {
        use(false) {
            try $0.run("UPDATE commands SET expires_at = ? WHERE command_id = ?", [.int(expiresAt), .text(commandID)])
                == 1
        }
    }

    public func endCommand(commandID: String, state: CommandState, reason: String, at: Int64, swept: Bool) -> Bool {
        use(false) {
            try changeCommand(
                $0,
                "UPDATE commands SET state = ?, end_reason = ?, modified_at = ?, notify_due = ? WHERE command_id = ? AND "
                    + StoreSchema.openCommand,
                [
                    .text(state.rawValue), .text(reason), .int(at),
                    .int(swept ? at + StoreRules.notificationGraceMs : nil), .text(commandID)
                ])
        }
    }

    public func commandsDueToEnd(now: Int64, sentBefore: Int64?, deliveredBefore: Int64?, limit: Int)
        -> [CommandRecord]
    {
        use([]) {
            try $0.rows(
                StoreRows.commandColumns + " WHERE " + StoreSchema.openCommand
                    + " AND ((expires_at IS NOT NULL AND expires_at <= ?) OR (state = 'SENDING' AND created_at <= ?)"
                    + " OR (state = 'DELIVERED' AND modified_at <= ?)) ORDER BY seq LIMIT ?",
                [.int(now), .int(sentBefore), .int(deliveredBefore), .int(Int64(max(0, limit)))], StoreRows.command)
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
                        INSERT INTO users (user_id, login_name, password_hash, created_at) VALUES (?, ?, ?, ?)
                        ON CONFLICT (login_name) DO NOTHING
                        """, [.text(u.userID), .text(loginName), .text(passwordHash), .int(u.createdAt)]) == 1
                else { return nil }
                u.accessToken = try issue(c, kind: .user, subject: u.userID)
                return u
            }
        }
    }

    public func setPasswordHash(userID: String, _ hash: String) -> Bool {
        use(false) {
            try $0.run("UPDATE users SET password_hash = ? WHERE user_id = ?", [.text(hash), .text(userID)]) == 1
        }
    }

    public func user(id: String) -> UserRecord? {
        use(nil) { try $0.first(StoreRows.userColumns + " WHERE user_id = ?", [.text(id)], StoreRows.user) }
    }

    public func user(accessToken: String) -> UserRecord? {
        use(nil) {
            try $0.first(
                StoreRows.userColumns + " WHERE " + Self.isLiveTokenSubject("user_id") + " LIMIT 1",
                Self.tokenValues(.user, accessToken), StoreRows.user)
        }
    }

    /// One statement: the user of the token and, beside it, the thing (its
    /// columns NULL when there is none).
    public func user(accessToken: String, thing thingID: String) -> (user: UserRecord, thing: ThingRecord?)? {
        use(nil) {
            try $0.first(
                Self.hot.userAndThing, Self.tokenValues(.user, accessToken) + [.text(thingID)]
            ) { row in
                let thing = StoreRows.ShiftedRow(row, by: StoreRows.userCount)
                return (StoreRows.user(row), thing.isNull(0) ? nil : StoreRows.thingWithLists(thing))
            }
        }
    }

    public func user(loginName: String) -> UserRecord? {
        use(nil) {
            try $0.first(StoreRows.userColumns + " WHERE login_name = ?", [.text(loginName)], StoreRows.user)
        }
    }

    // MARK: groups

    private static func withMembers(_ c: Connection, _ g: GroupRecord) throws -> GroupRecord {
        var out = g
        out.members = try c.rows(
            "SELECT user_id FROM group_members WHERE group_id = ? ORDER BY position", [.text(g.groupID)]
        ) { $0.string(0) }
        return out
    }

    public func createGroup(name: String, ownerUserID: String, members: [String]) -> GroupRecord? {
        use(nil) { c in
            let g = GroupRecord(groupID: HubIDs.groupID(), name: name, ownerUserID: ownerUserID, members: members)
            return try c.transaction {
                try c.run(
                    "INSERT INTO groups (group_id, name, owner_user_id) VALUES (?, ?, ?)",
                    [.text(g.groupID), .text(name), .text(ownerUserID)])
                for (i, m) in members.enumerated() {
                    try c.run(
                        "INSERT INTO group_members (group_id, position, user_id) VALUES (?, ?, ?)",
                        [.text(g.groupID), .int(Int64(i)), .text(m)])
                }
                return g
            }
        }
    }

    public func group(id: String) -> GroupRecord? {
        use(nil) { c in
            try c.first(StoreRows.groupColumns + " WHERE group_id = ?", [.text(id)], StoreRows.group).map {
                try Self.withMembers(c, $0)
            }
        }
    }

    public func groups(ofUser userID: String) -> [GroupRecord] {
        use([]) { c in
            // Ordered by groupID as MemoryStore does.
            try c.rows(
                StoreRows.groupColumns + """
                     WHERE owner_user_id = ?
                       OR group_id IN (SELECT group_id FROM group_members WHERE user_id = ?)
                    ORDER BY group_id
                    """ + Self.dialect.byteOrder, [.text(userID), .text(userID)], StoreRows.group
            ).map { try Self.withMembers(c, $0) }
        }
    }

    // MARK: app installations

    public func addAppInstallation(userID: String, kind: AppInstallation.Kind, target: String?) -> AppInstallation? {
        use(nil) { c in
            let id = HubIDs.installationID()
            let i = AppInstallation(
                installationID: id, userID: userID, kind: kind,
                target: StoreRules.installationTarget(kind: kind, id: id, given: target), createdAt: Platform.epochMs())
            try c.run(
                """
                INSERT INTO app_installations (installation_id, user_id, kind, target, created_at)
                VALUES (?, ?, ?, ?, ?)
                """, [.text(id), .text(userID), .text(kind.rawValue), .text(i.target), .int(i.createdAt)])
            return i
        }
    }

    public func appInstallation(id: String) -> AppInstallation? {
        use(nil) {
            try $0.first(
                StoreRows.installationColumns + " WHERE installation_id = ?", [.text(id)], StoreRows.installation)
        }
    }

    public func appInstallations(userID: String) -> [AppInstallation] {
        use([]) {
            try $0.rows(
                StoreRows.installationColumns + " WHERE user_id = ? ORDER BY created_at, "
                    + Self.dialect.insertionOrder, [.text(userID)], StoreRows.installation)
        }
    }

    public func notificationInstallations(userID: String, issuingInstallationID: String?) -> [AppInstallation] {
        use([]) {
            try $0.rows(
                StoreRows.installationColumns + " WHERE " + Self.toldInstallations(user: "?", issuing: "?")
                    + " ORDER BY i.created_at, i." + Self.dialect.insertionOrder,
                [.text(userID), .text(issuingInstallationID)], StoreRows.installation)
        }
    }

    /// Which of a user's app installations (`i`) are told of a command it
    /// issued from `issuing`: all of them for a user with a login name, only
    /// the issuing one for a pseudo user. `user` and `issuing` are SQL: a
    /// placeholder, or the columns of a command read in the same statement.
    static func toldInstallations(user: String, issuing: String) -> String {
        "i.user_id = " + user + " AND EXISTS (SELECT 1 FROM users u WHERE u.user_id = i.user_id"
            + " AND (u.login_name IS NOT NULL OR i.installation_id = " + issuing + "))"
    }

    public func countAppInstallations(kind: AppInstallation.Kind) -> Int {
        use(0) {
            Int(
                try $0.first("SELECT COUNT(*) FROM app_installations WHERE kind = ?", [.text(kind.rawValue)]) {
                    $0.int(0)
                } ?? 0)
        }
    }

    public func deleteUser(id: String) -> [AppInstallation]? {
        use(nil) { c in
            try c.transaction { () throws -> [AppInstallation]? in
                guard try c.first(StoreRows.userColumns + " WHERE user_id = ?", [.text(id)], StoreRows.user) != nil
                else { return nil }
                let installations = try c.rows(
                    StoreRows.installationColumns + " WHERE i.user_id = ?", [.text(id)], StoreRows.installation)
                let u: [SQLValue] = [.text(id)]
                try c.run("DELETE FROM app_installations WHERE user_id = ?", u)
                try c.run("DELETE FROM tokens WHERE kind = ? AND subject_id = ?", [.text(TokenKind.user.rawValue)] + u)
                try c.run("DELETE FROM thing_owners WHERE owner = ?", [.text("user:" + id)])
                try c.run("DELETE FROM group_members WHERE user_id = ?", u)
                try c.run("DELETE FROM users WHERE user_id = ?", u)
                return installations
            }
        }
    }

    public func removeAppInstallation(id: String, userID: String) -> Bool {
        use(false) {
            try $0.run(
                "DELETE FROM app_installations WHERE installation_id = ? AND user_id = ?", [.text(id), .text(userID)])
                == 1
        }
    }

    // MARK: server triggers

    public func insertTrigger(_ t: ServerTriggerRecord) -> Bool {
        use(false) {
            let seq = Self.dialect.sequence("triggers")
            return try $0.run(
                "INSERT INTO triggers (trigger_id, " + seq.column
                    + "thing_id, definition, enabled, last_match, created_at) VALUES (?, " + seq.value
                    + "?, ?, ?, ?, ?) ON CONFLICT (trigger_id) DO NOTHING",
                [
                    .text(t.triggerID), .text(t.thingID), .text(t.definition), .int(t.enabled ? 1 : 0),
                    .int(t.lastMatch.map { $0 ? 1 : 0 }), .int(t.createdAt)
                ]) == 1
        }
    }

    public func trigger(id: String) -> ServerTriggerRecord? {
        use(nil) { try $0.first(StoreRows.triggerColumns + " WHERE trigger_id = ?", [.text(id)], StoreRows.trigger) }
    }

    public func triggers(thingID: String) -> [ServerTriggerRecord] {
        use([]) {
            try $0.rows(
                StoreRows.triggerColumns + " WHERE thing_id = ? ORDER BY seq", [.text(thingID)], StoreRows.trigger)
        }
    }

    public func allTriggers() -> [ServerTriggerRecord] {
        use([]) { try $0.rows(StoreRows.triggerColumns + " ORDER BY seq", [], StoreRows.trigger) }
    }

    public func updateTrigger(id: String, definition: String) -> Bool {
        use(false) {
            try $0.run(
                "UPDATE triggers SET definition = ?, last_match = NULL WHERE trigger_id = ?",
                [.text(definition), .text(id)]) == 1
        }
    }

    public func setTriggerEnabled(id: String, enabled: Bool) -> Bool {
        use(false) {
            try $0.run("UPDATE triggers SET enabled = ? WHERE trigger_id = ?", [.int(enabled ? 1 : 0), .text(id)]) == 1
        }
    }

    public func claimTrigger(id: String) -> Bool {
        use(false) {
            try $0.run("UPDATE triggers SET enabled = 0 WHERE trigger_id = ? AND enabled = 1", [.text(id)]) == 1
        }
    }

    public func setTriggerLastMatch(id: String, lastMatch: Bool?) -> Bool {
        use(false) {
            try $0.run(
                "UPDATE triggers SET last_match = ? WHERE trigger_id = ?",
                [.int(lastMatch.map { $0 ? 1 : 0 }), .text(id)]) == 1
        }
    }

    public func deleteTrigger(id: String) -> Bool {
        use(false) { try $0.run("DELETE FROM triggers WHERE trigger_id = ?", [.text(id)]) == 1 }
    }

    // MARK: thing automation

    public func automation(thingID: String) -> ThingAutomation? {
        use(nil) {
            try $0.first(StoreRows.automationColumns + " WHERE thing_id = ?", [.text(thingID)], StoreRows.automation)
        }
    }

    public func saveAutomation(thingID: String, config: String) -> ThingAutomation? {
        use(nil) { c in
            try c.transaction { () throws -> ThingAutomation? in
                guard try Self.exists(c, thing: thingID) else { return nil }
                return try c.first(
                    """
                    INSERT INTO thing_automation (thing_id, config, version) VALUES (?, ?, 1)
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
        use(false) {
            try $0.run("UPDATE thing_automation SET report = ? WHERE thing_id = ?", [.text(report), .text(thingID)]) > 0
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
    /// A thing by its token, a command, and the command's targets (`thing(accessToken:command:)`).
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
            + " WHERE command_id = ?) c ON c.thing_id = t.thing_id LEFT JOIN app_installations i"
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
