// SPDX-License-Identifier: Apache-2.0

import CThingIFTestSupport
import Foundation
import Testing
import ThingIF
@testable import ThingIFHub

/// A hub's metric sample (0 when absent).
private func metric(_ hub: FrameworkSide, _ name: String, _ labels: [String: String] = [:]) -> Double {
    (try? Exposition(String(decoding: hub.metrics.exposition(), as: UTF8.self)))?.value(name, labels) ?? 0
}

/// A client ID whose partition is below 32 (`lower`) or not.
private func clientID(lower: Bool, prefix: String) -> String {
    var i = 0
    while (HubPartitions.partition(of: "\(prefix)\(i)") < 32) != lower { i += 1 }
    return "\(prefix)\(i)"
}

/// The hub with a real mosquitto: the mode it takes from the CONNACK or
/// the setting, and what the partitioned mode serves.
@Suite("Partitioned hub on mosquitto", .serialized, .offPool)
struct PartitionedHubTests {
    @Test("auto on mosquitto (its CONNACK has no Shared Subscription Available: available) subscribes through $share")
    func autoIsSharedOnMosquitto() throws {
        let env = try Env()
        defer { env.close() }
        #expect(env.hub.options.subscriptions == .auto)
        #expect(!env.hub.partitions.partitioned && env.hub.partitions.held == .max)
        // Every request served, none dropped, nothing leased.
        let (thing, tid) = try env.onlineAircon()
        let id = try #require(
            env.hub.sendCommand(to: tid, schema: Aircon.schema, schemaVersion: 1, actions: Aircon.powerOn))
        #expect(env.hub.waitForResults(of: id, timeoutMs: 30_000) != nil)
        #expect(thing.records.count == 1)
        #expect(metric(env.hub, "thingif_hub_partitions_held") == 0)
        #expect(metric(env.hub, "thingif_hub_foreign_requests_dropped_total") == 0)
    }

    @Test("--subscriptions partitioned on mosquitto: plain subscriptions, the one hub of a memory store serves all")
    func partitionedForced() throws {
        let env = try Env { $0.subscriptions = .partitioned }
        defer { env.close() }
        #expect(env.hub.partitions.partitioned && env.hub.partitions.held == .max)
        let (thing, tid) = try env.onlineAircon()
        let id = try #require(
            env.hub.sendCommand(to: tid, schema: Aircon.schema, schemaVersion: 1, actions: Aircon.powerOn))
        #expect(env.hub.waitForResults(of: id, timeoutMs: 30_000) != nil)
        #expect(thing.records.count == 1)
        #expect(metric(env.hub, "thingif_hub_partitions_held") == Double(HubPartitions.count))
        #expect(metric(env.hub, "thingif_hub_foreign_requests_dropped_total") == 0)
    }
}

@Suite(
    "Partitioned hubs on PostgreSQL and mosquitto", .serialized,
    .enabled(if: PostgresServer.enabled, "PostgreSQL is not installed (CI=true requires it)"), .offPool)
struct PartitionedHubPostgresTests {
    /// Another hub (a name in the lease table, no process) holds
    /// partitions 32…63; this hub holds 0…31. A request whose body is no
    /// Kii request at all, from a client ID of each half: this hub's is
    /// answered 400, the other's is dropped before its payload is read,
    /// counted, and not answered (no 400, no request counted).
    @Test("A request of a partition another hub holds is dropped before parsing and counted, not answered")
    func dropsForeignBeforeParsing() throws {
        try PostgresServer.get().withStore { store in
            let other = "~other-hub"
            let alone = try #require(
                store.leasePartitions(hubID: other, count: 64, leaseMs: 3_600_000, now: nil))
            #expect(alone.held == .max)
            #expect(store.releasePartitions(hubID: other, mask: 0xFFFF_FFFF, leaving: false))

            let env = try Env(store: store) { $0.subscriptions = .partitioned }
            defer { env.close() }
            #expect(env.hub.partitions.partitioned)
            #expect(env.hub.partitions.held == 0xFFFF_FFFF, "its first round takes the free half")

            let own = clientID(lower: true, prefix: "t-probe-"), foreign = clientID(lower: false, prefix: "t-probe-")
            let probe = try MqttProbe.watcher(env.broker, "p/+/resp")
            defer { probe.stop() }
            let garbage = Array("not a Kii request {{{".utf8)
            for id in [foreign, own] {
                #expect(
                    probe.publish(
                        "p/\(id)/thing-if/apps/\(Env.appID)/targets/thing:th.x/states", garbage,
                        responseTopic: "p/\(id)/resp", correlation: "c-\(id)"))
            }
            let answer = try #require(probe.waitForMessage(on: "p/\(own)/resp"), "this hub's partition is served")
            #expect(String(decoding: answer.payload, as: UTF8.self).hasPrefix("400"), "\(answer.payload)")
            #expect(poll { metric(env.hub, "thingif_hub_foreign_requests_dropped_total") == 1 })
            #expect(metric(env.hub, "thingif_hub_mqtt_requests_total", ["kind": "state", "status": "400"]) == 1)
            #expect(probe.messages(on: "p/\(foreign)/resp").isEmpty, "the other hub's request got an answer")
            #expect(metric(env.hub, "thingif_hub_partitions_held") == 32)
        }
    }

    /// A thing comes online while its partition is held by a hub that has
    /// since died (a name in the lease table whose lease runs out): the
    /// live hub, which does not hold the partition, does not resend its
    /// open command; when the lease lapses it takes the partition over and
    /// resends the open commands of its things online, once.
    @Test("Only the partition's holder resends on online; the hub that takes a partition over resends then")
    func resendOnTakeover() throws {
        try PostgresServer.get().withStore { store in
            let env = try Env(store: store) {
                $0.subscriptions = .partitioned
                $0.partitionLeaseMs = 1000
                $0.partitionTickMs = 100
            }
            defer { env.close() }
            let events = Locked<[String]>([])
            env.hub.onEvent = { line in events.withLock { $0.append(line) } }
            // A thing in the upper half (what this hub gives back when another joins).
            var found: (thing: TestThing, id: String, topic: String, storage: String)?
            for k in 0..<12 where found == nil {
                let (t, tid) = try env.onlineAircon(vendorThingID: "AC-PART-\(k)", storage: "thing-\(k)")
                let topic = try #require(store.thing(id: tid)?.installations.values.first)
                if HubPartitions.partition(of: topic) >= 32 {
                    found = (t, tid, topic, "thing-\(k)")
                } else {
                    t.destroy()
                }
            }
            let thing = try #require(found, "no thing's client ID fell in the upper half")
            #expect(thing.thing.destroy() == RC.ok)
            #expect(poll { !env.hub.presence.announcedOnline(thing.id) })
            let id = try #require(
                env.hub.sendCommand(to: thing.id, schema: Aircon.schema, schemaVersion: 1, actions: Aircon.powerOn))

            // A second hub joins (by the store alone) and takes the upper half
            // with a lease it never renews: it is dead from then on.
            let ghost = "~ghost-hub"
            _ = store.leasePartitions(hubID: ghost, count: 64, leaseMs: 8000, now: nil)
            #expect(poll { env.hub.partitions.held == 0xFFFF_FFFF }, "the hub gives back the upper half")
            let taken = try #require(store.leasePartitions(hubID: ghost, count: 64, leaseMs: 8000, now: nil))
            #expect(taken.held == 0xFFFF_FFFF_0000_0000)
            #expect(!env.hub.partitions.serves(thing.topic))

            // The thing comes back while the dead hub holds its partition.
            events.withLock { $0 = [] }
            let again = try env.newThing(storage: thing.storage)
            #expect(ct_register_aircon_handlers(again.ct, Aircon.schema, Aircon.version) == RC.ok)
            let vendorThingID = "AC-PART-" + thing.storage.dropFirst("thing-".count)
            #expect(ct_onboard(again.ct, vendorThingID, "password-1", "AirConditioner", "1.0.0", nil) == RC.ok)
            #expect(again.thingID == thing.id)
            #expect(ct_start(again.ct) == RC.ok)
            #expect(env.hub.waitForOnline(thing.id, timeoutMs: 30_000))
            #expect(env.hub.results(of: id) == nil)
            // The lease lapses: the live hub takes the upper half and resends.
            #expect(
                env.hub.waitForResults(of: id, timeoutMs: 30_000) != nil, "the command was not resent at the takeover")
            #expect(env.hub.partitions.held == .max)
            #expect(again.records.count == 1, "the command ran once")
            let lines = events.withLock { $0 }
            #expect(
                !lines.contains { $0.contains("unanswered command(s) to \(thing.id) again") },
                "a hub that does not hold the partition resent on online: \(lines)")
            #expect(lines.contains { $0.contains("partitions: sent 1 unanswered command(s) again") }, "\(lines)")
        }
    }
}
