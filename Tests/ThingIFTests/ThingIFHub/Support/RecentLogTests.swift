// SPDX-License-Identifier: Apache-2.0

import Testing

@testable import ThingIFHub

/// The hub's bounded logs (its request log, the commands whose result
/// deliveries it counts): the newest entries, oldest first.
@Suite("RecentLog: the newest entries in a ring (fast)")
struct RecentLogTests {
    @Test("Keeps the newest `capacity` entries, oldest first, and hands back each one it pushes out")
    func ring() {
        var log = RecentLog<Int>(capacity: 3)
        #expect(log.all.isEmpty)
        var out: [Int?] = []
        for i in 1...2 { out.append(log.append(i)) }
        #expect(log.all == [1, 2])
        for i in 3...8 { out.append(log.append(i)) }
        #expect(out == [nil, nil, nil, 1, 2, 3, 4, 5])
        #expect(log.all == [6, 7, 8])
        #expect(log.append(9) == 6)
        #expect(log.all == [7, 8, 9])
    }

    @Test("A capacity below one keeps one entry")
    func smallest() {
        var log = RecentLog<String>(capacity: 0)
        #expect(log.append("a") == nil)
        #expect(log.append("b") == "a")
        #expect(log.all == ["b"])
    }
}
