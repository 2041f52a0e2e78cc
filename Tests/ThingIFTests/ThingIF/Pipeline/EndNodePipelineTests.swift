// SPDX-License-Identifier: Apache-2.0

import Foundation
import Testing
import CThingIF
@testable import ThingIF

// A gateway's pipeline (docs/GATEWAYS.md §4, §5, §7) with the fake
// transport: commands per end node, their ledger records and results,
// membership events, the answers to the gateway's own requests, and the
// list read after a connect. GatewayDeviceTests runs the same against a real
// broker and hub.

extension PipelineRig {
    /// The rig as a gateway that records every end-node notice.
    func gateway() -> GatewayNotices {
        let notices = GatewayNotices()
        pipeline.setGateway(true)
        endNodeNotices = notices
        return notices
    }

    static func endNodeTopic(_ e: String) -> String { Topics.endNodeCommands(clientID: topic, endNode: e) }
    static func eventsTopic(_ e: String) -> String { Topics.endNodeEvents(clientID: topic, endNode: e) }

    static func on(_ topic: String, _ text: String) -> TransportMessage {
        TransportMessage(
            topic: topic, payload: Array(text.utf8), qos: 1, retain: false, responseTopic: nil, correlationData: nil)
    }

    /// The hub's endNodeAdded for `e` (vendorThingID `v`) on e's events topic.
    static func added(_ e: String, _ v: String) -> TransportMessage {
        on(
            eventsTopic(e),
            String(decoding: EndNodeEvent.added(thingID: e, vendorThingID: v, thingType: nil).encode(), as: UTF8.self))
    }

    /// Command `id` on end node `e`'s topic (`command`'s shape).
    static func command(_ id: String, endNode e: String, actions: Int = 1) -> TransportMessage {
        let c = command(id, actions: actions)
        return TransportMessage(
            topic: endNodeTopic(e), payload: c.payload, qos: 1, retain: false, responseTopic: nil, correlationData: nil)
    }

    /// The request topics' paths published so far (method and path), in order.
    var requests: [(method: String, path: String, requestID: String, body: String)] {
        let prefix = "p/\(Self.topic)/thing-if/apps/app/"
        return transport.published.compactMap { m in
            guard m.topic.hasPrefix(prefix), let r = KiiRequest.decode(m.payload), let rid = r.requestID else {
                return nil
            }
            return (r.method, String(m.topic.dropFirst(prefix.count)), rid, String(decoding: r.body, as: UTF8.self))
        }
    }

    /// Where each results request went: the thingID of targets/thing:{id}/…
    var resultTargets: [String] {
        requests.filter { $0.path.hasSuffix("/action-results") }.compactMap { r in
            r.path.split(separator: "/").dropFirst().first.map { String($0.dropFirst("thing:".count)) }
        }
    }

    /// The framework's answer to request `rid` with `status` and `body`.
    static func reply(_ status: Int, to rid: String, body: String) -> TransportMessage {
        TransportMessage(
            topic: Topics.response(clientID: topic),
            payload: KiiResponse(
                status: status, headers: [(KiiFraming.requestIDHeader, rid)], body: Array(body.utf8)
            ).encode(),
            qos: 1, retain: false, responseTopic: nil, correlationData: Array(rid.utf8))
    }
}

final class GatewayNotices {
    var list: [EndNodeNotice] = []
    var lines: [String] {
        list.map { "\($0.event) \($0.vendorThingID) \($0.thingID ?? "-")" }
    }
}

@Suite("Gateway pipeline with a fake transport (fast)")
struct EndNodePipelineTests {
    @Test(
        "Commands on end nodes' topics run for their end node in one group commit with the gateway's own; results go to each target"
    )
    func commandsPerTarget() throws {
        let rig = try PipelineRig()
        defer { rig.remove() }
        let notices = rig.gateway()
        rig.connect()
        var seen: [String] = []
        rig.onRun = { seen.append("\($0.command.id) \($0.target.thingID) \($0.target.vendorThingID ?? "-")") }
        rig.deliver([PipelineRig.added("th.e1", "LAMP-1"), PipelineRig.added("th.e2", "LAMP-2")])
        #expect(notices.lines == ["added LAMP-1 th.e1", "added LAMP-2 th.e2"])
        rig.steps.removeAll()
        rig.deliver([
            PipelineRig.command("c1", endNode: "th.e1"), PipelineRig.command("c2", actions: 1),
            PipelineRig.command("c3", endNode: "th.e2")
        ])
        #expect(seen == ["c1 th.e1 LAMP-1", "c2 th.1 -", "c3 th.e2 LAMP-2"])
        #expect(rig.resultTargets == ["th.e1", "th.1", "th.e2"])
        // One sync for the three starts and one for the three results.
        #expect(rig.trace.filter { $0 == "startSynced" || $0.hasPrefix("resultsSynced") }.count == 2)
        // The ledger names the end node of each end-node command.
        let ledger = try String(contentsOfFile: rig.storage.path(CommandLedger.fileName), encoding: .utf8)
        #expect(ledger.contains(#"{"c":"c1","a":"#) && ledger.contains(#""e":"th.e1"}"#))
        #expect(rig.pipeline.state.withLock { $0.ledger.target(of: "c2") } == nil)
    }

    @Test(
        "A command for an end node the gateway does not carry is answered NOT_REGISTERED, one being removed REMOVED; neither runs"
    )
    func refusedTargets() throws {
        let rig = try PipelineRig()
        defer { rig.remove() }
        _ = rig.gateway()
        rig.connect()
        rig.deliver([PipelineRig.added("th.e1", "LAMP-1")])
        rig.deliver([PipelineRig.command("c1", endNode: "th.e9", actions: 2)])
        #expect(rig.runs.isEmpty)
        #expect(rig.resultTargets == ["th.e9"])
        let body = try #require(rig.results.first?.body)
        #expect(body.contains(#""reason":"NOT_REGISTERED""#))
        #expect(body.contains("end node th.e9 is not registered on this gateway"))
        #expect(body.components(separatedBy: #""succeeded":false"#).count == 3)

        #expect(rig.pipeline.removeEndNode("LAMP-1") == 0)
        #expect(rig.requests.last?.method == "DELETE")
        #expect(rig.requests.last?.path == "things/th.1/end-nodes/th.e1")
        rig.deliver([PipelineRig.command("c2", endNode: "th.e1")])
        #expect(rig.runs.isEmpty)
        #expect(rig.results.last?.body.contains(#""reason":"REMOVED""#) == true)
        // A repeat of a refused command sends its results again, runs nothing.
        rig.acknowledgeAll()
        rig.deliver([PipelineRig.command("c1", endNode: "th.e9", actions: 2)])
        #expect(rig.runs.isEmpty)
        #expect(rig.results.filter { $0.commandID == "c1" }.count == 2)
    }

    @Test("A command ID taken for one target is neither run nor reported on another's topic")
    func foreignCommandID() throws {
        let rig = try PipelineRig()
        defer { rig.remove() }
        _ = rig.gateway()
        rig.connect()
        rig.deliver([PipelineRig.added("th.e1", "LAMP-1"), PipelineRig.added("th.e2", "LAMP-2")])
        rig.deliver([PipelineRig.command("c1", endNode: "th.e1")])
        #expect(rig.runs == ["c1#0"])
        rig.deliver([
            PipelineRig.command("c1", endNode: "th.e2"), PipelineRig.command("c1"),
            PipelineRig.on(PipelineRig.endNodeTopic("th.e2"), #"{"commandID":"c1","cancel":true}"#)
        ])
        #expect(rig.runs == ["c1#0"])
        #expect(rig.resultTargets == ["th.e1"])
        // On its own topic it is a repeat: its results again once answered.
        rig.acknowledgeAll()
        rig.deliver([PipelineRig.command("c1", endNode: "th.e1")])
        #expect(rig.resultTargets == ["th.e1", "th.e1"])
    }

    @Test("A crash while an end node's command runs: after the restart it is reported interrupted for that end node")
    func interruptedForItsTarget() throws {
        let dir = try makeTempDirectory(prefix: "thingif-pipeline")
        do {
            let rig = try PipelineRig(dir: dir)
            _ = rig.gateway()
            rig.answer = { _ in nil }  // deferred: still running at the "crash"
            rig.deliver([PipelineRig.added("th.e1", "LAMP-1"), PipelineRig.command("c1", endNode: "th.e1")])
            #expect(rig.runs == ["c1#0"])
        }
        let after = try PipelineRig(dir: dir)
        defer { after.remove() }
        _ = after.gateway()
        after.connect()
        after.pipeline.reportInterrupted()
        #expect(after.resultTargets == ["th.e1"])
        #expect(after.results.first?.body.contains("interrupted") == true)
        // The registry survived too.
        #expect(after.pipeline.endNodeEntries.map(\.vendorThingID) == ["LAMP-1"])
        #expect(after.pipeline.endNodeEntries.first?.thingID == "th.e1")
    }

    @Test(
        "Membership events: added, changed, removed; one naming another end node than its topic, or unknown, is dropped and never run"
    )
    func events() throws {
        let rig = try PipelineRig()
        defer { rig.remove() }
        let notices = rig.gateway()
        rig.connect()
        rig.deliver([
            PipelineRig.added("th.e1", "LAMP-1"),
            PipelineRig.on(
                PipelineRig.eventsTopic("th.e1"),
                #"{"event":"endNodeChanged","thingID":"th.e1","vendorThingID":"LAMP-9"}"#),
            PipelineRig.on(PipelineRig.eventsTopic("th.e1"), #"{"event":"endNodeRemoved","thingID":"th.e2"}"#),
            PipelineRig.on(PipelineRig.eventsTopic("th.e1"), #"{"event":"endNodeExploded","thingID":"th.e1"}"#),
            PipelineRig.on(PipelineRig.eventsTopic("th.e1"), #"{"event":"endNodeAdded","thingID":"th.e1"}"#)
        ])
        #expect(notices.lines == ["added LAMP-1 th.e1", "changed LAMP-9 th.e1"])
        #expect(rig.runs.isEmpty && rig.results.isEmpty)
        // The status goes out with each ADDED (offline: not said online yet).
        let statuses = rig.transport.published.filter { $0.topic.hasSuffix("/end-nodes/th.e1/status") }
        #expect(statuses.map { String(decoding: $0.payload, as: UTF8.self) } == ["offline"])
        #expect(statuses.allSatisfy { $0.retain })
        rig.deliver([
            PipelineRig.on(PipelineRig.eventsTopic("th.e1"), #"{"event":"endNodeRemoved","thingID":"th.e1"}"#)
        ])
        #expect(notices.lines.last == "removed LAMP-9 th.e1")
        #expect(rig.pipeline.endNodeEntries.isEmpty)
        // A standalone thing takes no end-node topic at all.
        rig.pipeline.setGateway(false)
        rig.deliver([PipelineRig.added("th.e3", "LAMP-3"), PipelineRig.command("c1", endNode: "th.e3")])
        #expect(rig.pipeline.endNodeEntries.isEmpty && rig.runs.isEmpty && rig.results.isEmpty)
    }

    @Test(
        "What a message is follows from its topic: a membership payload on an end node's command topic changes no registry (a malformed command), a command on its events topic runs nothing, another gateway's events topic is not read"
    )
    func eventsByTopicOnly() throws {
        let rig = try PipelineRig()
        defer { rig.remove() }
        let notices = rig.gateway()
        rig.connect()
        rig.deliver([PipelineRig.added("th.e1", "LAMP-1")])
        #expect(notices.lines == ["added LAMP-1 th.e1"])
        notices.list.removeAll()
        let e1 = PipelineRig.endNodeTopic("th.e1")
        let addE2 = EndNodeEvent.added(thingID: "th.e2", vendorThingID: "LAMP-2", thingType: nil).encode()
        rig.deliver([
            PipelineRig.on(e1, #"{"event":"endNodeRemoved","thingID":"th.e1"}"#),
            PipelineRig.on(e1, #"{"event":"endNodeChanged","thingID":"th.e1","vendorThingID":"LAMP-9"}"#),
            PipelineRig.on(PipelineRig.endNodeTopic("th.e2"), String(decoding: addE2, as: UTF8.self)),
            PipelineRig.on(
                PipelineRig.eventsTopic("th.e1"),
                #"{"commandID":"x1","schema":"S","schemaVersion":1,"actions":[{"a0":{}}]}"#),
            PipelineRig.on("p/other-gw/end-nodes/th.e1/events", #"{"event":"endNodeRemoved","thingID":"th.e1"}"#),
            PipelineRig.on(
                "p/\(PipelineRig.topic)/end-nodes/th.e1/x/events", #"{"event":"endNodeRemoved","thingID":"th.e1"}"#)
        ])
        #expect(notices.list.isEmpty)
        #expect(rig.pipeline.endNodeEntries.map(\.vendorThingID) == ["LAMP-1"])
        #expect(rig.runs.isEmpty && rig.results.isEmpty)
        // The same removal on the events topic is taken.
        rig.deliver([
            PipelineRig.on(PipelineRig.eventsTopic("th.e1"), #"{"event":"endNodeRemoved","thingID":"th.e1"}"#)
        ])
        #expect(notices.lines == ["removed LAMP-1 th.e1"])
        #expect(rig.pipeline.endNodeEntries.isEmpty)
    }

    @Test(
        "thingif_end_node_add: registered and synced first, the onboarding in the outbox; 200 makes it ADDED, a 4xx REFUSED and forgotten, a 5xx is sent again"
    )
    func onboardingAnswers() throws {
        let rig = try PipelineRig()
        defer { rig.remove() }
        let notices = rig.gateway()
        rig.pipeline.setLimits(.init(requestTimeoutMs: 1000))
        func add(_ v: String) -> Int32 {
            rig.pipeline.addEndNode(
                EndNodeOnboardingRequest(gateway: .thingID("th.1"), vendorThingID: v, password: "pw-\(v)"))
        }
        #expect(add("LAMP-1") == 0)
        #expect(add("LAMP-1") == Int32(THINGIF_ERR_EXISTS.rawValue))
        #expect(add("LAMP-2") == 0)
        #expect(add("LAMP-3") == 0)
        let registry = try String(contentsOfFile: rig.storage.path(EndNodeRegistry.fileName), encoding: .utf8)
        #expect(registry.contains("LAMP-3") && !registry.contains("pw-"))
        rig.connect()
        let sent = rig.requests.filter { $0.path == "things/th.1/end-nodes" }
        try #require(sent.count == 3)
        #expect(sent[0].body.contains(#""endNodeVendorThingID":"LAMP-1""#))
        #expect(sent[0].body.contains(#""gatewayThingID":"th.1""#))
        rig.deliver([
            PipelineRig.reply(200, to: sent[0].requestID, body: #"{"endNodeThingID":"th.e1","accessToken":"x"}"#),
            PipelineRig.reply(409, to: sent[1].requestID, body: #"{"errorCode":"END_NODE_OF_ANOTHER_GATEWAY"}"#),
            PipelineRig.reply(503, to: sent[2].requestID, body: #"{"errorCode":"SERVICE_BUSY"}"#)
        ])
        #expect(notices.lines == ["added LAMP-1 th.e1", "refused LAMP-2 -"])
        #expect(notices.list[1].detail?.contains("END_NODE_OF_ANOTHER_GATEWAY") == true)
        #expect(rig.pipeline.endNodeEntries.map(\.vendorThingID) == ["LAMP-1", "LAMP-3"])
        // LAMP-1 was added online: its status says so.
        #expect(
            rig.transport.published.contains {
                $0.topic.hasSuffix("/end-nodes/th.e1/status") && $0.payload == Array("online".utf8)
            })
        rig.clock.now += 1000
        rig.pipeline.sendDue()
        #expect(rig.requests.filter { $0.path == "things/th.1/end-nodes" }.count == 4)
        // Removing one still waiting withdraws its onboarding.
        #expect(rig.pipeline.removeEndNode("LAMP-3") == 0)
        #expect(rig.pipeline.state.withLock { $0.outbox.items.contains { EndNodeRequest($0) == .onboarding } } == false)
        rig.pipeline.setMaxEndNodes(1)
        #expect(add("LAMP-4") == Int32(THINGIF_ERR_TOO_MANY.rawValue))
    }

    @Test(
        "After a connect the hub's list is read page by page: what it names is learned, what it does not is forgotten, a pending onboarding is kept"
    )
    func listAfterConnect() throws {
        let rig = try PipelineRig()
        defer { rig.remove() }
        let notices = rig.gateway()
        rig.deliver([PipelineRig.added("th.e1", "LAMP-1"), PipelineRig.added("th.e2", "LAMP-2")])
        #expect(
            rig.pipeline.addEndNode(
                EndNodeOnboardingRequest(gateway: .thingID("th.1"), vendorThingID: "LAMP-5", password: "p")) == 0)
        notices.list.removeAll()
        rig.connect()
        rig.pipeline.syncEndNodes()
        var reads = rig.requests.filter { $0.method == "GET" }
        try #require(reads.count == 1)
        #expect(reads[0].path == "things/th.1/end-nodes?bestEffortLimit=100")
        rig.deliver([
            PipelineRig.reply(
                200, to: reads[0].requestID,
                body: #"{"results":[{"thingID":"th.e1","vendorThingID":"LAMP-1"}],"nextPaginationKey":"k/1 2"}"#)
        ])
        reads = rig.requests.filter { $0.method == "GET" }
        try #require(reads.count == 2)
        #expect(reads[1].path == "things/th.1/end-nodes?bestEffortLimit=100&paginationKey=k%2F1%202")
        rig.deliver([
            PipelineRig.reply(
                200, to: reads[1].requestID,
                body:
                    #"{"results":[{"thingID":"th.e3","vendorThingID":"LAMP-3"},{"thingID":"../x","vendorThingID":"BAD"}]}"#
            )
        ])
        #expect(notices.lines == ["added LAMP-3 th.e3", "removed LAMP-2 th.e2"])
        #expect(rig.pipeline.endNodeEntries.map(\.vendorThingID) == ["LAMP-1", "LAMP-5", "LAMP-3"])
        // The list read is not kept across restarts (in memory only).
        let outbox = (try? String(contentsOfFile: rig.storage.path(Outbox.fileName), encoding: .utf8)) ?? ""
        #expect(!outbox.contains("end-nodes?"))
    }

    @Test(
        "A crash between any two steps with commands for several end nodes: none runs twice, each gets its results for its own target"
    )
    func crashAtEveryStepAcrossEndNodes() throws {
        // c1 and c4 for LAMP-1, c2 for LAMP-2, c3 the gateway's own.
        let targets = ["c1": "th.e1", "c2": "th.e2", "c3": "th.1", "c4": "th.e1"]
        func message(_ id: String) -> TransportMessage {
            targets[id] == "th.1" ? PipelineRig.command(id) : PipelineRig.command(id, endNode: targets[id]!)
        }
        let files = [CommandLedger.fileName, Outbox.fileName, EndNodeRegistry.fileName]
        let first = try PipelineRig()
        defer { first.remove() }
        _ = first.gateway()
        first.deliver([PipelineRig.added("th.e1", "LAMP-1"), PipelineRig.added("th.e2", "LAMP-2")])
        var crashes: [FastPipelineTests.Crash] = []
        func crash(_ label: String) {
            var f: [String: [UInt8]] = [:]
            for n in files { f[n] = first.storage.read(n) }
            crashes.append(.init(at: label, files: f, ran: first.runs, published: first.results))
        }
        first.onStep = { step, id in crash("after \(step) \(id ?? "")") }
        first.onRun = { call in crash("inside the handler of \(call.command.id)#\(call.index)") }
        first.connect()
        first.transport.incoming = [message("c3"), message("c4")]
        first.deliver([message("c1"), message("c2")])
        first.acknowledgeAll()
        crash("after a clean stop")
        #expect(first.runs == ["c1#0", "c2#0", "c3#0", "c3#1", "c4#0"])
        #expect(crashes.count >= 30)

        for c in crashes {
            let second = try c.secondLife()
            defer { second.remove() }
            _ = second.gateway()
            second.connect()
            second.pipeline.reportInterrupted()
            second.deliver(["c1", "c2", "c3", "c4"].map(message))
            let runs = c.ran + second.runs
            for r in Set(runs) {
                #expect(runs.filter { $0 == r }.count == 1, "\(c.at): \(r) ran \(runs.filter { $0 == r }.count) times")
            }
            let published = second.requests.filter { $0.path.hasSuffix("/action-results") }
            for (id, target) in targets {
                let sent = published.filter { $0.path.contains("/commands/\(id)/") }
                #expect(!sent.isEmpty, "\(c.at): no results for \(id) after the restart")
                #expect(
                    sent.allSatisfy { $0.path.hasPrefix("targets/thing:\(target)/") },
                    "\(c.at): \(id)'s results went to \(sent.map(\.path))")
            }
        }
    }

    @Test(
        "Bad input on end-node topics: oversized (reported dropped for its end node), malformed, not UTF-8, deep, hostile topics; nothing runs, a good command still does"
    )
    func badInputOnEndNodeTopics() throws {
        let rig = try PipelineRig()
        defer { rig.remove() }
        _ = rig.gateway()
        rig.pipeline.setLimits(.init(maxPayload: 512))
        rig.connect()
        rig.deliver([PipelineRig.added("th.e1", "LAMP-1")])
        let e1 = PipelineRig.endNodeTopic("th.e1")
        let big =
            #"{"commandID":"big1","schema":"S","schemaVersion":1,"actions":[{"a0":{"pad":""#
            + String(
                repeating: "x", count: 600) + #""}}]}"#
        var notUTF8 = Array(#"{"commandID":"nu1","schema":"S","schemaVersion":1,"actions":[{"a0":{"s":""#.utf8)
        notUTF8 += [0xFF, 0xFE] + Array(#""}}]}"#.utf8)
        let deep = String(repeating: "[", count: 400) + String(repeating: "]", count: 400)
        rig.deliver([
            PipelineRig.on(e1, big),
            PipelineRig.on(e1, #"{"commandID":"m1","actions":[{"#),
            TransportMessage(
                topic: e1, payload: notUTF8, qos: 1, retain: false, responseTopic: nil, correlationData: nil),
            PipelineRig.on(e1, deep),
            PipelineRig.on(e1, #"{"commandID":"c9","schema":"S","schemaVersion":1,"actions":"turnPower"}"#),
            PipelineRig.on(
                "p/\(PipelineRig.topic)/end-nodes/th.e1/x/commands", #"{"commandID":"t1","actions":[{"a":{}}]}"#),
            PipelineRig.on("p/other-gw/end-nodes/th.e1/commands", #"{"commandID":"t2","actions":[{"a":{}}]}"#),
            PipelineRig.on("p/\(PipelineRig.topic)/end-nodes//commands", #"{"commandID":"t3","actions":[{"a":{}}]}"#)
        ])
        #expect(rig.runs.isEmpty)
        // Every command whose ID could be read gets an outcome, for its end node.
        let reported = Set(rig.results.map(\.commandID))
        #expect(reported.contains("big1"))
        #expect(reported.isDisjoint(with: ["t1", "t2", "t3"]))
        #expect(Set(rig.resultTargets) == ["th.e1"])
        rig.deliver([PipelineRig.command("ok1", endNode: "th.e1", actions: 1)])
        #expect(rig.runs == ["ok1#0"])
    }

    @Test(
        "End nodes' commands share the gateway's bounds: with the outbox full of results they wait in the inbox; the inbox bound holds"
    )
    func sharedBounds() throws {
        let rig = try PipelineRig()
        defer { rig.remove() }
        _ = rig.gateway()
        rig.pipeline.setOutboxCapacity(2)
        rig.connect()
        rig.deliver([PipelineRig.added("th.e1", "LAMP-1"), PipelineRig.added("th.e2", "LAMP-2")])
        rig.deliver([PipelineRig.command("c1", endNode: "th.e1"), PipelineRig.command("c2", endNode: "th.e2")])
        rig.deliver([PipelineRig.command("c3", endNode: "th.e1")])
        #expect(rig.runs == ["c1#0", "c2#0"])
        #expect(rig.pipeline.state.withLock { $0.inbox.count } == 1)
        rig.deliver([PipelineRig.reply(204, to: rig.results[0].requestID)])
        #expect(rig.runs == ["c1#0", "c2#0", "c3#0"])

        let bounded = try PipelineRig()
        defer { bounded.remove() }
        _ = bounded.gateway()
        bounded.pipeline.setLimits(.init(inboxMax: 2))
        bounded.connect()
        bounded.deliver([PipelineRig.added("th.e1", "LAMP-1")])
        for i in 1...5 { bounded.pipeline.received(PipelineRig.command("c\(i)", endNode: "th.e1")) }
        #expect(bounded.pipeline.state.withLock { $0.inboxHighWater } <= 2)
        bounded.pipeline.processInbox(canRead: true)
        #expect(bounded.runs == ["c1#0", "c2#0", "c3#0", "c4#0", "c5#0"])
    }

    @Test(
        "Events during the list read win over its pages: an end node removed meanwhile stays removed, one added meanwhile is kept"
    )
    func eventsDuringListRead() throws {
        let rig = try PipelineRig()
        defer { rig.remove() }
        let notices = rig.gateway()
        rig.deliver([PipelineRig.added("th.e1", "LAMP-1")])
        rig.connect()
        rig.pipeline.syncEndNodes()
        let read = try #require(rig.requests.last { $0.method == "GET" })
        notices.list.removeAll()
        // The hub answered the read, then removed LAMP-1 and an owner added
        // LAMP-4; the events overtake the answer.
        rig.deliver([
            PipelineRig.on(PipelineRig.eventsTopic("th.e1"), #"{"event":"endNodeRemoved","thingID":"th.e1"}"#),
            PipelineRig.added("th.e4", "LAMP-4"),
            PipelineRig.reply(
                200, to: read.requestID, body: #"{"results":[{"thingID":"th.e1","vendorThingID":"LAMP-1"}]}"#)
        ])
        #expect(notices.lines == ["removed LAMP-1 th.e1", "added LAMP-4 th.e4"])
        #expect(rig.pipeline.endNodeEntries.map(\.vendorThingID) == ["LAMP-4"])
    }

    @Test(
        "A command for an end node unknown while the list read runs waits for the read: run once the list names it, refused NOT_REGISTERED when it does not"
    )
    func commandsWaitForTheListRead() throws {
        let rig = try PipelineRig()
        defer { rig.remove() }
        let notices = rig.gateway()
        rig.connect()
        // A new handle (a replaced gateway): the hub delivers on the old one's retained status.
        rig.pipeline.syncEndNodes()
        let read = try #require(rig.requests.last { $0.method == "GET" })
        rig.deliver([PipelineRig.command("c1", endNode: "th.e1"), PipelineRig.command("c9", endNode: "th.e9")])
        #expect(rig.runs.isEmpty && rig.results.isEmpty)
        // The answer and a command in one pass: the command waits too.
        rig.deliver([
            PipelineRig.reply(
                200, to: read.requestID, body: #"{"results":[{"thingID":"th.e1","vendorThingID":"LAMP-1"}]}"#),
            PipelineRig.command("c2", endNode: "th.e1")
        ])
        #expect(notices.lines == ["added LAMP-1 th.e1"])
        #expect(rig.runs == ["c1#0", "c2#0"])
        #expect(rig.resultTargets == ["th.e1", "th.e9", "th.e1"])
        let refused = try #require(rig.results.first { $0.commandID == "c9" })
        #expect(refused.body.contains(#""reason":"NOT_REGISTERED""#))
        // No read running: refused at once, as before.
        rig.deliver([PipelineRig.command("c3", endNode: "th.e8")])
        #expect(rig.results.last?.commandID == "c3")
        #expect(rig.runs == ["c1#0", "c2#0"])
    }

    @Test(
        "An outbox journal written before the outbox was generic (k endNodeOnboarding, endNodeRemoval) loads, is sent again, and its answers reach the gateway as before"
    )
    func outboxFromBeforeTags() throws {
        let first = try PipelineRig()
        defer { first.remove() }
        _ = first.gateway()
        first.deliver([PipelineRig.added("th.e2", "LAMP-2")])
        #expect(
            first.pipeline.addEndNode(
                EndNodeOnboardingRequest(gateway: .thingID("th.1"), vendorThingID: "LAMP-1", password: "p")) == 0)
        #expect(first.pipeline.removeEndNode("LAMP-2") == 0)
        // The names in the journal are the ones the older outbox wrote.
        let written = try String(contentsOfFile: first.storage.path(Outbox.fileName), encoding: .utf8)
        #expect(written.contains(#""k":"endNodeOnboarding""#) && written.contains(#""k":"endNodeRemoval""#))
        // The older outbox's lines, as it wrote them (its Kind named them).
        let lines = [
            #"{"op":"add","id":"old-1","m":"POST","p":"things/th.1/end-nodes","ct":"application/vnd.kii.OnboardingEndNodeWithGatewayThingID+json","b":"{\"gatewayThingID\":\"th.1\",\"endNodeVendorThingID\":\"LAMP-1\",\"endNodePassword\":\"p\"}","w":"onboarding of end node LAMP-1","k":"endNodeOnboarding"}"#,
            #"{"op":"add","id":"old-2","m":"DELETE","p":"things/th.1/end-nodes/th.e2","b":"","w":"removal of end node LAMP-2","k":"endNodeRemoval"}"#
        ]
        try (lines.joined(separator: "\n") + "\n").write(
            toFile: first.storage.path(Outbox.fileName), atomically: true, encoding: .utf8)
        let second = try PipelineRig(dir: first.dir)
        let notices = second.gateway()
        second.connect()
        #expect(Set(second.requests.map(\.requestID)) == ["old-1", "old-2"], "\(second.requests.map(\.path))")
        second.deliver([
            PipelineRig.reply(200, to: "old-1", body: #"{"endNodeThingID":"th.e1"}"#),
            PipelineRig.reply(204, to: "old-2", body: "")
        ])
        #expect(notices.lines == ["added LAMP-1 th.e1", "removed LAMP-2 th.e2"])
        #expect(second.pipeline.endNodeEntries.map(\.vendorThingID) == ["LAMP-1"])
        #expect(second.pipeline.state.withLock { $0.outbox.items.isEmpty })
    }

    @Test("An onboarding withdrawn by a removal stays withdrawn after a crash")
    func withdrawnStaysWithdrawn() throws {
        let rig = try PipelineRig()
        defer { rig.remove() }
        _ = rig.gateway()
        #expect(
            rig.pipeline.addEndNode(
                EndNodeOnboardingRequest(gateway: .thingID("th.1"), vendorThingID: "LAMP-1", password: "p")) == 0)
        #expect(rig.pipeline.removeEndNode("LAMP-1") == 0)
        // What a crash leaves: the file as it is now (nothing written out after).
        let reloaded = Outbox(storage: rig.storage, capacity: 16)
        #expect(reloaded.items.isEmpty, "\(reloaded.items.map(\.what))")
    }

    @Test("A full state upload supersedes only its own target's waiting uploads")
    func statePerTarget() throws {
        let rig = try PipelineRig()
        defer { rig.remove() }
        func put(_ id: String, _ body: String, patch: Bool = false) {
            #expect(
                rig.pipeline.sendRequest(
                    method: patch ? "PATCH" : "PUT", path: "targets/thing:\(id)/states",
                    contentType: "application/json",
                    body: Array(body.utf8), what: "state", kind: .state) == 0)
        }
        put("th.1", #"{"a":1}"#)
        put("th.e1", #"{"b":1}"#)
        put("th.e1", #"{"b":2}"#, patch: true)
        put("th.e2", #"{"c":1}"#)
        put("th.e1", #"{"b":3}"#)
        let waiting = rig.pipeline.state.withLock { $0.outbox.items.map { String(decoding: $0.body, as: UTF8.self) } }
        #expect(waiting == [#"{"a":1}"#, #"{"c":1}"#, #"{"b":3}"#])
    }
}
