// SPDX-License-Identifier: Apache-2.0

import ThingIF

/// A HubStore in memory: for tests and for a hub that needs to keep nothing.
public final class MemoryStore: HubStore, @unchecked Sendable {
    private struct Data {
        var things: [String: ThingRecord] = [:]
        var byVendorID: [String: String] = [:]
        /// SHA-256 (hex) of a token -> the token's record.
        var tokens: [String: TokenEntry] = [:]
        var lastTokenPruneMs: Int64 = 0
        var byTopic: [String: String] = [:]
        /// thingID -> its installationIDs, oldest first.
        var installationOrder: [String: [String]] = [:]
        var history: [String: [StateSample]] = [:]
        var sampleSeq: Int64 = 0
        var commands: [String: CommandRecord] = [:]
        /// commandID -> when its notification may be claimed (claimUnnotified).
        var notifyDue: [String: Int64] = [:]
        var commandOrder: [String] = []
        var seq: Int64 = 0
        var users: [String: UserRecord] = [:]
        var usersByLogin: [String: String] = [:]
        var groups: [String: GroupRecord] = [:]
        var installations: [String: AppInstallation] = [:]
        /// Each app installation's place in the order they were added (the
        /// SQL stores' insertion order, for those made in one millisecond).
        var installationRank: [String: Int] = [:]
        var installationsAdded = 0
        var triggers: [String: ServerTriggerRecord] = [:]
        var triggerOrder: [String] = []
        var automations: [String: ThingAutomation] = [:]
        /// serial -> the certificate the things' CA signed (recordCertificate).
        var certificates: [String: IssuedCertificate] = [:]
        /// serial -> its revocation (revokedCertificates).
        var revoked: [String: RevokedCertificate] = [:]
    }

    private struct IssuedCertificate {
        var thingID: String
        var installationID: String
        var notAfter: Int64
    }

    private struct TokenEntry {
        var kind: TokenKind
        var subjectID: String
        var createdAt: Int64
        var expiresAt: Int64
        var revoked: Bool
    }

    private let data = Locked(Data())
    public let secrets: HubSecrets
    public let retention: StateRetention

    public init(secrets: HubSecrets = HubSecrets(), retention: StateRetention = StateRetention()) {
        self.secrets = secrets
        self.retention = retention
    }

    /// One lock: one call at a time.
    public var concurrentCalls: Int { 1 }

    /// Each call commits on its own.
    public func inOneTransaction(_ body: () -> Void) -> OneTransaction { .unsupported }

    // MARK: tokens

    private func issue(_ d: inout Data, kind: TokenKind, subjectID: String) -> String {
        let now = Platform.epochMs()
        // Prune what can no longer be used, so the table stays bounded (a
        // pass over all tokens, so at most once a second).
        if now - d.lastTokenPruneMs >= 1000 {
            d.lastTokenPruneMs = now
            d.tokens = d.tokens.filter { !$0.value.revoked && ($0.value.expiresAt == 0 || $0.value.expiresAt > now) }
        }
        let raw = HubIDs.token()
        d.tokens[LibCrypto.sha256Hex(raw)] = TokenEntry(
            kind: kind, subjectID: subjectID, createdAt: now,
            expiresAt: secrets.expiry(kind, now: now), revoked: false)
        return raw
    }

    private func subject(_ d: Data, kind: TokenKind, token: String) -> String? {
        guard let e = d.tokens[LibCrypto.sha256Hex(token)], e.kind == kind, !e.revoked else { return nil }
        guard e.expiresAt == 0 || e.expiresAt > Platform.epochMs() else { return nil }
        return e.subjectID
    }

    public func issueToken(kind: TokenKind, subjectID: String) -> String? {
        data.withLock { d in
            switch kind {
            case .user: guard d.users[subjectID] != nil else { return nil }
            case .thing: guard d.things[subjectID] != nil else { return nil }
            }
            return issue(&d, kind: kind, subjectID: subjectID)
        }
    }

    public func revokeToken(_ token: String) -> Bool {
        data.withLock { d in
            let h = LibCrypto.sha256Hex(token)
            guard let e = d.tokens[h], !e.revoked else { return false }
            d.tokens[h]!.revoked = true
            return true
        }
    }

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

    // MARK: things' certificates

    /// Moves the recorded certificates that `selected` picks to the revoked
    /// list (SQLStore.revokeCertificates); expired ones are only dropped.
    private static func revokeCertificates(_ d: inout Data, _ selected: (IssuedCertificate) -> Bool) {
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

    // MARK: state

    public func applyState(thingID: String, method: String, upload: String, at: Int64) -> String? {
        data.withLock { d in
            guard var t = d.things[thingID] else { return nil }
            let merged = StateMerge.apply(method: method, upload: upload, to: t.state)
            t.state = merged
            d.things[thingID] = t
            var h = d.history[thingID, default: []]
            d.sampleSeq += 1
            h.append(
                StateSample(
                    thingID: thingID, at: at, method: method, upload: upload, state: merged,
                    cursor: d.sampleSeq))
            if let oldest = StoreRules.oldestKept(retention, at: at) {
                h.removeAll { $0.at < oldest }
            }
            if retention.maxSamples > 0, h.count > retention.maxSamples {
                h.removeFirst(h.count - retention.maxSamples)
            }
            d.history[thingID] = h
            return merged
        }
    }

    public func stateHistory(thingID: String, from: Int64, to: Int64) -> [StateSample] {
        data.withLock { d in (d.history[thingID] ?? []).filter { $0.at >= from && $0.at < to } }
    }

    public func stateHistoryPage(
        thingID: String, from: Int64, to: Int64, after: Int64, limit: Int, alias: String?, ranges: [StateRange]
    ) -> (samples: [StateSample], next: Int64?) {
        data.withLock { d in
            var out: [StateSample] = []
            var last: Int64 = 0
            for s in d.history[thingID] ?? [] where s.cursor > after && s.at >= from && s.at < to {
                guard StateRange.admit(ranges, state: s.state, alias: alias) else { continue }
                if out.count == max(0, limit) { return (out, last) }
                out.append(s)
                last = s.cursor
            }
            return (out, nil)
        }
    }

    // MARK: commands

    public func insertCommand(_ command: CommandRecord) -> CommandRecord? {
        data.withLock { d in
            guard d.commands[command.commandID] == nil else { return nil }
            d.seq += 1
            var c = command
            c.seq = d.seq
            d.commands[c.commandID] = c
            d.commandOrder.append(c.commandID)
            return c
        }
    }

    public func command(id: String) -> CommandRecord? { data.withLock { $0.commands[id] } }

    public func markDelivered(commandIDs: [String], at: Int64) -> Set<String> {
        data.withLock { d in
            var marked = Set<String>()
            for id in commandIDs {
                guard var c = d.commands[id], c.results == nil, c.state.isOpen else { continue }
                c.state = .delivered
                c.modifiedAt = at
                d.commands[id] = c
                marked.insert(id)
            }
            return marked
        }
    }

    public func recordResults(commandID: String, results: String, state: CommandState, at: Int64, swept: Bool)
        -> Bool
    {
        data.withLock { d in
            guard var c = d.commands[commandID], c.results == nil else { return false }
            c.results = results
            c.state = state
            c.modifiedAt = at
            d.commands[commandID] = c
            if swept { d.notifyDue[commandID] = at + StoreRules.notificationGraceMs }
            return true
        }
    }

    public func markUndelivered(commandID: String, at: Int64) -> Bool {
        data.withLock { d in
            guard var c = d.commands[commandID], c.results == nil, c.state == .delivered else { return false }
            c.state = .sending
            c.modifiedAt = at
            d.commands[commandID] = c
            return true
        }
    }

    public func markNotified(commandIDs: [String]) -> Int {
        data.withLock { d in commandIDs.reduce(0) { $0 + (d.notifyDue.removeValue(forKey: $1) != nil ? 1 : 0) } }
    }

    public func claimUnnotified(now: Int64, leaseMs: Int64, limit: Int) -> [CommandRecord] {
        data.withLock { d in
            let due = d.notifyDue.filter { $0.value <= now }.sorted { ($0.value, $0.key) < ($1.value, $1.key) }
                .prefix(max(0, limit))
            for (id, _) in due { d.notifyDue[id] = now + max(0, leaseMs) }
            return due.compactMap { d.commands[$0.key] }.sorted { $0.seq < $1.seq }
        }
    }

    public func commands(thingID: String, afterSeq: Int64, limit: Int) -> [CommandRecord] {
        data.withLock { d in
            let all = d.commands
            return Array(
                d.commandOrder.compactMap { all[$0] }
                    .filter { $0.thingID == thingID && $0.seq > afterSeq }.prefix(max(0, limit)))
        }
    }

    public func unansweredCommands(thingID: String) -> [CommandRecord] {
        data.withLock { d in
            d.commandOrder.compactMap { d.commands[$0] }.filter { $0.thingID == thingID && $0.results == nil }
        }
    }

    // MARK: command lifecycle

    public func setCommandExpiry(commandID: String, expiresAt: Int64) -> Bool {
        data.withLock { d in
            guard d.commands[commandID] != nil else { return false }
            d.commands[commandID]?.expiresAt = expiresAt
            return true
        }
    }

    public func endCommand(commandID: String, state: CommandState, reason: String, at: Int64, swept: Bool) -> Bool {
        data.withLock { d in
            guard var c = d.commands[commandID], c.results == nil, c.state.isOpen else { return false }
            c.state = state
            c.endReason = reason
            c.modifiedAt = at
            d.commands[commandID] = c
            if swept { d.notifyDue[commandID] = at + StoreRules.notificationGraceMs }
            return true
        }
    }

    public func commandsDueToEnd(now: Int64, sentBefore: Int64?, deliveredBefore: Int64?, limit: Int)
        -> [CommandRecord]
    {
        data.withLock { d in
            let all = d.commands
            let due = d.commandOrder.lazy.compactMap { all[$0] }.filter { c in
                guard c.results == nil, c.state.isOpen else { return false }
                if let e = c.expiresAt, e <= now { return true }
                if c.state == .sending, let b = sentBefore { return c.createdAt <= b }
                if c.state == .delivered, let b = deliveredBefore { return c.modifiedAt <= b }
                return false
            }
            return Array(due.prefix(max(0, limit)))
        }
    }

    // MARK: users, groups, app installations

    public func createUser(loginName: String?, passwordHash: String?) -> UserRecord? {
        data.withLock { d in
            if let loginName, d.usersByLogin[loginName] != nil { return nil }
            var u = UserRecord(
                userID: HubIDs.userID(), loginName: loginName, passwordHash: passwordHash,
                accessToken: "", createdAt: Platform.epochMs())
            d.users[u.userID] = u
            if let loginName { d.usersByLogin[loginName] = u.userID }
            u.accessToken = issue(&d, kind: .user, subjectID: u.userID)
            return u
        }
    }

    public func user(id: String) -> UserRecord? { data.withLock { $0.users[id] } }
    public func user(accessToken: String) -> UserRecord? {
        data.withLock { d in subject(d, kind: .user, token: accessToken).flatMap { d.users[$0] } }
    }
    public func user(loginName: String) -> UserRecord? {
        data.withLock { d in d.usersByLogin[loginName].flatMap { d.users[$0] } }
    }

    public func setPasswordHash(userID: String, _ hash: String) -> Bool {
        data.withLock { d in
            guard d.users[userID] != nil else { return false }
            d.users[userID]!.passwordHash = hash
            return true
        }
    }

    public func createGroup(name: String, ownerUserID: String, members: [String]) -> GroupRecord? {
        data.withLock { d in
            let g = GroupRecord(groupID: HubIDs.groupID(), name: name, ownerUserID: ownerUserID, members: members)
            d.groups[g.groupID] = g
            return g
        }
    }

    public func group(id: String) -> GroupRecord? { data.withLock { $0.groups[id] } }

    public func groups(ofUser userID: String) -> [GroupRecord] {
        data.withLock { d in
            d.groups.values.filter { $0.ownerUserID == userID || $0.members.contains(userID) }
                .sorted { $0.groupID < $1.groupID }
        }
    }

    public func addAppInstallation(userID: String, kind: AppInstallation.Kind, target: String?) -> AppInstallation? {
        data.withLock { d in
            let id = HubIDs.installationID()
            let i = AppInstallation(
                installationID: id, userID: userID, kind: kind,
                target: StoreRules.installationTarget(kind: kind, id: id, given: target),
                createdAt: Platform.epochMs())
            d.installations[id] = i
            d.installationsAdded += 1
            d.installationRank[id] = d.installationsAdded
            return i
        }
    }

    public func appInstallation(id: String) -> AppInstallation? { data.withLock { $0.installations[id] } }

    public func appInstallations(userID: String) -> [AppInstallation] {
        data.withLock { d in
            d.installations.values.filter { $0.userID == userID }.sorted {
                ($0.createdAt, d.installationRank[$0.installationID] ?? 0)
                    < ($1.createdAt, d.installationRank[$1.installationID] ?? 0)
            }
        }
    }

    public func notificationInstallations(userID: String, issuingInstallationID: String?) -> [AppInstallation] {
        guard let u = user(id: userID) else { return [] }
        let all = appInstallations(userID: userID)
        return u.pseudo ? all.filter { $0.installationID == issuingInstallationID } : all
    }

    public func countAppInstallations(kind: AppInstallation.Kind) -> Int {
        data.withLock { d in d.installations.values.filter { $0.kind == kind }.count }
    }

    public func deleteUser(id: String) -> [AppInstallation]? {
        data.withLock { d in
            guard let u = d.users.removeValue(forKey: id) else { return nil }
            if let l = u.loginName, d.usersByLogin[l] == id { d.usersByLogin[l] = nil }
            let mine = d.installations.values.filter { $0.userID == id }
                .sorted { (d.installationRank[$0.installationID] ?? 0) < (d.installationRank[$1.installationID] ?? 0) }
            for i in mine {
                d.installations[i.installationID] = nil
                d.installationRank[i.installationID] = nil
            }
            d.tokens = d.tokens.filter { !($0.value.kind == .user && $0.value.subjectID == id) }
            for (tid, t) in d.things where t.owners.contains("user:" + id) {
                d.things[tid]!.owners.removeAll { $0 == "user:" + id }
            }
            for (gid, g) in d.groups where g.members.contains(id) {
                d.groups[gid]!.members.removeAll { $0 == id }
            }
            return mine
        }
    }

    public func removeAppInstallation(id: String, userID: String) -> Bool {
        data.withLock { d in
            guard d.installations[id]?.userID == userID else { return false }
            d.installations[id] = nil
            d.installationRank[id] = nil
            return true
        }
    }

    // MARK: server triggers

    public func insertTrigger(_ trigger: ServerTriggerRecord) -> Bool {
        data.withLock { d in
            guard d.triggers[trigger.triggerID] == nil else { return false }
            d.triggers[trigger.triggerID] = trigger
            d.triggerOrder.append(trigger.triggerID)
            return true
        }
    }

    public func trigger(id: String) -> ServerTriggerRecord? { data.withLock { $0.triggers[id] } }

    public func triggers(thingID: String) -> [ServerTriggerRecord] {
        data.withLock { d in d.triggerOrder.compactMap { d.triggers[$0] }.filter { $0.thingID == thingID } }
    }

    public func allTriggers() -> [ServerTriggerRecord] {
        data.withLock { d in d.triggerOrder.compactMap { d.triggers[$0] } }
    }

    public func updateTrigger(id: String, definition: String) -> Bool {
        data.withLock { d in
            guard d.triggers[id] != nil else { return false }
            d.triggers[id]!.definition = definition
            d.triggers[id]!.lastMatch = nil
            return true
        }
    }

    public func setTriggerEnabled(id: String, enabled: Bool) -> Bool {
        data.withLock { d in
            guard d.triggers[id] != nil else { return false }
            d.triggers[id]!.enabled = enabled
            return true
        }
    }

    public func claimTrigger(id: String) -> Bool {
        data.withLock { d in
            guard d.triggers[id]?.enabled == true else { return false }
            d.triggers[id]!.enabled = false
            return true
        }
    }

    /// One hub uses a memory store.
    public func holdsScheduleLease() -> Bool { true }

    public func setTriggerLastMatch(id: String, lastMatch: Bool?) -> Bool {
        data.withLock { d in
            guard d.triggers[id] != nil else { return false }
            d.triggers[id]!.lastMatch = lastMatch
            return true
        }
    }

    public func deleteTrigger(id: String) -> Bool {
        data.withLock { d in
            guard d.triggers.removeValue(forKey: id) != nil else { return false }
            d.triggerOrder.removeAll { $0 == id }
            return true
        }
    }

    // MARK: thing automation

    public func automation(thingID: String) -> ThingAutomation? { data.withLock { $0.automations[thingID] } }

    public func saveAutomation(thingID: String, config: String) -> ThingAutomation? {
        data.withLock { d in
            guard d.things[thingID] != nil else { return nil }
            let a = ThingAutomation(
                thingID: thingID, config: config,
                version: (d.automations[thingID]?.version ?? 0) + 1)
            d.automations[thingID] = a
            return a
        }
    }

    public func saveAutomationReport(thingID: String, report: String) -> Bool {
        data.withLock { d in
            guard d.automations[thingID] != nil else { return false }
            d.automations[thingID]?.report = report
            return true
        }
    }
}
