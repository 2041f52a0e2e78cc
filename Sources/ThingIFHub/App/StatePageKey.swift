// SPDX-License-Identifier: Apache-2.0

/// A state history page's paginationKey, in Kii's shape: `100/{offset}`,
/// the matching samples already answered (docs/decisions/kii-state-queries.md).
/// Kii's own app SDK's large test (thing-if-iOSSDK
/// `testSuccessQueryThingUpdateStates`) expects "100/3" after three of four
/// results and then sends "100/3" itself, so the key cannot stay the hub's
/// opaque cursor. Kii documents neither number; the hub writes 100 (`page`)
/// and reads any number there. A bare number is the cursor the hub gave
/// before (a sample's ID), still read so that a client paging across an
/// upgrade goes on.
enum StatePageKey: Equatable {
    case offset(Int)
    case cursor(Int64)

    /// What the hub writes before the slash.
    static let page = 100
    /// The largest offset read (a key past it is refused, not scanned).
    static let maxOffset = 10_000_000

    init?(_ key: String) {
        let parts = key.utf8.split(separator: UInt8(ascii: "/"), omittingEmptySubsequences: false)
        func number(_ s: Substring.UTF8View.SubSequence) -> Int64? {
            guard !s.isEmpty, s.count <= 19, s.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) else { return nil }
            return Int64(String(decoding: s, as: UTF8.self))
        }
        switch parts.count {
        case 1:
            guard let v = number(parts[0]) else { return nil }
            self = .cursor(v)
        case 2:
            guard number(parts[0]) != nil, let n = number(parts[1]), n <= Self.maxOffset else { return nil }
            self = .offset(Int(n))
        default: return nil
        }
    }

    var text: String {
        switch self {
        case .offset(let n): return "\(Self.page)/\(n)"
        case .cursor(let v): return String(v)
        }
    }
}
