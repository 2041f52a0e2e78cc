// SPDX-License-Identifier: Apache-2.0

import CThingIF
import Foundation
import Testing
import ThingIF
@testable import ThingIFHub

/// The epoch ms a test's hubs write their leases in: moved by the test only.
private final class TestClock: @unchecked Sendable {
    private let ms = Locked<Int64>(1_700_000_000_000)
    var now: Int64 { ms.withLock { $0 } }
    func advance(_ by: Int64) { ms.withLock { $0 += by } }
}

/// A hub's partitions on `store` in the partitioned mode, with the test's
/// clock, a lease of 5 s, and its takeovers kept in `gains`.
private func hub(
    _ id: String, _ store: HubStore, _ clock: TestClock, gains: Locked<[UInt64]>? = nil
) -> HubPartitions {
    let p = HubPartitions(
        mode: .partitioned, hubID: id, store: store, leaseMs: 5000, metrics: HubMetrics(), events: HubEvents(),
        clock: { clock.now })
    _ = p.connected(sharedAvailable: true)
    if let gains { p.onGained = { g in gains.withLock { $0.append(g) } } }
    return p
}

@Suite("Request partitions: the mode, the CONNACK and the one-hub stores (no server)")
struct PartitionModeTests {
    @Test("auto partitions only where the broker says it has no shared subscriptions; the setting forces either")
    func modes() {
        #expect(!SubscriptionMode.auto.partitions(sharedAvailable: true))
        #expect(SubscriptionMode.auto.partitions(sharedAvailable: false))
        #expect(SubscriptionMode.partitioned.partitions(sharedAvailable: true))
        #expect(!SubscriptionMode.shared.partitions(sharedAvailable: false))
    }

    @Test("Shared Subscription Available is read off libmosquitto's CONNACK properties; absent means available")
    func connackProperty() {
        #expect(MqttClient.sharedSubscriptionsAvailable(nil))
        for (value, available) in [(UInt8(0), false), (1, true)] {
            var props: OpaquePointer?
            defer { mosquitto_property_free_all(&props) }
            #expect(
                mosquitto_property_add_byte(&props, Int32(MQTT_PROP_SHARED_SUB_AVAILABLE.rawValue), value)
                    == MOSQ_ERR_SUCCESS.rawValue)
            // Another property beside it changes nothing.
            _ = mosquitto_property_add_int16(&props, Int32(MQTT_PROP_RECEIVE_MAXIMUM.rawValue), 20)
            #expect(MqttClient.sharedSubscriptionsAvailable(props) == available, "value \(value)")
        }
        var other: OpaquePointer?
        defer { mosquitto_property_free_all(&other) }
        _ = mosquitto_property_add_int16(&other, Int32(MQTT_PROP_RECEIVE_MAXIMUM.rawValue), 20)
        #expect(MqttClient.sharedSubscriptionsAvailable(other))
    }

    @Test("A store one hub uses (memory, SQLite) leases nothing: partitioned, that hub serves every partition")
    func oneHubHoldsAll() throws {
        let dir = try makeTempDirectory(prefix: "thingif-partitions")
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let sqlite = try SQLiteStore(path: dir + "/hub.db", secrets: .fastForTests)
        defer { sqlite.close() }
        for store in [MemoryStore(secrets: .fastForTests), sqlite] as [HubStore] {
            #expect(!(store is PartitionLeaseStore))
            let p = hub("hub-1", store, TestClock())
            #expect(p.partitioned && p.held == .max && p.tick() == nil)
            #expect(p.serves("t0123") && p.serves("anything"))
        }
        // The shared mode serves everything and leases nothing.
        let shared = HubPartitions(
            mode: .auto, hubID: "hub-2", store: MemoryStore(secrets: .fastForTests), leaseMs: 5000,
            metrics: HubMetrics(), events: HubEvents())
        #expect(shared.connected(sharedAvailable: true))
        #expect(!shared.partitioned && shared.held == .max && shared.tick() == nil)
    }

    @Test("A client ID's partition is FNV-1a of its bytes modulo 64: the same on every hub and every run")
    func stablePartition() {
        let empty: UInt64 = 0xcbf2_9ce4_8422_2325, a: UInt64 = 0xaf63_dc4c_8601_ec8c
        #expect(HubPartitions.partition(of: "") == Int(empty % 64))
        #expect(HubPartitions.partition(of: "a") == Int(a % 64))
        let spread = Set((0..<1000).map { HubPartitions.partition(of: "t\($0)") })
        #expect(spread.count == HubPartitions.count, "1,000 client IDs reach every partition")
    }
}

@Suite(
    "Request partitions' leases on PostgreSQL", .serialized,
    .enabled(if: PostgresServer.enabled, "PostgreSQL is not installed (CI=true requires it)"), .offPool)
struct PartitionLeaseTests {
    /// Two hubs on one database, their rounds driven by the test at times of
    /// its clock: alone a hub takes all 64; a second one joins and each ends
    /// with 32 (the first gives back its extras, the second takes them);
    /// a hub that stops renewing keeps its partitions until its lease
    /// lapses, then the other takes them over (and is told which); a hub
    /// that leaves gives them back at once.
    @Test("Fair split of two hubs, takeover after a lapse, rebalance on a join, handover on a leave")
    func leases() throws {
        try PostgresServer.get().withStore { store in
            let clock = TestClock()
            let gainsA = Locked<[UInt64]>([])
            let a = hub("hub-a", store, clock, gains: gainsA)
            #expect(a.tick() == .max, "alone, a hub holds every partition")
            #expect(gainsA.withLock { $0 } == [.max])

            // B joins: nothing is free, so it takes nothing yet; A's next round
            // gives back what is beyond its share, B's next takes it.
            let b = hub("hub-b", store, clock)
            #expect(b.tick() == 0, "a partition held and in its lease is never taken")
            let heldA = try #require(a.tick())
            #expect(heldA.nonzeroBitCount == 32)
            let heldB = try #require(b.tick())
            #expect(heldB.nonzeroBitCount == 32 && heldA & heldB == 0 && heldA | heldB == .max)
            // Steady: renewals change nothing.
            clock.advance(1000)
            #expect(a.tick() == heldA)
            #expect(b.tick() == heldB)
            #expect(a.held == heldA && b.held == heldB)

            // B stops renewing (it died): its leases run until 5 s after its
            // last round; then A, alone alive, takes them over.
            clock.advance(4999)
            #expect(a.tick() == heldA, "B's leases have not lapsed yet")
            clock.advance(1)
            #expect(a.tick() == .max, "B's lapsed partitions are taken over")
            #expect(gainsA.withLock { $0 }.last == heldB, "the takeover names what was taken")

            // C joins: A gives back half, C takes it.
            let c = hub("hub-c", store, clock)
            #expect(c.tick() == 0)
            let heldA2 = try #require(a.tick())
            #expect(heldA2.nonzeroBitCount == 32)
            #expect(c.tick().map { $0.nonzeroBitCount == 32 && $0 & heldA2 == 0 } == true)

            // A leaves (stops): C takes everything at its next round, no lapse to wait for.
            a.leave()
            #expect(a.held == 0)
            #expect(c.tick() == .max)
        }
    }

    /// A hub's rounds go on the database's clock (now nil): the leases it
    /// writes run out a lease after the database's now, which a round at a
    /// time of the test's own then finds.
    @Test("Without a clock of its own a round writes its leases on the database's clock")
    func databaseClock() throws {
        try PostgresServer.get().withStore { store in
            let before = Platform.epochMs()
            let first = try #require(store.leasePartitions(hubID: "hub-x", count: 64, leaseMs: 60_000, now: nil))
            #expect(first == PartitionLeases(held: .max, share: 64, hubs: 1))
            // Before the lease is over (by the machine's clock, the database's
            // here) nothing is taken; after it everything is.
            let early = try #require(store.leasePartitions(hubID: "hub-y", count: 64, leaseMs: 1, now: before + 59_000))
            #expect(early.held == 0 && early.hubs == 2)
            let late = try #require(store.leasePartitions(hubID: "hub-y", count: 64, leaseMs: 1, now: before + 120_000))
            #expect(late.held == .max && late.hubs == 1)
        }
    }

    /// Many rounds of three hubs in turn, each hub's round at a time of its
    /// own: no partition is ever held by two hubs, and they settle at
    /// 22/21/21 (64 over 3: the first by ID gets the extra one).
    @Test("Three hubs never hold a partition together and settle on 22, 21 and 21")
    func threeHubs() throws {
        try PostgresServer.get().withStore { store in
            let clock = TestClock()
            let hubs = ["hub-1", "hub-2", "hub-3"].map { hub($0, store, clock) }
            var last: [UInt64] = [0, 0, 0]
            for round in 0..<6 {
                for (i, h) in hubs.enumerated() {
                    last[i] = try #require(h.tick())
                    clock.advance(100)
                    for j in 0..<3 where j != i { #expect(last[i] & last[j] == 0, "round \(round): \(i) and \(j)") }
                }
            }
            #expect(last.map(\.nonzeroBitCount) == [22, 21, 21])
            #expect(last[0] | last[1] | last[2] == .max)
        }
    }
}
