// SPDX-License-Identifier: Apache-2.0

import Foundation
import Testing
import ThingIF
import ThingIFHub

/// The end-node twins of the attack tests (docs/GATEWAYS.md §6.2) on the
/// owner's side over REST (a stranger on another owner's gateway, the
/// per-gateway cap under concurrent onboardings, budgets spent after
/// authorisation, guessing an end node's password) and on the broker, with
/// the production broker configuration (an end node's credentials, another
/// gateway's or the bootstrap identity reading or writing a gateway's
/// end-node topics). Each makes the attack, checks that it fails, and that
/// the legitimate path still works. The gateway's own requests' twins are
/// in GatewayRequestsTests.
@Suite("Gateway security", .offPool)
struct GatewaySecurityTests {
    typealias Link = GatewayRequestsTests.Link
    /// A SUBACK's, CONNACK's or PUBACK's reason codes that refuse.
    static let refused = SecurityTests.refused
    static let notAuthorized: Int32 = 0x87

    /// The strangers beside gateway B, connected: a standalone thing (a
    /// thing onboarded by itself without a layout; its topic) and the
    /// bootstrap identity.
    static func strangers(_ e: HubAPIEnv) async throws -> (topic: String, thing: MqttProbe, boot: MqttProbe) {
        let body = #"{"vendorThingID":"AC-BRK-S","thingPassword":"pw"}"#
        let r = try await e.call(
            "POST", "\(e.thingIF)/onboardings", body: Data(body.utf8), contentType: GatewayLayoutTests.byThing)
        try #require(r.status == 200, "\(r.status) \(r.text)")
        let ep = try #require(r.json["mqttEndpoint"] as? [String: Any])
        let topic = try #require(ep["mqttTopic"] as? String)
        let thing = try MqttProbe(
            port: e.env.broker.port, clientID: topic, username: try #require(ep["username"] as? String),
            password: try #require(ep["password"] as? String))
        let boot = try MqttProbe.bootstrap(port: e.env.broker.port)
        try #require(thing.isConnected && boot.isConnected)
        return (topic, thing, boot)
    }

    /// Two gateways of two owners, A with the end node E (onboarded by A
    /// over its connection; E's token from A's onboarding of it again over
    /// HTTPS, the only answer that carries it) and B with F; A's and B's
    /// connections.
    static func twoGateways(_ e: HubAPIEnv) async throws -> (
        a: Link, e: (id: String, token: String), b: Link, f: String
    ) {
        let (ua, ta) = try await e.user()
        let (ub, tb) = try await e.user()
        let a = try Link(e, try await GatewayRequestsTests.gateway(e, "GW-BRK-A", uid: ua, token: ta))
        let b = try Link(e, try await GatewayRequestsTests.gateway(e, "GW-BRK-B", uid: ub, token: tb))
        let r = a.onboard("LAMP-BRK-E", path: a.ownPath)
        try #require(r?.status == 200, "\(GatewayRequestsTests.describe(r))")
        let id = try #require(GatewayRequestsTests.json(r)["endNodeThingID"] as? String)
        let again = try await EndNodeOwnerTests.onboard(
            e, #"{"gatewayThingID":"\#(a.gateway.id)","endNodeVendorThingID":"LAMP-BRK-E","endNodePassword":"pw"}"#,
            token: a.gateway.token)
        try #require(again.status == 200 && again.string("endNodeThingID") == id, "\(again.status) \(again.text)")
        let en = (id, try #require(again.string("accessToken")))
        let f = try #require(b.onboardAll("LAMP-BRK-F", count: 1).first)
        return (a, en, b, f)
    }

    /// The hub's broker identity, reading every end-node topic: what the broker lets through.
    static func watcher(_ e: HubAPIEnv) throws -> MqttProbe { try MqttProbe.watcher(e.env.broker, "p/+/end-nodes/#") }

    @Test(
        "endNodeAuthentication: an end node's thingID and token, and another gateway's credentials on A's client ID, are refused; A stays connected"
    )
    func endNodeAuthentication() async throws {
        try await withHubAPI { e in
            let (a, en, b, _) = try await Self.twoGateways(e)
            defer { a.stop(); b.stop() }
            let port = e.env.broker.port
            for (clientID, username, password, what) in [
                (en.id, en.id, en.token, "E's thingID and token"),
                (a.gateway.topic, en.id, en.token, "E's thingID and token on A's client ID"),
                (a.gateway.topic, a.gateway.username, en.token, "A's username with E's token"),
                ("e-" + randomHexString(4), en.token, en.token, "E's token as username"),
                (a.gateway.topic, b.gateway.username, b.gateway.password, "B's credentials on A's client ID")
            ] {
                let p = try MqttProbe(port: port, clientID: clientID, username: username, password: password)
                defer { p.stop() }
                #expect(!p.isConnected, "\(what): connected")
                #expect(
                    p.connackCode.map { Self.refused.contains($0) } ?? true,
                    "\(what): \(String(describing: p.connackCode))")
            }
            // A was never taken over, and its requests still work.
            #expect(a.probe.isConnected && a.probe.disconnectCount == 0)
            let list = a.ask("GET", "things/\(a.gateway.id)/end-nodes")
            #expect(list?.status == 200, "\(GatewayRequestsTests.describe(list))")
            #expect(b.probe.isConnected)
        }
    }

    @Test(
        "endNodeTokenHarvest: B, a standalone thing and the bootstrap identity read nothing of A's end-node topics; A reads its commands"
    )
    func endNodeTokenHarvest() async throws {
        try await withHubAPI { e in
            let (a, en, b, f) = try await Self.twoGateways(e)
            defer { a.stop(); b.stop() }
            let gA = a.gateway.topic
            let (sTopic, thing, boot) = try await Self.strangers(e)
            defer { thing.stop(); boot.stop() }
            let foreign = [
                Topics.endNodeCommands(clientID: gA, endNode: "+"),
                Topics.endNodeCommands(clientID: gA, endNode: en.id),
                Topics.endNodeEvents(clientID: gA, endNode: "+"), Topics.endNodeEvents(clientID: gA, endNode: en.id),
                Topics.endNodeStatus(clientID: gA, endNode: en.id), "p/\(gA)/end-nodes/#", "p/+/end-nodes/#",
                "p/+/end-nodes/+/commands", "p/+/end-nodes/+/events", "p/+/end-nodes/+/status",
                Topics.response(clientID: gA)
            ]
            for (name, probe) in [("gateway B", b.probe), ("a standalone thing", thing), ("bootstrap", boot)] {
                // The bootstrap identity may read a reply topic it names
                // (docs/SECURITY.md, residual risks: thing topics carry 88
                // random bits); a thing's role may not.
                for filter in foreign where probe !== boot || filter != Topics.response(clientID: gA) {
                    let code = try #require(probe.subscribe(filter), "\(name): no SUBACK for \(filter)")
                    #expect(Self.refused.contains(code), "\(name) subscribed to \(filter): \(code)")
                }
            }
            // The rules are a gateway's: B reads its own end nodes' commands and events, a standalone thing has none.
            #expect(b.probe.subscribe(Topics.endNodeCommands(clientID: b.gateway.topic, endNode: "+")) == 1)
            #expect(b.probe.subscribe(Topics.endNodeEvents(clientID: b.gateway.topic, endNode: "+")) == 1)
            let own = try #require(thing.subscribe(Topics.endNodeCommands(clientID: sTopic, endNode: "+")))
            #expect(Self.refused.contains(own), "a standalone thing subscribed to its end-node commands: \(own)")
            let ownEvents = try #require(thing.subscribe(Topics.endNodeEvents(clientID: sTopic, endNode: "+")))
            #expect(
                Self.refused.contains(ownEvents), "a standalone thing subscribed to its end-node events: \(ownEvents)")
            #expect(a.probe.subscribe(Topics.endNodeCommands(clientID: gA, endNode: "+")) == 1)
            #expect(a.probe.subscribe(Topics.endNodeEvents(clientID: gA, endNode: "+")) == 1)

            // A onboards a new end node (its answer crosses p/A/resp, without
            // the end node's token: endNodeTokenOffReplyTopic) and the hub's
            // identity writes on E's and F's command topics.
            let r = a.onboard("LAMP-BRK-NEW")
            #expect(r?.status == 200, "\(GatewayRequestsTests.describe(r))")
            let newID = try #require(GatewayRequestsTests.json(r)["endNodeThingID"] as? String)
            let hub = try Self.watcher(e)
            defer { hub.stop() }
            let toE = Topics.endNodeCommands(clientID: gA, endNode: en.id)
            let toF = Topics.endNodeCommands(clientID: b.gateway.topic, endNode: f)
            #expect(
                hub.publishAcked(toE, Array(#"{"event":"probe-e"}"#.utf8)).map { !Self.refused.contains($0) } == true)
            #expect(
                hub.publishAcked(toF, Array(#"{"event":"probe-f"}"#.utf8)).map { !Self.refused.contains($0) } == true)
            let eventsE = Topics.endNodeEvents(clientID: gA, endNode: en.id)
            let eventsF = Topics.endNodeEvents(clientID: b.gateway.topic, endNode: f)
            #expect(
                hub.publishAcked(eventsE, Array(#"{"event":"probe-e"}"#.utf8)).map { !Self.refused.contains($0) }
                    == true)
            #expect(
                hub.publishAcked(eventsF, Array(#"{"event":"probe-f"}"#.utf8)).map { !Self.refused.contains($0) }
                    == true)
            #expect(a.probe.waitForMessage(on: toE) != nil, "A did not get its end node's command topic")
            #expect(a.probe.waitForMessage(on: eventsE) != nil, "A did not get its end node's events topic")
            // B got its own end node's messages after A's were routed: the broker has decided about B by then.
            #expect(b.probe.waitForMessage(on: toF) != nil)
            #expect(b.probe.waitForMessage(on: eventsF) != nil)
            #expect(a.probe.messages(on: toF).isEmpty && a.probe.messages(on: eventsF).isEmpty)
            let seen = (b.probe.messages() + thing.messages() + boot.messages())
            #expect(!seen.contains { $0.topic == toE }, "A's end-node command reached another client")
            #expect(!seen.contains { $0.topic == eventsE }, "A's end-node event reached another client")
            #expect(
                !seen.contains { String(decoding: $0.payload, as: UTF8.self).contains(newID) },
                "harvested: \(seen.map(\.topic))")
        }
    }

    @Test(
        "endNodeTokenOffReplyTopic: the bootstrap identity reading a gateway's reply topic sees its end-node onboardings' answers (both paths) with no access token; over HTTPS the caller still gets it"
    )
    func endNodeTokenOffReplyTopic() async throws {
        try await withHubAPI { e in
            let (uid, token) = try await e.user()
            let a = try Link(e, try await GatewayRequestsTests.gateway(e, "GW-TOK", uid: uid, token: token))
            defer { a.stop() }
            let boot = try MqttProbe.bootstrap(port: e.env.broker.port)
            defer { boot.stop() }
            // SECURITY.md's residual risk: a reply topic it can name (here it knows G).
            let replies = Topics.response(clientID: a.gateway.topic)
            try #require(boot.subscribe(replies) == 1)
            let kii = a.onboard("LAMP-TOK-1")
            let own = a.onboard("LAMP-TOK-2", path: a.ownPath)
            for r in [kii, own] {
                #expect(r?.status == 200, "\(GatewayRequestsTests.describe(r))")
                #expect(GatewayRequestsTests.json(r)["endNodeThingID"] is String)
                #expect(GatewayRequestsTests.json(r)["accessToken"] == nil, "\(GatewayRequestsTests.describe(r))")
            }
            // The bootstrap identity got both answers, and no token in them.
            #expect(poll { boot.messages(on: replies).count >= 2 })
            let read = boot.messages(on: replies).map { String(decoding: $0.payload, as: UTF8.self) }
            #expect(read.filter { $0.contains("endNodeThingID") }.count == 2, "\(read)")
            #expect(!read.contains { $0.contains("accessToken") }, "harvested: \(read)")
            // Over HTTPS the answer is the caller's own: the gateway's and the owner's keep the token.
            let byGateway = try await EndNodeOwnerTests.onboard(
                e, #"{"gatewayThingID":"\#(a.gateway.id)","endNodeVendorThingID":"LAMP-TOK-3","endNodePassword":"pw"}"#,
                token: a.gateway.token)
            #expect(byGateway.status == 200 && byGateway.string("accessToken") != nil, "\(byGateway.text)")
            let (_, ownerToken) = try await EndNodeOwnerTests.endNode(
                e, gateway: a.gateway.id, "LAMP-TOK-4", uid: uid, token: token)
            #expect(!ownerToken.isEmpty)
        }
    }

    @Test(
        "endNodeInjection: B, a standalone thing, the bootstrap identity and A itself cannot write A's end-node commands or events; only A writes its statuses"
    )
    func endNodeInjection() async throws {
        try await withHubAPI { e in
            let (a, en, b, _) = try await Self.twoGateways(e)
            defer { a.stop(); b.stop() }
            let gA = a.gateway.topic
            let (sTopic, thing, boot) = try await Self.strangers(e)
            let hub = try Self.watcher(e)
            defer { thing.stop(); boot.stop(); hub.stop() }
            try #require(a.probe.subscribe(Topics.endNodeCommands(clientID: gA, endNode: "+")) == 1)
            try #require(a.probe.subscribe(Topics.endNodeEvents(clientID: gA, endNode: "+")) == 1)
            let commands = Topics.endNodeCommands(clientID: gA, endNode: en.id)
            let events = Topics.endNodeEvents(clientID: gA, endNode: en.id)
            let status = Topics.endNodeStatus(clientID: gA, endNode: en.id)
            let command =
                #"{"commandID":"evil","schema":"Lamp","schemaVersion":1,"issuer":"user:x","actions":[{"turnPower":{"power":false}}]}"#
            let removal = #"{"event":"endNodeRemoved","thingID":"\#(en.id)"}"#
            for (name, probe) in [("gateway B", b.probe), ("a standalone thing", thing), ("bootstrap", boot)] {
                for (topic, payload) in [
                    (commands, command), (commands, removal), (events, removal), (events, command), (status, "online")
                ] {
                    #expect(
                        probe.publishAcked(topic, Array(payload.utf8)) == Self.notAuthorized,
                        "\(name) wrote \(topic)")
                }
            }
            // Only the hub writes a command or events topic, the gateway's own included.
            #expect(a.probe.publishAcked(commands, Array(command.utf8)) == Self.notAuthorized)
            #expect(a.probe.publishAcked(events, Array(removal.utf8)) == Self.notAuthorized)
            // A standalone thing has no end-node statuses; A has.
            #expect(
                thing.publishAcked(Topics.endNodeStatus(clientID: sTopic, endNode: en.id), Array("online".utf8))
                    == Self.notAuthorized)
            let mine = a.probe.publishAcked(status, Array("online".utf8))
            #expect(mine.map { !Self.refused.contains($0) } == true, "A's own status: \(String(describing: mine))")
            // What passed the broker: A's status only.
            #expect(hub.waitForMessage(on: status) != nil)
            #expect(hub.messages().map(\.topic) == [status], "\(hub.messages().map(\.topic))")
            #expect(a.probe.messages(on: commands).isEmpty && a.probe.messages(on: events).isEmpty)
        }
    }

    @Test(
        "endNodeRulesGivenAgain: a gateway's role made without its end-node rules (before broker rights for end nodes, or before the events topic) gets them at its next onboarding"
    )
    func endNodeRulesGivenAgain() async throws {
        try await withHubAPI { e in
            let (uid, token) = try await e.user()
            let gw = try await GatewayRequestsTests.gateway(e, "GW-BRK-OLD", uid: uid, token: token)
            // The role as a hub before broker rights for end nodes made it: without the three rules
            // (a hub before the events topic made it without the events rule alone).
            let admin = try Self.watcher(e)
            defer { admin.stop() }
            let control = "$CONTROL/dynamic-security/v1"
            try #require(admin.subscribe(control + "/response") == 1)
            let role = BrokerAdmin.thingRole(topic: gw.topic)
            let tag = "strip-" + randomHexString(4)
            let strip =
                #"{"commands":[{"command":"removeRoleACL","rolename":"\#(role)","acltype":"subscribeLiteral","topic":"\#(Topics.endNodeCommands(clientID: gw.topic, endNode: "+"))","correlationData":"\#(tag)"},{"command":"removeRoleACL","rolename":"\#(role)","acltype":"subscribeLiteral","topic":"\#(Topics.endNodeEvents(clientID: gw.topic, endNode: "+"))","correlationData":"\#(tag)"},{"command":"removeRoleACL","rolename":"\#(role)","acltype":"publishClientSend","topic":"\#(Topics.endNodeStatus(clientID: gw.topic, endNode: "+"))","correlationData":"\#(tag)"}]}"#
            #expect(admin.publishAcked(control, Array(strip.utf8)).map { !Self.refused.contains($0) } == true)
            var answer = ""
            poll(timeoutMs: 30_000) {
                answer =
                    admin.messages(on: control + "/response").map { String(decoding: $0.payload, as: UTF8.self) }
                    .first { $0.contains(tag) } ?? ""
                return !answer.isEmpty
            }
            #expect(answer.contains(tag) && !answer.contains("error"), "\(answer)")
            let before = try Link(e, gw)
            let stripped = try #require(
                before.probe.subscribe(Topics.endNodeCommands(clientID: gw.topic, endNode: "+")))
            #expect(Self.refused.contains(stripped), "the rule was not taken away: \(stripped)")
            let strippedEvents = try #require(
                before.probe.subscribe(Topics.endNodeEvents(clientID: gw.topic, endNode: "+")))
            #expect(Self.refused.contains(strippedEvents), "the events rule was not taken away: \(strippedEvents)")
            before.stop()
            // The gateway onboards again: same installation, same role, new password, the rules back.
            let again = try await GatewayRequestsTests.onboardedByItself(e, gw.vendor, id: gw.id)
            try #require(again.topic == gw.topic, "a new installation: \(again.topic)")
            let after = try Link(e, again)
            defer { after.stop() }
            #expect(after.probe.subscribe(Topics.endNodeCommands(clientID: gw.topic, endNode: "+")) == 1)
            #expect(after.probe.subscribe(Topics.endNodeEvents(clientID: gw.topic, endNode: "+")) == 1)
            let code = after.probe.publishAcked(
                Topics.endNodeStatus(clientID: gw.topic, endNode: "x"), Array("offline".utf8))
            #expect(code.map { !Self.refused.contains($0) } == true, "\(String(describing: code))")
        }
    }

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

    @Test(
        "endNodeNoConfiguration: an end node has no automation and no MQTT installation of its own: 409 END_NODE_UNSUPPORTED, nothing stored; its gateway's are untouched"
    )
    func endNodeNoConfiguration() async throws {
        try await withHubAPI { e in
            let (uid, token) = try await e.user()
            let gw = try await EndNodeOwnerTests.gateway(e, "GW-NOCONF", owner: "user:\(uid)", token: token)
            let (en, enToken) = try await EndNodeOwnerTests.endNode(
                e, gateway: gw, "LAMP-NOCONF", uid: uid, token: token)
            let action: [String: Any] = ["schema": "Lamp", "schemaVersion": 1, "action": "turnPower"]
            let timer: [String: Any] = [
                "fireDate": Platform.epochMs() + 86_400_000, "timeZone": "UTC", "actionSets": ["s0"]
            ]
            let t = e.target(en)
            let refused: [(String, String, [String: Any]?)] = [
                ("PUT", "\(t)/action-sets/s0", ["actions": [action]]), ("GET", "\(t)/action-sets", nil),
                ("DELETE", "\(t)/action-sets/s0", nil), ("PUT", "\(t)/timer-triggers/t0", timer),
                ("GET", "\(t)/timer-triggers", nil), ("PUT", "\(t)/timer-triggers/t0/enable", nil),
                ("DELETE", "\(t)/timer-triggers/t0", nil), ("GET", "\(t)/automation", nil)
            ]
            for (method, path, body) in refused {
                let r =
                    if let body { try await e.call(method, path, token: token, json: body) } else {
                        try await e.call(method, path, token: token)
                    }
                #expect(
                    r.status == 409 && r.errorCode == "END_NODE_UNSUPPORTED", "\(method) \(path): \(r.status) \(r.text)"
                )
            }
            // Its own token asks for an MQTT installation: refused, none made.
            let i = try await e.call("POST", "\(e.api)/installations", token: enToken, json: ["deviceType": "MQTT"])
            #expect(i.status == 409 && i.errorCode == "END_NODE_UNSUPPORTED", "\(i.status) \(i.text)")
            let ep = try await e.call("GET", "\(e.api)/installations/inst-none/mqtt-endpoint", token: enToken)
            #expect(ep.status == 409 && ep.errorCode == "END_NODE_UNSUPPORTED", "\(ep.status) \(ep.text)")
            #expect(e.hub.store.thing(id: en)?.installations.isEmpty == true)
            #expect(e.hub.automation.message(thingID: en) == nil)

            // The gateway, a thing of its own, keeps both.
            let put = try await e.call(
                "PUT", "\(e.target(gw))/action-sets/s0", token: token, json: ["actions": [action]])
            #expect(put.status == 204, "\(put.status) \(put.text)")
        }
    }
}
