// SPDX-License-Identifier: Apache-2.0

#if canImport(Glibc)
    import Glibc
#endif

/// A pthread mutex with one condition variable: what the hub's worker
/// queues (RequestLane, CostlyWork) lock their state with and wait on for
/// work or room. Plain pthreads, as the threads that wait are pthreads too.
final class Monitor: @unchecked Sendable {
    private let mutex = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)
    private let changed = UnsafeMutablePointer<pthread_cond_t>.allocate(capacity: 1)

    init() {
        pthread_mutex_init(mutex, nil)
        pthread_cond_init(changed, nil)
    }

    deinit {
        pthread_cond_destroy(changed)
        pthread_mutex_destroy(mutex)
        changed.deallocate()
        mutex.deallocate()
    }

    func locked<T>(_ body: () -> T) -> T {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return body()
    }

    /// Only inside locked(): releases the lock until signal() or broadcast(),
    /// then holds it again. Callers wait in a loop on their own condition.
    func wait() { pthread_cond_wait(changed, mutex) }
    /// Wakes one waiter.
    func signal() { pthread_cond_signal(changed) }
    /// Wakes every waiter.
    func broadcast() { pthread_cond_broadcast(changed) }
}
