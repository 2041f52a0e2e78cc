// SPDX-License-Identifier: Apache-2.0

import Foundation
import Testing
import ThingIF
import ThingIFHub
#if canImport(Glibc)
    import Glibc
#endif

/// Counts what the hub reports through onEvent (its MQTT thread).
final class HubEvents: @unchecked Sendable {
    private let lock = NSLock()
    private var resent = 0
    private var births = 0

    var resends: Int { lock.withLock { resent } }
    var onlineEvents: Int { lock.withLock { births } }

    func attach(to hub: FrameworkSide) {
        hub.onEvent = { [self] line in
            // "sent N unanswered command(s) to th.… again"
            if line.hasPrefix("sent "), let n = Int(line.dropFirst(5).prefix { $0.isNumber }) {
                lock.withLock { resent += n }
            } else if line.hasSuffix(" is online") {
                lock.withLock { births += 1 }
            }
        }
    }
}

final class StopFlag: @unchecked Sendable {
    private let lock = NSLock()
    private var value = false
    var isSet: Bool { lock.withLock { value } }
    func set() { lock.withLock { value = true } }
}

/// One fault run: a persistent broker, the in-process hub with a journal,
/// optionally a cutting proxy on the thing's side, and aircon as a separate
/// process writing one effects line per action it runs.
final class FaultRig {
    static let appID = "faultApp"
    static let appKey = "faultKey"

    let name: String
    let directory: String
    let broker: PersistentBroker
    let proxy: CuttingProxy?
    private(set) var hub: FrameworkSide
    /// The hub's store; a restarted hub opens the same one again.
    private var hubStore: HubStore
    let hubOptions: FrameworkSide.Options
    let events = HubEvents()
    let appliance: ApplianceProcess
    let effectsPath: String
    private(set) var thingID = ""
    private(set) var hubRestarts = 0
    let started = Date()

    /// commandIDs in the order sent, and the action each carries.
    private(set) var sent: [String] = []
    private(set) var actionOf: [String: String] = [:]
    /// Sends whose publish failed (the hub had recorded the command first).
    private(set) var publishFailures = 0
    private var pending: Set<String> = []

    init(name: String, withProxy: Bool, sharedSubscription: Bool) throws {
        self.name = name
        directory = try makeTempDirectory(prefix: "thingif-fault")
        broker = try PersistentBroker()
        proxy = withProxy ? try CuttingProxy(upstreamPort: broker.port) : nil
        hubOptions = FrameworkSide.Options(
            appID: FaultRig.appID, appKey: FaultRig.appKey, brokerPort: broker.port,
            advertisedPort: proxy?.port, sharedSubscription: sharedSubscription,
            brokerUsername: broker.adminUsername, brokerPassword: broker.adminPassword)
        hubStore = try makeHubStore(directory + "/hub.sqlite")
        guard let h = FrameworkSide(hubOptions, store: hubStore) else { throw HarnessError("cannot create the hub") }
        hub = h
        events.attach(to: hub)
        guard hub.start(timeoutMs: 5000) else { throw HarnessError("the hub did not connect to the broker") }
        effectsPath = directory + "/effects.log"
        appliance = try ApplianceProcess(
            args: [
                "--host", "127.0.0.1", "--port", String(proxy?.port ?? broker.port),
                "--app-id", FaultRig.appID, "--app-key", FaultRig.appKey,
                "--vendor-thing-id", "AC-\(name)", "--password", "fault-pass",
                "--storage", directory + "/thing", "--effects-log", effectsPath,
                "--reconnect-ms", "50,400", "--request-timeout-ms", "2000", "--keepalive-s", "10"
            ], logPath: directory + "/aircon.log")
    }

    deinit {
        appliance.stop()
        proxy?.stop()
        hub.stop()
        broker.stop(signal: SIGKILL)
        try? FileManager.default.removeItem(atPath: directory)
    }

    /// Starts aircon and waits (bounded) until the hub sees it online.
    func startThing() throws {
        try appliance.start()
        guard let t = hub.waitForThing(vendorThingID: "AC-\(name)", timeoutMs: 15_000) else {
            throw HarnessError("aircon did not onboard within 15 s:\n\(tail(appliance.log))")
        }
        thingID = t.thingID
        guard hub.waitForOnline(thingID, timeoutMs: 15_000) else {
            throw HarnessError("aircon did not come online within 15 s:\n\(tail(appliance.log))")
        }
    }

    /// Result deliveries counted by hubs that were restarted since.
    private(set) var earlierPosts: [String: Int] = [:]

    /// Result deliveries of a command over every hub of this run.
    func resultPosts(of id: String) -> Int { earlierPosts[id, default: 0] + hub.resultPostCount(of: id) }

    /// Stops the hub and starts a new one on the same store.
    func restartHub() throws {
        hub.stop()
        for id in sent { earlierPosts[id, default: 0] += hub.resultPostCount(of: id) }
        hubStore = try makeHubStore(directory + "/hub.sqlite")
        guard let h = FrameworkSide(hubOptions, store: hubStore) else {
            throw HarnessError("cannot create the restarted hub")
        }
        hub = h
        events.attach(to: hub)
        guard hub.start(timeoutMs: 5000) else { throw HarnessError("the restarted hub did not connect") }
        hubRestarts += 1
    }

    static func command(_ i: Int) -> (Command, String) {
        let id = FrameworkSide.newCommandID()
        let (action, actions) =
            i % 2 == 0
            ? ("turnPower", "[{\"turnPower\":{\"power\":\(i % 4 == 0)}}]")
            : ("setFanSpeed", "[{\"setFanSpeed\":{\"fanSpeed\":\(i % 11)}}]")
        let doc =
            "{\"commandID\":\"\(id)\",\"schema\":\"AirConditioner-Demo\",\"schemaVersion\":1,"
            + "\"issuer\":\"user:fault\",\"actions\":\(actions)}"
        guard case .success(let j) = JSON.parse(doc), case .success(let c) = Command.decode(j) else {
            fatalError("bad test command \(doc)")
        }
        return (c, action)
    }

    private func refreshPending() {
        pending = pending.filter { hub.results(of: $0) == nil }
    }

    /// Sends `total` commands, at most `window` without results at a time,
    /// running `faults[i]` just before command i. Throws when `deadline`
    /// passes.
    func stream(total: Int, window: Int = 50, deadline: Date, faults: [Int: () throws -> Void]) throws {
        for i in 0..<total {
            if let fault = faults[i] {
                let t0 = Date()
                try fault()
                print(
                    "fault \(name): fault at command \(i) took \(String(format: "%.2f", Date().timeIntervalSince(t0))) s"
                )
            }
            let waitStart = Date()
            var reported = false
            while pending.count >= window {
                refreshPending()
                if pending.count < window { break }
                if Date() > deadline {
                    throw HarnessError("\(name): stuck at command \(i) with \(pending.count) unanswered")
                }
                if !reported && Date().timeIntervalSince(waitStart) > 3 {
                    reported = true
                    print(
                        "fault \(name): no results for 3 s at command \(i) "
                            + "(t=\(String(format: "%.1f", Date().timeIntervalSince(started))) s, online=\(hub.presence.isOnline(thingID)))"
                    )
                }
                usleep(2_000)
            }
            let (cmd, action) = FaultRig.command(i)
            sent.append(cmd.id)
            actionOf[cmd.id] = action
            pending.insert(cmd.id)
            // send() records the command (journal) before publishing; when
            // the publish fails the hub sends it again on the thing's birth.
            if !hub.delivery.send(cmd, to: thingID) { publishFailures += 1 }
        }
    }

    /// Waits (bounded) until every command sent has results.
    func drain(deadline: Date) -> Bool {
        while true {
            refreshPending()
            if pending.isEmpty { return true }
            if Date() > deadline { return false }
            usleep(10_000)
        }
    }

    var unansweredCount: Int { pending.count }

    /// How many times each commandID appears in the effects log, and lines
    /// whose action does not match the command's.
    func effects() -> (counts: [String: Int], mismatched: [String]) {
        var counts: [String: Int] = [:]
        var mismatched: [String] = []
        for line in readText(effectsPath).split(separator: "\n") {
            let parts = line.split(separator: " ")
            guard parts.count == 2 else {
                mismatched.append(String(line))
                continue
            }
            let id = String(parts[0])
            counts[id, default: 0] += 1
            if actionOf[id] != String(parts[1]) { mismatched.append(String(line)) }
        }
        return (counts, mismatched)
    }

    /// Connections the appliance made beyond one per start.
    var reconnects: Int {
        let connects = appliance.log.split(separator: "\n").filter { $0 == "aircon: connected" }.count
        return max(0, connects - appliance.starts)
    }

    /// Requests the appliance sent again after its request timeout.
    var thingResends: Int {
        appliance.log.split(separator: "\n").filter { $0.contains("sending it again") }.count
    }

    func diagnostics() -> String {
        """
        --- aircon log (tail) ---
        \(tail(appliance.log))
        --- broker log (tail) ---
        \(tail(broker.log, lines: 20))
        """
    }
}

/// What the checks found, for the summary line.
struct FaultTally {
    var results = 0
    var effects = 0
    var interrupted = 0
    var interruptedRan = 0
    var duplicatePosts = 0
}

/// Checks the reliability contract over every command sent: exactly one
/// result each in the hub; each ran at most once, and exactly once unless its
/// result says "interrupted"; nothing ran that was not sent.
func checkContract(_ rig: FaultRig, allowInterrupted: Bool) throws -> FaultTally {
    var t = FaultTally()
    let (effects, mismatched) = rig.effects()
    #expect(mismatched.isEmpty, "effects lines that do not match their command: \(mismatched.prefix(5))")
    let sentSet = Set(rig.sent)
    let strangers = effects.keys.filter { !sentSet.contains($0) }
    #expect(strangers.isEmpty, "the appliance ran commands that were never sent: \(strangers.prefix(5))")
    #expect(rig.hub.delivery.unanswered(of: rig.thingID).isEmpty, "the hub still has unanswered commands")
    var problems: [String] = []
    for id in rig.sent {
        let ran = effects[id] ?? 0
        t.effects += ran
        if ran > 1 { problems.append("\(id) ran \(ran) times") }
        guard let text = rig.hub.results(of: id) else {
            problems.append("\(id) has no result")
            continue
        }
        t.results += 1
        let posts = rig.resultPosts(of: id)
        if posts < 1 { problems.append("\(id): result stored but \(posts) posts counted") }
        t.duplicatePosts += max(0, posts - 1)
        let entries = try parseResults(text)
        guard entries.count == 1, let e = entries.first, e.name == rig.actionOf[id] else {
            problems.append("\(id): unexpected results \(text)")
            continue
        }
        if e.succeeded {
            if ran != 1 { problems.append("\(id) succeeded but ran \(ran) times") }
        } else if e.errorMessage?.hasPrefix("interrupted") == true {
            t.interrupted += 1
            t.interruptedRan += ran
            if !allowInterrupted { problems.append("\(id) reported interrupted though the appliance never stopped") }
        } else {
            problems.append("\(id) failed: \(e.errorMessage ?? "?")")
        }
    }
    #expect(problems.isEmpty, "\(problems.count) broken promise(s): \(problems.prefix(10))")
    return t
}

@Suite("Faults: no command lost, none run twice", .serialized, .offPool)
struct FaultTests {
    static let total = 1000

    /// Runs one fault scenario end to end and prints one line of counts.
    private func run(
        _ name: String, total: Int = FaultTests.total, proxy: Bool = false,
        sharedSubscription: Bool = true, allowInterrupted: Bool = false,
        faults: (FaultRig) -> [Int: () throws -> Void],
        background: ((FaultRig, @escaping () -> Bool) -> Void)? = nil,
        extra: (FaultRig) -> String
    ) throws {
        let rig = try FaultRig(name: name, withProxy: proxy, sharedSubscription: sharedSubscription)
        try rig.startThing()
        let deadline = Date().addingTimeInterval(45)
        var ok = false
        defer {
            if !ok {
                print(
                    "fault \(name) FAILED after \(String(format: "%.1f", Date().timeIntervalSince(rig.started))) s\n\(rig.diagnostics())"
                )
            }
        }
        let done = StopFlag()
        var bg: Thread?
        if let background {
            let t = Thread { background(rig) { done.isSet } }
            bg = t
            t.start()
        }
        defer {
            done.set()
            while !(bg?.isFinished ?? true) { usleep(5_000) }
        }
        try rig.stream(total: total, deadline: deadline, faults: faults(rig))
        done.set()
        while !(bg?.isFinished ?? true) { usleep(5_000) }
        let drainStart = Date()
        let drained = rig.drain(deadline: deadline.addingTimeInterval(15))
        print("fault \(name): drain took \(String(format: "%.2f", Date().timeIntervalSince(drainStart))) s")
        #expect(drained, "\(rig.unansweredCount) command(s) still without results after the deadline")
        // Let any stray redelivery arrive and run (it must not), then stop the
        // appliance so the effects log is final.
        usleep(1_000_000)
        rig.appliance.stop()
        let t = try checkContract(rig, allowInterrupted: allowInterrupted)
        let seconds = Date().timeIntervalSince(rig.started)
        print(
            "fault \(name): sent=\(rig.sent.count) results=\(t.results) effects=\(t.effects) "
                + "interrupted=\(t.interrupted) (of which ran=\(t.interruptedRan)) hubResends=\(rig.events.resends) "
                + "duplicateResultPosts=\(t.duplicatePosts) publishFailures=\(rig.publishFailures) "
                + "thingTimeoutResends=\(rig.thingResends) reconnects=\(rig.reconnects) \(extra(rig)) time=\(String(format: "%.1f", seconds))s"
        )
        #expect(t.results == rig.sent.count)
        #expect(rig.sent.count == total)
        ok = drained && t.results == rig.sent.count
        if ProcessInfo.processInfo.environment["THINGIF_FAULT_LOGS"] != nil {
            try? rig.appliance.log.write(
                toFile: "/tmp/thingif-fault-\(name)-aircon.log", atomically: true, encoding: .utf8)
            try? rig.broker.log.write(
                toFile: "/tmp/thingif-fault-\(name)-broker.log", atomically: true, encoding: .utf8)
        }
    }

    @Test("Broker killed and restarted mid-stream (SIGTERM with persistence, then SIGKILL)")
    func brokerRestart() throws {
        try run(
            "broker",
            faults: { rig in
                [
                    350: {
                        rig.broker.stop(signal: SIGTERM)
                        usleep(300_000)
                        try rig.broker.start()
                    },
                    700: {
                        rig.broker.stop(signal: SIGKILL)
                        usleep(300_000)
                        try rig.broker.start()
                    }
                ]
            }, extra: { "brokerRestarts=\($0.broker.restarts)" })
    }

    @Test("Appliance SIGKILLed mid-stream and restarted on the same storage")
    func applianceKill() throws {
        try run(
            "appliance", allowInterrupted: true,
            faults: { rig in
                let kill: () throws -> Void = {
                    rig.appliance.kill9()
                    usleep(100_000)
                    try rig.appliance.start()
                }
                return [300: kill, 550: kill, 800: kill]
            }, extra: { "applianceKills=\($0.appliance.starts - 1)" })
    }

    @Test("A proxy cuts the thing's connection every 1-2 s")
    func connectionCuts() throws {
        // More commands than the others so that the stream sees several cuts
        // (the ledger remembers 1000 commands; at most 50 are in flight).
        try run(
            "cuts", total: 2 * FaultTests.total, proxy: true, faults: { _ in [:] },
            background: { rig, done in
                // First cut after ~0.5 s of streaming, then every 1-2 s.
                var next = Date().addingTimeInterval(0.5)
                while !done() {
                    if Date() >= next {
                        rig.proxy?.cutAll()
                        next = Date().addingTimeInterval(Double.random(in: 1.0...2.0))
                    }
                    usleep(20_000)
                }
            }, extra: { "cuts=\($0.proxy?.cuts ?? 0)" })
    }

    @Test("Hub restarted mid-stream on the same store")
    func hubRestart() throws {
        // A plain subscription here: with mosquitto 2.0.11, persistence on and
        // the shared subscription ($share/thingif-hub/…), the restarted hub
        // received only part of the requests for ~30 s after the restart
        // (nothing was lost, but the run took ~42 s instead of ~6 s).
        try run(
            "hub", sharedSubscription: false,
            faults: { rig in
                [
                    400: {
                        // Down for a moment: results posted meanwhile reach no one.
                        rig.hub.stop()
                        usleep(300_000)
                        try rig.restartHub()
                    }
                ]
            }, extra: { "hubRestarts=\($0.hubRestarts)" })
    }
}
