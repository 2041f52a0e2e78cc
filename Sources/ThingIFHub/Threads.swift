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
