// SPDX-License-Identifier: Apache-2.0

import CThingIF

/// A value behind a pthread mutex. Used instead of Synchronization.Mutex,
/// whose futex hand-off ThreadSanitizer cannot follow on Linux (it reports
/// races between two critical sections of the same lock); with a pthread
/// mutex `swift test --sanitize=thread` checks the real thing.
public final class Locked<Value>: @unchecked Sendable {
    private let mutex: UnsafeMutablePointer<pthread_mutex_t>
    private var value: Value

    public init(_ value: Value) {
        self.value = value
        mutex = .allocate(capacity: 1)
        mutex.initialize(to: pthread_mutex_t())
        pthread_mutex_init(mutex, nil)
    }

    deinit {
        pthread_mutex_destroy(mutex)
        mutex.deinitialize(count: 1)
        mutex.deallocate()
    }

    /// Runs `body` with the lock held. Not re-entrant: `body` must not take
    /// the same lock again. Typed throws: Embedded Swift has no untyped ones.
    @inline(__always)
    public func withLock<R, E: Error>(_ body: (inout Value) throws(E) -> R) throws(E) -> R {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return try body(&value)
    }
}
