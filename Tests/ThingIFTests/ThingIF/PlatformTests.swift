// SPDX-License-Identifier: Apache-2.0

import Testing
@testable import ThingIF

/// Platform's hex and random IDs: the hub's tokens, IDs and salts are made of them.
@Suite("Platform: hex and random hex (fast)")
struct FastPlatformTests {
    @Test("hex writes two lowercase digits a byte, in order")
    func hex() {
        #expect(Platform.hex([]) == "")
        #expect(Platform.hex([0x00, 0x0f, 0x10, 0xa5, 0xff, 0x09]) == "000f10a5ff09")
        #expect(Platform.hex(Array(0...255)).count == 512)
        #expect(Platform.hex(Array(0...255)).hasSuffix("fcfdfeff"))
    }

    @Test("randomHex: 2 digits a byte, any length; every position takes every digit")
    func randomHex() {
        for n in [0, 1, 7, 8, 9, 16, 20, 33] {
            let s = Platform.randomHex(bytes: n)
            #expect(s.utf8.count == 2 * n, "\(n) bytes: \(s)")
            #expect(s.utf8.allSatisfy { (48...57).contains($0) || (97...102).contains($0) }, "\(s)")
        }
        #expect(Platform.randomHex(bytes: 20) != Platform.randomHex(bytes: 20))
        // 9 bytes span two draws of the generator. Over 2,000 IDs each of
        // the 18 positions sees all 16 digits (a byte used twice, or one
        // left at 0, would not; by chance a digit is missed at a position
        // with odds of about 16 * (15/16)^2000, below 10^-50).
        var seen = Array(repeating: Set<UInt8>(), count: 18)
        for _ in 0..<2_000 {
            for (i, c) in Platform.randomHex(bytes: 9).utf8.enumerated() { seen[i].insert(c) }
        }
        #expect(seen.allSatisfy { $0.count == 16 }, "\(seen.map(\.count))")
        // Bytes of one draw differ from each other (not one byte repeated).
        let same = (0..<200).filter { _ in
            let s = Array(Platform.randomHex(bytes: 8).utf8)
            return (1..<8).allSatisfy { s[2 * $0] == s[0] && s[2 * $0 + 1] == s[1] }
        }
        #expect(same.isEmpty)
    }
}
