import Foundation
import Logging
import ServiceLifecycle
import ThingIF
import ThingIFHub
import ThingIFHubServer
#if canImport(Glibc)
import Glibc
#endif

// thingif-hub: the framework side. Things talk to it over MQTT, apps call
// its REST API over HTTP (docs/openapi.yaml). With --demo it only waits for
// one thing to onboard over MQTT, sends the AirConditioner-Demo commands,
// prints each round trip and exits 0 when every result came back as expected.

let config: HubConfig
do {
    switch try HubConfig.load(arguments: Array(CommandLine.arguments.dropFirst()),
                              environment: ProcessInfo.processInfo.environment,
                              readFile: { path in FileManager.default.contents(atPath: path).map { Array($0) } }) {
    case .help:
        print(HubConfig.usage)
        exit(0)
    case .run(let c):
        config = c
    }
} catch {
    fputs("thingif-hub: \(error)\n\(HubConfig.usage)\n", stderr)
    exit(2)
}
let timeoutS = config.timeoutS

@Sendable func say(_ s: String) {
    print(s)
    fflush(stdout)
}

// The store: a SQLite file by default; memory with --memory, and for --demo
// unless --db was given.
let store: HubStore
if config.memory || (config.demo && !config.dbGiven) {
    store = MemoryStore(secrets: config.secrets, retention: config.retention)
} else {
    do {
        store = try SQLiteStore(path: config.db, secrets: config.secrets, retention: config.retention)
    } catch {
        fputs("thingif-hub: cannot open the database \(config.db): \(error)\n", stderr)
        exit(1)
    }
}

// Secure by default: the hub needs its broker identity (docs/SECURITY.md).
if config.brokerUsername == nil {
    guard config.insecureAnonymousBroker else {
        fputs("thingif-hub: no broker identity: give --broker-username and its password (THINGIF_HUB_BROKER_PASSWORD or "
              + "the config file; docs/SECURITY.md), or --insecure-anonymous-broker for an open development broker\n", stderr)
        exit(2)
    }
    say("hub: WARNING: --insecure-anonymous-broker: no broker identity; things get no broker credentials")
}

var hubOptions = FrameworkSide.Options(appID: config.appID, appKey: config.appKey, brokerHost: config.brokerHost,
                                       brokerPort: config.brokerPort, advertisedHost: config.advertisedHost,
                                       advertisedPort: config.advertisedPort, brokerUsername: config.brokerUsername,
                                       brokerPassword: config.brokerPassword, brokerTLS: config.brokerTLS,
                                       advertisedTLSPort: config.advertisedTLSPort)
hubOptions.limits = config.limits
guard let hub = FrameworkSide(hubOptions, store: store) else {
    fputs("thingif-hub: cannot create an MQTT client\n", stderr)
    exit(1)
}
if !config.quiet { hub.onEvent = { say("hub: " + $0) } }

if !config.demo {
    // The REST API; it sets hub.onCommandFinished for notifications, so it
    // exists before the hub starts taking results.
    let security = HubServer.Security(
        limits: config.limits,
        rateLimiter: config.rateLimit > 0 ? RateLimiter(ratePerSecond: Double(config.rateLimit), burst: config.rateBurst) : nil,
        webhooks: WebhookGuard(allow: config.webhookAllow), tlsCertFile: config.tlsCert, tlsKeyFile: config.tlsKey)
    if config.insecureFastPasswordHash {
        say("hub: WARNING: --insecure-fast-password-hash is set (\(config.passwordIterations) iterations): for tests only")
    }
    let server = HubServer(hub: hub, host: config.httpHost, port: config.httpPort, security: security,
                           logLevel: config.quiet ? .error : .warning, log: { say("hub: " + $0) })
    guard hub.start() else {
        fputs("thingif-hub: cannot start on the broker at \(config.brokerHost):\(config.brokerPort): \(hub.startProblem ?? "")\n", stderr)
        exit(1)
    }
    // The server triggers' schedules (SCHEDULE, SCHEDULE_ONCE): one tick a second.
    let ticker = Thread {
        while true {
            hub.triggerEngine.tick()
            Thread.sleep(forTimeInterval: 1)
        }
    }
    ticker.start()
    let where_ = config.memory ? "in memory" : "in \(config.db)"
    say("hub: serving app \(config.appID) on the MQTT broker at \(config.brokerHost):\(config.brokerPort), data \(where_)")
    var logger = Logger(label: "thingif-hub")
    logger.logLevel = .warning
    let group = ServiceGroup(configuration: .init(services: [server], gracefulShutdownSignals: [.sigterm, .sigint],
                                                  logger: logger))
    do {
        try await group.run()
    } catch {
        fputs("thingif-hub: the HTTP API stopped: \(error)\n", stderr)
        hub.stop()
        exit(1)
    }
    hub.stop()
    say("hub: stopped")
    exit(0)
}

guard hub.start() else {
    fputs("thingif-hub: cannot start on the broker at \(config.brokerHost):\(config.brokerPort): \(hub.startProblem ?? "")\n", stderr)
    exit(1)
}
say("hub: serving app \(config.appID) on the broker at \(config.brokerHost):\(config.brokerPort)")

// --demo
struct Step {
    var title: String
    var actions: String
    var titleField: String?
    var description: String?
    var metadata: String?
    /// Expected outcome per action, in order.
    var expect: [Bool]
}
let steps = [
    Step(title: "1. Turn on at 25°C, fan speed 5 (three actions)",
         actions: #"[{"turnPower":{"power":true}},{"setPresetTemperature":{"presetTemperature":25}},{"setFanSpeed":{"fanSpeed":5}}]"#,
         titleField: "Cool down", description: "Before I get home", metadata: #"{"origin":"demo"}"#, expect: [true, true, true]),
    Step(title: "2. A temperature out of range (the appliance refuses it)",
         actions: #"[{"setPresetTemperature":{"presetTemperature":99}}]"#, expect: [false]),
    Step(title: "3. Power off",
         actions: #"[{"turnPower":{"power":false}}]"#, expect: [true]),
]

say("hub: waiting up to \(timeoutS) s for a thing to come online …")
guard let thingID = hub.waitForOnlineThing(timeoutMs: timeoutS * 1000) else {
    fputs("thingif-hub: no thing came online within \(timeoutS) s\n", stderr)
    exit(1)
}

var failures = 0
for step in steps {
    say("")
    say("── \(step.title)")
    guard let cid = hub.sendCommand(to: thingID, schema: "AirConditioner-Demo", schemaVersion: 1, actions: step.actions,
                                    title: step.titleField, description: step.description, metadata: step.metadata) else {
        fputs("thingif-hub: could not send the command\n", stderr)
        exit(1)
    }
    say("   → command \(cid) to \(thingID): \(step.actions)")
    guard let text = hub.waitForResults(of: cid, timeoutMs: timeoutS * 1000),
          case .success(let j) = JSON.parse(text), let results = ActionResults.decode(j) else {
        say("   ✗ no results within \(timeoutS) s")
        failures += 1
        continue
    }
    for (i, r) in results.all.enumerated() {
        let mark = r.succeeded ? "✓" : "✗"
        let detail = r.errorMessage.map { ": \($0)" } ?? ""
        say("   ← \(mark) \(r.name) \(r.succeeded ? "succeeded" : "failed")\(detail)")
        if i >= step.expect.count || step.expect[i] != r.succeeded { failures += 1 }
    }
    if results.all.count != step.expect.count { failures += 1 }
    let uploads = hub.stateUploads(of: thingID).count
    _ = hub.wait(timeoutMs: 2000) { hub.stateUploads(of: thingID).count > uploads }
    if let state = hub.thing(thingID)?.state { say("   ⇢ state now: \(state)") }
}
say("")
say(failures == 0 ? "demo: all round trips came back as expected" : "demo: \(failures) unexpected result(s)")
hub.stop()
exit(failures == 0 ? 0 : 1)
