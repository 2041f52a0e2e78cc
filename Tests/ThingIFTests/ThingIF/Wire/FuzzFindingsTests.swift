// SPDX-License-Identifier: Apache-2.0

import CThingIF
import Testing

@testable import ThingIF

// What the libFuzzer targets of fuzz/ found (scripts/fuzz.sh), one test each.

/// Frees counted on the thread that installed the allocator: Swift Testing
/// runs other tests at the same time, and their jansson values must not
/// count. The allocator passes through to malloc/free, so the other tests
/// are not disturbed while it is installed. Their threads read which thread
/// counts while this test sets it: behind a lock (a plain global was a data
/// race, which ThreadSanitizer reported once in CI). `liveOnThread` is
/// touched only by the counting thread.
private let countingThread = Locked<pthread_t?>(nil)
nonisolated(unsafe) private var liveOnThread = 0

private func onCountingThread() -> Bool {
    countingThread.withLock { t in t.map { pthread_equal($0, pthread_self()) != 0 } ?? false }
}
private func passMalloc(_ n: Int) -> UnsafeMutableRawPointer? {
    if onCountingThread() { liveOnThread += 1 }
    return malloc(n)
}
private func passFree(_ p: UnsafeMutableRawPointer?) {
    if p != nil && onCountingThread() { liveOnThread -= 1 }
    free(p)
}

@Suite("Fuzz findings", .serialized, .offPool)
struct FuzzFindingsTests {
    @Test("JSON.dump frees json_dumps' buffer with jansson's free function, not libc's (a host may set its allocator)")
    func dumpUsesJanssonsFree() throws {
        var oldMalloc: json_malloc_t?
        var oldFree: json_free_t?
        json_get_alloc_funcs(&oldMalloc, &oldFree)
        liveOnThread = 0
        countingThread.withLock { $0 = pthread_self() }
        json_set_alloc_funcs({ passMalloc($0) }, { passFree($0) })
        defer {
            json_set_alloc_funcs(oldMalloc, oldFree)
            countingThread.withLock { $0 = nil }
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

@Suite("Fuzz findings: Kii framing")
struct FuzzFramingFindingsTests {
    /// A first line and `headers` header lines, without the empty line.
    private func unterminated(_ first: String, headers: Int) -> [UInt8] {
        var text = first
        for i in 0..<headers { text += "\nX-\(i): v" }
        return Array(text.utf8)
    }

    @Test(
        "Kii framing: 65 lines without an empty line are refused, as 65 terminated lines are (kii_request, kii_reply)")
    func lineLimitWithoutEmptyLine() {
        // 64 lines: accepted, and accepted again after encode().
        let req64 = KiiRequest.decode(unterminated("PATCH", headers: 63))
        #expect(req64?.headers.count == 63)
        #expect(req64.flatMap { KiiRequest.decode($0.encode()) } != nil)
        let resp64 = KiiResponse.decode(unterminated("204", headers: 63))
        #expect(resp64.flatMap { KiiResponse.decode($0.encode()) } != nil)
        // 65 lines: refused whether or not the last line ends with a line
        // end (before the fix, only the terminated form was refused, so a
        // message the hub accepted did not survive its own encoding).
        #expect(KiiRequest.decode(unterminated("PATCH", headers: 64)) == nil)
        #expect(KiiRequest.decode(unterminated("PATCH", headers: 64) + [10]) == nil)
        #expect(KiiResponse.decode(unterminated("204", headers: 64)) == nil)
    }
}

@Suite("Fuzz findings: topics")
struct FuzzTopicFindingsTests {
    @Test("Topics split at every '/' byte, also when a combining mark follows it (kii_request)")
    func slashBeforeCombiningMark() {
        // "/" + U+0351 is one Character: String.split kept it inside a level.
        #expect(Topics.parseStatus("p/a/\u{351}b/status") == nil)
        #expect(Topics.parseRequest("p/c/\u{351}x/thing-if/apps/app/onboardings") == nil)
        let ok = Topics.parseRequest("p/c\u{351}/thing-if/apps/app/targets/thing:t/states")
        #expect(ok?.clientID == "c\u{351}")
        #expect(ok?.path == "targets/thing:t/states")
        #expect(Topics.parseStatus("p/th.1/status") == "th.1")
    }
}
