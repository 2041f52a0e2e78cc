// SPDX-License-Identifier: Apache-2.0

/// The leases of the things' request partitions among the hubs that share
/// a store (HubPartitions, docs/decisions/cluster-hub-partitions.md): a
/// partition is held by at most one hub at a time, until its lease
/// lapses. Only a store that several hubs share has them (PostgresStore);
/// with any other the one hub holds every partition and leases nothing.
///
/// Times are epoch ms of the database's clock (`now` nil), so that every
/// hub's lease is measured on one clock and no hub's clock matters; a test
/// gives times of its own.
public protocol PartitionLeaseStore: AnyObject, Sendable {
    /// One round of hub `hubID`, in one transaction: it is alive until
    /// `now + leaseMs` (now: the database's clock when nil), renews every partition below `count` it holds, and
    /// while it holds fewer than its share takes partitions whose lease
    /// lapsed (or that nobody held), lowest first. Its share is `count`
    /// over the hubs alive, one more for each of the first `count % hubs`
    /// of them by ID, so that the shares add up to `count`. nil: the store
    /// failed, and nothing was renewed.
    func leasePartitions(hubID: String, count: Int, leaseMs: Int64, now: Int64?) -> PartitionLeases?
    /// Gives back the partitions of `mask` (bit p: partition p) at once,
    /// free for any hub's next round; `leaving` also ends the hub's
    /// membership, so that the others' shares grow at their next round.
    /// False: the store failed (the leases then lapse by themselves).
    func releasePartitions(hubID: String, mask: UInt64, leaving: Bool) -> Bool
}

/// What a round of `leasePartitions` left a hub with.
public struct PartitionLeases: Sendable, Equatable {
    /// Bit p: the hub holds partition p, until the round's now + leaseMs,
    /// the round's now being no earlier than when the call began.
    public var held: UInt64
    /// How many partitions are its fair share.
    public var share: Int
    /// The hubs alive, this one included.
    public var hubs: Int

    public init(held: UInt64, share: Int, hubs: Int) {
        self.held = held
        self.share = share
        self.hubs = hubs
    }
}
