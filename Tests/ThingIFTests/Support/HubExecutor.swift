// SPDX-License-Identifier: Apache-2.0

import Foundation

/// Threads of their own for the in-process hubs' tasks, so that a hub
/// accepts, times out and answers connections however many synchronous
/// tests hold the cooperative pool. Swift Testing runs a synchronous test on
/// that pool (one thread per core); on a 2-core machine two of them waiting
/// on a broker or a device left no thread for any in-process hub, and under
/// ThreadSanitizer a hub then did not accept a connection for 30 s.
///
/// A task started with this as its executor preference runs its own jobs,
/// its child tasks' (Hummingbird's connection handlers, the service group's
/// services) and those of the default actors it calls here (SE-0417).
/// Unstructured tasks the hub starts itself run on the global pool as
/// before.
final class HubExecutor: TaskExecutor, @unchecked Sendable {
    /// One for every in-process hub of the test process.
    static let shared = HubExecutor(threads: 4)

    private let condition = NSCondition()
    private var jobs: [UnownedJob] = []
    private var head = 0

    init(threads: Int) {
        for i in 0..<threads {
            let t = Thread { [self] in work() }
            t.name = "hub-executor-\(i)"
            t.start()
        }
    }

    func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        condition.lock()
        jobs.append(job)
        condition.signal()
        condition.unlock()
    }

    private func work() {
        while true {
            condition.lock()
            while head == jobs.count { condition.wait() }
            let job = jobs[head]
            head += 1
            if head == jobs.count {
                jobs.removeAll(keepingCapacity: true)
                head = 0
            }
            condition.unlock()
            job.runSynchronously(on: asUnownedTaskExecutor())
        }
    }
}
