// SPDX-License-Identifier: Apache-2.0

/// A read that tells "there is none" from "the store failed": the hub
/// answers a thing's request 500 for the second, which the thing sends
/// again, where a 4xx would make it drop the request for good.
public enum StoreRead<Value> {
    case found(Value)
    case notFound
    case failed

    /// The value when found.
    public var value: Value? {
        if case .found(let v) = self { return v }
        return nil
    }

    public func map<U>(_ transform: (Value) -> U) -> StoreRead<U> {
        switch self {
        case .found(let v): return .found(transform(v))
        case .notFound: return .notFound
        case .failed: return .failed
        }
    }
}

extension StoreRead: Sendable where Value: Sendable {}
