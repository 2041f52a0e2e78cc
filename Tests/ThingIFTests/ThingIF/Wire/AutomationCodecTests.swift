// SPDX-License-Identifier: Apache-2.0

import Testing
@testable import ThingIF
import ThingIFHub
import ThingIFRules

private func json(_ text: String) throws -> JSON {
    switch JSON.parse(text) {
    case .success(let j): return j
    case .failure(let e): throw e
    }
}

/// The automation codec, its checks and the calendar arithmetic shared by
/// the thing, the hub and the CLI: no broker, milliseconds per test.
@Suite("Automation codec and calendar (fast)")
struct FastAutomationCodecTests {
    @Test("Names are counted in bytes everywhere: 64 bytes pass, 33 two-byte characters (66 bytes) do not")
    func namesInBytes() {
        #expect(AutomationCodec.checkName(String(repeating: "n", count: 64), "x") == nil)
        #expect(AutomationCodec.checkName(String(repeating: "n", count: 65), "x") != nil)
        #expect(AutomationCodec.checkName(String(repeating: "é", count: 32), "x") == nil)
        let wide = String(repeating: "é", count: 33)
        #expect(wide.count == 33 && wide.utf8.count == 66)
        #expect(AutomationCodec.checkName(wide, "x") != nil)
        #expect(AutomationCodec.checkName("", "x") != nil)
        #expect(AutomationCodec.checkName("a\u{1}b", "x") != nil)
        #expect(AutomationCodec.checkName("a\u{7f}", "x") != nil)
    }

    @Test("Time zones: a zone the library parses; a regular file under zoneinfo that is not a zone is refused")
    func timeZones() {
        #expect(AutomationCodec.checkTimeZone("Europe/Paris") == nil)
        #expect(AutomationCodec.checkTimeZone("UTC") == nil)
        for bad in ["zone.tab", "iso3166.tab", "Mars/Olympus_Mons", "../etc/passwd", "/etc/passwd", "", "Europe/"] {
            #expect(AutomationCodec.checkTimeZone(bad) != nil, "\(bad)")
        }
    }

    @Test("A recurrence count that would overflow is refused by the decoder, not trapped on")
    func recurrenceOverflow() throws {
        for count in ["9000000000000000000", "0", "-1", "1000001", "\"5\""] {
            let j = try json(
                #"{"name":"t","fireDate":1,"recurrence":{"unit":"week","count":\#(count)},"timeZone":"UTC","actionSets":["s"]}"#
            )
            guard case .failure = AutomationCodec.decodeTrigger(j) else {
                Issue.record("count \(count) was accepted")
                continue
            }
        }
        let ok = try json(
            #"{"name":"t","fireDate":1,"recurrence":{"unit":"week","count":5},"timeZone":"UTC","actionSets":["s"]}"#)
        let t = try AutomationCodec.decodeTrigger(ok).get()
        #expect(t.recurrence.map { $0.periodMs } == Int64(5) * 604_800_000)
        #expect(AutomationCodec.check(t, knownSets: { $0 == "s" }) == nil)
        var six = t
        six.recurrence = Recurrence(unit: .week, count: 6)
        #expect(AutomationCodec.check(six, knownSets: { _ in true }) != nil)
    }

    @Test("A whole configuration: counts, duplicates, unknown sets, local sets, params; encode round-trips")
    func wholeConfig() throws {
        let set =
            #"{"name":"s","actions":[{"schema":"AC","schemaVersion":1,"action":"turnPower","params":{"power":true}}]}"#
        let timer = #"{"name":"t","fireDate":1,"timeZone":"UTC","actionSets":["s"],"enabled":true}"#
        let good = try AutomationCodec.decodeConfig(json(#"{"actionSets":[\#(set)],"timerTriggers":[\#(timer)]}"#))
            .get()
        #expect(good.sets.map { $0.name } == ["s"] && good.triggers.map { $0.name } == ["t"])
        #expect(good.sets[0].actions[0].params["power"]?.boolValue == true)
        // encode then decode gives the same configuration.
        let again = try AutomationCodec.decodeSet(AutomationCodec.encode(good.sets[0])).get()
        #expect(again.name == "s" && again.actions.count == 1 && again.actions[0].action == "turnPower")
        let t2 = try AutomationCodec.decodeTrigger(AutomationCodec.encode(good.triggers[0])).get()
        #expect(t2.name == "t" && t2.enabled && t2.actionSets == ["s"] && t2.timeZone == "UTC")

        let refused = [
            #"{"actionSets":[\#(set),\#(set)]}"#,  // a name twice
            #"{"timerTriggers":[\#(timer)]}"#,  // no such set
            #"{"actionSets":{}}"#,
            #"{"actionSets":[{"name":"s","actions":[{"schema":"AC","action":"a","params":[1]}]}]}"#,
            #"{"actionSets":[{"name":"s","actions":[{"schema":"","action":"a"}]}]}"#,
            #"{"actionSets":[{"name":"s","actions":[{"schema":"\#(String(repeating: "x", count: 201))","action":"a"}]}]}"#,
            "[]"
        ]
        for text in refused {
            guard case .failure = AutomationCodec.decodeConfig(try json(text)) else {
                Issue.record("accepted: \(text)")
                continue
            }
        }
        // A trigger may name one of the thing's own (local) sets.
        #expect(
            (try? AutomationCodec.decodeConfig(json(#"{"timerTriggers":[\#(timer)]}"#), localSets: ["s"]).get()) != nil)
        let many =
            "["
            + (0...AutomationLimits.maxActionSets).map { #"{"name":"s\#($0)","actions":[]}"# }.joined(separator: ",")
            + "]"
        guard case .failure = AutomationCodec.decodeConfig(try json(#"{"actionSets":\#(many)}"#)) else {
            Issue.record("\(AutomationLimits.maxActionSets + 1) action sets accepted")
            return
        }
    }

    @Test("Civil dates: day numbers and dates agree both ways, weekdays, over 800 years")
    func civil() {
        #expect(Civil.days(year: 1970, month: 1, day: 1) == 0)
        #expect(Civil.weekday(days: 0) == 4)  // a Thursday
        #expect(Civil.weekday(days: -1) == 3)
        var previousWeekday = Civil.weekday(days: -146_097)
        for d in stride(from: -146_097, through: 146_097, by: 1) {
            let (y, m, day) = Civil.date(days: d)
            if Civil.days(year: y, month: m, day: day) != d {
                Issue.record("day \(d) -> \(y)-\(m)-\(day) does not map back")
                return
            }
            let w = Civil.weekday(days: d)
            if d > -146_097 && w != (previousWeekday + 1) % 7 {
                Issue.record("weekday of day \(d) is \(w) after \(previousWeekday)")
                return
            }
            previousWeekday = w
        }
        #expect(Civil.date(days: Civil.days(year: 2024, month: 2, day: 29)) == (2024, 2, 29))
    }

    @Test("Time zone rules: Europe/Paris offsets in winter, summer and on the changes; a skipped local time")
    func zoneRules() throws {
        let paris = try #require(TimeZoneRules.load("Europe/Paris"))
        func utc(_ y: Int, _ mo: Int, _ d: Int, _ h: Int, _ mi: Int = 0) -> Int64 {
            Int64(Civil.days(year: y, month: mo, day: d)) * 86_400 + Int64(h * 3600 + mi * 60)
        }
        #expect(paris.offset(atUTC: utc(2026, 1, 15, 12)) == 3600)
        #expect(paris.offset(atUTC: utc(2026, 7, 15, 12)) == 7200)
        // 2026-03-29 01:00 UTC: 02:00 local becomes 03:00.
        #expect(paris.offset(atUTC: utc(2026, 3, 29, 0, 59)) == 3600)
        #expect(paris.offset(atUTC: utc(2026, 3, 29, 1, 0)) == 7200)
        // 2026-10-25 01:00 UTC: back to +1.
        #expect(paris.offset(atUTC: utc(2026, 10, 25, 0, 59)) == 7200)
        #expect(paris.offset(atUTC: utc(2026, 10, 25, 1, 0)) == 3600)
        // 02:30 local on 29 March does not exist: it maps to 03:30 local (01:30 UTC).
        #expect(paris.utc(ofLocal: utc(2026, 3, 29, 2, 30)) == utc(2026, 3, 29, 1, 30))
        // Far beyond the transitions table, the POSIX footer rule applies.
        #expect(paris.offset(atUTC: utc(2090, 7, 1, 12)) == 7200)
        #expect(paris.offset(atUTC: utc(2090, 12, 1, 12)) == 3600)
    }

    @Test("Daily timer at 08:00 Europe/Paris: the next occurrence keeps 08:00 local across a DST change")
    func nextOccurrence() throws {
        let paris = try #require(TimeZoneRules.load("Europe/Paris"))
        // 2026-03-27 08:00 local (+1) = 07:00 UTC.
        let start = (Int64(Civil.days(year: 2026, month: 3, day: 27)) * 86_400 + 7 * 3600) * 1000
        let t = TimerTrigger(
            name: "t", startDate: start, fireDate: start, recurrence: Recurrence(unit: .day, count: 1),
            timeZone: "Europe/Paris", actionSets: ["s"], enabled: true, remote: false)
        // After the 28th's firing, the 29th (+2): 08:00 local = 06:00 UTC.
        let after28 = start + 86_400_000 + 1
        let expected = (Int64(Civil.days(year: 2026, month: 3, day: 29)) * 86_400 + 6 * 3600) * 1000
        #expect(t.nextOccurrence(after: after28, zone: paris) == expected)
        // Without a zone, a plain 24-hour period.
        #expect(t.nextOccurrence(after: after28, zone: nil) == start + 2 * 86_400_000)
    }

    @Test("Cron: next minute matching, day-of-month OR day-of-week, 31 February never")
    func cron() throws {
        let weekdays8 = try #require(CronSchedule("0 8 * * 1-5"))
        // 2026-11-21 is a Saturday: the next is Monday 23rd 08:00 UTC.
        let sat = Int64(Civil.days(year: 2026, month: 11, day: 21)) * 86_400_000
        #expect(Civil.weekday(days: Civil.days(year: 2026, month: 11, day: 21)) == 6)
        #expect(
            weekdays8.next(after: sat) == Int64(Civil.days(year: 2026, month: 11, day: 23)) * 86_400_000 + 8 * 3_600_000
        )
        let never = try #require(CronSchedule("0 0 31 2 *"))
        #expect(never.next(after: sat) == nil)
        #expect(CronSchedule("61 * * * *") == nil && CronSchedule("* * *") == nil)
        // Both restricted: the 1st of the month OR a Sunday.
        let either = try #require(CronSchedule("0 0 1 * 0"))
        #expect(either.next(after: sat) == Int64(Civil.days(year: 2026, month: 11, day: 22)) * 86_400_000)
    }
}
