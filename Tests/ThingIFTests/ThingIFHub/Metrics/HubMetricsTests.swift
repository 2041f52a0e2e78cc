// SPDX-License-Identifier: Apache-2.0

import CThingIF
import CThingIFTestSupport
import Foundation
import Testing
import ThingIF
import ThingIFHub
import ThingIFHubServer

@Suite("Hub metrics: Prometheus counters, gauges and histograms", .serialized, .offPool)
struct HubMetricsTests {
    @Test("GET /metrics: a command run to DONE by the C appliance moves the counters and the latency histogram by one")
    func metricsMove() async throws {
        try await withHubAPI(security: HubServer.Security(metricsToken: HubAPIEnv.metricsToken)) { e in
            let events = HubLines()
            e.hub.onEvent = events.sink
            // A configured token is required: none, a wrong one and another scheme get 401.
            for headers in [
                [:], ["Authorization": "Bearer wrong"], ["Authorization": "Basic \(HubAPIEnv.metricsToken)"]
            ] {
                let r = try await e.call("GET", "/metrics", headers: headers)
                #expect(r.status == 401 && r.errorCode == "UNAUTHORIZED", "\(headers): \(r.status) \(r.text)")
            }
            let (uid, token) = try await e.user()
            let (tid, thingToken) = try await e.onboard("AC-METRICS-1", owner: "user:\(uid)", token: token)
            _ = try await e.appliance(thingID: tid, token: thingToken)
            // An event stream is the user's one target: nothing for the notification sweep.
            _ = try await e.installation("SSE", token: token)
            let before = try await e.metrics()
            #expect(before.types["thingif_hub_command_result_latency_seconds"] == "histogram")
            #expect(before.types["thingif_hub_commands_issued_total"] == "counter")
            #expect(before.value("thingif_hub_things_online") == 1)

            let cid = try await e.postCommand(tid, token: token, userID: uid)
            let c = try await e.waitForFinished(tid, cid, token: token)
            #expect(c["commandState"] as? String == "DONE")
            // Its notification is told (and, were it marked, its mark queued)
            // after its results are stored. Then a marker's mark: the flush
            // that carries it carries every mark queued before, so once it is
            // done, any mark of the command was flushed too.
            let told = await offPool { events.first(containing: "notified of the end of \(cid)") }
            #expect(told == "notified of the end of \(cid)", "\(told ?? "not told")")
            let marker = "marker-" + Platform.randomHex(bytes: 4)
            e.hub.notifications.markSoon(marker)
            #expect(await offPool { events.wait { $0.hasPrefix("marked notified:") && $0.contains(marker) } })
            let after = try await e.metrics()

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
            // Never due for a sweep, so never marked (a statement a command
            // spared): the marker's is the one statement.
            #expect(delta("thingif_hub_store_latency_seconds_count", ["op": "markNotified"]) == 1)
            let marked = events.all.filter { $0.hasPrefix("marked notified:") }
            #expect(!marked.contains { $0.contains(cid) }, "\(marked)")
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
        let security = HubServer.Security(metricsToken: HubAPIEnv.metricsToken)
        let allow = WebhookGuard(allow: ["127.0.0.1:\(hook.port)", "127.0.0.1:\(deadPort)"])
        try await withHubAPI(security: security, options: { $0.webhooks = allow }) { e in
            let events = HubLines()
            e.hub.onEvent = events.sink
            // The operator's log lines too, still kept in e.logs.
            let logLines = HubLines()
            let log = e.hub.onLog
            e.hub.onLog = { line in
                log?(line)
                logLines.append(line)
            }
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
            let before = try await e.metrics()
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
            // Each command's notifications are counted once it is told (SSE
            // and MQTT then; webhooks are posted off the request thread and
            // counted before their outcome is reported): wait for all of them.
            let counted = await offPool {
                [done, failed].allSatisfy { cid in events.wait { $0.hasPrefix("notified of the end of \(cid)") } }
                    && events.wait(count: 2) { $0.hasPrefix("webhook of") && $0.hasSuffix(" delivered") }
                    && logLines.wait(count: 2) { $0.hasPrefix("webhook of") }
            }
            #expect(counted, "events: \(events.all); logs: \(logLines.all)")
            let logs = e.logs
            let after = try await e.metrics()
            #expect(after.types[name] == "counter")
            for (channel, outcome, n) in [
                ("sse", "ok", 2.0), ("sse", "failed", 2), ("webhook", "ok", 2), ("webhook", "failed", 2),
                ("mqtt", "ok", 2), ("mqtt", "failed", 0)
            ] {
                let delta = count(after, channel, outcome) - count(before, channel, outcome)
                #expect(delta == n, "\(name){channel=\(channel),outcome=\(outcome)} moved by \(delta), not \(n)")
            }
            // Counted, not logged: an SSE installation without a stream is an
            // app that is not open. A webhook that fails is logged (waited for above).
            #expect(logs.withLock { $0.contains { $0.contains("webhook of") } }, "\(logs.withLock { $0 })")
            #expect(!logs.withLock { $0.contains { $0.contains("no open event stream") } }, "\(logs.withLock { $0 })")
            func delta(_ metric: String) -> Double { after.value(metric) - before.value(metric) }
            #expect(delta("thingif_hub_commands_failed_total") == 1)
            #expect(delta("thingif_hub_commands_done_total") == 1)
            #expect(delta("thingif_hub_command_result_latency_seconds_count") == 2)

            // The appliance stops (its will: offline): the gauge goes down.
            // The hub reports it offline after it set the gauge.
            await offPool { _ = t.destroy() }
            #expect(await offPool { events.wait { $0 == "\(tid) is offline" } }, "\(events.all)")
            let online = try await e.metrics().value("thingif_hub_things_online")
            #expect(online == 0, "things_online \(online) after the thing went offline")
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
                let m = try await e.metrics(token: nil)
                return m.value("thingif_hub_end_nodes_online") == online
                    && total.map { m.samples["thingif_hub_end_nodes"] == $0 } ?? true
            }
            let m = try await e.metrics(token: nil)
            #expect(m.types["thingif_hub_end_nodes_online"] == "gauge", "\(m.types)")
            #expect(m.types["thingif_hub_end_nodes"] == "gauge")
            #expect(try await gauges(online: 0, total: 2))
            try await connection(a, true)
            #expect(try await gauges(online: 1))
            try await connection(b, true)
            #expect(try await gauges(online: 2))
            // Things' own statuses are another gauge: the end nodes are not things_online.
            #expect(try await e.metrics(token: nil).value("thingif_hub_things_online") == 0)
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
            #expect(await offPool { poll { e.hub.presence.isOnline(gw) } })
            #expect(try await gauges(online: 1))
            link.probe.client.disconnectWithWill()
            #expect(await offPool { poll { !e.hub.presence.isOnline(gw) } })
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
                #expect(try await e.metrics(token: nil).types["thingif_hub_end_nodes"] == "gauge")
            }
            let seconds = Date().timeIntervalSince(start)
            let ran = e.hub.metrics.endNodeCounts - counts
            #expect(ran >= 1, "the first scrape counts")
            #expect(Double(ran) <= seconds + 1, "\(ran) counts for 200 scrapes in \(seconds) s")
        }
    }
}
