// SPDX-License-Identifier: Apache-2.0

import Foundation
import Testing
import ThingIF
import ThingIFHub
#if canImport(Glibc)
    import Glibc
#endif

@Suite(
    "thingif-hub --subscriptions partitioned on PostgreSQL", .serialized,
    .enabled(if: PostgresServer.enabled, "PostgreSQL is not installed (CI=true requires it)"), .offPool)
struct HubPartitionTests {
    /// A hub's /metrics over HTTP, parsed; nil when it does not answer.
    private func metrics(_ url: String) -> Exposition? {
        guard let u = URL(string: url + "/metrics"), let text = try? String(contentsOf: u, encoding: .utf8) else {
            return nil
        }
        return try? Exposition(text)
    }

    private func held(_ url: String) -> Double { metrics(url)?.value("thingif_hub_partitions_held") ?? -1 }

    /// Two hub processes with plain subscriptions on one broker and one
    /// database: each receives every request and serves the 32 partitions
    /// it holds. Six things take a stream of commands through both hubs'
    /// REST APIs; hub B is killed with SIGKILL a third of the way in (its
    /// leases lapse, hub A takes its partitions over) and started again two
    /// thirds in (the hubs split again). Every command ends DONE, no action
    /// runs twice, and every thing's outbox drains (each request answered).
    @Test(
        "Two partitioned hubs, one killed and restarted mid-stream: every command DONE once, every request answered",
        .enabled(if: CLIEndToEnd.available, "needs thingif-hub and thingif next to the test bundle"),
        .timeLimit(.minutes(4)))
    func killedPartitionedHub() throws {
        let hubs = try TwoHubs(prefix: "thingif-partitioned", hubArgs: ["--subscriptions", "partitioned"])
        defer { hubs.close() }
        #expect(readText(hubs.root + "/hub-a.log").contains("requests in 64 partitions (--subscriptions partitioned)"))
        #expect(
            poll(timeoutMs: 30_000) { held(hubs.urlA) == 32 && held(hubs.urlB) == 32 },
            "the hubs did not split the partitions: A \(held(hubs.urlA)), B \(held(hubs.urlB))")
        let things = try (1...6).map { try hubs.addThing("AC-PART-\($0)") }
        let count = 48
        var droppedBeforeKill = 0.0
        let sent = try hubs.streamKillingB(
            things, count: count,
            beforeKill: {
                droppedBeforeKill =
                    (metrics(hubs.urlA)?.value("thingif_hub_foreign_requests_dropped_total") ?? 0)
                    + (metrics(hubs.urlB)?.value("thingif_hub_foreign_requests_dropped_total") ?? 0)
            },
            beforeRestart: {
                // Required: without the takeover every later command waits in vain.
                try #require(
                    poll(timeoutMs: 30_000) { held(hubs.urlA) == 64 }, "hub A did not take hub B's partitions over")
            })
        #expect(sent.count == count)
        #expect(droppedBeforeKill > 0, "neither hub dropped another's request: not partitioned")
        hubs.expectEveryCommandDoneOnce(sent)
        for k in 1...things.count {
            #expect(
                poll(timeoutMs: 30_000) { pendingOutbox(hubs.root + "/aircon-\(k)").isEmpty },
                "aircon \(k) still owes: \(pendingOutbox(hubs.root + "/aircon-\(k)"))")
        }
        #expect(
            poll(timeoutMs: 30_000) { held(hubs.urlA) == 32 && held(hubs.urlB) == 32 },
            "the restarted hub did not get its share back: A \(held(hubs.urlA)), B \(held(hubs.urlB))")
    }
}
