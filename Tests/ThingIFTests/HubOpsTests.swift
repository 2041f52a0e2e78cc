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

@Suite("Hub operations: Prometheus metrics and Home Assistant discovery", .serialized)
struct HubOpsTests {
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
            let before = try await metrics(e)
            #expect(before.types["thingif_hub_command_result_latency_seconds"] == "histogram")
            #expect(before.types["thingif_hub_commands_issued_total"] == "counter")
            #expect(before.value("thingif_hub_things_online") == 1)

            let cid = try await e.postCommand(tid, token: token, userID: uid)
            let c = try await e.waitForFinished(tid, cid, token: token)
            #expect(c["commandState"] as? String == "DONE")
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
            #expect(after.value("thingif_hub_things_online") == 1)
        }
    }
}
