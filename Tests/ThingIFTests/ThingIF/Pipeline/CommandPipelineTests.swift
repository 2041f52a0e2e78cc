// SPDX-License-Identifier: Apache-2.0

import Foundation
import Testing
@testable import ThingIF

// The command pipeline without a broker: a fake of our own
// Transport seam and a fake clock, the real ledger and outbox on a temporary
// directory. What the fault streams prove in minutes with mosquitto, these
// prove step by step in milliseconds.

/// A transport that records what is published and hands over, one per
/// `loop` call, the messages a test put in `incoming` (what a socket holds).
final class FakeTransport: Transport {
    let clientID: String
    var published: [TransportMessage] = []
    var incoming: [TransportMessage] = []
    var deliver: (TransportMessage) -> Void = { _ in }
    var publishRC: Int32 = 0

    init(clientID: String) { self.clientID = clientID }

    func publish(
        topic: String, payload: [UInt8], qos: Int32, retain: Bool, responseTopic: String?,
        correlationData: [UInt8]?
    ) -> Int32 {
        published.append(
            TransportMessage(
                topic: topic, payload: payload, qos: qos, retain: retain, responseTopic: responseTopic,
                correlationData: correlationData))
        return publishRC
    }

    func loop(timeoutMs: Int) -> Int32 {
        if !incoming.isEmpty { deliver(incoming.removeFirst()) }
        return 0
    }

    var hasInput: Bool { !incoming.isEmpty }
    static func describe(_ rc: Int32) -> String { "fake error \(rc)" }
}

/// A clock that moves only when the test moves it.
final class FakeClock: PipelineClock {
    var now: Int64 = 1_000_000
    func nowMs() -> Int64 { now }
}

typealias TestPipeline = CommandPipeline<FakeTransport, FakeClock, PipelineRig>

/// Results as the fake framework saw them published.
struct PublishedResults {
    var commandID: String
    var requestID: String
    var body: String
}

/// One pipeline on one storage directory, with a fake transport and clock,
/// and a handler that records every action it runs ("c1#0"). The rig is the
/// pipeline's owner (PipelineOwner).
final class PipelineRig: PipelineOwner {
    static let topic = "th-topic"
    static let identity = Identity(
        appID: "app", vendorThingID: nil, thingID: "th.1", accessToken: "token",
        endpoint: MQTTEndpoint(
            installationID: "inst", host: "", portTCP: 0, portSSL: 0, username: "", password: "",
            mqttTopic: topic, ttl: 0))

    let dir: String
    let storage: Storage
    let clock = FakeClock()
    let transport = FakeTransport(clientID: PipelineRig.topic)
    private(set) var pipeline: TestPipeline!
    var runs: [String] = []
    var steps: [(step: PipelineStep, id: String?)] = []
    /// The handler's answer; nil defers the result.
    var answer: (ActionCall) -> ActionResult? = { ActionResult(name: $0.name, succeeded: true) }
    var onRun: (ActionCall) -> Void = { _ in }
    var onStep: (PipelineStep, String?) -> Void = { _, _ in }
    /// Where end-node notices go (EndNodePipelineTests' `gateway()`).
    var endNodeNotices: GatewayNotices?

    init(dir: String? = nil) throws {
        self.dir = try dir ?? makeTempDirectory(prefix: "thingif-pipeline")
        storage = try #require(Storage(directory: self.dir))
        pipeline = TestPipeline(
            owner: self, storage: storage, appID: "app", clock: clock, logger: Logger(), requestPrefix: "rq")
        pipeline.adopt(Self.identity)
        transport.deliver = { [unowned self] m in pipeline.received(m) }
    }

    // MARK: PipelineOwner

    func runAction(_ call: ActionCall) -> ActionResult? {
        runs.append("\(call.command.id)#\(call.index)")
        onRun(call)
        return answer(call)
    }

    func applyRemoteConfig(_ payload: [UInt8]) {}
    func epochNow() -> Int64 { Platform.epochMs() }
    func notify(_ notice: EndNodeNotice) { endNodeNotices?.list.append(notice) }

    func passed(_ step: PipelineStep, _ commandID: String?) {
        steps.append((step, commandID))
        onStep(step, commandID)
    }

    func remove() { try? FileManager.default.removeItem(atPath: dir) }

    /// CONNACK: the pipeline publishes on the fake from now on.
    func connect() {
        pipeline.attach(transport)
        pipeline.sendDue()
    }

    /// A schema command with actions a0, a1, …
    static func command(_ id: String, actions: Int = 2) -> TransportMessage {
        let list = (0..<actions).map { #"{"a\#($0)":{"n":\#($0)}}"# }.joined(separator: ",")
        let json = #"{"commandID":"\#(id)","schema":"S","schemaVersion":1,"issuer":"user:u","actions":[\#(list)]}"#
        return TransportMessage(
            topic: topic, payload: Array(json.utf8), qos: 1, retain: false, responseTopic: nil, correlationData: nil)
    }

    static func reply(_ status: Int, to requestID: String) -> TransportMessage {
        TransportMessage(
            topic: Topics.response(clientID: topic),
            payload: KiiResponse(status: status, headers: [(KiiFraming.requestIDHeader, requestID)]).encode(),
            qos: 1, retain: false, responseTopic: nil, correlationData: Array(requestID.utf8))
    }

    /// Messages into the inbox (as the transport's callback would), then one loop pass.
    func deliver(_ messages: [TransportMessage], canRead: Bool = true) {
        for m in messages { pipeline.received(m) }
        pipeline.processInbox(canRead: canRead)
    }

    /// Every action-results request published so far, in order.
    var results: [PublishedResults] {
        transport.published.compactMap { m in
            guard let r = KiiRequest.decode(m.payload), let rid = r.requestID,
                let c = m.topic.range(of: "/commands/"), let e = m.topic.range(of: "/action-results")
            else { return nil }
            return PublishedResults(
                commandID: String(m.topic[c.upperBound..<e.lowerBound]), requestID: rid,
                body: String(decoding: r.body, as: UTF8.self))
        }
    }

    /// The framework answers every results request published so far.
    func acknowledgeAll(status: Int = 204) {
        deliver(results.map { Self.reply(status, to: $0.requestID) })
        pipeline.writeOut()
    }

    /// The steps passed, without the inbox's own, as "admitted c1" lines.
    var trace: [String] {
        steps.filter { $0.step != .received }.map { "\($0.step)" + ($0.id.map { " " + $0 } ?? "") }
    }
}

@Suite("Command pipeline with a fake transport and clock (fast)")
struct FastPipelineTests {
    @Test("One pass: commands run in order, action by action; one sync before the handlers, one before the results")
    func orderAndGroupCommit() throws {
        let rig = try PipelineRig()
        defer { rig.remove() }
        rig.connect()
        rig.deliver(["c1", "c2", "c3"].map { PipelineRig.command($0) })
        #expect(rig.runs == ["c1#0", "c1#1", "c2#0", "c2#1", "c3#0", "c3#1"])
        #expect(
            rig.trace == [
                "admitted c1", "admitted c2", "admitted c3", "startSynced",
                "finished c1", "finished c2", "finished c3", "resultsSynced",
                "published c1", "published c2", "published c3"
            ])
        let results = rig.results
        #expect(results.map(\.commandID) == ["c1", "c2", "c3"])
        // Results keep the order of the actions.
        #expect(results.allSatisfy { $0.body.contains(#"[{"a0":{"succeeded":true}},{"a1":{"succeeded":true}}]"#) })
        // The ledger holds them until the framework answers.
        #expect(rig.pipeline.state.withLock { $0.ledger.owedResults().count } == 3)
        rig.acknowledgeAll()
        #expect(rig.pipeline.state.withLock { $0.ledger.owedResults().count } == 0)
        #expect(rig.pipeline.state.withLock { $0.outbox.items.count } == 0)
    }

    @Test("Results held after a pass share the next pass's sync with the commands already read")
    func heldResultsShareTheNextSync() throws {
        let rig = try PipelineRig()
        defer { rig.remove() }
        rig.connect()
        // c2 and c3 wait on the socket: read after c1's pass, without waiting.
        rig.transport.incoming = [PipelineRig.command("c2"), PipelineRig.command("c3")]
        rig.deliver([PipelineRig.command("c1")])
        #expect(rig.runs == ["c1#0", "c1#1", "c2#0", "c2#1", "c3#0", "c3#1"])
        // Three commands, three syncs (one at a time would take six); c1's
        // results go out only after the sync that covers them.
        #expect(
            rig.trace == [
                "admitted c1", "startSynced", "finished c1",
                "admitted c2", "admitted c3", "startSynced", "published c1",
                "finished c2", "finished c3", "resultsSynced", "published c2", "published c3"
            ])
        #expect(rig.results.map(\.commandID) == ["c1", "c2", "c3"])
    }

    @Test("A command delivered twice runs once; a redelivery after its results are answered sends them again")
    func duplicates() throws {
        let rig = try PipelineRig()
        defer { rig.remove() }
        rig.connect()
        rig.deliver([PipelineRig.command("c1"), PipelineRig.command("c1")])
        #expect(rig.runs == ["c1#0", "c1#1"])
        #expect(rig.results.count == 1)
        // Still owed: the outbox has it, so a redelivery adds nothing.
        rig.deliver([PipelineRig.command("c1")])
        #expect(rig.results.count == 1)
        rig.acknowledgeAll()
        rig.deliver([PipelineRig.command("c1")])
        #expect(rig.runs == ["c1#0", "c1#1"])
        #expect(rig.results.map(\.commandID) == ["c1", "c1"])
        #expect(rig.results[0].body == rig.results[1].body)
    }

    @Test("A deferred action holds only its command's results; completing it syncs and sends them, once")
    func deferredAction() throws {
        let rig = try PipelineRig()
        defer { rig.remove() }
        rig.connect()
        rig.answer = { call in
            call.command.id == "c1" && call.index == 0 ? nil : ActionResult(name: call.name, succeeded: true)
        }
        rig.deliver([PipelineRig.command("c1"), PipelineRig.command("c2")])
        #expect(rig.results.map(\.commandID) == ["c2"])
        #expect(rig.pipeline.isPending("c1", index: 0))
        #expect(!rig.pipeline.isPending("c1", index: 1))
        rig.steps.removeAll()
        #expect(
            rig.pipeline.complete("c1", index: 0, result: .failure("a0", "too hot")))
        #expect(rig.trace == ["finished c1", "resultsSynced c1", "published c1"])
        #expect(!rig.pipeline.complete("c1", index: 0, result: .failure("a0", "again")))
        #expect(rig.results.map(\.commandID) == ["c2", "c1"])
        #expect(
            rig.results[1].body.contains(
                #"[{"a0":{"succeeded":false,"errorMessage":"too hot"}},{"a1":{"succeeded":true}}]"#))
    }

    @Test(
        "Requests wait while disconnected, go out on attach, again after the timeout (fake clock), 5xx kept, 4xx dropped"
    )
    func publishAndResend() throws {
        let rig = try PipelineRig()
        defer { rig.remove() }
        rig.pipeline.setLimits(.init(requestTimeoutMs: 1000))
        rig.deliver([PipelineRig.command("c1"), PipelineRig.command("c2")])
        #expect(rig.runs.count == 4)
        #expect(rig.transport.published.isEmpty)
        rig.connect()
        #expect(rig.results.map(\.commandID) == ["c1", "c2"])
        let first = rig.results.map(\.requestID)
        rig.clock.now += 999
        rig.pipeline.sendDue()
        #expect(rig.results.count == 2)
        rig.clock.now += 1
        rig.pipeline.sendDue()
        // The same request IDs: the framework can tell a repeat.
        #expect(rig.results.map(\.requestID) == first + first)
        rig.deliver([PipelineRig.reply(503, to: first[0]), PipelineRig.reply(400, to: first[1])])
        rig.clock.now += 1000
        rig.pipeline.sendDue()
        #expect(rig.results.map(\.requestID) == first + first + [first[0]])
        // A reconnect sends what is owed at once.
        rig.pipeline.detach()
        rig.connect()
        #expect(rig.results.map(\.requestID) == first + first + [first[0], first[0]])
        rig.deliver([PipelineRig.reply(204, to: first[0])])
        #expect(rig.pipeline.state.withLock { $0.outbox.items.isEmpty })
    }

    @Test("A 429 (slow down) keeps the results and sends them again after the timeout, as a 5xx; a 400 drops them")
    func tooManyRequestsIsRetried() throws {
        let rig = try PipelineRig()
        defer { rig.remove() }
        rig.pipeline.setLimits(.init(requestTimeoutMs: 1000))
        rig.connect()
        rig.deliver([PipelineRig.command("c1"), PipelineRig.command("c2"), PipelineRig.command("c3")])
        let ids = rig.results.map(\.requestID)
        #expect(rig.results.map(\.commandID) == ["c1", "c2", "c3"])
        rig.deliver([
            PipelineRig.reply(429, to: ids[0]), PipelineRig.reply(503, to: ids[1]), PipelineRig.reply(400, to: ids[2])
        ])
        // Not at once: the timeout is the slowing down a 429 asks for.
        rig.pipeline.sendDue()
        #expect(rig.results.count == 3)
        rig.clock.now += 1000
        rig.pipeline.sendDue()
        #expect(rig.results.map(\.requestID) == ids + [ids[0], ids[1]])
        #expect(rig.pipeline.state.withLock { $0.outbox.items.map(\.commandID) } == ["c1", "c2"])
        rig.deliver([PipelineRig.reply(204, to: ids[0]), PipelineRig.reply(204, to: ids[1])])
        #expect(rig.pipeline.state.withLock { $0.outbox.items.isEmpty })
        #expect(rig.pipeline.state.withLock { $0.ledger.owedResults().isEmpty })
    }

    @Test("With the outbox full of results, new commands wait; a reply that frees room lets them run in the same pass")
    func commandsWaitForOutboxRoom() throws {
        let rig = try PipelineRig()
        defer { rig.remove() }
        rig.pipeline.setOutboxCapacity(2)
        rig.connect()
        rig.deliver([PipelineRig.command("c1"), PipelineRig.command("c2")])
        rig.deliver([PipelineRig.command("c3")])
        #expect(!rig.runs.contains("c3#0"))
        #expect(rig.pipeline.state.withLock { $0.inbox.count } == 1)
        let rid = rig.results[0].requestID
        rig.deliver([PipelineRig.reply(204, to: rid)])
        #expect(rig.runs.suffix(2) == ["c3#0", "c3#1"])
        #expect(rig.results.map(\.commandID) == ["c1", "c2", "c3"])
    }

    @Test("The inbox bound: at the bound the messages are handled inside the transport's callback, none dropped")
    func inboxBound() throws {
        let rig = try PipelineRig()
        defer { rig.remove() }
        rig.pipeline.setLimits(.init(inboxMax: 2))
        rig.connect()
        for i in 1...5 { rig.pipeline.received(PipelineRig.command("c\(i)", actions: 1)) }
        #expect(rig.runs == ["c1#0", "c2#0", "c3#0", "c4#0"])
        rig.pipeline.processInbox(canRead: true)
        #expect(rig.runs == ["c1#0", "c2#0", "c3#0", "c4#0", "c5#0"])
        #expect(rig.pipeline.state.withLock { $0.inboxHighWater } == 2)
        #expect(rig.results.map(\.commandID) == ["c1", "c2", "c3", "c4", "c5"])
    }

    /// What a SIGKILL at one point leaves: the bytes written to the files
    /// (appends still buffered in memory are lost), what had run, and what
    /// the framework had received.
    struct Crash {
        var at: String
        var files: [String: [UInt8]]
        var ran: [String]
        var published: [PublishedResults]

        /// A new rig on a directory holding what the crash left.
        func secondLife() throws -> PipelineRig {
            let dir = try makeTempDirectory(prefix: "thingif-pipeline-crash")
            for (name, bytes) in files {
                try Data(bytes).write(to: URL(fileURLWithPath: dir + "/" + name))
            }
            return try PipelineRig(dir: dir)
        }
    }

    @Test("A crash between any two steps (and inside a handler): no action runs twice, every command gets its results")
    func crashAtEveryStep() throws {
        let commands = ["c1", "c2", "c3", "c4"]
        let files = [CommandLedger.fileName, Outbox.fileName]
        // The first life: c1 and c2 in one pass, c3 and c4 read after it
        // (held results across passes), then the framework answers.
        let first = try PipelineRig()
        defer { first.remove() }
        var crashes: [Crash] = []
        func crash(_ label: String) {
            var f: [String: [UInt8]] = [:]
            for n in files { f[n] = first.storage.read(n) }
            crashes.append(Crash(at: label, files: f, ran: first.runs, published: first.results))
        }
        first.onStep = { step, id in crash("after \(step) \(id ?? "")") }
        first.onRun = { call in crash("inside the handler of \(call.command.id)#\(call.index)") }
        first.connect()
        first.transport.incoming = [PipelineRig.command("c3"), PipelineRig.command("c4")]
        first.deliver([PipelineRig.command("c1"), PipelineRig.command("c2")])
        first.acknowledgeAll()
        crash("after a clean stop")
        #expect(first.runs.count == 8)
        // Every kind of step was passed, so a crash was tried after each.
        let kinds = Set(first.steps.map { "\($0.step)" })
        #expect(
            kinds == [
                "received", "admitted", "startSynced", "finished", "resultsSynced", "published", "acknowledged"
            ])
        #expect(crashes.count >= 30)

        for c in crashes {
            // The second life on what the crash left; the broker (or the hub
            // on the birth message) delivers every command again.
            let second = try c.secondLife()
            defer { second.remove() }
            second.connect()
            second.pipeline.reportInterrupted()
            second.deliver(commands.map { PipelineRig.command($0) })

            let runs = c.ran + second.runs
            for r in Set(runs) {
                #expect(runs.filter { $0 == r }.count == 1, "\(c.at): \(r) ran \(runs.filter { $0 == r }.count) times")
            }
            let after = second.results
            for id in commands {
                let sent = after.filter { $0.commandID == id }
                #expect(!sent.isEmpty, "\(c.at): no results for \(id) after the restart")
                for s in sent {
                    // Reported succeeded only for actions that did run.
                    for a in 0..<2 where s.body.contains(#"{"a\#(a)":{"succeeded":true}}"#) {
                        #expect(runs.contains("\(id)#\(a)"), "\(c.at): \(id)#\(a) reported done, never ran")
                    }
                    // Published before the crash: durable, so the same results again.
                    if let before = c.published.first(where: { $0.commandID == id }) {
                        #expect(s.body == before.body, "\(c.at): \(id) sent \(before.body), then \(s.body)")
                    }
                }
            }
        }
    }
}
