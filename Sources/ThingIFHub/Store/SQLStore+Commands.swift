// SPDX-License-Identifier: Apache-2.0

import ThingIF

/// SQLStore's commands and their lifecycle (the statements SQLite and PostgreSQL share).
extension SQLStore {
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
}
