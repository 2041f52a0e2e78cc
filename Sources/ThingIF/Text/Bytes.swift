// SPDX-License-Identifier: Apache-2.0

import CThingIF

// The protocol's names and IDs (commandIDs, action names, aliases, action set
// and trigger names, JSON keys, methods) are bytes: the core compares and
// hashes them as their UTF-8 bytes, never as Unicode text. `==` and hashing
// on String would mean canonical equivalence, which the protocol does not
// ask for, and they pull Unicode normalisation code and tables (70 KB)
// into the Embedded library (docs/DECISIONS.md, "The core's text is bytes").
// CMake links libthingif.so without the tables and with --no-undefined, so
// core code that brings them back fails that link.

extension String {
    /// The same UTF-8 bytes as `other` (no Unicode normalisation).
    @inline(never)
    func equals(_ other: String) -> Bool {
        var a = self
        var b = other
        return a.withUTF8 { x in
            b.withUTF8 { y in
                x.count == y.count && (x.count == 0 || memcmp(x.baseAddress!, y.baseAddress!, x.count) == 0)
            }
        }
    }
}

extension String {
    /// The same bytes as `other` with ASCII letters' case ignored: Kii's
    /// clients write media types and layout names in either case.
    public func equalsIgnoringASCIICase(_ other: String) -> Bool {
        String.equalIgnoringASCIICase(utf8, other.utf8)
    }

    static func equalIgnoringASCIICase<A: Collection<UInt8>, B: Collection<UInt8>>(_ a: A, _ b: B) -> Bool {
        guard a.count == b.count else { return false }
        let lower = { (c: UInt8) in (0x41...0x5A).contains(c) ? c | 0x20 : c }
        return zip(a, b).allSatisfy { lower($0) == lower($1) }
    }
}

extension Optional where Wrapped == String {
    /// Both nil, or both strings with the same UTF-8 bytes.
    func equals(_ other: String?) -> Bool {
        switch (self, other) {
        case (nil, nil): return true
        case (let a?, let b?): return a.equals(b)
        default: return false
        }
    }
}

extension Array where Element == UInt8 {
    /// Whether `needle`'s bytes occur in these, in a row (a cheap look
    /// before a parse).
    func containsSubsequence(_ needle: [UInt8]) -> Bool {
        guard count >= needle.count else { return false }
        var i = 0
        while i + needle.count <= count {
            var k = 0
            while k < needle.count && self[i + k] == needle[k] { k += 1 }
            if k == needle.count { return true }
            i += 1
        }
        return false
    }
}

extension Sequence where Element == String {
    /// Whether an element has the same UTF-8 bytes as `name`.
    func containsBytes(_ name: String) -> Bool { contains { $0.equals(name) } }
}

extension RawRepresentable where Self: CaseIterable, RawValue == String {
    /// The case whose raw value has the same UTF-8 bytes as `name`: a wire
    /// name read without `init(rawValue:)`, whose String switch compares
    /// Unicode text.
    init?(named name: String) {
        guard let c = Self.allCases.first(where: { name.equals($0.rawValue) }) else { return nil }
        self = c
    }
}

/// A String used as a dictionary key or set member by its UTF-8 bytes.
struct ByteKey: Hashable {
    let string: String

    init(_ string: String) { self.string = string }

    static func == (a: ByteKey, b: ByteKey) -> Bool { a.string.equals(b.string) }

    func hash(into hasher: inout Hasher) {
        var s = string
        s.withUTF8 { hasher.combine(bytes: UnsafeRawBufferPointer($0)) }
    }
}
