import ThingIF

/// Size limits of requests that reach the hub (MQTT and REST alike).
public enum HubLimits {
    /// A state upload's body (64 KiB).
    public static let maxStateBody = 64 * 1024
    /// Any other request body (64 KiB).
    public static let maxBody = 64 * 1024

    /// The limit for a request path of the thing's MQTT API.
    public static func maxRequestBody(path: String) -> Int {
        path.hasSuffix("/states") ? maxStateBody : maxBody
    }
}

/// Token buckets by key (a client ID, a user, a thing): `burst` requests at
/// once, refilled at `perSecond`. Memory is bounded: idle full buckets are
/// dropped when the table grows past `maxKeys`.
public final class RateLimiter: @unchecked Sendable {
    private struct Bucket {
        var tokens: Double
        var at: Int64
    }

    public let perSecond: Double
    public let burst: Double
    public let maxKeys: Int
    private let buckets = Locked<[String: Bucket]>([:])

    public init(perSecond: Double, burst: Double, maxKeys: Int = 100_000) {
        self.perSecond = perSecond
        self.burst = burst
        self.maxKeys = maxKeys
    }

    /// Takes one token of `key`'s bucket; false when it is empty.
    public func allow(_ key: String, now: Int64) -> Bool {
        buckets.withLock { b in
            var bucket = b[key] ?? Bucket(tokens: burst, at: now)
            bucket.tokens = min(burst, bucket.tokens + Double(max(0, now - bucket.at)) * perSecond / 1000)
            bucket.at = now
            let ok = bucket.tokens >= 1
            if ok { bucket.tokens -= 1 }
            b[key] = bucket
            if b.count > maxKeys {
                let full = b.filter { $0.value.tokens + Double(now - $0.value.at) * perSecond / 1000 >= burst }
                for k in full.keys { b[k] = nil }
            }
            return ok
        }
    }
}
