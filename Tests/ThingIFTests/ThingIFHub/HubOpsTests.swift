// SPDX-License-Identifier: Apache-2.0

import CThingIF
import CThingIFTestSupport
import Foundation
import Testing
import ThingIF
import ThingIFHub
import ThingIFHubServer

/// One Prometheus text exposition, parsed: each sample keyed by its name
/// and its labels in name order, e.g. `thingif_hub_mqtt_requests_total{kind="state",status="204"}`.
struct Exposition {
    var samples: [String: Double] = [:]
    var types: [String: String] = [:]

    init(_ text: String) throws {
        for raw in text.split(separator: "\n") {
            let line = raw.trimmingCharacters(in: .whitespaces)
            if line.isEmpty { continue }
            if line.hasPrefix("# TYPE ") {
                let p = line.split(separator: " ")
                if p.count == 4 { types[String(p[2])] = String(p[3]) }
                continue
            }
            if line.hasPrefix("#") { continue }
            guard let space = line.lastIndex(of: " "), let value = Double(line[line.index(after: space)...]) else {
                throw HarnessError("not a sample line: \(line)")
            }
            let series = String(line[..<space])
            if let open = series.firstIndex(of: "{") {
                guard series.hasSuffix("}") else { throw HarnessError("bad labels: \(line)") }
                let name = String(series[..<open])
                let inner = series[series.index(after: open)..<series.index(before: series.endIndex)]
                var labels: [(String, String)] = []
                for pair in inner.split(separator: ",") where !pair.isEmpty {
                    guard let eq = pair.firstIndex(of: "="), pair[pair.index(after: eq)...].hasPrefix("\"") else {
                        throw HarnessError("bad label \(pair) in \(line)")
                    }
                    labels.append((String(pair[..<eq]), String(pair[pair.index(after: eq)...])))
                }
                samples[Exposition.key(name, labels)] = value
            } else {
                samples[series] = value
            }
        }
    }

    static func key(_ name: String, _ labels: [(String, String)]) -> String {
        guard !labels.isEmpty else { return name }
        let sorted = labels.sorted { $0.0 < $1.0 }.map { "\($0.0)=\($0.1)" }
        return name + "{" + sorted.joined(separator: ",") + "}"
    }

    /// A sample's value (0 when absent: a counter not yet incremented).
    func value(_ name: String, _ labels: [String: String] = [:]) -> Double {
        samples[Exposition.key(name, labels.map { ($0.key, "\"\($0.value)\"") })] ?? 0
    }
}

@Suite("Hub operations: Prometheus metrics and Home Assistant discovery", .serialized, .offPool)
struct HubOpsTests {
    /// Home Assistant discovery on, and a broker login for the test's own
    /// Home Assistant client (its username and password).
    static func homeAssistantOn(_ e: HubAPIEnv) async throws -> (user: String, password: String) {
        let user = "ha-" + Platform.randomHex(bytes: 4)
        let password = Platform.randomHex(bytes: 16)
        let problem = await offPool {
            e.hub.homeAssistant.provisionClient(username: user, password: password, prefix: "homeassistant")
        }
        try #require(problem == nil, "\(problem ?? "")")
        await offPool { e.hub.homeAssistant.enable(HomeAssistantOptions()) }
        return (user, password)
    }

    /// Home Assistant's MQTT client, with the login homeAssistantOn made; connected.
    static func homeAssistantClient(_ e: HubAPIEnv, user: String, password: String) async throws -> MqttProbe {
        let ha = try await offPool {
            Result {
                try MqttProbe(
                    port: e.env.broker.port, clientID: "ha-probe-\(Platform.randomHex(bytes: 4))", username: user,
                    password: password)
            }
        }.get()
        try #require(ha.isConnected, "connack \(String(describing: ha.connackCode))")
        return ha
    }

    static let metricsToken = "metrics-" + Platform.randomHex(bytes: 8)

    func metrics(_ e: HubAPIEnv, token: String? = HubOpsTests.metricsToken) async throws -> Exposition {
        let r = try await e.get("/metrics", token: token)
        try #require(r.status == 200, "/metrics: \(r.status) \(r.text)")
        #expect(r.contentType?.hasPrefix("text/plain") == true)
        return try Exposition(r.text)
    }

    @Test("GET /metrics: a command run to DONE by the C appliance moves the counters and the latency histogram by one")
    func metricsMove() async throws {
        try await withHubAPI(security: HubServer.Security(metricsToken: HubOpsTests.metricsToken)) { e in
            // A configured token is required: none, a wrong one and another scheme get 401.
            for headers in [
                [:], ["Authorization": "Bearer wrong"], ["Authorization": "Basic \(HubOpsTests.metricsToken)"]
            ] {
                let r = try await e.call("GET", "/metrics", headers: headers)
                #expect(r.status == 401 && r.errorCode == "UNAUTHORIZED", "\(headers): \(r.status) \(r.text)")
            }
            let (uid, token) = try await e.user()
            let (tid, thingToken) = try await e.onboard("AC-METRICS-1", owner: "user:\(uid)", token: token)
            _ = try await e.appliance(thingID: tid, token: thingToken)
            // An event stream is the user's one target: nothing for the notification sweep.
            _ = try await e.installation("SSE", token: token)
            let before = try await metrics(e)
            #expect(before.types["thingif_hub_command_result_latency_seconds"] == "histogram")
            #expect(before.types["thingif_hub_commands_issued_total"] == "counter")
            #expect(before.value("thingif_hub_things_online") == 1)

            let cid = try await e.postCommand(tid, token: token, userID: uid)
            let c = try await e.waitForFinished(tid, cid, token: token)
            #expect(c["commandState"] as? String == "DONE")
            // Past the delivery tick that would mark its notification sent.
            try await Task.sleep(nanoseconds: 600_000_000)
            let after = try await metrics(e)

            func delta(_ name: String, _ labels: [String: String] = [:]) -> Double {
                after.value(name, labels) - before.value(name, labels)
            }
            #expect(delta("thingif_hub_commands_issued_total") == 1)
            #expect(delta("thingif_hub_commands_delivered_total") == 1)
            #expect(delta("thingif_hub_commands_done_total") == 1)
            #expect(delta("thingif_hub_commands_failed_total") == 0)
            #expect(delta("thingif_hub_command_result_latency_seconds_count") == 1)
            let sum = delta("thingif_hub_command_result_latency_seconds_sum")
            #expect(sum >= 0 && sum < 10, "latency \(sum) s")
            // Every bucket at or above the observed latency moved by one; +Inf always.
            #expect(delta("thingif_hub_command_result_latency_seconds_bucket", ["le": "+Inf"]) == 1)
            #expect(delta("thingif_hub_command_result_latency_seconds_bucket", ["le": "60.0"]) == 1)
            #expect(delta("thingif_hub_mqtt_requests_total", ["kind": "action-results", "status": "204"]) == 1)
            #expect(delta("thingif_hub_store_latency_seconds_count", ["op": "recordResults"]) == 1)
            #expect(delta("thingif_hub_store_latency_seconds_count", ["op": "insertCommand"]) == 1)
            // Never due for a sweep, so never marked (a statement a command spared).
            #expect(delta("thingif_hub_store_latency_seconds_count", ["op": "markNotified"]) == 0)
            #expect(e.hub.store.claimUnnotified(now: Platform.epochMs() + 60_000, leaseMs: 1, limit: 10).isEmpty)
            #expect(after.value("thingif_hub_things_online") == 1)
        }
    }

    @Test(
        "notifications_total by channel and outcome (SSE, webhook, MQTT; ok and failed), commands_failed, and things_online when the thing goes offline"
    )
    func notificationMetrics() async throws {
        let hook = try WebhookReceiver()
        defer { hook.stop() }
        // A webhook that fails: an allowed address where nothing listens any more.
        let dead = try WebhookReceiver()
        let (deadURL, deadPort) = (dead.url, dead.port)
        dead.stop()
        let security = HubServer.Security(metricsToken: HubOpsTests.metricsToken)
        let allow = WebhookGuard(allow: ["127.0.0.1:\(hook.port)", "127.0.0.1:\(deadPort)"])
        try await withHubAPI(security: security, options: { $0.webhooks = allow }) { e in
            // A normal user: every installation of the issuer is told.
            let (uid, token) = try await e.user(loginName: "metrics-notes")
            let (tid, thingToken) = try await e.onboard("AC-METRICS-2", owner: "user:\(uid)", token: token)
            // The appliance fails every setFanSpeed.
            let t = try await e.appliance(thingID: tid, token: thingToken) { t in
                #expect(ct_behave_fail(t.ct, "setFanSpeed", "the fan is stuck") == 0)
            }
            let sse = try await e.installation("SSE", token: token)
            _ = try await e.installation("SSE", token: token)  // no stream open: failed
            _ = try await e.installation("WEBHOOK", token: token, webhookURL: hook.url)
            _ = try await e.installation("WEBHOOK", token: token, webhookURL: deadURL)
            _ = try await e.installation("MQTT", token: token)
            let stream = try RawStream(port: e.port, path: "\(e.api)/installations/\(sse.id)/events", token: token)
            #expect(await offPool { stream.waitFor(": connected") }, "stream: \(stream.text)")
            let before = try await metrics(e)
            #expect(before.value("thingif_hub_things_online") == 1)

            // One command the appliance runs, one whose action fails.
            let done = try await e.postCommand(
                tid, token: token, userID: uid, actions: [["turnPower": ["power": true]]])
            #expect(try await e.waitForFinished(tid, done, token: token)["commandState"] as? String == "DONE")
            let failed = try await e.postCommand(
                tid, token: token, userID: uid, actions: [["setFanSpeed": ["fanSpeed": 5]]])
            #expect(try await e.waitForFinished(tid, failed, token: token)["commandState"] as? String == "INCOMPLETE")
            #expect(
                await offPool { stream.waitFor("\"commandID\":\"\(failed)\"") && stream.text.contains(done) },
                "stream: \(stream.text)")
            #expect(await offPool { poll(timeoutMs: 30_000) { hook.bodies.withLock { $0.count } == 2 } })

            let name = "thingif_hub_notifications_total"
            func count(_ m: Exposition, _ channel: String, _ outcome: String) -> Double {
                m.value(name, ["channel": channel, "outcome": outcome])
            }
            // Webhooks are posted off the request thread: wait until both of each are counted.
            var after = try await metrics(e)
            let deadline = Date().addingTimeInterval(15)
            while Date() < deadline
                && (count(after, "webhook", "ok") - count(before, "webhook", "ok") < 2
                    || count(after, "webhook", "failed") - count(before, "webhook", "failed") < 2)
            {
                try await Task.sleep(nanoseconds: 100_000_000)
                after = try await metrics(e)
            }
            #expect(after.types[name] == "counter")
            for (channel, outcome, n) in [
                ("sse", "ok", 2.0), ("sse", "failed", 2), ("webhook", "ok", 2), ("webhook", "failed", 2),
                ("mqtt", "ok", 2), ("mqtt", "failed", 0)
            ] {
                let delta = count(after, channel, outcome) - count(before, channel, outcome)
                #expect(delta == n, "\(name){channel=\(channel),outcome=\(outcome)} moved by \(delta), not \(n)")
            }
            // Counted, not logged: an SSE installation without a stream is an
            // app that is not open. A webhook that fails is logged.
            let logs = e.logs
            #expect(
                await offPool {
                    poll(timeoutMs: 30_000) { logs.withLock { $0.contains { $0.contains("webhook of") } } }
                },
                "\(logs.withLock { $0 })")
            #expect(!logs.withLock { $0.contains { $0.contains("no open event stream") } }, "\(logs.withLock { $0 })")
            func delta(_ metric: String) -> Double { after.value(metric) - before.value(metric) }
            #expect(delta("thingif_hub_commands_failed_total") == 1)
            #expect(delta("thingif_hub_commands_done_total") == 1)
            #expect(delta("thingif_hub_command_result_latency_seconds_count") == 2)

            // The appliance stops (its will: offline): the gauge goes down.
            await offPool { _ = t.destroy() }
            var online = after.value("thingif_hub_things_online")
            let offDeadline = Date().addingTimeInterval(10)
            while online != 0 && Date() < offDeadline {
                try await Task.sleep(nanoseconds: 100_000_000)
                online = try await metrics(e).value("thingif_hub_things_online")
            }
            #expect(online == 0, "things_online \(online) after the thing went offline")
        }
    }

    @Test(
        "Deleting a thing: 204; its data, token, broker login and retained topics are gone, Home Assistant's config is emptied; refusals delete nothing"
    )
    func deleteThing() async throws {
        try await withHubAPI { e in
            _ = try await Self.homeAssistantOn(e)

            let (uid, token) = try await e.user()
            let (tid, thingToken) = try await e.onboard("AC-DEL-1", owner: "user:\(uid)", token: token)
            _ = try await e.appliance(thingID: tid, token: thingToken) { t in
                #expect(ct_behave_upload_state(t.ct, "setPresetTemperature", 1) == 0)
            }
            let identity = try StoredIdentity(storage: e.env.storage("ac"))
            #expect(identity.thingID == tid)
            // Something of everything: a command with results and a state
            // upload, an action set (the retained automation config), a trigger.
            let cid = try await e.postCommand(tid, token: token, userID: uid)
            _ = try await e.waitForFinished(tid, cid, token: token)
            let action: [String: Any] = [
                "schema": Aircon.schema, "schemaVersion": 1, "action": "turnPower", "params": ["power": true]
            ]
            let put = try await e.call(
                "PUT", "\(e.target(tid))/action-sets/morning", token: token, json: ["actions": [action]])
            #expect(put.status == 204, "\(put.text)")
            let trigger = try await e.call(
                "POST", "\(e.target(tid))/triggers", token: token,
                json: [
                    "predicate": ["eventSource": "SCHEDULE_ONCE", "scheduleAt": Platform.epochMs() + 3_600_000],
                    "command": [
                        "schema": Aircon.schema, "schemaVersion": 1, "issuer": "user:\(uid)",
                        "actions": [["turnPower": ["power": false]]]
                    ]
                ])
            #expect(trigger.status == 201, "\(trigger.text)")

            // The retained messages of the thing, each there now.
            let retained = [
                "homeassistant/climate/\(tid)/config", "thingif/\(tid)/state", "thingif/\(tid)/availability",
                Topics.config(clientID: identity.topic), Topics.status(clientID: identity.topic)
            ]
            let watcher = try await offPool { Result { try TopicListener(port: e.env.broker.port, topics: retained) } }
                .get()
            defer { watcher.stop() }
            let present = await offPool {
                poll(timeoutMs: 30_000) { retained.allSatisfy { watcher.payloads(on: $0).contains { !$0.isEmpty } } }
            }
            #expect(present, "retained: \(retained.map { ($0, watcher.payloads(on: $0)) })")

            // Refusals delete nothing: no token, another user's, a target
            // that is not a thing, another app, an unknown thing.
            let path = "\(e.api)/targets/thing:\(tid)"
            let (_, otherToken) = try await e.user()
            #expect(try await e.call("DELETE", path).status == 401)
            let foreign = try await e.call("DELETE", path, token: otherToken)
            #expect(foreign.status == 404 && foreign.errorCode == "TARGET_NOT_FOUND", "\(foreign.text)")
            #expect(try await e.call("DELETE", "\(e.api)/targets/group:\(tid)", token: token).status == 404)
            let app = try await e.call("DELETE", "/api/apps/otherApp/targets/thing:\(tid)", token: token)
            #expect(app.status == 404 && app.errorCode == "APP_NOT_FOUND", "\(app.text)")
            #expect(try await e.call("DELETE", "\(e.api)/targets/thing:th.nope", token: token).status == 404)
            #expect(try await e.get("\(e.target(tid))/commands", token: token).status == 200)
            #expect(e.hub.delivery.isOnline(tid))
            // A second hub on the same store and broker (as two hubs share
            // PostgreSQL) learns the thing's status from the broker too.
            let other = try #require(
                FrameworkSide(
                    Env.hubOptions(appID: Env.appID, appKey: Env.appKey, broker: e.env.broker), store: e.hub.store))
            let otherEvents = Locked<[String]>([])
            other.onEvent = { line in otherEvents.withLock { $0.append(line) } }
            #expect(await offPool { other.start(timeoutMs: 30_000) }, "\(other.startProblem ?? "")")
            defer { other.stop() }
            #expect(await offPool { other.waitForOnline(tid, timeoutMs: 30_000) })

            let deleted = try await e.call("DELETE", path, token: token)
            #expect(deleted.status == 204 && deleted.data.isEmpty, "\(deleted.status) \(deleted.text)")

            // Its data is gone for its owner.
            let commands = try await e.get("\(e.target(tid))/commands", token: token)
            #expect(commands.status == 404 && commands.errorCode == "TARGET_NOT_FOUND", "\(commands.text)")
            let mine = try await e.get("\(e.api)/users/me/things", token: token)
            #expect(mine.status == 200 && !mine.text.contains(tid), "\(mine.text)")
            #expect(e.hub.store.command(id: cid) == nil && e.hub.store.automation(thingID: tid) == nil)
            #expect(e.hub.store.triggers(thingID: tid).isEmpty && e.hub.store.allTriggers().isEmpty)
            // Its token is unknown now: the thing's own calls over HTTP get
            // Kii's 403 WRONG_TOKEN (over MQTT, 401).
            let upload = try await e.call("PUT", "\(e.target(tid))/states", token: thingToken, json: ["power": true])
            #expect(upload.status == 403 && upload.errorCode == "WRONG_TOKEN", "\(upload.status) \(upload.text)")
            // Its broker login no longer connects.
            let login = try await offPool {
                Result {
                    try MqttProbe(
                        port: e.env.broker.port, clientID: identity.topic, username: identity.username,
                        password: identity.password)
                }
            }.get()
            defer { login.stop() }
            #expect(!login.isConnected && login.connackCode != 0, "connack \(String(describing: login.connackCode))")
            // Each retained topic was emptied (what makes Home Assistant
            // remove the entity), and a new subscriber finds none of them.
            let emptied = await offPool {
                poll(timeoutMs: 30_000) { retained.allSatisfy { watcher.payloads(on: $0).last == "" } }
            }
            #expect(emptied, "last payloads: \(retained.map { ($0, watcher.payloads(on: $0).last ?? "-") })")
            let late = try await offPool { Result { try TopicListener(port: e.env.broker.port, topics: retained) } }
                .get()
            defer { late.stop() }
            await offPool { Platform.sleepMs(1000) }
            #expect(late.messages.withLock { $0.isEmpty }, "still retained: \(late.messages.withLock { $0 })")
            #expect(!e.hub.delivery.isOnline(tid))
            #expect(try await metrics(e, token: nil).value("thingif_hub_things_online") == 0)
            // The other hub forgets it when the cleared status reaches it.
            let forgotten = await offPool {
                poll(timeoutMs: 30_000) { otherEvents.withLock { $0.contains("\(tid) was deleted by another hub") } }
            }
            #expect(forgotten, "\(otherEvents.withLock { $0 })")
            #expect(!other.delivery.isOnline(tid))
            let otherMetrics = try Exposition(String(decoding: other.metrics.exposition(), as: UTF8.self))
            #expect(otherMetrics.value("thingif_hub_things_online") == 0)
            // Home Assistant's birth message publishes no config for it again.
            _ = watcher.client.publish(topic: "homeassistant/status", payload: Array("online".utf8), qos: 1)
            await offPool { Platform.sleepMs(500) }
            #expect(late.messages.withLock { $0.isEmpty }, "published again: \(late.messages.withLock { $0 })")

            // A second delete finds nothing.
            let again = try await e.call("DELETE", path, token: token)
            #expect(again.status == 404 && again.errorCode == "TARGET_NOT_FOUND")

            // Kii's path deletes too, and the vendorThingID onboards anew as a new thing.
            let (tid2, _) = try await e.onboard("AC-DEL-1", owner: "user:\(uid)", token: token)
            #expect(tid2 != tid)
            let kii = try await e.call("DELETE", "\(e.api)/things/\(tid2)", token: token)
            #expect(kii.status == 204, "\(kii.status) \(kii.text)")
            #expect(e.hub.store.thing(id: tid2) == nil)
        }
    }

    @Test("end_nodes and end_nodes_online: gauges of the end nodes onboarded and of those online behind their gateway")
    func endNodesOnlineGauge() async throws {
        // Counted at every scrape here (interval 0), so that each change shows at once.
        try await withHubAPI(options: { $0.endNodeGaugeIntervalMs = 0 }) { e in
            let (uid, token) = try await e.user()
            let gateway = try await GatewayRequestsTests.gateway(e, "GW-MET-1", uid: uid, token: token)
            let gw = gateway.id, gwToken = gateway.token
            let a = try await EndNodeOwnerTests.endNode(e, gateway: gw, "LAMP-MET-1", uid: uid, token: token).id
            let b = try await EndNodeOwnerTests.endNode(e, gateway: gw, "LAMP-MET-2", uid: uid, token: token).id
            func connection(_ endNode: String, _ online: Bool) async throws {
                try await EndNodeOwnerTests.connection(e, gateway: gw, token: gwToken, endNode, online: online)
            }
            func gauges(online: Double, total: Double? = nil) async throws -> Bool {
                let m = try await metrics(e, token: nil)
                return m.value("thingif_hub_end_nodes_online") == online
                    && total.map { m.samples["thingif_hub_end_nodes"] == $0 } ?? true
            }
            let m = try await metrics(e, token: nil)
            #expect(m.types["thingif_hub_end_nodes_online"] == "gauge", "\(m.types)")
            #expect(m.types["thingif_hub_end_nodes"] == "gauge")
            #expect(try await gauges(online: 0, total: 2))
            try await connection(a, true)
            #expect(try await gauges(online: 1))
            try await connection(b, true)
            #expect(try await gauges(online: 2))
            // Things' own statuses are another gauge: the end nodes are not things_online.
            #expect(try await metrics(e, token: nil).value("thingif_hub_things_online") == 0)
            try await connection(a, false)
            #expect(try await gauges(online: 1))
            // A removed end node's presence goes with it.
            let removed = try await e.call("DELETE", "\(e.thingIF)/things/\(gw)/end-nodes/\(b)", token: token)
            #expect(removed.status == 204, "\(removed.status) \(removed.text)")
            #expect(try await gauges(online: 0, total: 1))
            // A thingif gateway announces its own status: its end nodes count while it is online, and
            // its Will takes them all out of the gauge at once.
            try await connection(a, true)
            let link = try await offPool { Result { try GatewayRequestsTests.Link(e, gateway, will: true) } }.get()
            defer { link.stop() }
            #expect(link.probe.publish(Topics.status(clientID: gateway.topic), Array("online".utf8), retain: true))
            #expect(await offPool { poll { e.hub.delivery.isOnline(gw) } })
            #expect(try await gauges(online: 1))
            link.probe.client.disconnectWithWill()
            #expect(await offPool { poll { !e.hub.delivery.isOnline(gw) } })
            #expect(try await gauges(online: 0))
        }
    }

    @Test(
        "The end-node gauges are counted at most once a second, however often anyone asks the open /metrics"
    )
    func endNodeGaugesBounded() async throws {
        try await withHubAPI { e in
            let (uid, token) = try await e.user()
            let gateway = try await GatewayRequestsTests.gateway(e, "GW-MET-2", uid: uid, token: token)
            _ = try await EndNodeOwnerTests.endNode(e, gateway: gateway.id, "LAMP-MET-3", uid: uid, token: token)
            // The count walks every end node's presence under the delivery's lock
            // and asks the store: 200 scrapes run it at most once a second.
            let counts = e.hub.metrics.endNodeCounts
            let start = Date()
            for _ in 0..<200 {
                #expect(try await metrics(e, token: nil).types["thingif_hub_end_nodes"] == "gauge")
            }
            let seconds = Date().timeIntervalSince(start)
            let ran = e.hub.metrics.endNodeCounts - counts
            #expect(ran >= 1, "the first scrape counts")
            #expect(Double(ran) <= seconds + 1, "\(ran) counts for 200 scrapes in \(seconds) s")
        }
    }

    @Test(
        "Home Assistant discovery for an end node: its own device, via_device its gateway's; availability follows its presence behind the gateway; its entity goes with its gateway"
    )
    func homeAssistantEndNode() async throws {
        try await withHubAPI { e in
            let (haUser, haPassword) = try await Self.homeAssistantOn(e)

            let (uid, token) = try await e.user()
            // A gateway onboarded by its owner, then by itself (its MQTT identity).
            let gateway = try await GatewayRequestsTests.gateway(e, "GW-HA-1", uid: uid, token: token)
            let gw = gateway.id, gwToken = gateway.token
            // An end node of the mapped type (an air conditioner on the gateway's bus).
            let n = try await e.call(
                "POST", "\(e.thingIF)/onboardings", token: token,
                json: [
                    "gatewayThingID": gw, "endNodeVendorThingID": "AC-HA-EN-1", "endNodePassword": "pw",
                    "owner": "user:\(uid)", "endNodeThingType": "AirConditioner"
                ], contentType: "application/vnd.kii.OnboardingEndNodeWithGatewayThingID+json")
            try #require(n.status == 200, "\(n.status) \(n.text)")
            let en = try #require(n.string("endNodeThingID"))
            let configTopic = "homeassistant/climate/\(en)/config"
            let availabilityTopic = "thingif/\(en)/availability"

            let ha = try await Self.homeAssistantClient(e, user: haUser, password: haPassword)
            defer { ha.stop() }
            for topic in ["homeassistant/#", "thingif/+/availability"] {
                let code = await offPool { ha.subscribe(topic) }
                #expect(code.map { $0 < 0x80 } == true, "\(topic): \(String(describing: code))")
            }
            func availability() -> String? {
                ha.messages(on: availabilityTopic).last.map { String(decoding: $0.payload, as: UTF8.self) }
            }
            func connection(_ online: Bool) async throws {
                try await EndNodeOwnerTests.connection(e, gateway: gw, token: gwToken, en, online: online)
            }

            // The gateway says the end node is reachable: its device appears, through the gateway's.
            try await connection(true)
            let config = try #require(await offPool { ha.waitForMessage(on: configTopic) }, "no config")
            // Retained: a subscriber that comes later gets it too.
            let late = try await offPool {
                Result { try TopicListener(port: e.env.broker.port, topics: [configTopic]) }
            }
            .get()
            defer { late.stop() }
            let kept = await offPool {
                poll(timeoutMs: 30_000) { late.payloads(on: configTopic).contains { !$0.isEmpty } }
            }
            #expect(kept, "the config is retained")
            let schemaDoc = try JSON.parse(config.payload).get()
            #expect(HAClimateSchema.problems(schemaDoc) == [], "the config against Home Assistant's climate schema")
            let doc = try #require(parseObject(String(decoding: config.payload, as: UTF8.self)))
            let device = try #require(doc["device"] as? [String: Any])
            #expect(device["identifiers"] as? [String] == ["thingif_\(en)"], "one device per end node")
            #expect(device["via_device"] as? String == "thingif_\(gw)", "\(device)")
            #expect(doc["availability_topic"] as? String == availabilityTopic)
            #expect(
                await offPool { poll(timeoutMs: 30_000) { availability() == "online" } }, "\(availability() ?? "-")")

            // Its presence goes: so does its availability.
            try await connection(false)
            #expect(
                await offPool { poll(timeoutMs: 30_000) { availability() == "offline" } }, "\(availability() ?? "-")")

            // A thingif gateway over MQTT: online, then its end node's status; its Will takes the end node's
            // availability with it.
            let link = try await offPool { Result { try GatewayRequestsTests.Link(e, gateway, will: true) } }.get()
            defer { link.stop() }
            #expect(link.probe.publish(Topics.status(clientID: gateway.topic), Array("online".utf8), retain: true))
            #expect(
                link.probe.publish(
                    Topics.endNodeStatus(clientID: gateway.topic, endNode: en), Array("online".utf8), retain: true))
            #expect(
                await offPool { poll(timeoutMs: 30_000) { availability() == "online" } }, "\(availability() ?? "-")")
            link.probe.client.disconnectWithWill()
            #expect(
                await offPool { poll(timeoutMs: 30_000) { availability() == "offline" } }, "\(availability() ?? "-")")

            // Deleting the gateway deletes its end node: its entity leaves Home Assistant.
            let deleted = try await e.call("DELETE", "\(e.api)/targets/thing:\(gw)", token: token)
            #expect(deleted.status == 204, "\(deleted.status) \(deleted.text)")
            let emptied = await offPool {
                poll(timeoutMs: 30_000) { ha.messages(on: configTopic).last?.payload.isEmpty == true }
            }
            #expect(emptied, "the end node's config is emptied with its gateway")
            #expect(await offPool { poll(timeoutMs: 30_000) { availability() == "" } }, "\(availability() ?? "-")")
        }
    }

    /// The keys the hub must send for its controls (the schema itself has
    /// no required key).
    static let required: Set<String> = [
        "unique_id", "availability_topic", "modes", "mode_command_topic", "mode_state_topic", "power_command_topic",
        "temperature_command_topic", "temperature_state_topic", "fan_mode_command_topic", "fan_modes",
        "current_temperature_topic", "current_humidity_topic"
    ]

    @Test(
        "Home Assistant discovery: retained config, re-publish on its birth, its commands run on the C appliance, state and availability follow, bad input refused"
    )
    func homeAssistant() async throws {
        try await withHubAPI { e in
            let events = Locked<[String]>([])
            e.hub.onEvent = { line in events.withLock { $0.append(line) } }
            let (haUser, haPassword) = try await Self.homeAssistantOn(e)
            // Metrics are open when no token is set.
            #expect(try await e.get("/metrics", token: nil).status == 200)

            let (uid, token) = try await e.user()
            let (tid, thingToken) = try await e.onboard("AC-HA-1", owner: "user:\(uid)", token: token)
            let t = try await e.appliance(thingID: tid, token: thingToken) { t in
                #expect(ct_behave_upload_state(t.ct, "setPresetTemperature", 1) == 0)
            }
            let configTopic = "homeassistant/climate/\(tid)/config"
            let stateTopic = "thingif/\(tid)/state"
            let availabilityTopic = "thingif/\(tid)/availability"

            // Home Assistant, with its own broker identity.
            let ha = try await Self.homeAssistantClient(e, user: haUser, password: haPassword)
            defer { ha.stop() }
            // What it may read; a thing's topics it may not.
            for topic in ["homeassistant/#", "thingif/+/state", "thingif/+/availability"] {
                let code = await offPool { ha.subscribe(topic) }
                #expect(code.map { $0 < 0x80 } == true, "\(topic): \(String(describing: code))")
            }
            let refused = await offPool { ha.subscribe("p/#") }
            #expect(refused.map { $0 >= 0x80 } == true, "p/#: \(String(describing: refused))")

            // The retained config, checked against the climate schema.
            let config = try #require(await offPool { ha.waitForMessage(on: configTopic) }, "no config")
            #expect(config.retain, "the config is retained")
            let doc = try #require(parseObject(String(decoding: config.payload, as: UTF8.self)))
            let schemaDoc = try JSON.parse(config.payload).get()
            #expect(HAClimateSchema.problems(schemaDoc) == [], "the config against Home Assistant's climate schema")
            for (what, broken) in HAClimateSchema.brokenCopies(of: schemaDoc) {
                #expect(!HAClimateSchema.problems(broken).isEmpty, "the schema check accepts \(what)")
            }
            let keys = Set(doc.keys)
            #expect(
                HubOpsTests.required.subtracting(keys).isEmpty, "missing: \(HubOpsTests.required.subtracting(keys))")
            #expect(doc["unique_id"] as? String == "thingif_\(tid)")
            #expect(
                (doc["device"] as? [String: Any])?["identifiers"] as? [String] == ["thingif_\(tid)"],
                "the device block ties the entity to one device")
            #expect((doc["device"] as? [String: Any])?["via_device"] == nil, "a standalone thing is nobody's end node")
            #expect(doc["fan_modes"] as? [String] == (0...10).map(String.init))
            #expect(doc["availability_topic"] as? String == availabilityTopic)
            #expect(doc["temperature_state_topic"] as? String == stateTopic)
            #expect(doc["modes"] as? [String] == ["off", "cool"])
            #expect(doc["min_temp"] as? Int == 16 && doc["max_temp"] as? Int == 30)
            let temperatureTopic = try #require(doc["temperature_command_topic"] as? String)
            #expect(
                await offPool {
                    poll {
                        ha.messages(on: availabilityTopic).last.map { String(decoding: $0.payload, as: UTF8.self) }
                            == "online"
                    }
                })

            // Home Assistant's birth message: every config again.
            let seen = ha.messages(on: configTopic).count
            ha.publish("homeassistant/status", Array("online".utf8))
            #expect(await offPool { poll { ha.messages(on: configTopic).count > seen } }, "configs not published again")

            // A temperature command: a Thing-IF command by the hub, run to DONE.
            ha.publish(temperatureTopic, Array("22.0".utf8))
            var haCommand: [String: Any]?
            let deadline = Date().addingTimeInterval(10)
            while haCommand == nil && Date() < deadline {
                let r = try await e.get("\(e.target(tid))/commands", token: token)
                haCommand = (r.json["commands"] as? [[String: Any]])?.first {
                    $0["issuer"] as? String == HATopics.issuer
                }
                if haCommand == nil { try await Task.sleep(nanoseconds: 50_000_000) }
            }
            let cid = try #require(haCommand?["commandID"] as? String, "no command issued by \(HATopics.issuer)")
            let done = try await e.waitForFinished(tid, cid, token: token)
            #expect(done["commandState"] as? String == "DONE", "\(done)")
            #expect(done["issuer"] as? String == "hub:homeassistant")
            // Meant for now: it lives 60 s (CommandLifetimes.homeAssistantTimeToLive).
            let created = try #require((done["createdAt"] as? NSNumber)?.int64Value)
            let expires = try #require((done["expiresAt"] as? NSNumber)?.int64Value, "\(done)")
            #expect(expires - created >= 59_000 && expires - created <= 61_000, "\(expires - created) ms")
            let actions = done["actions"] as? [[String: Any]]
            #expect((actions?.first?["setPresetTemperature"] as? [String: Any])?["presetTemperature"] as? Int == 22)
            // The thing's state upload reaches the state topic.
            let stateSeen = await offPool {
                poll(timeoutMs: 30_000) {
                    ha.messages(on: stateTopic).contains {
                        parseObject(String(decoding: $0.payload, as: UTF8.self))?["presetTemperature"] as? Int == 22
                    }
                }
            }
            #expect(
                stateSeen, "state: \(ha.messages(on: stateTopic).map { String(decoding: $0.payload, as: UTF8.self) })")

            // Bad input: a log line each, no command, no crash.
            ha.publish(temperatureTopic, Array("warm".utf8))
            ha.publish(temperatureTopic, Array(repeating: UInt8(ascii: "9"), count: 4096))
            ha.publish("thingif/no-such-thing/set/temperature", Array("22".utf8))
            ha.publish("thingif/\(tid)/set/fan_mode", Array("99".utf8))
            let logged = await offPool {
                poll { events.withLock { $0.filter { $0.hasPrefix("homeassistant: command refused") }.count } >= 4 }
            }
            #expect(logged, "\(events.withLock { $0.filter { $0.hasPrefix("homeassistant") } })")
            let lines = events.withLock { $0.filter { $0.hasPrefix("homeassistant: command refused") } }
            #expect(lines.contains { $0.contains("temperature must be a number") })
            #expect(lines.contains { $0.contains("4096 bytes") })
            #expect(lines.contains { $0.contains("unknown thing") })
            let listed = try await e.get("\(e.target(tid))/commands", token: token)
            #expect((listed.json["commands"] as? [Any])?.count == 1, "only the one good command")
            let m = try await metrics(e, token: nil)
            #expect(m.value("thingif_hub_homeassistant_commands_total", ["outcome": "issued"]) == 1)
            #expect(m.value("thingif_hub_homeassistant_commands_total", ["outcome": "refused"]) == 4)
            #expect(e.hub.delivery.isOnline(tid), "the hub still serves the thing")

            // The appliance stops: availability flips to offline.
            await offPool { _ = t.destroy() }
            let offline = await offPool {
                poll(timeoutMs: 30_000) {
                    ha.messages(on: availabilityTopic).last.map { String(decoding: $0.payload, as: UTF8.self) }
                        == "offline"
                }
            }
            #expect(
                offline,
                "availability: \(ha.messages(on: availabilityTopic).map { String(decoding: $0.payload, as: UTF8.self) })"
            )
        }
    }

    @Test(
        "thingif-hub --ha-mappings-file: a second thing type's config follows the file; `thingif thing delete` removes the thing and empties it",
        .enabled(if: CLIEndToEnd.available, "needs thingif-hub (with --http-port) and thingif next to the test bundle"),
        .timeLimit(.minutes(3)))
    func mappingsFileAndCLIDelete() throws {
        let cli = try #require(CLIEndToEnd.cli), hubExe = try #require(CLIEndToEnd.hub)
        let scene = try ProcessScene(prefix: "thingif-ha-mappings")
        defer { scene.end() }
        let broker = scene.broker, root = scene.root
        // A heater: the appliance's actions, another thing type, its own
        // range, no fan, the room temperature from another state field.
        let file = root + "/ha-mappings.json"
        try Data(
            #"""
            {"mappings":[{"thingType":"Heater","component":"climate","name":"Heater",
              "schema":"AirConditioner-Demo","schemaVersion":1,
              "power":{"action":"turnPower","param":"power","state":"power"},
              "targetTemperature":{"action":"setPresetTemperature","param":"presetTemperature",
                                   "state":"presetTemperature","min":5,"max":28,"step":1},
              "currentTemperature":{"state":"roomTemperature"}}]}
            """#.utf8
        ).write(to: URL(fileURLWithPath: file))
        let hubLog = root + "/hub.log"
        let (hubPID, url) = try startHubProcess(
            hubExe, broker: broker, logPath: hubLog, storeArgs: ["--memory", "--ha-mappings-file", file])
        scene.children.append(hubPID)
        let env = ["THINGIF_HUB_URL": url, "THINGIF_CONFIG": root + "/cli/cli.json"]
        func thingif(_ args: String...) throws -> (status: Int32, output: String) {
            try runProgram(cli, args, environment: env)
        }
        var r = try thingif("user", "create")
        #expect(r.status == 0, "\(r.output)")
        r = try thingif("onboard", "HT-0001", "demo-pass", "--thing-type", "Heater", "--json")
        #expect(r.status == 0, "\(r.output)")
        let onboarded = try JSON.parse(r.output).get()
        let thingID = try #require(onboarded["thingID"]?.stringValue)
        let thingToken = try #require(onboarded["accessToken"]?.stringValue)

        let configTopic = "homeassistant/climate/\(thingID)/config"
        let listener = try TopicListener(port: broker.port, topics: [configTopic])
        defer { listener.stop() }
        let heater = try ApplianceProcess(
            args: [
                "--port", "\(broker.port)", "--storage", root + "/heater", "--thing-id", thingID, "--token", thingToken
            ],
            logPath: root + "/heater.log")
        try heater.start()
        defer { heater.stop() }

        // The thing came online: its config, from the file's mapping.
        #expect(
            poll(timeoutMs: 30_000) { listener.payloads(on: configTopic).contains { !$0.isEmpty } },
            "no config; hub:\n\(readText(hubLog))\nheater:\n\(heater.log)")
        let text = try #require(listener.payloads(on: configTopic).first { !$0.isEmpty })
        let doc = try JSON.parse(text).get()
        #expect(HAClimateSchema.problems(doc) == [])
        #expect(doc["name"]?.stringValue == "Heater")
        #expect(doc["min_temp"]?.intValue == 5 && doc["max_temp"]?.intValue == 28)
        #expect(doc["device"]?["model"]?.stringValue == "AirConditioner-Demo")
        #expect(doc["current_temperature_template"]?.stringValue == "{{ value_json.roomTemperature }}")
        #expect(doc["fan_modes"] == nil && doc["fan_mode_command_topic"] == nil, "the heater has no fan")
        #expect(doc["current_humidity_topic"] == nil)

        // thingif thing delete: the config is emptied, the thing is gone.
        r = try thingif("thing", "delete", thingID)
        #expect(r.status == 0 && r.output.contains("thing \(thingID) deleted"), "\(r.output)")
        #expect(
            poll(timeoutMs: 30_000) { listener.payloads(on: configTopic).last == "" },
            "\(listener.payloads(on: configTopic))")
        r = try thingif("state", "get", thingID)
        #expect(r.status == 1 && r.output.contains("HTTP 404"), "\(r.output)")
        r = try thingif("thing", "delete", thingID)
        #expect(r.status == 1 && r.output.contains("TARGET_NOT_FOUND"), "\(r.output)")
        r = try thingif("thing", "delete")
        #expect(r.status == 2, "a usage error: \(r.output)")
    }

    @Test(
        "Home Assistant settings: the example mappings file is the built-in mapping; bad prefixes and files are refused"
    )
    func homeAssistantSettings() throws {
        let root = URL(fileURLWithPath: BrokerSecrets.repoRoot)
        let example = try Data(contentsOf: root.appendingPathComponent("examples/ha-mappings.json"))
        let parsed = try HAClimateMapping.parse(Array(example)).get()
        #expect(parsed == [.airConditionerDemo])
        #expect((try? HAClimateMapping.parse(Array(#"{"mappings":[{"thingType":"X"}]}"#.utf8)).get()) == nil)
        #expect((try? HAClimateMapping.parse(Array("not json".utf8)).get()) == nil)
        func load(_ args: [String]) throws -> HubConfig {
            guard case .run(let c) = try HubConfig.load(arguments: args, environment: [:], readFile: { _ in nil })
            else { throw HarnessError("help") }
            return c
        }
        let defaults = try load([])
        #expect(defaults.haDiscovery && defaults.haDiscoveryPrefix == "homeassistant" && defaults.metricsToken == nil)
        let set = try load(["--ha-discovery=false", "--ha-discovery-prefix", "ha/discovery", "--metrics-token", "t"])
        #expect(!set.haDiscovery && set.haDiscoveryPrefix == "ha/discovery" && set.metricsToken == "t")
        for bad in ["ha/#", "+", "", "a//b", "$SYS"] {
            #expect(throws: HubConfig.ConfigError.self) { try load(["--ha-discovery-prefix", bad]) }
        }
        #expect(throws: HubConfig.ConfigError.self) { try load(["--ha-username", "ha"]) }
    }
}

/// Home Assistant's MQTT climate discovery schema, written from its
/// documentation: https://www.home-assistant.io/integrations/climate.mqtt/
/// (Configuration Variables: each key's type and default) and
/// https://www.home-assistant.io/integrations/mqtt/ (MQTT discovery: the
/// `device` block, `availability` and `availability_topic`, `qos`). Home
/// Assistant checks a discovery payload with its own voluptuous schema; the
/// homeassistant package from PyPI (hundreds of MB of dependencies) is too
/// heavy to install in CI for this one check, so its rules are copied here:
/// the keys a climate entity may have and, for each, the type and values it
/// takes. `problems` returns what violates them (empty: the payload is valid).
enum HAClimateSchema {
    enum Kind {
        case string, topic, stateTemplate, commandTemplate, number, positiveNumber, bool, qos, precision, unit
        case modes, strings, availability, availabilityMode, device, entityCategory
    }

    /// Home Assistant's HVAC modes (climate: "modes … Needs to be a subset
    /// of" off, heat, cool, heat_cool, auto, dry, fan_only).
    static let hvacModes: Set<String> = ["off", "heat", "cool", "heat_cool", "auto", "dry", "fan_only"]

    /// The device block's keys (MQTT discovery, "device").
    static let deviceKeys: Set<String> = [
        "configuration_url", "connections", "hw_version", "identifiers", "manufacturer", "model", "model_id", "name",
        "serial_number", "suggested_area", "sw_version", "via_device"
    ]

    static let keys: [String: Kind] = {
        var k: [String: Kind] = [
            "name": .string, "unique_id": .string, "object_id": .string, "icon": .string, "encoding": .string,
            "entity_picture": .string, "entity_category": .entityCategory, "enabled_by_default": .bool,
            "device": .device, "availability": .availability, "availability_topic": .topic,
            "availability_template": .stateTemplate, "availability_mode": .availabilityMode,
            "payload_available": .string, "payload_not_available": .string, "payload_on": .string,
            "payload_off": .string, "qos": .qos, "retain": .bool, "optimistic": .bool, "modes": .modes,
            "fan_modes": .strings, "preset_modes": .strings, "swing_modes": .strings, "min_temp": .number,
            "max_temp": .number, "temp_step": .positiveNumber, "precision": .precision, "initial": .number,
            "min_humidity": .number, "max_humidity": .number, "temperature_unit": .unit,
            "json_attributes_topic": .topic, "json_attributes_template": .stateTemplate,
            "value_template": .stateTemplate, "action_topic": .topic, "action_template": .stateTemplate,
            "current_temperature_topic": .topic, "current_temperature_template": .stateTemplate,
            "current_humidity_topic": .topic, "current_humidity_template": .stateTemplate,
            "preset_mode_value_template": .stateTemplate, "preset_mode_state_topic": .topic
        ]
        // The controls: a command topic and template, a state topic and template each.
        for control in [
            "mode", "power", "temperature", "fan_mode", "swing_mode", "preset_mode", "target_humidity",
            "temperature_high", "temperature_low"
        ] {
            k["\(control)_command_topic"] = .topic
            k["\(control)_command_template"] = .commandTemplate
            if control != "power" && control != "preset_mode" {
                k["\(control)_state_topic"] = .topic
                k["\(control)_state_template"] = .stateTemplate
            }
        }
        return k
    }()

    static func number(_ v: JSON) -> Double? {
        if let i = v.intValue { return Double(i) }
        return v.typeName == "a number" ? Double(v.dump()) : nil
    }

    /// A topic the hub names for one entity: a non-empty UTF-8 string of at
    /// most 65,535 bytes without NUL, and without the wildcards + and #
    /// (command topics are published to, so MQTT forbids wildcards there;
    /// Home Assistant would accept them in state topics, but an entity's
    /// topics are the hub's own, concrete ones).
    static func topicProblem(_ v: JSON) -> String? {
        guard let s = v.stringValue else { return "must be a topic string, not \(v.typeName)" }
        if s.isEmpty || s.utf8.count > 65_535 { return "must be 1 to 65,535 bytes" }
        if s.contains("+") || s.contains("#") || s.contains("\u{0}") { return "\(s) has a wildcard or NUL" }
        return nil
    }

    /// A Jinja template: a string with balanced {{ }}; a state template
    /// reads the payload (`value` or `value_json`).
    static func templateProblem(_ v: JSON, state: Bool) -> String? {
        guard let s = v.stringValue else { return "must be a template string, not \(v.typeName)" }
        let opens = s.components(separatedBy: "{{").count - 1
        let closes = s.components(separatedBy: "}}").count - 1
        if opens == 0 || opens != closes { return "\(s) is not a {{ … }} template" }
        if state && !s.contains("value") { return "\(s) does not read the payload (value / value_json)" }
        return nil
    }

    static func stringsProblem(_ v: JSON, allowed: Set<String>? = nil) -> String? {
        guard v.isArray, v.count > 0 else { return "must be a non-empty list, not \(v.typeName)" }
        let items = v.elements.map(\.stringValue)
        guard items.allSatisfy({ $0.map { !$0.isEmpty } == true }) else { return "must hold non-empty strings" }
        let strings = items.compactMap { $0 }
        if Set(strings).count != strings.count { return "has duplicates: \(strings)" }
        if let allowed, let bad = strings.first(where: { !allowed.contains($0) }) {
            return "\(bad) is not one of \(allowed.sorted())"
        }
        return nil
    }

    static func problem(_ kind: Kind, _ v: JSON) -> String? {
        switch kind {
        case .string: return v.isString ? nil : "must be a string, not \(v.typeName)"
        case .topic: return topicProblem(v)
        case .stateTemplate: return templateProblem(v, state: true)
        case .commandTemplate: return templateProblem(v, state: false)
        case .number: return number(v) == nil ? "must be a number, not \(v.typeName)" : nil
        case .positiveNumber: return (number(v) ?? 0) > 0 ? nil : "must be a number above 0"
        case .bool: return v.boolValue == nil ? "must be a boolean, not \(v.typeName)" : nil
        case .qos: return v.intValue.map { (0...2).contains($0) } == true ? nil : "must be 0, 1 or 2"
        case .precision: return [0.1, 0.5, 1.0].contains(number(v) ?? -1) ? nil : "must be 0.1, 0.5 or 1.0"
        case .unit: return ["C", "F"].contains(v.stringValue ?? "") ? nil : "must be C or F"
        case .modes: return stringsProblem(v, allowed: hvacModes)
        case .strings: return stringsProblem(v)
        case .availabilityMode:
            return ["all", "any", "latest"].contains(v.stringValue ?? "") ? nil : "all, any or latest"
        case .entityCategory:
            return ["config", "diagnostic"].contains(v.stringValue ?? "") ? nil : "config or diagnostic"
        case .availability:
            guard v.isArray, v.count > 0 else { return "must be a non-empty list of {topic, …}" }
            for a in v.elements {
                guard a.isObject, let t = a["topic"] else { return "an entry without a topic" }
                if let p = topicProblem(t) { return "topic \(p)" }
                for (key, value) in a.members where key != "topic" {
                    switch key {
                    case "payload_available", "payload_not_available":
                        if !value.isString { return "\(key) must be a string" }
                    case "value_template":
                        if let p = templateProblem(value, state: true) { return p }
                    default: return "unknown key \(key) in an entry"
                    }
                }
            }
            return nil
        case .device:
            guard v.isObject else { return "must be an object, not \(v.typeName)" }
            if let bad = v.members.first(where: { !deviceKeys.contains($0.key) }) { return "unknown key \(bad.key)" }
            // "At least one of identifiers or connections must be present."
            guard let ids = v["identifiers"] ?? v["connections"] else { return "needs identifiers or connections" }
            if ids.isString { return ids.stringValue!.isEmpty ? "empty identifiers" : nil }
            if let p = stringsProblem(ids) { return "identifiers \(p)" }
            for key in ["name", "manufacturer", "model", "sw_version", "hw_version"] where v[key] != nil {
                if v[key]?.isString != true { return "\(key) must be a string" }
            }
            return nil
        }
    }

    static func problems(_ doc: JSON) -> [String] {
        guard doc.isObject else { return ["the payload is \(doc.typeName), not an object"] }
        var out: [String] = []
        for (key, value) in doc.members {
            guard let kind = keys[key] else {
                out.append("unknown key \(key)")
                continue
            }
            if let p = problem(kind, value) { out.append("\(key): \(p)") }
        }
        if doc["availability"] != nil && doc["availability_topic"] != nil {
            out.append("availability and availability_topic exclude each other")
        }
        if doc["device"] != nil && doc["unique_id"] == nil {
            out.append("device needs unique_id (the device registry works only with it)")
        }
        if let lo = doc["min_temp"].flatMap(number), let hi = doc["max_temp"].flatMap(number), lo >= hi {
            out.append("min_temp \(lo) must be below max_temp \(hi)")
        }
        return out
    }

    /// Broken copies of a valid payload, each of which must be refused: the
    /// schema's own test (a check that cannot fail proves nothing).
    static func brokenCopies(of doc: JSON) -> [(String, JSON)] {
        func copy(_ change: (JSON) -> Void) -> JSON {
            let c = doc.deepCopy()!
            change(c)
            return c
        }
        func list(_ xs: [String]) -> JSON {
            let a = JSON.array()
            for x in xs { a.append(JSON.string(x)!) }
            return a
        }
        return [
            ("a mode Home Assistant lacks", copy { $0.set("modes", list(["off", "cooling"])) }),
            ("a duplicate mode", copy { $0.set("modes", list(["off", "off"])) }),
            ("a temperature as a string", copy { $0.set("min_temp", JSON.string("16")!) }),
            ("min_temp above max_temp", copy { $0.set("min_temp", .int(40)) }),
            ("a wildcard command topic", copy { $0.set("temperature_command_topic", JSON.string("thingif/+/set/t")!) }),
            ("a topic that is a number", copy { $0.set("mode_state_topic", .int(1)) }),
            ("a misspelt key", copy { $0.set("temprature_unit", JSON.string("C")!) }),
            ("a unit of kelvin", copy { $0.set("temperature_unit", JSON.string("K")!) }),
            ("qos 3", copy { $0.set("qos", .int(3)) }),
            ("a template without braces", copy { $0.set("temperature_state_template", JSON.string("value_json.t")!) }),
            (
                "a device without identifiers",
                copy {
                    let d = JSON.object()
                    d.set("name", string: "x")
                    $0.set("device", d)
                }
            ),
            (
                "availability as a list besides availability_topic",
                copy {
                    let a = JSON.array()
                    let entry = JSON.object()
                    entry.set("topic", string: "thingif/x/availability")
                    a.append(entry)
                    $0.set("availability", a)
                }
            ),
            ("an empty fan_modes", copy { $0.set("fan_modes", JSON.array()) })
        ]
    }
}
