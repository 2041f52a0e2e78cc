// SPDX-License-Identifier: Apache-2.0

import Foundation
import Testing
import ThingIF
@testable import ThingIFHub

private func withEachStore(_ factory: StoreFactory, _ body: (HubStore) throws -> Void) throws {
    let (store, cleanup) = try factory.make(.fastForTests, StateRetention())
    defer { cleanup() }
    try body(store)
}

private func registered(
    _ s: HubStore, _ vendor: String, password: String = "pw", type: String? = nil, layout: LayoutPosition?
) -> Result<ThingRecord, RegisterError> {
    s.registerThing(
        vendorThingID: vendor, password: password, thingType: type, firmwareVersion: nil, dataGroupingInterval: nil,
        layoutPosition: layout)
}

private func thing(_ r: Result<ThingRecord, RegisterError>) throws -> ThingRecord {
    switch r {
    case .success(let t): return t
    case .failure(let e): throw HarnessError("registration failed: \(e)")
    }
}

private func gateway(_ s: HubStore, _ vendor: String) throws -> ThingRecord {
    try thing(registered(s, vendor, type: "Gateway", layout: .gateway))
}

private func onboard(
    _ s: HubStore, _ gateway: String, _ vendor: String, password: String = "np", type: String? = "Lamp",
    firmware: String? = nil, owners: [String] = ["user:u1"], max: Int = 100
) -> EndNodeOnboarding {
    s.onboardEndNode(
        gatewayThingID: gateway, vendorThingID: vendor, password: password, thingType: type,
        firmwareVersion: firmware, owners: owners, maxEndNodes: max)
}

/// The end node onboarded, or what the store answered instead.
private func endNode(_ r: EndNodeOnboarding, created: Bool) throws -> ThingRecord {
    guard case .onboarded(let t, let c) = r else { throw HarnessError("not onboarded: \(r)") }
    guard c == created else { throw HarnessError("created \(c), expected \(created)") }
    return t
}

/// A refusal as text ("onboarded" for none), to compare.
private func outcome(_ r: EndNodeOnboarding) -> String {
    if case .onboarded = r { return "onboarded" }
    return "\(r)"
}

private func registerError(_ r: Result<ThingRecord, RegisterError>) -> RegisterError? {
    if case .failure(let e) = r { return e }
    return nil
}

/// Every page of a gateway's end nodes, `limit` at a time.
private func allPages(_ s: HubStore, _ gateway: String, limit: Int) throws -> [[ThingRecord]] {
    var pages: [[ThingRecord]] = []
    var after: EndNodeCursor?
    repeat {
        let page = try #require(s.endNodes(gatewayThingID: gateway, after: after, limit: limit))
        pages.append(page.endNodes)
        after = page.next
        if pages.count > 100 { throw HarnessError("the pages do not end") }
    } while after != nil
    return pages
}

extension StoreConformanceTests {
    @Test(
        "Registering with a layout: kept from the first registration; another one named is refused, none named keeps it",
        arguments: StoreFactory.all)
    func registerWithLayout(_ factory: StoreFactory) throws {
        try withEachStore(factory) { s in
            // None named: STANDALONE, by every read.
            let plain = try thing(registered(s, "AC-L", layout: nil))
            #expect(plain.layoutPosition == .standalone && plain.gatewayThingID == nil)
            #expect(s.thing(id: plain.thingID)?.layoutPosition == .standalone)
            #expect(try thing(registered(s, "AC-L", layout: .standalone)).thingID == plain.thingID)
            #expect(registerError(registered(s, "AC-L", layout: .gateway)) == .wrongLayout)

            let g = try gateway(s, "GW-L")
            #expect(g.layoutPosition == .gateway && g.gatewayThingID == nil)
            #expect(s.thing(id: g.thingID)?.layoutPosition == .gateway)
            #expect(s.thing(vendorThingID: "GW-L")?.layoutPosition == .gateway)
            #expect(s.thing(accessToken: g.accessToken)?.layoutPosition == .gateway)
            #expect(s.addInstallation(thingID: g.thingID, installationID: "gi", mqttTopic: "gtopic"))
            #expect(s.thing(mqttTopic: "gtopic")?.layoutPosition == .gateway)
            #expect(s.addOwner(thingID: g.thingID, owner: "user:u1"))
            #expect(s.things(ownedBy: ["user:u1"]).map(\.layoutPosition) == [.gateway])

            // Again: none named keeps GATEWAY (Kii's owner calls often omit
            // it), the same named is served, another is refused.
            let again = try thing(registered(s, "GW-L", layout: nil))
            #expect(again.thingID == g.thingID && again.layoutPosition == .gateway)
            #expect(try thing(registered(s, "GW-L", layout: .gateway)).layoutPosition == .gateway)
            #expect(
                registerError(
                    s.registerThing(
                        vendorThingID: "GW-L", password: "pw", thingType: nil, firmwareVersion: "9",
                        dataGroupingInterval: nil, layoutPosition: .standalone)) == .wrongLayout)
            // A refusal writes nothing.
            #expect(s.thing(id: g.thingID)?.firmwareVersion == nil)
            #expect(s.thing(id: g.thingID)?.layoutPosition == .gateway)
            // The password and the type are checked before the layout.
            #expect(registerError(registered(s, "GW-L", password: "bad", layout: .standalone)) == .wrongPassword)
            #expect(registerError(registered(s, "GW-L", type: "Lamp", layout: .standalone)) == .wrongType)

            // ENDNODE is never this call's: an end node names its gateway.
            #expect(registerError(registered(s, "EN-L", layout: .endNode)) == .wrongLayout)
            #expect(s.thing(vendorThingID: "EN-L") == nil)
            #expect(registerError(registered(s, "GW-L", layout: .endNode)) == .wrongLayout)
        }
    }

    @Test(
        "Onboarding an end node: an ENDNODE thing of the gateway with the owners given; again with its password, the same one",
        arguments: StoreFactory.all)
    func onboardEndNode(_ factory: StoreFactory) throws {
        try withEachStore(factory) { s in
            let g = try gateway(s, "GW-1")
            let e = try endNode(onboard(s, g.thingID, "LAMP-1", firmware: "1.0"), created: true)
            #expect(e.thingID.hasPrefix("th.") && e.thingID != g.thingID)
            #expect(e.vendorThingID == "LAMP-1" && e.thingType == "Lamp" && e.firmwareVersion == "1.0")
            #expect(e.layoutPosition == .endNode && e.gatewayThingID == g.thingID)
            #expect(e.owners == ["user:u1"])
            let hash = try #require(e.passwordHash)
            #expect(hash.hasPrefix("pbkdf2-sha256$1000$") && PasswordHash.verify("np", hash))
            #expect(e.accessToken.count == 40)
            #expect(s.thing(accessToken: e.accessToken)?.thingID == e.thingID)
            // Every read gives the layout and the gateway.
            let read = try #require(s.thing(id: e.thingID))
            #expect(read.layoutPosition == .endNode && read.gatewayThingID == g.thingID && read.accessToken == "")
            #expect(s.thing(vendorThingID: "LAMP-1")?.gatewayThingID == g.thingID)
            #expect(s.thing(accessToken: e.accessToken)?.gatewayThingID == g.thingID)
            // The read that tells a missing thing from a failed store (a gateway's requests).
            guard case .found(let byID) = s.thingRead(id: e.thingID) else {
                Issue.record("thingRead(id:) did not find \(e.thingID)")
                return
            }
            #expect(byID.layoutPosition == .endNode && byID.gatewayThingID == g.thingID && byID.owners == ["user:u1"])
            if case .notFound = s.thingRead(id: "th.none") {} else { Issue.record("thingRead(id:) found th.none") }
            #expect(s.things(ownedBy: ["user:u1"]).map(\.thingID) == [e.thingID])
            #expect(s.endNodeCount(gatewayThingID: g.thingID) == 1)
            // The gateway is no end node of anything.
            #expect(s.thing(id: g.thingID)?.gatewayThingID == nil)
            #expect(s.endNodeCount(gatewayThingID: e.thingID) == 0)

            // Again, with the same password: the same thing, a new token (the
            // old one stays), owners added, firmware updated, a nil type
            // matching; not counted again.
            let again = try endNode(
                onboard(s, g.thingID, "LAMP-1", type: nil, firmware: "1.1", owners: ["user:u1", "group:g1"]),
                created: false)
            #expect(again.thingID == e.thingID && again.createdAt == e.createdAt)
            #expect(again.accessToken.count == 40 && again.accessToken != e.accessToken)
            #expect(s.thing(accessToken: e.accessToken)?.thingID == e.thingID)
            #expect(s.thing(accessToken: again.accessToken)?.thingID == e.thingID)
            #expect(again.owners == ["user:u1", "group:g1"])
            #expect(again.thingType == "Lamp" && again.firmwareVersion == "1.1")
            #expect(again.layoutPosition == .endNode && again.gatewayThingID == g.thingID)
            #expect(s.endNodeCount(gatewayThingID: g.thingID) == 1)

            // A type set later, when the first onboarding gave none.
            let untyped = try endNode(onboard(s, g.thingID, "LAMP-2", type: nil, owners: []), created: true)
            #expect(untyped.thingType == nil && untyped.owners.isEmpty)
            #expect(try endNode(onboard(s, g.thingID, "LAMP-2", type: "Lamp"), created: false).thingType == "Lamp")

            // An end node's credentials register nothing, named a layout or
            // not (an owner adds itself with the end-node forms, which name
            // the gateway): refused, and it stays the gateway's end node.
            #expect(registerError(registered(s, "LAMP-1", password: "np", layout: nil)) == .wrongLayout)
            #expect(registerError(registered(s, "LAMP-1", password: "np", layout: .standalone)) == .wrongLayout)
            let kept = try #require(s.thing(vendorThingID: "LAMP-1"))
            #expect(kept.thingID == e.thingID && kept.layoutPosition == .endNode && kept.gatewayThingID == g.thingID)
        }
    }

    @Test(
        "Onboarding an end node is refused, writing nothing: no gateway, not a gateway, wrong password, no end node, another gateway's, another type",
        arguments: StoreFactory.all)
    func endNodeRefusals(_ factory: StoreFactory) throws {
        try withEachStore(factory) { s in
            let g = try gateway(s, "GW-A")
            let other = try gateway(s, "GW-B")
            let plain = try thing(registered(s, "AC-1", layout: nil))
            let e = try endNode(onboard(s, g.thingID, "LAMP-A"), created: true)
            let theirs = try endNode(onboard(s, other.thingID, "LAMP-B"), created: true)

            #expect(outcome(onboard(s, "th.nope", "LAMP-NEW")) == "noGateway")
            #expect(outcome(onboard(s, plain.thingID, "LAMP-NEW")) == "notAGateway")
            #expect(outcome(onboard(s, e.thingID, "LAMP-NEW")) == "notAGateway")
            #expect(s.thing(vendorThingID: "LAMP-NEW") == nil)
            // The gateway is checked before the vendorThingID.
            #expect(outcome(onboard(s, "th.nope", "LAMP-A", password: "bad")) == "noGateway")

            #expect(outcome(onboard(s, g.thingID, "LAMP-A", password: "bad", owners: ["user:x"])) == "wrongPassword")
            // The password before what the thing is: a stranger learns nothing of it.
            #expect(outcome(onboard(s, g.thingID, "AC-1", password: "bad")) == "wrongPassword")
            #expect(outcome(onboard(s, g.thingID, "LAMP-B", password: "bad")) == "wrongPassword")

            // A standalone thing, a gateway (itself included), another gateway's end node.
            #expect(outcome(onboard(s, g.thingID, "AC-1", password: "pw")) == "notAnEndNode")
            #expect(outcome(onboard(s, g.thingID, "GW-A", password: "pw")) == "notAnEndNode")
            #expect(outcome(onboard(s, g.thingID, "GW-B", password: "pw")) == "notAnEndNode")
            #expect(
                outcome(onboard(s, g.thingID, "LAMP-B", owners: ["user:x"]))
                    == outcome(.otherGateway(other.thingID)))
            #expect(outcome(onboard(s, g.thingID, "LAMP-A", type: "Sensor", owners: ["user:x"])) == "wrongType")

            // Nothing was written by any of them.
            for (t, owners) in [(plain, [String]()), (e, ["user:u1"]), (theirs, ["user:u1"])] {
                let read = try #require(s.thing(id: t.thingID))
                #expect(read.owners == owners && read.gatewayThingID == t.gatewayThingID)
                #expect(read.layoutPosition == t.layoutPosition && read.thingType == t.thingType)
            }
            #expect(s.endNodeCount(gatewayThingID: g.thingID) == 1)
            #expect(s.endNodeCount(gatewayThingID: other.thingID) == 1)
            #expect(s.thing(id: plain.thingID)?.layoutPosition == .standalone)
        }
    }

    @Test(
        "The cap per gateway: a new end node past it is refused, one onboarded again is not; concurrent onboardings stay under it",
        arguments: StoreFactory.all)
    func endNodeCap(_ factory: StoreFactory) throws {
        try withEachStore(factory) { s in
            let g = try gateway(s, "GW-CAP")
            let other = try gateway(s, "GW-FREE")
            let first = try endNode(onboard(s, g.thingID, "EN-1", max: 2), created: true)
            _ = try endNode(onboard(s, g.thingID, "EN-2", max: 2), created: true)
            #expect(outcome(onboard(s, g.thingID, "EN-3", max: 2)) == "tooManyEndNodes")
            #expect(s.thing(vendorThingID: "EN-3") == nil)
            #expect(s.endNodeCount(gatewayThingID: g.thingID) == 2)
            #expect(s.endNodeTotal() == 2, "the gateways themselves are not end nodes")
            // Idempotent at the cap; the cap is the gateway's own.
            #expect(try endNode(onboard(s, g.thingID, "EN-1", max: 2), created: false).thingID == first.thingID)
            _ = try endNode(onboard(s, other.thingID, "EN-3", max: 2), created: true)
            #expect(outcome(onboard(s, g.thingID, "EN-4", max: 0)) == "tooManyEndNodes")
            // A removed end node makes room.
            #expect(s.endNodeTotal() == 3, "of every gateway")
            #expect(s.deleteThing(id: first.thingID))
            #expect(s.endNodeCount(gatewayThingID: g.thingID) == 1)
            #expect(s.endNodeTotal() == 2)
            _ = try endNode(onboard(s, g.thingID, "EN-4", max: 2), created: true)

            // Eight onboardings at once under a cap of three: three pass.
            let racing = try gateway(s, "GW-RACE")
            let outcomes = Locked<[String]>([])
            DispatchQueue.concurrentPerform(iterations: 8) { i in
                let r = onboard(s, racing.thingID, "EN-RACE-\(i)", max: 3)
                outcomes.withLock { $0.append(outcome(r)) }
            }
            let all = outcomes.withLock { $0 }
            #expect(all.filter { $0 == "onboarded" }.count == 3, "\(all)")
            #expect(all.filter { $0 == "tooManyEndNodes" }.count == 5, "\(all)")
            #expect(s.endNodeCount(gatewayThingID: racing.thingID) == 3)
            #expect(s.endNodeTotal() == 6)
        }
    }

    @Test(
        "A gateway's end nodes, paged in onboarding order: every one once, whatever the page size; only its own",
        arguments: StoreFactory.all)
    func endNodePages(_ factory: StoreFactory) throws {
        try withEachStore(factory) { s in
            let g = try gateway(s, "GW-P")
            let other = try gateway(s, "GW-Q")
            let plain = try thing(registered(s, "AC-P", layout: nil))
            var made: [ThingRecord] = []
            for i in 0..<7 {
                made.append(try endNode(onboard(s, g.thingID, "EN-P\(i)", owners: ["user:u\(i)"]), created: true))
            }
            _ = try endNode(onboard(s, other.thingID, "EN-Q"), created: true)
            // Onboarding order: by createdAt, thingID on the same millisecond.
            let expected = made.sorted { ($0.createdAt, $0.thingID) < ($1.createdAt, $1.thingID) }.map(\.thingID)

            let whole = try #require(s.endNodes(gatewayThingID: g.thingID, after: nil, limit: 100))
            #expect(whole.endNodes.map(\.thingID) == expected)
            #expect(whole.next == nil)
            // Whole records.
            let firstRead = try #require(whole.endNodes.first { $0.thingID == made[0].thingID })
            #expect(firstRead.owners == ["user:u0"] && firstRead.vendorThingID == "EN-P0")
            #expect(firstRead.gatewayThingID == g.thingID && firstRead.layoutPosition == .endNode)
            #expect(whole.endNodes.allSatisfy { $0.accessToken.isEmpty })

            for limit in [1, 2, 3, 6, 7] {
                let pages = try allPages(s, g.thingID, limit: limit)
                #expect(pages.flatMap { $0 }.map(\.thingID) == expected, "limit \(limit)")
                #expect(pages.dropLast().allSatisfy { $0.count == limit }, "limit \(limit)")
                #expect(pages.count == (7 + limit - 1) / limit, "limit \(limit): no empty last page")
            }
            // Less than one is one.
            #expect(s.endNodes(gatewayThingID: g.thingID, after: nil, limit: 0)?.endNodes.count == 1)
            #expect(s.endNodes(gatewayThingID: g.thingID, after: nil, limit: -5)?.endNodes.count == 1)

            // The list changing between pages: the one a cursor names is
            // removed, one is added; the next page goes on from the place.
            let page1 = try #require(s.endNodes(gatewayThingID: g.thingID, after: nil, limit: 3))
            let cursor = try #require(page1.next)
            #expect(cursor == EndNodeCursor(page1.endNodes[2]))
            #expect(s.deleteThing(id: cursor.thingID))
            let added = try endNode(onboard(s, g.thingID, "EN-P7"), created: true)
            let rest = try #require(s.endNodes(gatewayThingID: g.thingID, after: cursor, limit: 100))
            // (The added one may share the last one's millisecond: then thingIDs order them.)
            let after = (made.filter { expected.dropFirst(3).contains($0.thingID) } + [added])
                .sorted { ($0.createdAt, $0.thingID) < ($1.createdAt, $1.thingID) }.map(\.thingID)
            #expect(rest.endNodes.map(\.thingID) == after)
            #expect(Set(after) == Set(expected.dropFirst(3) + [added.thingID]))
            #expect(rest.next == nil)

            // Nobody else's: another gateway's, a standalone thing, an end
            // node, an unknown thingID have none.
            #expect(s.endNodes(gatewayThingID: other.thingID, after: nil, limit: 10)?.endNodes.count == 1)
            for id in [plain.thingID, made[1].thingID, "th.nope"] {
                let none = try #require(s.endNodes(gatewayThingID: id, after: nil, limit: 10))
                #expect(none.endNodes.isEmpty && none.next == nil)
                #expect(s.endNodeCount(gatewayThingID: id) == 0)
            }
        }
    }

    @Test(
        "Deleting a gateway deletes its end nodes with everything of theirs, certificates revoked; others stay",
        arguments: StoreFactory.all)
    func deleteGateway(_ factory: StoreFactory) throws {
        try withEachStore(factory) { s in
            let g = try gateway(s, "GW-DEL")
            let kept = try gateway(s, "GW-KEEP")
            let plain = try thing(registered(s, "AC-DEL", layout: nil))
            var ends: [ThingRecord] = []
            for (n, gw) in [g, g, kept].enumerated() {
                let e = try endNode(onboard(s, gw.thingID, "EN-DEL-\(n)"), created: true)
                ends.append(e)
                #expect(s.applyState(thingID: e.thingID, method: "PUT", upload: #"{"n":\#(n)}"#, at: 1000) != nil)
                #expect(s.insertCommand(endNodeCommand("cmd-en-\(n)", thing: e.thingID)) != nil)
                #expect(
                    s.insertTrigger(
                        ServerTriggerRecord(
                            triggerID: "trg-en-\(n)", thingID: e.thingID, definition: "{}", createdAt: 5)))
                #expect(s.saveAutomation(thingID: e.thingID, config: "{}") != nil)
                #expect(
                    s.recordCertificate(thingID: e.thingID, installationID: "gi", serial: "0e\(n)", notAfter: .max))
            }
            #expect(s.addInstallation(thingID: g.thingID, installationID: "gi", mqttTopic: "gw-del-topic"))
            #expect(s.recordCertificate(thingID: g.thingID, installationID: "gi", serial: "0a", notAfter: .max))

            // An end node removed alone leaves its gateway and the others.
            let single = try endNode(onboard(s, g.thingID, "EN-DEL-X"), created: true)
            #expect(s.deleteThing(id: single.thingID))
            #expect(s.thing(id: g.thingID) != nil && s.endNodeCount(gatewayThingID: g.thingID) == 2)

            #expect(s.deleteThing(id: g.thingID))
            for e in [g, ends[0], ends[1]] {
                #expect(s.thing(id: e.thingID) == nil)
                #expect(s.thing(vendorThingID: e.vendorThingID ?? "") == nil)
                #expect(s.thing(accessToken: e.accessToken) == nil)
                #expect(s.issueToken(kind: .thing, subjectID: e.thingID) == nil)
            }
            for n in 0..<2 {
                #expect(s.stateHistory(thingID: ends[n].thingID, from: 0, to: .max).isEmpty)
                #expect(s.command(id: "cmd-en-\(n)") == nil && s.trigger(id: "trg-en-\(n)") == nil)
                #expect(s.automation(thingID: ends[n].thingID) == nil)
            }
            #expect(s.thing(mqttTopic: "gw-del-topic") == nil)
            #expect(s.revokedCertificates(now: 1)?.map(\.serial) == ["0a", "0e0", "0e1"])
            #expect(s.endNodeCount(gatewayThingID: g.thingID) == 0)
            #expect(s.endNodes(gatewayThingID: g.thingID, after: nil, limit: 10)?.endNodes.isEmpty == true)
            #expect(!s.deleteThing(id: g.thingID))

            // The other gateway, its end node and a standalone thing keep all of theirs.
            #expect(s.thing(id: kept.thingID) != nil && s.thing(id: plain.thingID) != nil)
            let k = try #require(s.thing(id: ends[2].thingID))
            #expect(k.gatewayThingID == kept.thingID && k.state == #"{"n":2}"#)
            #expect(s.command(id: "cmd-en-2") != nil && s.trigger(id: "trg-en-2") != nil)
            #expect(s.endNodeCount(gatewayThingID: kept.thingID) == 1)

            // The vendorThingIDs are free: onboarded again, new things.
            let newGateway = try gateway(s, "GW-DEL")
            #expect(newGateway.thingID != g.thingID)
            let reborn = try endNode(onboard(s, newGateway.thingID, "EN-DEL-0"), created: true)
            #expect(reborn.thingID != ends[0].thingID && reborn.state == nil)
        }
    }
}

private func endNodeCommand(_ id: String, thing: String) -> CommandRecord {
    CommandRecord(
        commandID: id, thingID: thing, issuer: "user:u1", issuingInstallationID: nil,
        payload: #"{"commandID":"\#(id)"}"#, createdAt: 1000, modifiedAt: 1000)

}

extension StoreConformanceTests {
    @Test(
        "A gateway's token reads one of its end nodes' commands with it, in one statement on SQL; never another's",
        arguments: StoreFactory.all)
    func gatewayReadsEndNodeCommand(_ factory: StoreFactory) throws {
        try withEachStore(factory) { s in
            let fast = FastPaths(s)  // as the hub calls it
            let g = try gateway(s, "GW-JOIN-1")
            let other = try gateway(s, "GW-JOIN-2")
            let plain = try thing(registered(s, "AC-JOIN-3", layout: nil))
            let e = try endNode(onboard(s, g.thingID, "LAMP-J1"), created: true)
            let f = try endNode(onboard(s, other.thingID, "LAMP-J2"), created: true)
            _ = try #require(s.insertCommand(endNodeCommand("cj-e", thing: e.thingID)))
            _ = try #require(s.insertCommand(endNodeCommand("cj-f", thing: f.thingID)))
            _ = try #require(s.insertCommand(endNodeCommand("cj-g", thing: g.thingID)))
            _ = try #require(s.insertCommand(endNodeCommand("cj-p", thing: plain.thingID)))
            // The gateway's own command, and its end node's: each with its thingID.
            let own = try #require(fast.thing(accessToken: g.accessToken, command: "cj-g").value)
            #expect(own.thing.thingID == g.thingID && own.command?.thingID == g.thingID)
            let its = try #require(fast.thing(accessToken: g.accessToken, command: "cj-e").value)
            #expect(its.thing.thingID == g.thingID && its.command?.thingID == e.thingID)
            #expect(its.command?.commandID == "cj-e")
            // Another gateway's end node's, or a standalone thing's: none.
            #expect(try #require(fast.thing(accessToken: g.accessToken, command: "cj-f").value).command == nil)
            #expect(try #require(fast.thing(accessToken: g.accessToken, command: "cj-p").value).command == nil)
            // An end node's own token reads its own only; a standalone thing's token no end node's.
            let selfRead = try #require(fast.thing(accessToken: e.accessToken, command: "cj-e").value)
            #expect(selfRead.command?.thingID == e.thingID)
            #expect(try #require(fast.thing(accessToken: e.accessToken, command: "cj-g").value).command == nil)
            #expect(try #require(fast.thing(accessToken: plain.accessToken, command: "cj-e").value).command == nil)
            // Once the end node is gone, its gateway reads none of its commands.
            #expect(s.deleteThing(id: e.thingID))
            #expect(try #require(fast.thing(accessToken: g.accessToken, command: "cj-e").value).command == nil)
        }
    }
}
