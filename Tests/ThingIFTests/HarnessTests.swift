// SPDX-License-Identifier: Apache-2.0

import Foundation
import Testing
import ThingIF

#if canImport(Glibc)
    import Glibc
#endif

@Suite("Test harness", .offPool)
struct HarnessTests {
    /// Every thread of the cooperative pool is held by a blocked task (what
    /// a test that blocks without the `.offPool` trait would do). The
    /// in-process hub still accepts and answers, on its own executor
    /// (HubExecutor); this test, which has the trait, blocks a thread of
    /// its own (TestThreads) and its own awaits (a sleep, a call through
    /// URLSession) still resume. The blockers let go after 60 s whatever
    /// happens, so that without the trait the test fails instead of hanging.
    @Test("An in-process hub answers, and an .offPool test runs, while every thread of the cooperative pool is blocked")
    func hubBesidesBlockedPool() async throws {
        let e = try await HubAPIEnv.start()
        let port = e.port
        let width = ProcessInfo.processInfo.activeProcessorCount
        let started = Locked(0)
        let left = Locked(0)
        let release = DispatchSemaphore(value: 0)
        for _ in 0..<width {
            Task.detached {
                started.withLock { $0 += 1 }
                _ = release.wait(timeout: .now() + 60)
                left.withLock { $0 += 1 }
            }
        }
        func releaseAll() { for _ in 0..<width { release.signal() } }

        #expect(TestThreads.isCurrent, "the test body runs on TestThreads")
        let held = poll(timeoutMs: 60_000) { started.withLock { $0 } == width }
        #expect(held, "the blockers hold every pool thread")
        let reply = held ? Self.health(port: port) : ""
        #expect(reply.hasPrefix("HTTP/1.1 200"), "\(reply.prefix(200))")
        if held {
            try await Task.sleep(nanoseconds: 10_000_000)
            let r = try await e.get("/health", token: nil)
            #expect(r.status == 200)
            #expect(left.withLock { $0 } == 0, "the awaits resumed only once the pool was let go")
        }
        releaseAll()
        await e.close()
    }

    /// GET /health over a raw socket, read until the server closes (bounded).
    private static func health(port: Int) -> String {
        guard let fd = connectLoopback(port: port, receiveTimeoutMs: 200) else { return "" }
        defer { close(fd) }
        let request = "GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
        _ = request.withCString { send(fd, $0, strlen($0), Int32(MSG_NOSIGNAL)) }
        var got = [UInt8]()
        var buf = [UInt8](repeating: 0, count: 1024)
        let until = Date().addingTimeInterval(30)
        while Date() < until {
            let n = recv(fd, &buf, buf.count, 0)
            if n > 0 { got += buf[0..<n] } else if n == 0 { break }
        }
        return String(decoding: got, as: UTF8.self)
    }
}
