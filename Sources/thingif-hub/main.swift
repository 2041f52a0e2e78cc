nonisolated(unsafe) var stopRequested: sig_atomic_t = 0
import ThingIF
import ThingIFHub
#if canImport(Glibc)
import Glibc
#endif

// thingif-hub: the framework side over MQTT. With --demo it waits for one
// thing to onboard, sends the AirConditioner-Demo commands, prints each
// round trip and exits 0 when every result came back as expected.

let usage = """
usage: thingif-hub [--host H] [--port P] [--app-id ID] [--app-key KEY] [--demo] [--timeout S] [--quiet]
  --host, --port   broker to connect to (default 127.0.0.1:1883)
  --app-id         application ID the things use (default demoApp)
  --app-key        application key (default demoKey)
  --demo           wait for a thing, send the demo commands, print the results, exit
  --timeout        seconds to wait for the thing and each result in --demo (default 30)
  --quiet          do not print every request
"""

var host = "127.0.0.1", port = 1883, appID = "demoApp", appKey = "demoKey"
var demo = false, quiet = false, timeoutS = 30
var args = Array(CommandLine.arguments.dropFirst())
func value(_ flag: String) -> String {
    guard !args.isEmpty else { fputs("thingif-hub: \(flag) needs a value\n\(usage)\n", stderr); exit(2) }
    return args.removeFirst()
}
while !args.isEmpty {
    let a = args.removeFirst()
    switch a {
    case "--host": host = value(a)
    case "--port": port = Int(value(a)) ?? -1
    case "--app-id": appID = value(a)
    case "--app-key": appKey = value(a)
    case "--timeout": timeoutS = Int(value(a)) ?? -1
    case "--demo": demo = true
    case "--quiet": quiet = true
    case "-h", "--help": print(usage); exit(0)
    default: fputs("thingif-hub: unknown argument \(a)\n\(usage)\n", stderr); exit(2)
    }
}
guard (1...65535).contains(port), timeoutS > 0 else { fputs("thingif-hub: bad --port or --timeout\n", stderr); exit(2) }

@Sendable func say(_ s: String) {
    print(s)
    fflush(stdout)
}

guard let hub = FrameworkSide(.init(appID: appID, appKey: appKey, brokerHost: host, brokerPort: port)) else {
    fputs("thingif-hub: cannot create an MQTT client\n", stderr)
    exit(1)
}
if !quiet { hub.onEvent = { say("hub: " + $0) } }
guard hub.start() else {
    fputs("thingif-hub: cannot connect to the broker at \(host):\(port)\n", stderr)
    exit(1)
}
say("hub: serving app \(appID) on the broker at \(host):\(port)")

if !demo {
    signal(SIGTERM) { _ in stopRequested = 1 }
    signal(SIGINT) { _ in stopRequested = 1 }
    while stopRequested == 0 { Platform.sleepMs(100) }
    hub.stop()
    say("hub: stopped")
    exit(0)
}

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
    let uploads = hub.thing(thingID)?.stateUploads.count ?? 0
    _ = hub.wait(timeoutMs: 2000) { (hub.thing(thingID)?.stateUploads.count ?? 0) > uploads }
    if let state = hub.thing(thingID)?.state { say("   ⇢ state now: \(state)") }
}
say("")
say(failures == 0 ? "demo: all round trips came back as expected" : "demo: \(failures) unexpected result(s)")
hub.stop()
exit(failures == 0 ? 0 : 1)
