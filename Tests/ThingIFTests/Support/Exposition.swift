// SPDX-License-Identifier: Apache-2.0

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

extension HubAPIEnv {
    /// The metrics token the metrics tests' hubs are given.
    static let metricsToken = "metrics-" + Platform.randomHex(bytes: 8)

    /// GET /metrics with `token`, parsed.
    func metrics(token: String? = HubAPIEnv.metricsToken) async throws -> Exposition {
        let r = try await get("/metrics", token: token)
        try #require(r.status == 200, "/metrics: \(r.status) \(r.text)")
        #expect(r.contentType?.hasPrefix("text/plain") == true)
        return try Exposition(r.text)
    }
}
