// SPDX-License-Identifier: Apache-2.0

import ThingIF
#if canImport(Glibc)
    import Glibc
#endif

/// The hub's periodic work, on one thread of its own (never the Swift
/// concurrency pool or NIO's): each job runs `periodMs` after its last run
/// began (or after the start), the jobs in the order they were given, never
/// two at once. A job that is late (the one before it took long) runs once,
/// not once per period missed.
final class Scheduler: @unchecked Sendable {
    struct Job {
        var name: String
        var periodMs: Int64
        /// Called with the monotonic time (ms) the run began at.
        var run: (_ nowMs: Int64) -> Void
    }

    private let jobs: [Job]
    private let stopped = Locked(false)
    private var thread: pthread_t?

    init(_ jobs: [Job]) { self.jobs = jobs }

    /// Starts the thread; false when it cannot be made.
    func start() -> Bool {
        let jobs = self.jobs
        let stopped = self.stopped
        stopped.withLock { $0 = false }
        guard let shortest = jobs.map(\.periodMs).min() else { return true }
        let tid = startThread {
            var due = jobs.map { Platform.nowMs() + $0.periodMs }
            while !stopped.withLock({ $0 }) {
                let wait = max(0, min(due.min() ?? shortest, Platform.nowMs() + shortest) - Platform.nowMs())
                Platform.sleepMs(Int(wait))
                for (i, job) in jobs.enumerated() {
                    if stopped.withLock({ $0 }) { return }
                    let now = Platform.nowMs()
                    guard now >= due[i] else { continue }
                    job.run(now)
                    due[i] = now + job.periodMs
                }
            }
        }
        guard let tid else { return false }
        thread = tid
        return true
    }

    /// Stops and joins the thread, between two jobs (not from inside a job).
    func stop() {
        stopped.withLock { $0 = true }
        if let t = thread, pthread_equal(t, pthread_self()) == 0 { pthread_join(t, nil) }
        thread = nil
    }
}
