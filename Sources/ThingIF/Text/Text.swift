// SPDX-License-Identifier: Apache-2.0

/// A string built by string interpolation through out-of-line appends.
///
/// Swift's own interpolation (DefaultStringInterpolation) is specialised and
/// inlined at every site: in the Embedded build about 1 KB of code per log
/// line. `Text` keeps a site to one call per piece, so log lines and the
/// protocol's paths and messages cost a few bytes each (docs/DECISIONS.md,
/// "The core's text is bytes"). Numbers are written in decimal, strings as
/// they are; nothing is formatted by reflection.
public struct Text: ExpressibleByStringInterpolation, Sendable {
    public var string: String

    @inline(never)
    public init(_ string: String) { self.string = string }

    @inline(never)
    public init(stringLiteral value: String) { string = value }

    public init(stringInterpolation: Interpolation) { string = stringInterpolation.string }

    public struct Interpolation: StringInterpolationProtocol {
        var string = ""

        public init(literalCapacity: Int, interpolationCount: Int) {}

        @inline(never)
        public mutating func appendLiteral(_ literal: String) { string += literal }

        @inline(never)
        public mutating func appendInterpolation(_ value: String) { string += value }

        @inline(never)
        public mutating func appendInterpolation(_ value: Substring) { string += value }

        @inline(never)
        public mutating func appendInterpolation(_ value: Int64) { string += Text.decimal(value) }

        public mutating func appendInterpolation(_ value: Int) { appendInterpolation(Int64(value)) }
        public mutating func appendInterpolation(_ value: Int32) { appendInterpolation(Int64(value)) }
        public mutating func appendInterpolation(_ value: UInt32) { appendInterpolation(Int64(value)) }
        public mutating func appendInterpolation(_ value: UInt16) { appendInterpolation(Int64(value)) }
        public mutating func appendInterpolation(_ value: UInt8) { appendInterpolation(Int64(value)) }

        @inline(never)
        public mutating func appendInterpolation(_ value: Bool) { string += value ? "true" : "false" }
    }

    /// `value` in decimal, with a minus sign when negative.
    @inline(never)
    public static func decimal(_ value: Int64) -> String {
        var digits = [UInt8](repeating: 0, count: 20)
        var i = digits.count
        var v = value.magnitude
        repeat {
            i -= 1
            digits[i] = UInt8(truncatingIfNeeded: v % 10) &+ 48
            v /= 10
        } while v != 0
        if value < 0 {
            i -= 1
            digits[i] = 45
        }
        return String(decoding: digits[i...], as: UTF8.self)
    }
}

/// The string of `text`: `str("p/\(clientID)/resp")` builds it through
/// `Text`'s out-of-line appends instead of inlined interpolation.
@inline(__always)
func str(_ text: Text) -> String { text.string }
