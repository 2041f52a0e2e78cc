// SPDX-License-Identifier: Apache-2.0

import Testing
import ThingIF

@testable import ThingIFHub

/// CommandEnds, the wait a cancel's answer takes instead of polling the
/// store: woken by the command's end, never by another's, and bounded.
@Suite("Command ends: a waiter woken by its command's end, bounded by its deadline")
struct CommandEndsTests {
    /// The end of the command wakes its waiter; another command's does not.
    @Test("woken by its command's end, not by another's")
    func wokenByItsEnd() async {
        let ends = CommandEnds()
        let done = Locked(false)
        // A deadline no run reaches: only the end can return the wait.
        let waiting = Task {
            await ends.wait(for: "c1", timeoutMs: 600_000) { false }
            done.withLock { $0 = true }
        }
        while ends.waiters == 0 { await Task.yield() }
        ends.ended("c2")
        #expect(ends.waiters == 1)
        #expect(!done.withLock { $0 })
        ends.ended("c1")
        await waiting.value
        #expect(done.withLock { $0 })
        #expect(ends.waiters == 0)
    }

    /// An end before the wait began (the check runs once registered) returns at once.
    @Test("an end seen by the check returns at once")
    func endedBeforeTheWait() async {
        let ends = CommandEnds()
        await ends.wait(for: "c1", timeoutMs: 600_000) { true }
        #expect(ends.waiters == 0)
    }

    /// With no end the deadline returns the wait, and nothing is left registered.
    @Test("the deadline returns the wait")
    func deadline() async {
        let ends = CommandEnds()
        await ends.wait(for: "c1", timeoutMs: 20) { false }
        #expect(ends.waiters == 0)
        // A late end for it wakes nobody and does not trap.
        ends.ended("c1")
    }
}
