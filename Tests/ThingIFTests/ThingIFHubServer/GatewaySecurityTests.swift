// SPDX-License-Identifier: Apache-2.0

import Foundation
import Testing
import ThingIF
import ThingIFHub

/// The end-node twins of the attack tests (docs/GATEWAYS.md §6.2) that the
/// owner's side over REST can meet: a stranger on another owner's gateway,
/// the per-gateway cap under concurrent onboardings, budgets spent after
/// authorisation, and guessing an end node's password. Each makes the
/// attack, checks that it fails, and that the legitimate path still works.
@Suite("Gateway security (owner's side)", .offPool)
struct GatewaySecurityTests {
    @Test(
        "endNodeSecondOwner: a stranger lists, reads, removes, onboards onto, commands and reads an end node: 404, nothing changed"
    )
    func endNodeSecondOwner() async throws {
        try await withHubAPI { e in
            let (uid, token) = try await e.user()
            let (_, stranger) = try await e.user()
            let gw = try await EndNodeOwnerTests.gateway(e, "GW-SEC-1", owner: "user:\(uid)", token: token)
            let (lamp, _) = try await EndNodeOwnerTests.endNode(e, gateway: gw, "LAMP-SEC-1", uid: uid, token: token)
            let list = "\(e.thingIF)/things/\(gw)/end-nodes"
            let onto =
                #"{"gatewayThingID":"\#(gw)","endNodeVendorThingID":"LAMP-SEC-2","endNodePassword":"pw","owner":"user:\#(uid)"}"#
            for (method, path, body) in [
                ("GET", list, nil), ("GET", "\(list)/\(lamp)", nil), ("DELETE", "\(list)/\(lamp)", nil),
                ("POST", "\(e.thingIF)/onboardings", Data(onto.utf8))
            ] as [(String, String, Data?)] {
                let r = try await e.call(
                    method, path, token: stranger, body: body, contentType: EndNodeOwnerTests.byThingID)
                #expect(r.status == 404 && r.errorCode == "THING_NOT_FOUND", "\(method) \(path): \(r.status) \(r.text)")
            }
            // The end node's own resources are a thing's: TARGET_NOT_FOUND for a stranger.
            let command = try await e.call(
                "POST", "\(e.target(lamp))/commands", token: stranger,
                json: ["schema": "Lamp", "schemaVersion": 1, "actions": [["turnPower": ["power": true]]]])
            #expect(command.status == 404 && command.errorCode == "TARGET_NOT_FOUND", "\(command.text)")
            let state = try await e.get("\(e.target(lamp))/states", token: stranger)
            #expect(state.status == 404 && state.errorCode == "TARGET_NOT_FOUND", "\(state.text)")
            // Nothing changed, and the owner's calls still work.
            #expect(e.hub.store.thing(vendorThingID: "LAMP-SEC-2") == nil)
            #expect(e.hub.store.commands(thingID: lamp, afterSeq: 0, limit: 10).isEmpty)
            let mine = try await e.get("\(list)/\(lamp)", token: token)
            #expect(mine.status == 200 && mine.string("thingID") == lamp, "\(mine.status) \(mine.text)")
        }
    }

    @Test("endNodeCreationCaps: concurrent onboardings onto one gateway never pass maxEndNodesPerGateway")
    func endNodeCreationCaps() async throws {
        try await withHubAPI(options: { $0.limits.maxEndNodesPerGateway = 3 }) { e in
            let (uid, token) = try await e.user()
            let gw = try await EndNodeOwnerTests.gateway(e, "GW-SEC-2", owner: "user:\(uid)", token: token)
            let statuses = try await withThrowingTaskGroup(of: Int.self) { group in
                for i in 0..<10 {
                    group.addTask {
                        let body =
                            #"{"gatewayThingID":"\#(gw)","endNodeVendorThingID":"LAMP-CAP-\#(i)","endNodePassword":"pw","owner":"user:\#(uid)"}"#
                        return try await EndNodeOwnerTests.onboard(e, body, token: token).status
                    }
                }
                var all: [Int] = []
                for try await s in group { all.append(s) }
                return all.sorted()
            }
            #expect(statuses == [200, 200, 200] + Array(repeating: 409, count: 7), "\(statuses)")
            #expect(e.hub.store.endNodeCount(gatewayThingID: gw) == 3)
        }
    }

    @Test(
        "endNodeBudgetsAfterAuthorisation: a stranger's refused end-node calls spend its own budget, never the gateway's"
    )
    func endNodeBudgetsAfterAuthorisation() async throws {
        // Slow refill: a loaded machine earns no token back during the test.
        let limiter = RateLimiter(ratePerSecond: 0.05, burst: 4)
        try await withHubAPI(security: .init(rateLimiter: limiter)) { e in
            let (uid, token) = try await e.user()
            let (_, mallory) = try await e.user()
            let gw = try await EndNodeOwnerTests.gateway(e, "GW-SEC-3", owner: "user:\(uid)", token: token)
            let list = "\(e.thingIF)/things/\(gw)/end-nodes"
            var statuses: [Int] = []
            for _ in 0..<8 { statuses.append(try await e.get(list, token: mallory).status) }
            #expect(
                statuses.prefix(4).allSatisfy { $0 == 404 } && statuses.suffix(4).allSatisfy { $0 == 429 },
                "\(statuses)")
            // The gateway's budget is whole: its owner lists (3 more of its 4
            // after the gateway's onboarding spent one).
            for _ in 0..<3 {
                let r = try await e.get(list, token: token)
                #expect(r.status == 200, "\(r.status) \(r.text)")
            }
        }
    }

    @Test(
        "endNodePasswordGuessing: 403 WRONG_PASSWORD, then 429 for that vendorThingID; another end node onboards meanwhile"
    )
    func endNodePasswordGuessing() async throws {
        try await withHubAPI { e in
            let (uid, token) = try await e.user()
            let gw = try await EndNodeOwnerTests.gateway(e, "GW-SEC-4", owner: "user:\(uid)", token: token)
            let (lamp, _) = try await EndNodeOwnerTests.endNode(
                e, gateway: gw, "LAMP-W1", uid: uid, token: token, password: "right")
            func attempt(_ password: String) async throws -> HTTPReply {
                let body =
                    #"{"gatewayThingID":"\#(gw)","endNodeVendorThingID":"LAMP-W1","endNodePassword":"\#(password)","owner":"user:\#(uid)"}"#
                return try await EndNodeOwnerTests.onboard(e, body, token: token)
            }
            var statuses: [Int] = []
            for i in 0..<12 { statuses.append(try await attempt("guess-\(i)").status) }
            #expect(statuses == Array(repeating: 403, count: 10) + [429, 429], "\(statuses)")
            // The budget is the vendorThingID's: the right password waits too, another end node does not.
            #expect(try await attempt("right").status == 429)
            let other = try await EndNodeOwnerTests.endNode(e, gateway: gw, "LAMP-W2", uid: uid, token: token)
            #expect(other.id != lamp && e.hub.store.endNodeCount(gatewayThingID: gw) == 2)
        }
    }
}
