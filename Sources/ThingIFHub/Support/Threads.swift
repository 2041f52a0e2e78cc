// SPDX-License-Identifier: Apache-2.0

#if canImport(Glibc)
    import Glibc
#endif

/// Starts a pthread that runs `body` once, and returns it (to join or
/// detach); nil when the thread cannot be made. The hub's workers are plain
/// pthreads: their queues wait on a Monitor, and a blocking call there must
/// not hold a thread of the Swift concurrency pool or of NIO.
func startThread(_ body: @escaping () -> Void) -> pthread_t? {
    final class Box {
        let body: () -> Void
        init(_ b: @escaping () -> Void) { body = b }
    }
    let raw = Unmanaged.passRetained(Box(body)).toOpaque()
    var tid = pthread_t()
    let rc = pthread_create(
        &tid, nil,
        { raw in
            Unmanaged<Box>.fromOpaque(raw!).takeRetainedValue().body()
            return nil
        }, raw)
    guard rc == 0 else {
        Unmanaged<Box>.fromOpaque(raw).release()
        return nil
    }
    return tid
}

/// An object that one thread has set for the span of a call (a pthread
/// key): other threads see none. The object is not retained: `with` keeps
/// it alive for as long as it is set.
final class ThreadSlot<T: AnyObject>: @unchecked Sendable {
    private var key = pthread_key_t()

    init() { pthread_key_create(&key, nil) }

    /// A process has at most PTHREAD_KEYS_MAX (1,024) keys: each store
    /// has a slot, and tests open stores by the hundred.
    deinit { pthread_key_delete(key) }

    /// The object this thread has set, nil for none.
    var current: T? { pthread_getspecific(key).map { Unmanaged<T>.fromOpaque($0).takeUnretainedValue() } }

    /// Runs `body` with `value` set on this thread, then what was set before.
    func with<R>(_ value: T, _ body: () throws -> R) rethrows -> R {
        let before = pthread_getspecific(key)
        pthread_setspecific(key, Unmanaged.passUnretained(value).toOpaque())
        defer { pthread_setspecific(key, before) }
        return try withExtendedLifetime(value) { try body() }
    }
}
