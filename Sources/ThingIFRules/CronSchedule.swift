// SPDX-License-Identifier: Apache-2.0

import ThingIF

/// A five-field cron schedule (minute hour day-of-month month day-of-week),
/// in UTC. Each field: *, a number, a range a-b, a list a,b,c, or a step
/// (*/n, a-b/n). Day of week 0-7 (0 and 7 are Sunday). As in cron, when both
/// day fields are restricted a day matches either.
public struct CronSchedule: Sendable, Equatable {
    public let minutes: Set<Int>
    public let hours: Set<Int>
    public let daysOfMonth: Set<Int>
    public let months: Set<Int>
    public let daysOfWeek: Set<Int>
    let domStar: Bool
    let dowStar: Bool

    public init?(_ text: String) {
        let f = text.split(separator: " ", omittingEmptySubsequences: true).map(String.init)
        guard f.count == 5,
            let mi = Self.field(f[0], 0, 59), let h = Self.field(f[1], 0, 23), let dom = Self.field(f[2], 1, 31),
            let mo = Self.field(f[3], 1, 12), let dow = Self.field(f[4], 0, 7)
        else { return nil }
        minutes = mi
        hours = h
        daysOfMonth = dom
        months = mo
        daysOfWeek = Set(dow.map { $0 % 7 })
        domStar = f[2].hasPrefix("*")
        dowStar = f[4].hasPrefix("*")
    }

    private static func field(_ s: String, _ lo: Int, _ hi: Int) -> Set<Int>? {
        var out = Set<Int>()
        for part in s.split(separator: ",", omittingEmptySubsequences: false) {
            let pieces = part.split(separator: "/", omittingEmptySubsequences: false)
            guard pieces.count <= 2 else { return nil }
            var step = 1
            if pieces.count == 2 {
                guard let n = Int(pieces[1]), n >= 1, n <= hi - lo + 1 || n <= hi else { return nil }
                step = n
            }
            let range = pieces[0]
            var a: Int, b: Int
            if range == "*" {
                (a, b) = (lo, hi)
            } else if let dash = range.firstIndex(of: "-") {
                guard let x = Int(range[..<dash]), let y = Int(range[range.index(after: dash)...]) else { return nil }
                (a, b) = (x, y)
            } else {
                guard let x = Int(range) else { return nil }
                (a, b) = (x, pieces.count == 2 ? hi : x)
            }
            guard a >= lo, b <= hi, a <= b else { return nil }
            out.formUnion(stride(from: a, through: b, by: step))
        }
        return out.isEmpty ? nil : out
    }

    public func dayMatches(day: Int, month: Int, weekday: Int) -> Bool {
        guard months.contains(month) else { return false }
        let d = daysOfMonth.contains(day), w = daysOfWeek.contains(weekday)
        if domStar || dowStar { return (domStar || d) && (dowStar || w) }
        return d || w
    }

    /// The first minute strictly after `ms` (epoch milliseconds, UTC) that
    /// the schedule matches; nil when none within 5 years (31 February).
    public func next(after ms: Int64) -> Int64? {
        var minute = ms / 60_000 + 1  // minutes since the epoch; the next whole minute
        if ms < 0 { minute = (ms - 59_999) / 60_000 + 1 }
        var day = minute / 1440
        var minuteOfDay = Int(minute - day * 1440)
        for _ in 0..<(366 * 5) {
            let (_, m, d) = Civil.date(days: Int(day))
            let weekday = Civil.weekday(days: Int(day))
            if dayMatches(day: d, month: m, weekday: weekday) {
                for h in minuteOfDay / 60..<24 where hours.contains(h) {
                    let from = h == minuteOfDay / 60 ? minuteOfDay % 60 : 0
                    if let mm = minutes.filter({ $0 >= from }).min() {
                        return (day * 1440 + Int64(h * 60 + mm)) * 60_000
                    }
                }
            }
            day += 1
            minuteOfDay = 0
        }
        return nil
    }
}
