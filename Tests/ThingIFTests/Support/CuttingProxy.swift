// SPDX-License-Identifier: Apache-2.0

import Foundation
#if canImport(Glibc)
    import Glibc
#endif

/// A TCP proxy on 127.0.0.1 between a thing and the broker that can cut
/// every connection through it at once, to test reconnects. One thread
/// polls all sockets; loopback writes are small and never block for long.
final class CuttingProxy: @unchecked Sendable {
    let port: Int
    private var upstream: Int
    var upstreamPort: Int { lock.withLock { upstream } }
    private let listenFD: Int32
    private let lock = NSLock()
    private var pairs: [(Int32, Int32)] = []
    private var running = true
    private var frozen = false
    private var refusing = false
    private var thread: Thread?
    private(set) var cuts = 0
    private(set) var accepted = 0

    struct ProxyError: Error, CustomStringConvertible { let description: String }

    init(upstreamPort: Int) throws {
        upstream = upstreamPort
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw ProxyError(description: "socket failed") }
        var one: Int32 = 1
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
        var addr = CuttingProxy.loopback(port: 0)
        let ok = withUnsafePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard ok == 0, listen(fd, 16) == 0 else {
            close(fd)
            throw ProxyError(description: "bind/listen failed")
        }
        var len = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &len) }
        }
        listenFD = fd
        port = Int(UInt16(bigEndian: addr.sin_port))
        let t = Thread { [unowned self] in self.run() }
        thread = t
        t.start()
    }

    deinit { stop() }

    static func loopback(port: Int) -> sockaddr_in {
        var a = sockaddr_in()
        a.sin_family = sa_family_t(AF_INET)
        a.sin_port = in_port_t(UInt16(port).bigEndian)
        a.sin_addr.s_addr = inet_addr("127.0.0.1")
        return a
    }

    private func connectUpstream() -> Int32? { connectLoopback(port: upstreamPort) }

    private func run() {
        var buf = [UInt8](repeating: 0, count: 16384)
        while lock.withLock({ running }) {
            if lock.withLock({ frozen }) {
                usleep(20_000)
                continue
            }
            let snapshot = lock.withLock { pairs }
            var fds = [pollfd(fd: listenFD, events: Int16(POLLIN), revents: 0)]
            for (a, b) in snapshot {
                fds.append(pollfd(fd: a, events: Int16(POLLIN), revents: 0))
                fds.append(pollfd(fd: b, events: Int16(POLLIN), revents: 0))
            }
            let n = poll(&fds, nfds_t(fds.count), 50)
            guard n > 0 else { continue }
            if fds[0].revents & Int16(POLLIN) != 0 {
                let c = accept(listenFD, nil, nil)
                if c >= 0 {
                    if lock.withLock({ refusing }) {
                        close(c)
                    } else if let u = connectUpstream() {
                        lock.withLock {
                            pairs.append((c, u))
                            accepted += 1
                        }
                    } else {
                        close(c)
                    }
                }
            }
            for i in stride(from: 1, to: fds.count, by: 2) {
                let (a, b) = snapshot[(i - 1) / 2]
                for (from, to, revents) in [(a, b, fds[i].revents), (b, a, fds[i + 1].revents)] where revents != 0 {
                    let got = read(from, &buf, buf.count)
                    if got <= 0 || !writeAll(to, buf, got) {
                        drop(a, b)
                        break
                    }
                }
            }
        }
    }

    private func writeAll(_ fd: Int32, _ buf: [UInt8], _ count: Int) -> Bool {
        var off = 0
        while off < count {
            let w = buf.withUnsafeBytes { send(fd, $0.baseAddress! + off, count - off, Int32(MSG_NOSIGNAL)) }
            if w <= 0 { return false }
            off += w
        }
        return true
    }

    private func drop(_ a: Int32, _ b: Int32) {
        lock.withLock {
            guard let i = pairs.firstIndex(where: { $0.0 == a && $0.1 == b }) else { return }
            pairs.remove(at: i)
            close(a)
            close(b)
        }
    }

    /// Closes every connection through the proxy; returns how many.
    @discardableResult
    func cutAll() -> Int {
        lock.withLock {
            let n = pairs.count
            for (a, b) in pairs {
                shutdown(a, Int32(SHUT_RDWR))
                shutdown(b, Int32(SHUT_RDWR))
            }
            // The poll thread sees EOF on both and closes them.
            cuts += n
            return n
        }
    }

    /// Stops forwarding and accepting without closing anything: to both
    /// ends the link looks alive but silent, as when a route dies.
    /// New connections wait in the listen queue until `unfreeze()`.
    func freeze() { lock.withLock { frozen = true } }

    func unfreeze() { lock.withLock { frozen = false } }

    /// New connections go to `port` from now on; those through stay.
    func retarget(upstreamPort port: Int) { lock.withLock { upstream = port } }

    /// While set, each new connection is accepted and closed at once, as by
    /// a host whose broker is not up yet; connections already through stay.
    func refuse(_ on: Bool) { lock.withLock { refusing = on } }

    func stop() {
        let wasRunning = lock.withLock { () -> Bool in
            let r = running
            running = false
            return r
        }
        guard wasRunning else { return }
        while !(thread?.isFinished ?? true) { usleep(10_000) }
        lock.withLock {
            for (a, b) in pairs {
                close(a)
                close(b)
            }
            pairs.removeAll()
        }
        close(listenFD)
    }
}
