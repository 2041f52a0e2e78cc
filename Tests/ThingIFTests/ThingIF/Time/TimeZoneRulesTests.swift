// SPDX-License-Identifier: Apache-2.0

import Testing

@testable import ThingIF

/// The time zone rules' byte parsers (Sources/ThingIF/Time), which replaced
/// Character walks: POSIX TZ footers and zone names.
@Suite("Time zone rules (fast)")
struct FastTimeZoneRulesTests {
    @Test("POSIX TZ footers parse from bytes; malformed ones are refused")
    func posixTZ() throws {
        let ny = try #require(PosixTZ("EST5EDT,M3.2.0,M11.1.0"))
        #expect(ny.stdOffset == -5 * 3600)
        #expect(ny.dst?.offset == -4 * 3600)
        let kathmandu = try #require(PosixTZ("<+0545>-5:45"))
        #expect(kathmandu.stdOffset == 5 * 3600 + 45 * 60 && kathmandu.dst == nil)
        let paris = try #require(PosixTZ("CET-1CEST,M3.5.0,M10.5.0/3"))
        #expect(paris.stdOffset == 3600 && paris.dst?.offset == 7200 && paris.dst?.endTime == 3 * 3600)
        let julian = try #require(PosixTZ("AAA3BBB,J60/2:30:15,300"))
        #expect(julian.dst?.startTime == 2 * 3600 + 30 * 60 + 15)
        for bad in [
            "", "E5", "EST", "EST5EDT,M13.1.0,M11.1.0", "EST5EDT,M3.6.0,M11.1.0", "EST5EDT,J366,J1",
            "EST5EDT,M3.2.0", "<+05", "EST5EDT,M3.2.0,M11.1.0x", "EST99999999999"
        ] {
            #expect(PosixTZ(bad) == nil, "\(bad)")
        }
    }

    @Test("Zone names: letters, digits, _ - + between single slashes")
    func zoneNames() {
        for good in ["UTC", "Europe/Paris", "Etc/GMT+5", "America/Argentina/Buenos_Aires"] {
            #expect(TimeZoneRules.isValidName(good), "\(good)")
        }
        for bad in ["", "/UTC", "UTC/", "Europe//Paris", ".", "..", "Europe/../etc", "zone.tab", "caf\u{E9}"] {
            #expect(!TimeZoneRules.isValidName(bad), "\(bad)")
        }
    }
}
