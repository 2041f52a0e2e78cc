// SPDX-License-Identifier: Apache-2.0

import ThingIF

/// SQLStore's gateways' end nodes (the statements SQLite and PostgreSQL share).
extension SQLStore {
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
}
