import CThingIF
import Testing

@testable import ThingIF

// What the libFuzzer targets of fuzz/ found (scripts/fuzz.sh), one test each.

/// Frees counted on the thread that installed the allocator: Swift Testing
/// runs other tests at the same time, and their jansson values must not
/// count. The allocator passes through to malloc/free, so the other tests
/// are not disturbed while it is installed.
nonisolated(unsafe) private var countingThread: pthread_t?
nonisolated(unsafe) private var liveOnThread = 0

private func onCountingThread() -> Bool {
    if let t = countingThread { return pthread_equal(t, pthread_self()) != 0 }
    return false
}
private func passMalloc(_ n: Int) -> UnsafeMutableRawPointer? {
    if onCountingThread() { liveOnThread += 1 }
    return malloc(n)
}
private func passFree(_ p: UnsafeMutableRawPointer?) {
    if p != nil && onCountingThread() { liveOnThread -= 1 }
    free(p)
}

@Suite("Fuzz findings", .serialized)
struct FuzzFindingsTests {
    @Test("JSON.dump frees json_dumps' buffer with jansson's free function, not libc's (a host may set its allocator)")
    func dumpUsesJanssonsFree() throws {
        var oldMalloc: json_malloc_t?
        var oldFree: json_free_t?
        json_get_alloc_funcs(&oldMalloc, &oldFree)
        countingThread = pthread_self()
        liveOnThread = 0
        json_set_alloc_funcs({ passMalloc($0) }, { passFree($0) })
        defer {
            json_set_alloc_funcs(oldMalloc, oldFree)
            countingThread = nil
        }
        let doc = try JSON.parse(#"{"commandID":"c","actions":[{"a":{}}]}"#).get()
        let before = liveOnThread
        let text = doc.dump()
        let afterDump = liveOnThread
        let bytes = doc.dumpBytes()
        let afterBytes = liveOnThread
        #expect(text == #"{"commandID":"c","actions":[{"a":{}}]}"#)
        #expect(bytes == Array(text.utf8))
        // Everything jansson's allocator gave for the dump went back through
        // its free function (before the fix the dumped buffer went to libc's
        // free: one allocation left outstanding here, and with a real custom
        // allocator a bad free).
        #expect(afterDump == before)
        #expect(afterBytes == afterDump)
    }
}
