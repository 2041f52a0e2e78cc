// SPDX-License-Identifier: Apache-2.0

import CThingIF

/// Proleptic Gregorian calendar arithmetic on days since 1970-01-01
/// (Howard Hinnant's civil-date algorithms). No Foundation. The thing's
/// timers and the hub's cron schedules both use it.
public enum Civil {
    public static func days(year: Int, month: Int, day: Int) -> Int {
        let y = month <= 2 ? year - 1 : year
        let era = (y >= 0 ? y : y - 399) / 400
        let yoe = y - era * 400
        let mp = (month + 9) % 12
        let doy = (153 * mp + 2) / 5 + day - 1
        let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy
        return era * 146_097 + doe - 719_468
    }

    public static func date(days z0: Int) -> (year: Int, month: Int, day: Int) {
        let z = z0 + 719_468
        let era = (z >= 0 ? z : z - 146_096) / 146_097
        let doe = z - era * 146_097
        let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146_096) / 365
        let doy = doe - (365 * yoe + yoe / 4 - yoe / 100)
        let mp = (5 * doy + 2) / 153
        let d = doy - (153 * mp + 2) / 5 + 1
        let m = mp < 10 ? mp + 3 : mp - 9
        return (yoe + era * 400 + (m <= 2 ? 1 : 0), m, d)
    }

    /// 0 = Sunday.
    public static func weekday(days: Int) -> Int { ((days % 7) + 11) % 7 }

    static func isLeap(_ y: Int) -> Bool { (y % 4 == 0 && y % 100 != 0) || y % 400 == 0 }

    static func daysInMonth(year: Int, month: Int) -> Int {
        [31, isLeap(year) ? 29 : 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31][month - 1]
    }

    public static func floorDiv(_ a: Int64, _ b: Int64) -> Int64 { a >= 0 ? a / b : -((-a + b - 1) / b) }
}

/// A POSIX TZ string as found in the footer of a TZif v2+ file, e.g.
/// "CET-1CEST,M3.5.0,M10.5.0/3". Gives the UTC offset at any time after the
/// file's last transition.
struct PosixTZ {
    enum Rule {
        case julianNoLeap(Int)  // Jn, 1...365, February 29 never counted
        case zeroBased(Int)  // n, 0...365
        case monthWeekDay(Int, Int, Int)  // Mm.w.d
    }

    var stdOffset: Int  // seconds east of UTC
    var dst: (offset: Int, start: Rule, startTime: Int, end: Rule, endTime: Int)?

    init?(_ text: String) {
        var s = ArraySlice(text.utf8)
        guard PosixTZ.name(&s), let std = PosixTZ.offset(&s) else { return nil }
        stdOffset = -std
        if s.isEmpty { dst = nil; return }
        guard PosixTZ.name(&s) else { return nil }
        var dstOffset = stdOffset + 3600
        if let c = s.first, c != UInt8(ascii: ",") {
            guard let o = PosixTZ.offset(&s) else { return nil }
            dstOffset = -o
        }
        // Without rules, POSIX leaves the default implementation-defined;
        // use the US rules like glibc.
        var startRule = Rule.monthWeekDay(3, 2, 0), startTime = 7200
        var endRule = Rule.monthWeekDay(11, 1, 0), endTime = 7200
        if !s.isEmpty {
            guard s.first == UInt8(ascii: ",") else { return nil }
            s = s.dropFirst()
            guard let r1 = PosixTZ.rule(&s) else { return nil }
            startRule = r1
            if s.first == UInt8(ascii: "/") {
                s = s.dropFirst(); guard let t = PosixTZ.time(&s) else { return nil }; startTime = t
            }
            guard s.first == UInt8(ascii: ",") else { return nil }
            s = s.dropFirst()
            guard let r2 = PosixTZ.rule(&s) else { return nil }
            endRule = r2
            if s.first == UInt8(ascii: "/") {
                s = s.dropFirst(); guard let t = PosixTZ.time(&s) else { return nil }; endTime = t
            }
            guard s.isEmpty else { return nil }
        }
        dst = (dstOffset, startRule, startTime, endRule, endTime)
    }

    private static func name(_ s: inout ArraySlice<UInt8>) -> Bool {
        if s.first == UInt8(ascii: "<") {
            guard let end = s.firstIndex(of: UInt8(ascii: ">")) else { return false }
            s = s[(end + 1)...]
            return true
        }
        let n = s.prefix { ($0 >= 0x61 && $0 <= 0x7A) || ($0 >= 0x41 && $0 <= 0x5A) }
        guard n.count >= 3 else { return false }
        s = s.dropFirst(n.count)
        return true
    }

    private static func number(_ s: inout ArraySlice<UInt8>) -> Int? {
        let digits = s.prefix { $0 >= 0x30 && $0 <= 0x39 }
        guard !digits.isEmpty, digits.count <= 9 else { return nil }
        s = s.dropFirst(digits.count)
        return digits.reduce(0) { $0 * 10 + Int($1 - 0x30) }
    }

    /// [+-]hh[:mm[:ss]] in seconds (POSIX sign: positive is west of UTC).
    private static func time(_ s: inout ArraySlice<UInt8>) -> Int? {
        var sign = 1
        if s.first == UInt8(ascii: "+") {
            s = s.dropFirst()
        } else if s.first == UInt8(ascii: "-") {
            sign = -1; s = s.dropFirst()
        }
        guard let h = number(&s) else { return nil }
        var total = h * 3600
        if s.first == UInt8(ascii: ":") {
            s = s.dropFirst()
            guard let m = number(&s) else { return nil }
            total += m * 60
            if s.first == UInt8(ascii: ":") {
                s = s.dropFirst()
                guard let sec = number(&s) else { return nil }
                total += sec
            }
        }
        return sign * total
    }

    private static func offset(_ s: inout ArraySlice<UInt8>) -> Int? { time(&s) }

    private static func rule(_ s: inout ArraySlice<UInt8>) -> Rule? {
        if s.first == UInt8(ascii: "J") {
            s = s.dropFirst()
            guard let n = number(&s), (1...365).contains(n) else { return nil }
            return .julianNoLeap(n)
        }
        if s.first == UInt8(ascii: "M") {
            s = s.dropFirst()
            guard let m = number(&s), s.first == UInt8(ascii: ".") else { return nil }
            s = s.dropFirst()
            guard let w = number(&s), s.first == UInt8(ascii: ".") else { return nil }
            s = s.dropFirst()
            guard let d = number(&s), (1...12).contains(m), (1...5).contains(w), (0...6).contains(d) else { return nil }
            return .monthWeekDay(m, w, d)
        }
        guard let n = number(&s), (0...365).contains(n) else { return nil }
        return .zeroBased(n)
    }

    /// The day (days since the epoch) a rule names in a year.
    private static func day(_ r: Rule, year: Int) -> Int {
        let jan1 = Civil.days(year: year, month: 1, day: 1)
        switch r {
        case .julianNoLeap(let n):
            return jan1 + n - 1 + (Civil.isLeap(year) && n >= 60 ? 1 : 0)
        case .zeroBased(let n):
            return jan1 + n
        case .monthWeekDay(let m, let w, let d):
            let first = Civil.days(year: year, month: m, day: 1)
            var dom = 1 + (d - Civil.weekday(days: first) + 7) % 7 + (w - 1) * 7
            while dom > Civil.daysInMonth(year: year, month: m) { dom -= 7 }
            return first + dom - 1
        }
    }

    func offset(atUTC t: Int64) -> Int {
        guard let dst else { return stdOffset }
        let year = Civil.date(days: Int(Civil.floorDiv(t + Int64(stdOffset), 86400))).year
        // Start is given in standard local time, end in daylight local time.
        let start = Int64(PosixTZ.day(dst.start, year: year)) * 86400 + Int64(dst.startTime - stdOffset)
        let end = Int64(PosixTZ.day(dst.end, year: year)) * 86400 + Int64(dst.endTime - dst.offset)
        let inDST = start < end ? (t >= start && t < end) : !(t >= end && t < start)
        return inDST ? dst.offset : stdOffset
    }
}

/// A time zone's rules, read from a TZif file of the system's zoneinfo
/// (RFC 8536). Version 1 files use their 32-bit data; version 2+ files their
/// 64-bit data and the footer's POSIX TZ string, which gives the offset for
/// dates past the last transition (slim files stop their transitions early
/// and rely on it). When a file has no usable footer, the last transition's
/// offset holds from then on.
struct TimeZoneRules {
    let name: String
    let transitions: [Int64]
    let typeIndex: [Int]
    let offsets: [Int]
    let isDST: [Bool]
    let footer: PosixTZ?

    static var directory: String {
        if let p = getenv("TZDIR"), let s = String(validatingCString: p), !s.isEmpty { return s }
        return "/usr/share/zoneinfo"
    }

    /// True for names like "Europe/Paris", "UTC", "America/Argentina/Buenos_Aires".
    static func isValidName(_ name: String) -> Bool {
        let bytes = Array(name.utf8)
        guard !bytes.isEmpty, bytes.count <= 128, bytes.first != 0x2F, bytes.last != 0x2F else { return false }
        for part in bytes.split(separator: 0x2F, omittingEmptySubsequences: false) {
            guard !part.isEmpty,  // "." and ".." fail the character check
                part.allSatisfy({
                    ($0 >= 0x30 && $0 <= 0x39) || ($0 >= 0x41 && $0 <= 0x5a) || ($0 >= 0x61 && $0 <= 0x7a)
                        || $0 == 0x5f || $0 == 0x2d || $0 == 0x2b
                })
            else { return false }
        }
        return true
    }

    /// Loads a zone by its IANA name; nil when there is no such zone file or
    /// it is not a TZif file.
    static func load(_ name: String) -> TimeZoneRules? {
        guard isValidName(name), let bytes = Platform.readFile(directory + "/" + name, limit: 1 << 18) else {
            return nil
        }
        return TimeZoneRules(name: name, tzif: bytes)
    }

    init?(name: String, tzif b: [UInt8]) {
        self.name = name
        // UInt32, not Int: `Int` is 32 bits on armv7, where Int(UInt32) of a
        // negative offset's bit pattern (any zone west of UTC) traps.
        func u32(_ at: Int) -> UInt32? {
            guard at + 4 <= b.count else { return nil }
            return UInt32(b[at]) << 24 | UInt32(b[at + 1]) << 16 | UInt32(b[at + 2]) << 8 | UInt32(b[at + 3])
        }
        // A header count; none can exceed the file's size, which also keeps
        // the size arithmetic below from overflowing a 32-bit Int.
        func count(_ at: Int) -> Int? {
            guard let v = u32(at), v <= UInt32(b.count) else { return nil }
            return Int(v)
        }
        func i64(_ at: Int) -> Int64 {
            var v: UInt64 = 0
            for i in 0..<8 { v = v << 8 | UInt64(b[at + i]) }
            return Int64(bitPattern: v)
        }
        func header(_ at: Int) -> (isut: Int, isstd: Int, leap: Int, time: Int, type: Int, char: Int)? {
            guard b.count >= at + 44, b[at] == 0x54, b[at + 1] == 0x5a, b[at + 2] == 0x69, b[at + 3] == 0x66,
                let a = count(at + 20), let c = count(at + 24), let d = count(at + 28), let e = count(at + 32),
                let f = count(at + 36), let g = count(at + 40)
            else { return nil }
            return (a, c, d, e, f, g)
        }
        guard let h1 = header(0) else { return nil }
        let version = b[4]
        var at = 44
        var h = h1
        var timeSize = 4
        if version >= 0x32 {
            // Skip the 32-bit block; read the 64-bit one.
            at += h1.time * 5 + h1.type * 6 + h1.char + h1.leap * 8 + h1.isstd + h1.isut
            guard let h2 = header(at) else { return nil }
            h = h2
            at += 44
            timeSize = 8
        }
        let need = h.time * (timeSize + 1) + h.type * 6 + h.char + h.leap * (timeSize + 4) + h.isstd + h.isut
        guard h.type >= 1, at + need <= b.count else { return nil }
        var times: [Int64] = []
        for i in 0..<h.time {
            let p = at + i * timeSize
            times.append(timeSize == 8 ? i64(p) : Int64(Int32(bitPattern: u32(p)!)))
        }
        at += h.time * timeSize
        var idx: [Int] = []
        for i in 0..<h.time {
            let t = Int(b[at + i])
            guard t < h.type else { return nil }
            idx.append(t)
        }
        at += h.time
        var offs: [Int] = [], dsts: [Bool] = []
        for i in 0..<h.type {
            offs.append(Int(Int32(bitPattern: u32(at + i * 6)!)))
            dsts.append(b[at + i * 6 + 4] != 0)
        }
        at += h.type * 6 + h.char + h.leap * (timeSize + 4) + h.isstd + h.isut
        var footer: PosixTZ?
        if timeSize == 8, at < b.count, b[at] == 0x0a, let end = b[(at + 1)...].firstIndex(of: 0x0a), end > at + 1 {
            footer = PosixTZ(String(decoding: b[(at + 1)..<end], as: UTF8.self))
        }
        transitions = times
        typeIndex = idx
        offsets = offs
        isDST = dsts
        self.footer = footer
    }

    /// Seconds east of UTC at a UTC time (seconds since the epoch).
    func offset(atUTC t: Int64) -> Int {
        guard let last = transitions.last else { return footer?.offset(atUTC: t) ?? offsets[0] }
        if t < transitions[0] {
            // Before the first transition: the first standard-time type (RFC 8536 3.2).
            return offsets[isDST.firstIndex(of: false) ?? 0]
        }
        if t >= last, let footer { return footer.offset(atUTC: t) }
        var lo = 0, hi = transitions.count - 1
        while lo < hi {
            let mid = (lo + hi + 1) / 2
            if transitions[mid] <= t { lo = mid } else { hi = mid - 1 }
        }
        return offsets[typeIndex[lo]]
    }

    /// The UTC time of a local wall-clock time (both in seconds). A local
    /// time skipped by a forward change maps to the same instant as one
    /// hour (the change) later; one that occurs twice maps to the later.
    func utc(ofLocal local: Int64) -> Int64 {
        let t1 = local - Int64(offset(atUTC: local))
        return local - Int64(offset(atUTC: t1))
    }

    func local(ofUTC t: Int64) -> Int64 { t + Int64(offset(atUTC: t)) }
}
