// SPDX-License-Identifier: Apache-2.0

import ThingIF
#if canImport(Glibc)
    import Glibc
#endif

/// The hub's costly work on threads of its own: password hashing (PBKDF2,
/// about 150 ms of CPU at the production cost) and the hand-out of broker
/// credentials (a round trip to the broker's dynamic-security plugin).
///
/// At most `threads` jobs run at once and at most `queueLimit` wait; a job
/// that finds the queue full is refused at once (REST answers 503 with
/// Retry-After, MQTT a 503 reply), so a flood of sign-ups, logins or
/// onboardings never waits on, or takes, a thread that serves commands,
/// results, state or MQTT. The bound is what keeps hashing off the command
/// path: cores − 1 threads leave a core's worth of time to the rest. (They
/// ran at nice +10 once; on a busy machine that starved every onboarding,
/// see docs/DECISIONS.md.)
public final class CostlyWork: @unchecked Sendable {
    /// Why a job was refused.
    public struct Busy: Error, Sendable {
        public var retryAfterSeconds: Int
    }

    public let threads: Int
    public let queueLimit: Int

    private let monitor = Monitor()
    private var jobs: [() -> Void] = []
    private var head = 0
    private var busyThreads = 0
    private var closed = false
    /// Threads alive (they start with the first jobs and end after close()).
    private var liveThreads = 0
    private var refusedCount = 0
    private var doneCount = 0

    /// cores - 1 (at least one): the other core stays for the command path.
    public static var defaultThreads: Int { max(1, Int(sysconf(Int32(_SC_NPROCESSORS_ONLN))) - 1) }
    public static let defaultQueueLimit = 32

    public init(threads: Int = CostlyWork.defaultThreads, queueLimit: Int = CostlyWork.defaultQueueLimit) {
        self.threads = max(1, threads)
        self.queueLimit = max(1, queueLimit)
    }

    private func locked<T>(_ body: () -> T) -> T { monitor.locked(body) }

    /// Jobs waiting (not running).
    public var waiting: Int { locked { jobs.count - head } }
    /// Jobs running now.
    public var running: Int { locked { busyThreads } }
    /// Jobs refused because the queue was full, since the start.
    public var refused: Int { locked { refusedCount } }
    /// Jobs finished, since the start.
    public var done: Int { locked { doneCount } }

    /// Queues `job`; false (and nothing queued) when `queueLimit` jobs wait
    /// already, or after close(). Threads start as jobs come, up to `threads`.
    @discardableResult
    public func trySubmit(_ job: @escaping () -> Void) -> Bool {
        var ok = false
        let spawnOne: Bool = locked {
            guard !closed, jobs.count - head < queueLimit else {
                refusedCount += 1
                return false
            }
            ok = true
            jobs.append(job)
            monitor.signal()
            guard liveThreads < threads else { return false }
            liveThreads += 1
            return true
        }
        if spawnOne && !spawn() { locked { liveThreads -= 1 } }
        return ok
    }

    /// Runs `body` on the pool and returns its value; throws `Busy` at once
    /// when the queue is full. The caller's thread does not wait on a lock:
    /// an async caller is suspended, not blocked.
    public func run<T: Sendable>(_ body: @escaping @Sendable () -> T) async throws -> T {
        try await withCheckedThrowingContinuation { (c: CheckedContinuation<T, Error>) in
            let queued = trySubmit { c.resume(returning: body()) }
            if !queued { c.resume(throwing: Busy(retryAfterSeconds: retryAfterSeconds)) }
        }
    }

    /// Runs `body` on the pool and waits for it on the calling thread (for
    /// tests and threads of the hub's own that may wait); nil when refused.
    public func runAndWait<T>(_ body: @escaping () -> T) -> T? {
        let sem = UnsafeMutablePointer<sem_t>.allocate(capacity: 1)
        sem_init(sem, 0, 0)
        defer {
            sem_destroy(sem)
            sem.deallocate()
        }
        let box = ResultBox<T>()
        guard
            trySubmit({
                box.value = body()
                sem_post(sem)
            })
        else { return nil }
        while sem_wait(sem) != 0 {}
        return box.value
    }

    /// Seconds a refused caller should wait: the time the queue needs to
    /// drain at about a quarter second per job, at least 1.
    public var retryAfterSeconds: Int {
        let queued = locked { jobs.count - head + busyThreads }
        return max(1, Int((Double(queued) * 0.25 / Double(threads)).rounded(.up)))
    }

    private func take() -> (() -> Void)? {
        locked {
            while !closed && head == jobs.count { monitor.wait() }
            guard head < jobs.count else {
                liveThreads -= 1
                return nil
            }
            let j = jobs[head]
            head += 1
            if head == jobs.count {
                jobs.removeAll(keepingCapacity: true)
                head = 0
            } else if head >= 256 && head * 2 >= jobs.count {
                jobs.removeFirst(head)
                head = 0
            }
            busyThreads += 1
            return j
        }
    }

    private func finished() {
        locked {
            busyThreads -= 1
            doneCount += 1
        }
    }

    private func spawn() -> Bool {
        let tid = startThread {
            while let job = self.take() {
                job()
                self.finished()
            }
        }
        guard let tid else { return false }
        pthread_detach(tid)
        return true
    }

    /// Refuses new jobs; the threads end once the queue is empty.
    public func close() {
        locked {
            closed = true
            monitor.broadcast()
        }
    }

    /// Takes jobs again after close() (a hub started again).
    public func open() { locked { closed = false } }
}

private final class ResultBox<T>: @unchecked Sendable {
    var value: T?
}
