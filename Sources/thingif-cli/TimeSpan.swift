// SPDX-License-Identifier: Apache-2.0

/// `--expires-in` values: a whole number with an optional unit, `90`, `90s`,
/// `10m`, `2h` or `1d`. Only the syntax is checked here; the hub keeps the
/// allowed range of a command's timeToLive (400 WRONG_COMMAND outside it).
enum TimeSpan {
    static let units: [Character: Int] = ["s": 1, "m": 60, "h": 3600, "d": 86_400]

    /// The span in seconds, nil when `text` is not such a span (or overflows).
    static func seconds(_ text: String) -> Int? {
        var digits = Substring(text)
        var factor = 1
        if let last = text.last, let f = units[last] {
            factor = f
            digits = digits.dropLast()
        }
        guard !digits.isEmpty, digits.allSatisfy({ $0.isASCII && $0.isNumber }), let n = Int(digits) else {
            return nil
        }
        let (total, overflow) = n.multipliedReportingOverflow(by: factor)
        return overflow ? nil : total
    }
}
