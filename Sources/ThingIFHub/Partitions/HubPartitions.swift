// SPDX-License-Identifier: Apache-2.0

import ThingIF

/// Which of the things' requests this hub serves when the hubs subscribe
/// without a shared subscription (SubscriptionMode.partitioned; the
/// decision is docs/decisions/cluster-hub-partitions.md). Every hub then
/// receives every request; a request belongs to one of `count` partitions
/// by the client ID it came from (`partition(of:)`, FNV-1a of its bytes),
/// and a hub serves it only while it holds that partition's lease in the
/// shared store (PartitionLeaseStore). The rest it drops unread, before
/// its payload is decoded (`ThingRequests.accept`), and the thing's outbox
/// sends it again under the same request ID after its request timeout.
/// The holder of a thing's partition is also the one hub that resends the
/// thing's open commands when it comes online, and when it takes the
/// partition over (`onGained`).
///
/// The leases are renewed by the hub's scheduler (`tick`, every
/// `Options.partitionTickMs`); a hub counts a partition held until its
/// last successful round began plus the lease, by its own monotonic
/// clock, so it stops serving a partition before any other hub may take
/// it. A store without leases (memory, SQLite: one hub) holds all.
/// In the shared mode every request is served (the broker split them).
///
/// Threads: every method may be called from any thread; one lock, held
/// for a few fields.
public final class HubPartitions: @unchecked Sendable {
    /// The partitions, fixed: the same on every hub (a bit each in a mask).
    public static let count = 64
    static let all = UInt64.max

    struct State {
        /// The mode in force: decided at each CONNACK.
        var partitioned = false
        var held: UInt64 = 0
        /// Platform.nowMs(): `held` counts until then.
        var validUntil: Int64 = 0
        var share = 0
        var hubs = 0
    }

    let mode: SubscriptionMode
    /// This hub's name in the leases (its MQTT client ID: new at each start).
    let hubID: String
    let leases: PartitionLeaseStore?
    let leaseMs: Int64
    let metrics: HubMetrics
    let events: HubEvents
    /// The epoch ms the leases are written in: nil, the database's clock
    /// (tests give their own).
    let clock: (@Sendable () -> Int64)?
    private let state = Locked(State())
    /// One round at a time (the scheduler's, and start's first).
    private let rounds = Locked(())
    /// Called by `tick` with the partitions it took (bit p: partition p),
    /// outside the lock; set before the hub starts.
    var onGained: ((UInt64) -> Void)?

    init(
        mode: SubscriptionMode, hubID: String, store: HubStore, leaseMs: Int64, metrics: HubMetrics,
        events: HubEvents, clock: (@Sendable () -> Int64)? = nil
    ) {
        self.mode = mode
        self.hubID = hubID
        leases = store as? PartitionLeaseStore
        self.leaseMs = leaseMs
        self.metrics = metrics
        self.events = events
        self.clock = clock
    }

    /// The partition of a request's key (its client ID).
    public static func partition(of key: String) -> Int { Int(FNV1a.hash(key) % UInt64(count)) }

    /// Whether the hub partitions now (false before its first CONNACK).
    public var partitioned: Bool { state.withLock { $0.partitioned } }

    /// The partitions held now (bit p: partition p); every one in the shared mode.
    public var held: UInt64 {
        state.withLock { s in !s.partitioned ? Self.all : Platform.nowMs() < s.validUntil ? s.held : 0 }
    }

    /// Whether this hub serves a request (or resends the commands of a
    /// thing) whose client ID is `key`: always in the shared mode.
    func serves(_ key: String) -> Bool { held >> UInt64(Self.partition(of: key)) & 1 == 1 }

    /// A CONNACK: the mode for this connection, by the setting and the
    /// broker's Shared Subscription Available. Returns whether the hub
    /// subscribes through the shared group.
    func connected(sharedAvailable: Bool) -> Bool {
        let partitioned = mode.partitions(sharedAvailable: sharedAvailable)
        let leased = leases != nil
        state.withLock { s in
            if partitioned && !leased {
                s.held = Self.all
                s.validUntil = .max
            }
            s.partitioned = partitioned
        }
        if partitioned && !leased { metrics.setPartitionsHeld(Self.count) }
        return !partitioned
    }

    /// One round of the leases (the scheduler's, and once at start): renew,
    /// take up to the fair share, give back what is beyond it (after this
    /// hub stopped serving it). Returns the partitions held after it; nil
    /// when there was no round (shared mode, a store without leases) or the
    /// store failed (what was held lapses at its time).
    @discardableResult
    func tick() -> UInt64? {
        guard let leases, partitioned else { return nil }
        return rounds.withLock { _ in round(leases) }
    }

    private func round(_ leases: PartitionLeaseStore) -> UInt64? {
        let started = Platform.nowMs()
        guard let round = leases.leasePartitions(hubID: hubID, count: Self.count, leaseMs: leaseMs, now: clock?())
        else {
            events.log("partitions: the store did not renew this hub's leases; they lapse at their time")
            return nil
        }
        var keep = round.held
        var release: UInt64 = 0
        while keep.nonzeroBitCount > round.share {
            let top = UInt64(63 - keep.leadingZeroBitCount)
            keep &= ~(1 << top)
            release |= 1 << top
        }
        let gained = state.withLock { s -> UInt64 in
            let before = started < s.validUntil ? s.held : 0
            s.held = keep
            s.validUntil = started + leaseMs
            s.share = round.share
            s.hubs = round.hubs
            return keep & ~before
        }
        if release != 0, !leases.releasePartitions(hubID: hubID, mask: release, leaving: false) {
            events.log("partitions: could not give back \(release.nonzeroBitCount); they lapse at their time")
        }
        metrics.setPartitionsHeld(keep.nonzeroBitCount)
        if gained != 0 || release != 0 {
            events.event(
                "partitions: \(keep.nonzeroBitCount) of \(Self.count) held (\(round.hubs) hub(s)), "
                    + "\(gained.nonzeroBitCount) taken, \(release.nonzeroBitCount) given back")
        }
        if gained != 0 { onGained?(gained) }
        return keep
    }

    /// The hub stops: it serves nothing more and gives its partitions back
    /// at once, so that the other hubs take them at their next round rather
    /// than after the lease.
    func leave() {
        guard let leases else { return }
        let (was, held) = state.withLock { s -> (Bool, UInt64) in
            defer {
                s.held = 0
                s.validUntil = 0
            }
            return (s.partitioned, s.held)
        }
        guard was else { return }
        metrics.setPartitionsHeld(0)
        _ = leases.releasePartitions(hubID: hubID, mask: held, leaving: true)
    }
}
