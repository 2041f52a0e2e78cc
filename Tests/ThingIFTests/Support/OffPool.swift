// SPDX-License-Identifier: Apache-2.0

import Foundation
import Testing

/// Threads for test bodies that block (on a broker, a device, a hub, a
/// child process, a sleep), so that they never hold a thread of Swift's
/// cooperative pool. That pool has one thread per core; Swift Testing runs
/// every test on it, and two blocked tests on a 2-core machine left no
/// thread for anything async in the process (an in-process hub's calls,
/// the awaits of the tests that drive it).
///
/// Every job gets a thread at once: an idle one, or a new one. A job that
/// blocks holds its thread and no other job waits for it. A thread idle for
/// 10 s ends.
final class TestThreads: TaskExecutor, @unchecked Sendable {
    static let shared = TestThreads()

    private let condition = NSCondition()
    private var jobs: [UnownedJob] = []
    private var head = 0
    private var idle = 0
    private var count = 0

    /// Whether the calling thread is one of these.
    static var isCurrent: Bool { Thread.current.threadDictionary[key] != nil }
    private static let key = "thingif.TestThreads"

    func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        condition.lock()
        jobs.append(job)
        let waiting = jobs.count - head
        if waiting > idle {
            count += 1
            let t = Thread { [self] in work() }
            t.name = "test-body-\(count)"
            t.start()
        } else {
            condition.signal()
        }
        condition.unlock()
    }

    private func work() {
        Thread.current.threadDictionary[TestThreads.key] = true
        condition.lock()
        while true {
            while head == jobs.count {
                idle += 1
                let woken = condition.wait(until: Date().addingTimeInterval(10))
                idle -= 1
                if !woken && head == jobs.count {
                    count -= 1
                    condition.unlock()
                    return
                }
            }
            let job = jobs[head]
            head += 1
            if head == jobs.count {
                jobs.removeAll(keepingCapacity: true)
                head = 0
            }
            condition.unlock()
            job.runSynchronously(on: asUnownedTaskExecutor())
            condition.lock()
        }
    }
}

/// How many test cases with the `.offPool` trait run at once: twice as many
/// as there are cores, or THINGIF_TEST_BODIES. Each of them holds a world
/// of its own (brokers, hubs, things, child processes), mostly waiting.
/// Swift Testing starts every test at once; once off the pool, nothing
/// else would bound them, and a 2-core machine running all of them at
/// once missed the tests' own deadlines (a thing's 5 s request timeout).
final class TestGate: @unchecked Sendable {
    static let shared = TestGate(
        width: ProcessInfo.processInfo.environment["THINGIF_TEST_BODIES"].flatMap { Int($0) }
            ?? 2 * ProcessInfo.processInfo.activeProcessorCount)

    private let lock = NSLock()
    private var free: Int
    private var waiters: [CheckedContinuation<Void, Never>] = []

    init(width: Int) { free = max(1, width) }

    /// Waits (suspended, holding no thread) for a place.
    func enter() async {
        await withCheckedContinuation { (c: CheckedContinuation<Void, Never>) in
            let now: Bool = lock.withLock {
                if free > 0 {
                    free -= 1
                    return true
                }
                waiters.append(c)
                return false
            }
            if now { c.resume() }
        }
    }

    /// Gives the place to the longest waiter, or back.
    func leave() {
        let next: CheckedContinuation<Void, Never>? = lock.withLock {
            if waiters.isEmpty {
                free += 1
                return nil
            }
            return waiters.removeFirst()
        }
        next?.resume()
    }
}

/// The trait of a suite or test whose bodies block: each test case waits for
/// a place (TestGate; not one with a time limit), then runs with TestThreads as its task executor
/// preference, so that a synchronous body runs on a thread of TestThreads,
/// and an async one, its child tasks and the continuations it awaits resume
/// there too.
struct OffPoolTrait: SuiteTrait, TestTrait, TestScoping {
    var isRecursive: Bool { true }

    @TaskLocal static var inside = false

    func scopeProvider(for test: Test, testCase: Test.Case?) -> OffPoolTrait? {
        testCase == nil ? nil : self
    }

    func provideScope(
        for test: Test, testCase: Test.Case?, performing function: @Sendable () async throws -> Void
    ) async throws {
        // A test that names the trait in a suite that has it too: once.
        if OffPoolTrait.inside { return try await function() }
        // A time limit counts from before this scope, so a test that has
        // one does not queue at the gate (a few end-to-end tests).
        let queues = !test.traits.contains { $0 is TimeLimitTrait }
        if queues { await TestGate.shared.enter() }
        defer { if queues { TestGate.shared.leave() } }
        try await OffPoolTrait.$inside.withValue(true) {
            try await withTaskExecutorPreference(TestThreads.shared) { try await function() }
        }
    }
}

extension Trait where Self == OffPoolTrait {
    /// Runs each test case on threads of its own (TestThreads), a bounded
    /// number at once (TestGate).
    static var offPool: Self { OffPoolTrait() }
}

/// Records an issue (on the running test) when the caller, about to block,
/// is a task on a thread that is not one of TestThreads, that is, on the
/// cooperative pool: its suite lacks the `.offPool` trait. A thread that
/// runs no task (`offPool { }`, a helper's own) may block.
func expectOffPool(_ what: @autoclosure () -> String) {
    let inTask = withUnsafeCurrentTask { $0 != nil }
    guard inTask, !TestThreads.isCurrent else { return }
    Issue.record("\(what()) blocks a thread of the cooperative pool: give the suite the .offPool trait")
}

/// Runs one blocking step on a thread of its own and returns its value: for
/// helpers that any test may call (HubAPIEnv), whether its suite has the
/// `.offPool` trait or not. The step runs outside any task, so an issue
/// recorded there belongs to no test: return what to check instead.
func offPool<T>(_ body: @escaping () -> T) async -> T {
    await withCheckedContinuation { (c: CheckedContinuation<T, Never>) in
        let t = Thread { c.resume(returning: body()) }
        t.start()
    }
}
