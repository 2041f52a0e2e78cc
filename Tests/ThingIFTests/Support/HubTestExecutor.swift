import Foundation

/// Threads of their own for the in-process hubs' HTTP servers and the
/// tests that talk to them (withHubAPI). Swift Testing runs synchronous
/// tests on the cooperative pool, which has one thread per core; on a
/// 2-core machine two of them waiting on a broker or a device for seconds
/// leave no thread for any Hummingbird handler, and under ThreadSanitizer
/// whole servers did not get to listen within a minute. Work that prefers
/// this executor (a task created with it, and its child tasks) runs here
/// instead, whatever holds the pool.
final class HubTestExecutor: TaskExecutor, @unchecked Sendable {
    static let shared = HubTestExecutor(threads: 4)

    private let condition = NSCondition()
    private var jobs: [UnownedJob] = []
    private var head = 0

    init(threads: Int) {
        for i in 0..<threads {
            let t = Thread { [unowned self] in self.work() }
            t.name = "hub-test-executor-\(i)"
            t.start()
        }
    }

    func enqueue(_ job: consuming ExecutorJob) {
        let j = UnownedJob(job)
        condition.lock()
        jobs.append(j)
        condition.signal()
        condition.unlock()
    }

    private func work() {
        while true {
            condition.lock()
            while head == jobs.count { condition.wait() }
            let j = jobs[head]
            head += 1
            if head >= 1024 && head * 2 >= jobs.count {
                jobs.removeFirst(head)
                head = 0
            }
            condition.unlock()
            j.runSynchronously(on: asUnownedTaskExecutor())
        }
    }
}
