// SPDX-License-Identifier: Apache-2.0

import ThingIF

/// MemoryStore's things' certificates.
extension MemoryStore {
    // MARK: things' certificates

    /// Moves the recorded certificates that `selected` picks to the revoked
    /// list (SQLStore.revokeCertificates); expired ones are only dropped.
    static func revokeCertificates(_ d: inout Data, _ selected: (IssuedCertificate) -> Bool) {
        let now = Platform.epochMs()
        for (serial, c) in d.certificates where selected(c) {
            d.certificates[serial] = nil
            if c.notAfter > now, d.revoked[serial] == nil {
                d.revoked[serial] = RevokedCertificate(serial: serial, revokedAt: now, notAfter: c.notAfter)
            }
        }
    }

    public func gatewayCertificateTopics() -> [String]? {
        data.withLock { d in
            var topics = Set<String>()
            for c in d.certificates.values {
                guard let t = d.things[c.thingID], t.layoutPosition == .gateway,
                    let topic = t.installations[c.installationID]
                else { continue }
                topics.insert(topic)
            }
            return topics.sorted()
        }
    }

    public func recordCertificate(thingID: String, installationID: String, serial: String, notAfter: Int64) -> Bool {
        data.withLock { d in
            guard d.things[thingID] != nil, d.certificates[serial] == nil, d.revoked[serial] == nil else {
                return false
            }
            d.certificates[serial] = IssuedCertificate(
                thingID: thingID, installationID: installationID, notAfter: notAfter)
            return true
        }
    }

    public func revokedCertificates(now: Int64) -> [RevokedCertificate]? {
        data.withLock { d in
            d.revoked = d.revoked.filter { $0.value.notAfter > now }
            d.certificates = d.certificates.filter { $0.value.notAfter > now }
            return d.revoked.values.sorted { $0.serial < $1.serial }
        }
    }

    public func setFirmwareVersion(thingID: String, _ version: String) -> Bool {
        data.withLock { d in
            guard d.things[thingID] != nil else { return false }
            d.things[thingID]!.firmwareVersion = version
            return true
        }
    }

    public func setThingType(thingID: String, _ thingType: String) -> Bool {
        data.withLock { d in
            guard d.things[thingID] != nil else { return false }
            d.things[thingID]!.thingType = thingType
            return true
        }
    }

    public func setVendorThingID(thingID: String, vendorThingID: String, passwordHash: String)
        -> VendorThingIDChange
    {
        data.withLock { d in
            guard var t = d.things[thingID] else { return .noThing }
            if let other = d.byVendorID[vendorThingID], other != thingID { return .taken }
            if let old = t.vendorThingID, d.byVendorID[old] == thingID { d.byVendorID[old] = nil }
            t.vendorThingID = vendorThingID
            t.passwordHash = passwordHash
            d.things[thingID] = t
            d.byVendorID[vendorThingID] = thingID
            return .changed
        }
    }

    public func addOwner(thingID: String, owner: String) -> Bool {
        data.withLock { d in
            guard var t = d.things[thingID] else { return false }
            if !t.owners.contains(owner) { t.owners.append(owner) }
            d.things[thingID] = t
            return true
        }
    }

    public func things(ownedBy owners: [String]) -> [ThingRecord] {
        let wanted = Set(owners)
        return data.withLock { d in
            d.things.values.filter { !wanted.isDisjoint(with: $0.owners) }.sorted { $0.thingID < $1.thingID }
        }
    }

    public func deleteThing(id: String) -> Bool {
        data.withLock { d in
            guard d.things[id] != nil else { return false }
            let endNodes = d.things.values.filter { $0.gatewayThingID == id }.map(\.thingID)
            for e in endNodes { Self.delete(&d, id: e) }
            Self.delete(&d, id: id)
            return true
        }
    }

    /// Deletes one thing and what belongs to it (deleteThing).
    private static func delete(_ d: inout Data, id: String) {
        guard let t = d.things.removeValue(forKey: id) else { return }
        if let v = t.vendorThingID, d.byVendorID[v] == id { d.byVendorID[v] = nil }
        d.byTopic = d.byTopic.filter { $0.value != id }
        d.installationOrder[id] = nil
        d.history[id] = nil
        let commands = d.commands.filter { $0.value.thingID != id }
        d.commands = commands
        d.commandOrder.removeAll { commands[$0] == nil }
        let triggers = d.triggers.filter { $0.value.thingID != id }
        d.triggers = triggers
        d.triggerOrder.removeAll { triggers[$0] == nil }
        d.automations[id] = nil
        d.tokens = d.tokens.filter { !($0.value.kind == .thing && $0.value.subjectID == id) }
        Self.revokeCertificates(&d) { $0.thingID == id }
    }
}
