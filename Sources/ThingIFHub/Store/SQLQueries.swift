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

/// The store calls whose SQL is the same for SQLite and PostgreSQL, written
/// once: SQLiteStore and PostgresStore run them on their connection (inside
/// their own lock and error handling). What differs between the dialects
/// (inserts that number rows, upserts, row locks, notifications) stays in
/// each store.
enum SQLQueries {
    // MARK: tokens and things

    static func revokeToken(_ c: some SQLConnection, _ token: String) throws -> Bool {
        try c.run(
            "UPDATE tokens SET revoked = 1 WHERE token_hash = ? AND revoked = 0", [.text(Crypto.sha256Hex(token))]) == 1
    }

    /// What HubStore.deleteThing removes, children first, in one
    /// transaction; the tables without a foreign key on the thing (commands,
    /// triggers, tokens) are the reason it is spelled out rather than left
    /// to ON DELETE CASCADE.
    static func deleteThing(_ c: some SQLConnection, id: String) throws -> Bool {
        let t: [SQLValue] = [.text(id)]
        return try c.transaction {
            guard try c.first("SELECT 1 FROM things WHERE thing_id = ?", t, { _ in true }) != nil else { return false }
            try c.run("DELETE FROM commands WHERE thing_id = ?", t)
            try c.run("DELETE FROM triggers WHERE thing_id = ?", t)
            try c.run("DELETE FROM thing_automation WHERE thing_id = ?", t)
            try c.run("DELETE FROM state_samples WHERE thing_id = ?", t)
            try c.run("DELETE FROM thing_installations WHERE thing_id = ?", t)
            try c.run("DELETE FROM thing_owners WHERE thing_id = ?", t)
            try c.run(
                "DELETE FROM tokens WHERE kind = ? AND subject_id = ?", [.text(TokenKind.thing.rawValue), .text(id)])
            return try c.run("DELETE FROM things WHERE thing_id = ?", t) == 1
        }
    }

    static func setFirmwareVersion(_ c: some SQLConnection, thingID: String, _ version: String) throws -> Bool {
        try c.run("UPDATE things SET firmware_version = ? WHERE thing_id = ?", [.text(version), .text(thingID)]) == 1
    }

    static func setThingType(_ c: some SQLConnection, thingID: String, _ thingType: String) throws -> Bool {
        try c.run("UPDATE things SET thing_type = ? WHERE thing_id = ?", [.text(thingType), .text(thingID)]) == 1
    }

    // MARK: state

    static func stateHistory(_ c: some SQLConnection, thingID: String, from: Int64, to: Int64) throws -> [StateSample] {
        try c.rows(
            StoreRows.sampleColumns + " WHERE thing_id = ? AND at >= ? AND at < ? ORDER BY id",
            [.text(thingID), .int(from), .int(to)], StoreRows.sample)
    }

    static func stateHistoryPage(
        _ c: some SQLConnection, thingID: String, from: Int64, to: Int64, after: Int64, limit: Int
    ) throws -> (samples: [StateSample], next: Int64?) {
        let n = max(0, limit)
        var rows = try c.rows(
            StoreRows.sampleColumns + " WHERE thing_id = ? AND id > ? AND at >= ? AND at < ? ORDER BY id LIMIT ?",
            [.text(thingID), .int(after), .int(from), .int(to), .int(Int64(n + 1))], StoreRows.sample)
        guard rows.count > n else { return (rows, nil) }
        rows.removeLast()
        return (rows, rows.last?.cursor ?? after)
    }

    // MARK: commands

    static func command(_ c: some SQLConnection, id: String) throws -> CommandRecord? {
        try c.first(StoreRows.commandColumns + " WHERE command_id = ?", [.text(id)], StoreRows.command)
    }

    static func markDelivered(_ c: some SQLConnection, commandID: String, at: Int64) throws -> Bool {
        try c.run(
            """
            UPDATE commands SET state = ?, modified_at = ? WHERE command_id = ? AND results IS NULL
                AND state IN ('SENDING', 'DELIVERED')
            """,
            [.text(CommandState.delivered.rawValue), .int(at), .text(commandID)]) == 1
    }

    static func commands(_ c: some SQLConnection, thingID: String, afterSeq: Int64, limit: Int) throws
        -> [CommandRecord]
    {
        try c.rows(
            StoreRows.commandColumns + " WHERE thing_id = ? AND seq > ? ORDER BY seq LIMIT ?",
            [.text(thingID), .int(afterSeq), .int(Int64(max(0, limit)))], StoreRows.command)
    }

    static func markNotified(_ c: some SQLConnection, commandID: String) throws -> Bool {
        let sql = "UPDATE commands SET notify_due = NULL WHERE command_id = ? AND notify_due IS NOT NULL"
        return try c.run(sql, [.text(commandID)]) == 1
    }

    /// `lock` is PostgreSQL's `FOR UPDATE SKIP LOCKED` (sweeps of other hubs
    /// pass over the rows this one claims); SQLite has one writer.
    static func claimUnnotified(_ c: some SQLConnection, now: Int64, leaseMs: Int64, limit: Int, lock: String)
        throws -> [CommandRecord]
    {
        try c.rows(
            """
            UPDATE commands SET notify_due = ? WHERE command_id IN (
                SELECT command_id FROM commands WHERE notify_due <= ? ORDER BY notify_due LIMIT ?\(lock)
            ) RETURNING
            """ + " " + StoreRows.commandFields,
            [.int(now + max(0, leaseMs)), .int(now), .int(Int64(max(0, limit)))], StoreRows.command
        ).sorted { $0.seq < $1.seq }
    }

    static func unansweredCommands(_ c: some SQLConnection, thingID: String) throws -> [CommandRecord] {
        try c.rows(
            StoreRows.commandColumns + " WHERE thing_id = ? AND results IS NULL ORDER BY seq", [.text(thingID)],
            StoreRows.command)
    }

    // MARK: command lifecycle (new columns of migration SQLite 5 -> 6, PostgreSQL 2 -> 3)

    static func setCommandExpiry(_ c: some SQLConnection, commandID: String, expiresAt: Int64) throws -> Bool {
        try c.run("UPDATE commands SET expires_at = ? WHERE command_id = ?", [.int(expiresAt), .text(commandID)]) == 1
    }

    /// The condition of an open command (the partial index commands_open).
    static let openCommand = StoreSchema.openCommand

    static func endCommand(_ c: some SQLConnection, commandID: String, state: CommandState, reason: String, at: Int64)
        throws -> Bool
    {
        try c.run(
            "UPDATE commands SET state = ?, end_reason = ?, modified_at = ?, notify_due = ? WHERE command_id = ? AND "
                + openCommand,
            [
                .text(state.rawValue), .text(reason), .int(at), .int(at + StoreRules.notificationGraceMs),
                .text(commandID)
            ]) == 1
    }

    static func commandsDueToEnd(
        _ c: some SQLConnection, now: Int64, sentBefore: Int64?, deliveredBefore: Int64?, limit: Int
    ) throws -> [CommandRecord] {
        try c.rows(
            StoreRows.commandColumns + " WHERE " + openCommand
                + " AND ((expires_at IS NOT NULL AND expires_at <= ?) OR (state = 'SENDING' AND created_at <= ?)"
                + " OR (state = 'DELIVERED' AND modified_at <= ?)) ORDER BY seq LIMIT ?",
            [
                .int(now), .int(sentBefore), .int(deliveredBefore), .int(Int64(max(0, limit)))
            ], StoreRows.command)
    }

    // MARK: users, groups, app installations

    static func setPasswordHash(_ c: some SQLConnection, userID: String, _ hash: String) throws -> Bool {
        try c.run("UPDATE users SET password_hash = ? WHERE user_id = ?", [.text(hash), .text(userID)]) == 1
    }

    static func user(_ c: some SQLConnection, id: String) throws -> UserRecord? {
        try c.first(StoreRows.userColumns + " WHERE user_id = ?", [.text(id)], StoreRows.user)
    }

    static func user(_ c: some SQLConnection, loginName: String) throws -> UserRecord? {
        try c.first(StoreRows.userColumns + " WHERE login_name = ?", [.text(loginName)], StoreRows.user)
    }

    static func createGroup(_ c: some SQLConnection, name: String, ownerUserID: String, members: [String]) throws
        -> GroupRecord
    {
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

    static func addAppInstallation(_ c: some SQLConnection, userID: String, kind: AppInstallation.Kind, target: String?)
        throws -> AppInstallation
    {
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

    static func appInstallation(_ c: some SQLConnection, id: String) throws -> AppInstallation? {
        try c.first(StoreRows.installationColumns + " WHERE installation_id = ?", [.text(id)], StoreRows.installation)
    }

    static func countAppInstallations(_ c: some SQLConnection, kind: AppInstallation.Kind) throws -> Int {
        Int(
            try c.first("SELECT COUNT(*) FROM app_installations WHERE kind = ?", [.text(kind.rawValue)]) { $0.int(0) }
                ?? 0)
    }

    static func removeAppInstallation(_ c: some SQLConnection, id: String, userID: String) throws -> Bool {
        try c.run(
            "DELETE FROM app_installations WHERE installation_id = ? AND user_id = ?", [.text(id), .text(userID)]) == 1
    }

    // MARK: server triggers and automation

    static func trigger(_ c: some SQLConnection, id: String) throws -> ServerTriggerRecord? {
        try c.first(StoreRows.triggerColumns + " WHERE trigger_id = ?", [.text(id)], StoreRows.trigger)
    }

    static func triggers(_ c: some SQLConnection, thingID: String) throws -> [ServerTriggerRecord] {
        try c.rows(StoreRows.triggerColumns + " WHERE thing_id = ? ORDER BY seq", [.text(thingID)], StoreRows.trigger)
    }

    static func allTriggers(_ c: some SQLConnection) throws -> [ServerTriggerRecord] {
        try c.rows(StoreRows.triggerColumns + " ORDER BY seq", [], StoreRows.trigger)
    }

    static func updateTrigger(_ c: some SQLConnection, id: String, definition: String) throws -> Bool {
        try c.run(
            "UPDATE triggers SET definition = ?, last_match = NULL WHERE trigger_id = ?", [.text(definition), .text(id)]
        )
            == 1
    }

    static func setTriggerEnabled(_ c: some SQLConnection, id: String, enabled: Bool) throws -> Bool {
        try c.run("UPDATE triggers SET enabled = ? WHERE trigger_id = ?", [.int(enabled ? 1 : 0), .text(id)]) == 1
    }

    static func claimTrigger(_ c: some SQLConnection, id: String) throws -> Bool {
        try c.run("UPDATE triggers SET enabled = 0 WHERE trigger_id = ? AND enabled = 1", [.text(id)]) == 1
    }

    static func setTriggerLastMatch(_ c: some SQLConnection, id: String, lastMatch: Bool?) throws -> Bool {
        try c.run(
            "UPDATE triggers SET last_match = ? WHERE trigger_id = ?", [.int(lastMatch.map { $0 ? 1 : 0 }), .text(id)])
            == 1
    }

    static func deleteTrigger(_ c: some SQLConnection, id: String) throws -> Bool {
        try c.run("DELETE FROM triggers WHERE trigger_id = ?", [.text(id)]) == 1
    }

    static func saveAutomationReport(_ c: some SQLConnection, thingID: String, report: String) throws -> Bool {
        try c.run("UPDATE thing_automation SET report = ? WHERE thing_id = ?", [.text(report), .text(thingID)]) > 0
    }
}
