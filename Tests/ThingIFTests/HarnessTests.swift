// SPDX-License-Identifier: Apache-2.0

import Foundation
import Testing
import ThingIF

#if canImport(Glibc)
    import Glibc
#endif

@Suite("Test harness")
struct HarnessTests {
    /// Every thread of the cooperative pool is held by a blocked task (as
    /// synchronous tests waiting on a broker can hold them); the in-process
    /// hub still accepts and answers, on its own executor (HubExecutor).
    @Test("An in-process hub answers while every thread of the cooperative pool is blocked")
    func hubBesidesBlockedPool() async throws {
        let e = try await HubAPIEnv.start()
        let port = e.port
        let width = ProcessInfo.processInfo.activeProcessorCount
        let started = Locked(0)
        let release = DispatchSemaphore(value: 0)
        for _ in 0..<width {
            Task.detached {
                started.withLock { $0 += 1 }
                release.wait()
            }
        }
        let (held, reply) = await offPool { () -> (Bool, String) in
            // Every blocker holds a pool thread; they release them whatever happens.
            defer { for _ in 0..<width { release.signal() } }
            let deadline = Date().addingTimeInterval(60)
            while started.withLock({ $0 }) < width && Date() < deadline { usleep(10_000) }
            guard started.withLock({ $0 }) == width else { return (false, "") }
            guard let fd = connectLoopback(port: port, receiveTimeoutMs: 200) else { return (true, "") }
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
            return (true, String(decoding: got, as: UTF8.self))
        }
        #expect(held, "the blockers held every pool thread")
        #expect(reply.hasPrefix("HTTP/1.1 200"), "\(reply.prefix(200))")
        await e.close()
    }
}
