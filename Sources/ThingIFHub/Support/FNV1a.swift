// SPDX-License-Identifier: Apache-2.0

/// FNV-1a, 64 bits: the hub's one hash for spreading keys over stripes and
/// lanes (a thing's command gate, a client's request lane). Not for
/// anything an attacker may aim at: it is fast and has no key.
struct FNV1a {
    private(set) var value: UInt64 = 0xcbf2_9ce4_8422_2325

    mutating func add(_ byte: UInt8) { value = (value ^ UInt64(byte)) &* 0x0000_0100_0000_01b3 }

    /// The hash of a whole text's UTF-8 bytes.
    static func hash(_ text: String) -> UInt64 {
        var h = FNV1a()
        for b in text.utf8 { h.add(b) }
        return h.value
    }
}
