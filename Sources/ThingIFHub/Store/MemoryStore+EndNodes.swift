// SPDX-License-Identifier: Apache-2.0

import ThingIF

/// MemoryStore's gateways' end nodes.
extension MemoryStore {
    // MARK: gateways' end nodes

    /// The KDF runs outside the lock, as registerThing's; the checks and
    /// the write run under it, which is the transaction.
    public func onboardEndNode(
        gatewayThingID: String, vendorThingID: String, password: String, thingType: String?,
        firmwareVersion: String?, owners: [String], maxEndNodes: Int
    ) -> EndNodeOnboarding {
        /// The refusal the gateway calls for, nil when it is a gateway.
        func gatewayRefusal(_ d: Data) -> EndNodeOnboarding? {
            guard let g = d.things[gatewayThingID] else { return .noGateway }
            return g.layoutPosition == .gateway ? nil : .notAGateway
        }
        func addOwners(_ t: inout ThingRecord) {
            for o in owners where !t.owners.contains(o) { t.owners.append(o) }
        }
        // A few rounds at most, as registerThing's.
        for _ in 0..<4 {
            let (refusal, known) = data.withLock { d in
                (gatewayRefusal(d), d.byVendorID[vendorThingID].flatMap { d.things[$0] })
            }
            if let refusal { return refusal }
            if let known {
                guard let h = known.passwordHash, PasswordHash.verify(password, h) else { return .wrongPassword }
                let r: EndNodeOnboarding? = data.withLock { d in
                    if let refusal = gatewayRefusal(d) { return refusal }
                    guard var t = d.things[known.thingID], t.passwordHash == h else { return nil }
                    guard t.layoutPosition == .endNode, let g = t.gatewayThingID else { return .notAnEndNode }
                    guard g == gatewayThingID else { return .otherGateway(g) }
                    guard StoreRules.typeMatches(thingType, known: t.thingType) else { return .wrongType }
                    if t.thingType == nil { t.thingType = thingType }
                    if let firmwareVersion { t.firmwareVersion = firmwareVersion }
                    addOwners(&t)
                    d.things[t.thingID] = t
                    t.accessToken = issue(&d, kind: .thing, subjectID: t.thingID)
                    return .onboarded(t, created: false)
                }
                if let r { return r }
                continue
            }
            let hash = PasswordHash.make(password, iterations: secrets.passwordIterations)
            let r: EndNodeOnboarding? = data.withLock { d in
                if let refusal = gatewayRefusal(d) { return refusal }
                guard d.byVendorID[vendorThingID] == nil else { return nil }
                guard Self.endNodeCount(d, gatewayThingID) < maxEndNodes else { return .tooManyEndNodes }
                var t = ThingRecord(
                    thingID: HubIDs.thingID(), vendorThingID: vendorThingID, passwordHash: hash,
                    thingType: thingType, firmwareVersion: firmwareVersion, accessToken: "",
                    createdAt: Platform.epochMs(), layoutPosition: .endNode, gatewayThingID: gatewayThingID)
                addOwners(&t)
                d.things[t.thingID] = t
                d.byVendorID[vendorThingID] = t.thingID
                t.accessToken = issue(&d, kind: .thing, subjectID: t.thingID)
                return .onboarded(t, created: true)
            }
            if let r { return r }
        }
        return .storage
    }

    public func endNodes(gatewayThingID: String, after: EndNodeCursor?, limit: Int)
        -> (endNodes: [ThingRecord], next: EndNodeCursor?)?
    {
        let n = max(1, limit)
        let all = data.withLock { d in
            d.things.values.filter { t in t.gatewayThingID == gatewayThingID && after.map { $0.precedes(t) } ?? true }
        }.sorted { EndNodeCursor($0).precedes($1) }
        guard all.count > n else { return (all, nil) }
        let page = Array(all.prefix(n))
        return (page, page.last.map(EndNodeCursor.init))
    }

    public func endNodeCount(gatewayThingID: String) -> Int? {
        data.withLock { d in Self.endNodeCount(d, gatewayThingID) }
    }

    public func endNodeTotal() -> Int? {
        data.withLock { d in d.things.values.reduce(0) { $0 + ($1.gatewayThingID != nil ? 1 : 0) } }
    }

    private static func endNodeCount(_ d: Data, _ gatewayThingID: String) -> Int {
        d.things.values.reduce(0) { $0 + ($1.gatewayThingID == gatewayThingID ? 1 : 0) }
    }
}
