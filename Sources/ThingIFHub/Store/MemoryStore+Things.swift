// SPDX-License-Identifier: Apache-2.0

import ThingIF

/// MemoryStore's things.
extension MemoryStore {
    // MARK: things

    /// The KDF (a quarter second at the production cost) runs outside the
    /// lock, so one onboarding never stalls the rest of the hub.
    public func registerThing(
        vendorThingID: String, password: String, thingType: String?, firmwareVersion: String?,
        dataGroupingInterval: String?, layoutPosition: LayoutPosition?
    ) -> Result<ThingRecord, RegisterError> {
        if layoutPosition == .endNode { return .failure(.wrongLayout) }
        // A few rounds at most: only a concurrent first registration of the
        // same vendorThingID (or a password change) makes one repeat.
        for _ in 0..<4 {
            let known = data.withLock { d in d.byVendorID[vendorThingID].flatMap { d.things[$0] } }
            if let known {
                guard let h = known.passwordHash, PasswordHash.verify(password, h) else {
                    return .failure(.wrongPassword)
                }
                let r: Result<ThingRecord, RegisterError>? = data.withLock { d in
                    guard var t = d.things[known.thingID], t.passwordHash == h else { return nil }
                    if !StoreRules.typeMatches(thingType, known: t.thingType) { return .failure(.wrongType) }
                    if t.layoutPosition == .endNode || layoutPosition.map({ $0 != t.layoutPosition }) == true {
                        return .failure(.wrongLayout)
                    }
                    if t.thingType == nil { t.thingType = thingType }
                    if let firmwareVersion { t.firmwareVersion = firmwareVersion }
                    if let dataGroupingInterval { t.dataGroupingInterval = dataGroupingInterval }
                    d.things[t.thingID] = t
                    t.accessToken = issue(&d, kind: .thing, subjectID: t.thingID)
                    return .success(t)
                }
                if let r { return r }
                continue
            }
            let hash = PasswordHash.make(password, iterations: secrets.passwordIterations)
            let r: Result<ThingRecord, RegisterError>? = data.withLock { d in
                guard d.byVendorID[vendorThingID] == nil else { return nil }
                var t = ThingRecord(
                    thingID: HubIDs.thingID(), vendorThingID: vendorThingID, passwordHash: hash,
                    thingType: thingType, firmwareVersion: firmwareVersion,
                    accessToken: "", dataGroupingInterval: dataGroupingInterval,
                    createdAt: Platform.epochMs(), layoutPosition: layoutPosition ?? .standalone)
                d.things[t.thingID] = t
                d.byVendorID[vendorThingID] = t.thingID
                t.accessToken = issue(&d, kind: .thing, subjectID: t.thingID)
                return .success(t)
            }
            if let r { return r }
        }
        return .failure(.storage)
    }

    public func thing(id: String) -> ThingRecord? { data.withLock { $0.things[id] } }
    public func thing(vendorThingID: String) -> ThingRecord? {
        data.withLock { d in d.byVendorID[vendorThingID].flatMap { d.things[$0] } }
    }
    /// Never `.failed`: memory does not fail.
    public func thingRead(id: String) -> StoreRead<ThingRecord> {
        thing(id: id).map { .found($0) } ?? .notFound
    }
    /// Never `.failed`: memory does not fail.
    public func thingRead(accessToken: String) -> StoreRead<ThingRecord> {
        data.withLock { d in subject(d, kind: .thing, token: accessToken).flatMap { d.things[$0] } }
            .map { .found($0) } ?? .notFound
    }
    public func thing(mqttTopic: String) -> ThingRecord? {
        data.withLock { d in d.byTopic[mqttTopic].flatMap { d.things[$0] } }
    }

    public func addInstallation(thingID: String, installationID: String, mqttTopic: String) -> Bool {
        data.withLock { d in
            guard d.things[thingID] != nil else { return false }
            d.things[thingID]!.installations[installationID] = mqttTopic
            d.byTopic[mqttTopic] = thingID
            d.installationOrder[thingID, default: []].removeAll { $0 == installationID }
            d.installationOrder[thingID, default: []].append(installationID)
            return true
        }
    }

    public func installationsOldestFirst(thingID: String) -> [(installationID: String, mqttTopic: String)] {
        data.withLock { d in
            guard let t = d.things[thingID] else { return [] }
            return (d.installationOrder[thingID] ?? []).compactMap { iid in
                t.installations[iid].map { (iid, $0) }
            }
        }
    }

    public func removeInstallation(thingID: String, installationID: String) -> Bool {
        data.withLock { d in
            guard let topic = d.things[thingID]?.installations.removeValue(forKey: installationID) else {
                return false
            }
            if d.byTopic[topic] == thingID { d.byTopic[topic] = nil }
            d.installationOrder[thingID]?.removeAll { $0 == installationID }
            Self.revokeCertificates(&d) { $0.thingID == thingID && $0.installationID == installationID }
            return true
        }
    }
}
