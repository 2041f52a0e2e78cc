// SPDX-License-Identifier: Apache-2.0

import ThingIF

/// Limits of the app API (documented in docs/openapi.yaml).
public enum AppLimits {
    public static let maxTitle = 50
    public static let maxDescription = 200
    public static let maxMetadataBytes = 1024
    public static let maxActions = 100
    public static let maxActionBytes = 16 * 1024
    public static let defaultPageSize = 10
    public static let maxPageSize = 100
    public static let groupingIntervals: [String: Int64] = [
        "1_MINUTE": 60_000, "15_MINUTES": 900_000, "30_MINUTES": 1_800_000,
        "1_HOUR": 3_600_000, "12_HOURS": 43_200_000
    ]
    /// The grouping interval of a thing onboarded without one: Kii's
    /// one-minute groups (docs/decisions/kii-state-queries.md).
    public static let defaultGroupingInterval = "1_MINUTE"
    /// The most grouping intervals one grouped query's range may touch
    /// (Kii's limit, thing-if-AndroidSDK ThingIFAPI.query: "over 60 data
    /// grouping intervals" is a 400).
    public static let maxGroupingIntervals: Int64 = 60
}

/// The hub's size limits, in one place for the REST API and the MQTT side.
public struct HubLimits: Sendable, Equatable {
    /// The largest state upload (PUT/PATCH of a state) accepted, in bytes.
    public var maxStateBody: Int
    /// The largest body of any other request, in bytes.
    public var maxBody: Int
    /// The most state history samples one read returns (bestEffortLimit is
    /// capped to it; paginationKey gives the next page).
    public var maxHistoryPage: Int
    /// The most end nodes one gateway carries (docs/GATEWAYS.md §7): the
    /// onboarding past it is 409 TOO_MANY_END_NODES. Each end node is a
    /// thing, a retained status and an entry in the gateway's registry, so
    /// one gateway (or its owner) must not make them without end.
    public var maxEndNodesPerGateway: Int
    /// The largest firmware image an upload may store, in bytes: enforced
    /// while the body streams (413, nothing kept).
    public var maxImageBytes: Int64
    /// Block and hash-page requests one thing may have in flight on the
    /// hub (read or waiting to be read); beyond it, 429 (docs/UPDATES.md §9).
    public var updateRequestsPerThing: Int
    /// Threads that read blocks and hash pages for things (never the
    /// request lanes that serve commands), and how many reads may wait for
    /// them; a read that finds the queue full is 429.
    public var updateServeThreads: Int
    public var updateServeQueue: Int
    /// Bytes of blocks and hash pages the hub serves a second, in all (a
    /// token bucket of one second's bytes, at least one largest block);
    /// 0: no cap. Beyond it, 429.
    public var updateBytesPerSecond: Int64

    public static let defaultMaxStateBody = 64 * 1024
    public static let defaultMaxBody = 64 * 1024
    public static let defaultMaxHistoryPage = 1000
    public static let defaultMaxEndNodesPerGateway = 100
    /// 256 MiB: a Linux root file system's update, well under what a
    /// manifest may name (2^20 blocks).
    public static let defaultMaxImageBytes: Int64 = 256 * 1024 * 1024
    /// The range the setting accepts.
    public static let endNodesPerGatewayRange = 1...100_000
    /// A thing's download window is a few blocks (libthingif's is 4).
    public static let defaultUpdateRequestsPerThing = 4
    public static let defaultUpdateServeThreads = 2
    public static let defaultUpdateServeQueue = 256
    /// 32 MiB/s: a thousand things at 32 KiB/s each.
    public static let defaultUpdateBytesPerSecond: Int64 = 32 * 1024 * 1024

    public init(
        maxStateBody: Int = defaultMaxStateBody, maxBody: Int = defaultMaxBody,
        maxHistoryPage: Int = defaultMaxHistoryPage, maxEndNodesPerGateway: Int = defaultMaxEndNodesPerGateway,
        maxImageBytes: Int64 = defaultMaxImageBytes, updateRequestsPerThing: Int = defaultUpdateRequestsPerThing,
        updateServeThreads: Int = defaultUpdateServeThreads, updateServeQueue: Int = defaultUpdateServeQueue,
        updateBytesPerSecond: Int64 = defaultUpdateBytesPerSecond
    ) {
        self.maxImageBytes = maxImageBytes
        self.updateRequestsPerThing = updateRequestsPerThing
        self.updateServeThreads = updateServeThreads
        self.updateServeQueue = updateServeQueue
        self.updateBytesPerSecond = updateBytesPerSecond
        self.maxStateBody = maxStateBody
        self.maxBody = maxBody
        self.maxHistoryPage = maxHistoryPage
        self.maxEndNodesPerGateway = maxEndNodesPerGateway
    }
}

/// Token buckets keyed by a string (a user's or a thing's ID): each key may
/// spend `burst` requests at once and gets `ratePerSecond` back per second.
/// Thread-safe. Memory is bounded: buckets idle long enough to be full again
/// are dropped (a full bucket is the same as none), and beyond `maxKeys` the
/// least recently used bucket goes.
public final class RateLimiter: @unchecked Sendable {
    public let ratePerSecond: Double
    public let burst: Double
    public let maxKeys: Int

    private struct Bucket {
        var tokens: Double
        var lastMs: Int64
    }

    private struct State {
        var buckets: [String: Bucket] = [:]
        var lastSweepMs: Int64 = 0
    }

    private let state = Locked(State())

    /// `ratePerSecond` > 0, `burst` >= 1.
    public init(ratePerSecond: Double, burst: Int, maxKeys: Int = 100_000) {
        self.ratePerSecond = max(ratePerSecond, 0.001)
        self.burst = Double(max(burst, 1))
        self.maxKeys = max(maxKeys, 1)
    }

    /// Takes one token of `key`'s bucket at `now` (ms); false when it is empty.
    public func allow(_ key: String, now: Int64) -> Bool {
        state.withLock { s in
            sweep(&s, now: now)
            var b = s.buckets[key] ?? Bucket(tokens: burst, lastMs: now)
            b.tokens = refill(b, now: now)
            b.lastMs = max(b.lastMs, now)
            guard b.tokens >= 1 else {
                s.buckets[key] = b
                return false
            }
            b.tokens -= 1
            if s.buckets[key] == nil, s.buckets.count >= maxKeys,
                let oldest = s.buckets.min(by: { $0.value.lastMs < $1.value.lastMs })?.key
            {
                s.buckets[oldest] = nil
            }
            s.buckets[key] = b
            return true
        }
    }

    /// Whether `key`'s bucket has a token at `now`, without taking it (a
    /// caller that spends only on failures checks this first).
    public func hasToken(_ key: String, now: Int64) -> Bool {
        state.withLock { s in
            guard let b = s.buckets[key] else { return true }
            return refill(b, now: now) >= 1
        }
    }

    /// Whole seconds until `key` has a token again (at least 1), for Retry-After.
    public func retryAfterSeconds(_ key: String, now: Int64) -> Int {
        state.withLock { s in
            guard let b = s.buckets[key] else { return 1 }
            let missing = 1 - refill(b, now: now)
            guard missing > 0 else { return 1 }
            return max(1, Int((missing / ratePerSecond).rounded(.up)))
        }
    }

    /// How many buckets are kept (for tests).
    public var bucketCount: Int { state.withLock { $0.buckets.count } }

    private func refill(_ b: Bucket, now: Int64) -> Double {
        let elapsed = Double(max(0, now - b.lastMs)) / 1000
        return min(burst, b.tokens + elapsed * ratePerSecond)
    }

    /// Drops the buckets that are full again, at most once a second.
    private func sweep(_ s: inout State, now: Int64) {
        guard now - s.lastSweepMs >= 1000 else { return }
        s.lastSweepMs = now
        let fullAfterMs = Int64((burst / ratePerSecond) * 1000) + 1
        s.buckets = s.buckets.filter { now - $0.value.lastMs < fullAfterMs }
    }
}
