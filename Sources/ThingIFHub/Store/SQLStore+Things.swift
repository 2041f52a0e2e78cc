// SPDX-License-Identifier: Apache-2.0

import ThingIF

/// SQLStore's things (the statements SQLite and PostgreSQL share).
extension SQLStore {
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
}
