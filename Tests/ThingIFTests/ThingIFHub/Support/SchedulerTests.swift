// SPDX-License-Identifier: Apache-2.0

import Foundation
import Testing
import ThingIF

@testable import ThingIFHub

/// The scheduler's rules, checked in ways that a loaded machine cannot
/// break: load only delays runs, so the checks are on order and on the
/// smallest gap between the times two runs of a job began (as the scheduler
/// gives them), never on how many runs fit in a time.
@Suite("The hub's scheduler", .offPool)
struct SchedulerTests {
    /// The times each job's runs began (monotonic ms), and whether two ever overlapped.
    final class Log: @unchecked Sendable {
        let runs = Locked<[String: [Int64]]>([:])
        let inJob = Locked(false)
        let overlapped = Locked(false)

        func job(_ name: String, _ periodMs: Int64, block: @escaping () -> Void = {}) -> Scheduler.Job {
            .init(name: name, periodMs: periodMs) { [self] now in
                if inJob.withLock({ $0 }) { overlapped.withLock { $0 = true } }
                inJob.withLock { $0 = true }
                runs.withLock { $0[name, default: []].append(now) }
                block()
                inJob.withLock { $0 = false }
            }
        }

        func count(_ name: String) -> Int { runs.withLock { $0[name]?.count ?? 0 } }

        /// The smallest gap between two runs of `name` that follow each other.
        func smallestGap(_ name: String) -> Int64? {
            let t = runs.withLock { $0[name] ?? [] }
            return zip(t, t.dropFirst()).map { $1 - $0 }.min()
        }
    }

    @Test("Each job runs at its own period, on one thread, never two at once; a stop ends it between jobs")
    func periodsAndStop() throws {
        let log = Log()
        let scheduler = Scheduler([log.job("fast", 20), log.job("slow", 200)])
        try #require(scheduler.start())
        #expect(poll(timeoutMs: 30_000) { log.count("slow") >= 3 && log.count("fast") >= 3 })
        scheduler.stop()
        let after = log.runs.withLock { $0 }
        // Never sooner than its period after its last run began.
        #expect((log.smallestGap("fast") ?? 0) >= 20, "fast: \(after["fast"] ?? [])")
        #expect((log.smallestGap("slow") ?? 0) >= 200, "slow: \(after["slow"] ?? [])")
        #expect(!log.overlapped.withLock { $0 })
        #expect(!log.inJob.withLock { $0 }, "stopped between jobs, not inside one")
        // stop() joined the thread: nothing can run after it returned.
        #expect(log.runs.withLock { $0 } == after, "no run after the stop")
    }

    @Test("A late job runs once, not once per period it missed")
    func lateJobRunsOnce() throws {
        let log = Log()
        let first = Locked(true)
        let scheduler = Scheduler([
            // Its first run holds the thread for ten of the other job's periods.
            log.job("blocker", 10) {
                if first.withLock({ f in
                    defer { f = false }; return f
                }) {
                    usleep(200_000)
                }
            },
            log.job("counted", 20)
        ])
        try #require(scheduler.start())
        #expect(poll(timeoutMs: 30_000) { log.count("counted") >= 4 })
        scheduler.stop()
        // Caught up run by run, the counted job would have run about ten
        // times back to back after the block.
        #expect((log.smallestGap("counted") ?? 0) >= 20, "\(log.runs.withLock { $0["counted"] ?? [] })")
    }
}
