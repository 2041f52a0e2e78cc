// SPDX-License-Identifier: Apache-2.0

import Testing

@testable import ThingIF

/// The core's text rules (Sources/ThingIF/Text): interpolation through
/// `Text`, strings compared and hashed as bytes, cuts on scalar boundaries.
@Suite("Text and bytes (fast)")
struct FastTextTests {
    @Test("Text interpolation writes numbers in decimal and strings as they are")
    func interpolation() {
        let name = "turnPower"
        let sub = "p/abc/resp".utf8.split(separator: 0x2F).map { Substring($0) }[1]
        #expect(str("plain") == "plain")
        #expect(str("action \(name) of \(sub)") == "action turnPower of abc")
        #expect(str("\(0) \(-1) \(42)") == "0 -1 42")
        #expect(str("\(Int64.min)|\(Int64.max)") == "-9223372036854775808|9223372036854775807")
        #expect(str("\(UInt32.max) \(Int32.min) \(UInt16(7)) \(UInt8(255))") == "4294967295 -2147483648 7 255")
        #expect(str("\(true)/\(false)") == "true/false")
        for n in [Int64(1), 9, 10, 99, 100, 1_000_000_007, -10, -999] {
            #expect(Text.decimal(n) == String(n))
        }
    }

    @Test("Names are equal when their bytes are: no Unicode normalisation")
    func byteEquality() {
        let composed = "caf\u{E9}"  // é as one scalar
        let decomposed = "cafe\u{301}"  // e + combining acute
        #expect(composed == decomposed, "Swift's String == is canonical equivalence")
        #expect(!composed.equals(decomposed), "the core compares bytes")
        #expect(composed.equals("caf\u{E9}"))
        #expect("".equals(""))
        #expect(!"a".equals(""))
        #expect(!"ab".equals("abc"))
        #expect(Optional("x").equals("x"))
        #expect(!Optional<String>.none.equals("x"))
        #expect(Optional<String>.none.equals(nil) && !Optional("x").equals(nil))
        #expect(RecurrenceUnit(named: "week") == .week && RecurrenceUnit(named: "Week") == nil)
        #expect(["a", "b"].containsBytes("b"))
        #expect(!["a", composed].containsBytes(decomposed))

        var table: [ByteKey: Int] = [:]
        table[ByteKey(composed)] = 1
        table[ByteKey(decomposed)] = 2
        table[ByteKey("caf\u{E9}")] = 3
        #expect(table.count == 2)
        #expect(table[ByteKey(composed)] == 3)
        #expect(table[ByteKey(decomposed)] == 2)
    }

    @Test("An error message over 1024 bytes is cut on a scalar boundary, never inside one")
    func truncation() {
        let limit = ActionContext.maxErrorMessageBytes
        #expect(ActionContext.truncate("short") == "short")
        let exact = String(repeating: "x", count: limit)
        #expect(ActionContext.truncate(exact) == exact)
        #expect(ActionContext.truncate(exact + "y") == exact)
        for unit in ["\u{E9}", "\u{20AC}", "\u{1F600}", "a\u{20AC}"] {
            let long = String(repeating: unit, count: 2 * limit / unit.utf8.count)
            let cut = ActionContext.truncate(long)
            let bytes = Array(cut.utf8)
            #expect(bytes.count <= limit && bytes.count > limit - 4, "\(unit.utf8.count)-byte unit: \(bytes.count)")
            #expect(bytes == Array(long.utf8.prefix(bytes.count)), "a prefix of the message")
            #expect(!cut.unicodeScalars.contains("\u{FFFD}"), "no scalar split")
        }
    }
}
