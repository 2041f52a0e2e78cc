// SPDX-License-Identifier: Apache-2.0

import Foundation
import Testing
import ThingIF
import ThingIFHub
import ThingIFHubServer
#if canImport(Glibc)
    import Glibc
#endif

/// The HTTP connection cap per client address (docs/SECURITY.md,
/// "Floods"): one address holding its whole share leaves the global cap's
/// room to the others. Real hubs and real sockets from two loopback
/// addresses (Linux routes all of 127/8 to the loopback interface). Every
/// wait is for an event (a close, an answer), bounded so that a failure
/// ends the test; no timeout of the hub's is on, so only the cap closes.
@Suite("Hub connections per address: one address cannot shut the others out", .serialized, .offPool)
struct HubConnectionCapTests {
    static let attacker = "127.0.0.2"

    @Test("Connections per address: counted up to the limit, an address forgotten when its count is back to zero")
    func table() async {
        let t = AddressConnections(limit: 2)
        #expect(t.take("v4:192.0.2.1") && t.take("v4:192.0.2.1"))
        #expect(!t.take("v4:192.0.2.1"))
        #expect(t.take("v4:192.0.2.2"))
        #expect(t.count("v4:192.0.2.1") == 2 && t.addresses == 2)
        t.give("v4:192.0.2.1")
        #expect(t.take("v4:192.0.2.1"))
        for _ in 0..<2 { t.give("v4:192.0.2.1") }
        t.give("v4:192.0.2.2")
        #expect(t.addresses == 0 && t.count("v4:192.0.2.1") == 0)
        // From many threads at once: never over the limit, nothing left.
        let big = AddressConnections(limit: 5)
        let over = Locked(0)
        await withTaskGroup(of: Void.self) { g in
            for i in 0..<8 {
                g.addTask {
                    for n in 0..<2000 {
                        let key = "v4:198.51.100.\((i + n) % 3)"
                        guard big.take(key) else { continue }
                        if big.count(key) > 5 { over.withLock { $0 += 1 } }
                        big.give(key)
                    }
                }
            }
        }
        #expect(over.withLock { $0 } == 0 && big.addresses == 0)
    }

    @Test("Configuration: --http-max-connections-per-address, its environment variable and file key; 100 by default")
    func settings() throws {
        func load(_ args: [String], env: [String: String] = [:], file: String? = nil) throws -> HubConfig {
            try HubConfig.forTest(args, env: env, file: file)
        }
        let d = try load([])
        #expect(d.httpMaxConnectionsPerAddress == 100 && d.connections.maxConnectionsPerAddress == 100)
        #expect(d.connections.maxConnections == 1000)
        #expect(try load(["--http-max-connections-per-address", "7"]).connections.maxConnectionsPerAddress == 7)
        #expect(
            try load([], env: ["THINGIF_HUB_HTTP_MAX_CONNECTIONS_PER_ADDRESS": "0"]).httpMaxConnectionsPerAddress == 0)
        #expect(try load([], file: #"{"httpMaxConnectionsPerAddress": 12}"#).httpMaxConnectionsPerAddress == 12)
        #expect(throws: HubConfig.ConfigError.self) { try load(["--http-max-connections-per-address", "-1"]) }
        #expect(HubConfig.usage.contains("--http-max-connections-per-address"))
    }

    @Test(
        "One address holding its whole share of HTTP connections with half-sent requests: its next ones are closed at once and counted, another address is answered, its held ones still work"
    )
    func oneAddressCannotFillTheCap() async throws {
        let perAddress = 8
        let global = 20
        var security = HubServer.Security()
        security.connections = HTTPConnectionLimits(
            headerTimeoutSeconds: 0, bodyTimeoutSeconds: 0, idleTimeoutSeconds: 0, maxConnections: global,
            maxConnectionsPerAddress: perAddress)
        try await withHubAPI(security: security) { e in
            let port = e.port
            // Enough to fill the global cap and more: without the cap per
            // address the hub would hold `global` of them and accept no other.
            let attempts = global + 4
            let fds = try await offPool {
                Result { () throws -> [Int32] in
                    var fds: [Int32] = []
                    for _ in 0..<attempts {
                        guard let fd = connectFrom(Self.attacker, port: port) else {
                            fds.forEach { close($0) }
                            throw HarnessError("cannot connect from \(Self.attacker)")
                        }
                        sendAll(fd, "GET /health HTTP/1.1\r\nHost: x\r\nX-Half: ")
                        fds.append(fd)
                    }
                    return fds
                }
            }.get()
            defer { fds.forEach { close($0) } }
            // The hub closes every one beyond the share, and only those.
            let closed = await offPool { waitUntilClosed(fds, count: attempts - perAddress, timeoutMs: 30_000) }
            #expect(closed.count == attempts - perAddress, "closed by the hub: \(closed.count) of \(attempts)")
            // A client from another address connects and is answered.
            let health = await offPool { httpGet(port: port, path: "/health", timeoutMs: 30_000) }
            #expect(
                health?.status == 200, "GET /health from 127.0.0.1: \(health.map { "\($0.status)" } ?? "no answer")")
            let metrics = String(decoding: e.hub.metrics.exposition(), as: UTF8.self)
            #expect(
                metrics.contains(
                    #"thingif_hub_refused_total{defence="address_connections"} \#(attempts - perAddress)"#),
                "\(metrics)")
            // The held ones were never cut: each finishes its request and is
            // answered. (Without the cap the hub holds the global cap's
            // worth: the rest wait in the backlog, and are not tried here.)
            let held = fds.filter { closed[$0] == nil }
            guard held.count == perAddress else { return }
            let answers = await offPool {
                held.map { fd -> Int? in
                    sendAll(fd, "sent\r\nConnection: close\r\n\r\n")
                    return readResponse(fd, timeoutMs: 30_000)?.status
                }
            }
            #expect(answers == Array(repeating: 200, count: perAddress), "\(answers)")
        }
    }

    @Test(
        "Connections per address are given back: after the address closes them, as many are open and answered again"
    )
    func slotsComeBack() async throws {
        let perAddress = 4
        var security = HubServer.Security()
        security.connections = HTTPConnectionLimits(
            headerTimeoutSeconds: 0, bodyTimeoutSeconds: 0, idleTimeoutSeconds: 0, maxConnections: 50,
            maxConnectionsPerAddress: perAddress)
        try await withHubAPI(security: security) { e in
            let port = e.port
            // Served and still open (keep-alive): each holds its slot.
            let first = await offPool { keepAliveHealthChecks(port: port, count: perAddress, from: Self.attacker) }
            #expect(first.answered == perAddress)
            let extra = await offPool { () -> Bool in
                guard let fd = connectFrom(Self.attacker, port: port) else { return false }
                defer { close(fd) }
                return waitUntilClosed([fd], count: 1, timeoutMs: 30_000).count == 1
            }
            #expect(extra, "one over the share is closed")
            first.fds.forEach { close($0) }
            // The hub sees the closes in its own time: try again until all
            // are served at once (bounded), which needs every slot back.
            let again = await offPool { () -> Bool in
                poll(timeoutMs: 30_000) {
                    let r = keepAliveHealthChecks(port: port, count: perAddress, from: Self.attacker)
                    r.fds.forEach { close($0) }
                    return r.answered == perAddress
                }
            }
            #expect(again)
        }
    }

    @Test(
        "Behind a trusted proxy the forwarded address counts, while its request is answered: over it 503 with Retry-After and the connection closed; other forwarded addresses and idle proxy connections are not held back"
    )
    func forwardedAddress() async throws {
        var security = HubServer.Security()
        security.trustedProxies = ["127.0.0.1"]
        security.connections = HTTPConnectionLimits(
            headerTimeoutSeconds: 0, bodyTimeoutSeconds: 0, idleTimeoutSeconds: 0, maxConnections: 50,
            maxConnectionsPerAddress: 2)
        try await withHubAPI(security: security) { e in
            let port = e.port
            // Requests whose heads are in but whose bodies are not: in flight.
            func halfSent(_ client: String) -> Int32? {
                guard let fd = connectFrom("127.0.0.1", port: port) else { return nil }
                sendAll(
                    fd,
                    "POST /api/apps/\(Env.appID)/users HTTP/1.1\r\nHost: x\r\nX-Forwarded-For: \(client)\r\n"
                        + "Content-Type: application/json\r\nContent-Length: 10\r\n\r\n{")
                return fd
            }
            let result = await offPool { () -> (over: [String], held: [Int?], other: Int?, idle: [Int?]) in
                // Three of 203.0.113.7 through the proxy: whichever head the
                // hub reads last is one too many.
                let fds = (0..<3).compactMap { _ in halfSent("203.0.113.7") }
                defer { fds.forEach { close($0) } }
                let closed = waitUntilClosed(fds, count: 1, timeoutMs: 30_000)
                // The other two were held: their bodies finished, they are answered.
                let held = fds.filter { closed[$0] == nil }.map { fd -> Int? in
                    sendAll(fd, "        }")
                    return readResponse(fd, timeoutMs: 30_000)?.status
                }
                // Another client behind the same proxy is answered.
                let other = httpGet(port: port, path: "/health", headers: ["X-Forwarded-For": "203.0.113.8"])?.status
                // Idle keep-alive connections of the proxy hold nothing: three
                // answered requests of 203.0.113.8, each on a connection left open.
                let idle = keepAliveHealthChecks(
                    port: port, count: 3, from: "127.0.0.1", headers: ["X-Forwarded-For": "203.0.113.8"])
                idle.fds.forEach { close($0) }
                return (Array(closed.values), held, other, idle.statuses)
            }
            #expect(result.over.count == 1 && result.held == [201, 201], "\(result.over) \(result.held)")
            let answer = result.over.first ?? ""
            #expect(answer.hasPrefix("HTTP/1.1 503"), "\(answer)")
            #expect(answer.contains("SERVICE_BUSY") && answer.lowercased().contains("retry-after: 1"), "\(answer)")
            #expect(result.other == 200)
            #expect(result.idle == [200, 200, 200], "\(result.idle)")
            let metrics = String(decoding: e.hub.metrics.exposition(), as: UTF8.self)
            #expect(metrics.contains(#"thingif_hub_refused_total{defence="address_connections"} 1"#), "\(metrics)")
        }
    }
}

// MARK: raw sockets from a chosen loopback address

/// A TCP connection from `source` (an address of the loopback interface) to
/// 127.0.0.1:`port`; close-on-exec. Nil when it cannot bind or connect.
private func connectFrom(_ source: String, port: Int) -> Int32? {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
    guard fd >= 0 else { return nil }
    func address(_ ip: String, _ port: Int) -> sockaddr_in {
        var a = sockaddr_in()
        a.sin_family = sa_family_t(AF_INET)
        a.sin_port = UInt16(port).bigEndian
        a.sin_addr.s_addr = inet_addr(ip)
        return a
    }
    var local = address(source, 0)
    var remote = address("127.0.0.1", port)
    let ok = withUnsafePointer(to: &local) { l in
        withUnsafePointer(to: &remote) { r in
            l.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            } == 0
                && r.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
                } == 0
        }
    }
    guard ok else {
        close(fd)
        return nil
    }
    return fd
}

private func sendAll(_ fd: Int32, _ text: String) {
    _ = text.withCString { send(fd, $0, strlen($0), Int32(MSG_NOSIGNAL)) }
}

/// Waits (poll(2), bounded) until `count` of `fds` were closed by the peer
/// (end of stream or reset); returns those closed, each with the text it
/// received before.
private func waitUntilClosed(_ fds: [Int32], count: Int, timeoutMs: Int) -> [Int32: String] {
    var received: [Int32: [UInt8]] = [:]
    var closed: [Int32: String] = [:]
    let deadline = Date().addingTimeInterval(Double(timeoutMs) / 1000)
    var buf = [UInt8](repeating: 0, count: 4096)
    while closed.count < count && Date() < deadline {
        var set = fds.filter { closed[$0] == nil }.map {
            pollfd(fd: $0, events: Int16(POLLIN), revents: 0)
        }
        guard poll(&set, nfds_t(set.count), 100) > 0 else { continue }
        for p in set where p.revents != 0 {
            let n = recv(p.fd, &buf, buf.count, Int32(MSG_DONTWAIT))
            if n > 0 {
                received[p.fd, default: []] += buf[0..<n]
            } else if n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK) {
                closed[p.fd] = String(decoding: received[p.fd] ?? [], as: UTF8.self)
            }
        }
    }
    return closed
}

private struct HTTPResponseHead: CustomStringConvertible {
    let status: Int
    let headers: String
    let text: String
    var description: String { "\(status) \(text)" }
}

/// Reads one response (head, then Content-Length bytes of body) within
/// `timeoutMs`; nil when none came.
private func readResponse(_ fd: Int32, timeoutMs: Int) -> HTTPResponseHead? {
    var got: [UInt8] = []
    var buf = [UInt8](repeating: 0, count: 4096)
    let deadline = Date().addingTimeInterval(Double(timeoutMs) / 1000)
    while Date() < deadline {
        let text = String(decoding: got, as: UTF8.self)
        if let end = text.range(of: "\r\n\r\n") {
            let head = String(text[..<end.lowerBound])
            let length =
                head.split(separator: "\r\n").first { $0.lowercased().hasPrefix("content-length:") }
                .flatMap { Int($0.split(separator: ":")[1].trimmingCharacters(in: .whitespaces)) } ?? 0
            let body = String(text[end.upperBound...])
            if body.utf8.count >= length, let status = Int(head.split(separator: " ").dropFirst().first ?? "") {
                return HTTPResponseHead(status: status, headers: head, text: body)
            }
        }
        var p = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        guard poll(&p, 1, 100) > 0 else { continue }
        let n = recv(fd, &buf, buf.count, Int32(MSG_DONTWAIT))
        if n > 0 {
            got += buf[0..<n]
        } else if n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK) {
            return nil
        }
    }
    return nil
}

/// GET `path` on a connection of its own from 127.0.0.1, closed after it.
private func httpGet(port: Int, path: String, headers: [String: String] = [:], timeoutMs: Int = 30_000)
    -> HTTPResponseHead?
{
    guard let fd = connectFrom("127.0.0.1", port: port) else { return nil }
    defer { close(fd) }
    let extra = headers.map { "\($0.key): \($0.value)\r\n" }.joined()
    sendAll(fd, "GET \(path) HTTP/1.1\r\nHost: 127.0.0.1\r\n\(extra)Connection: close\r\n\r\n")
    return readResponse(fd, timeoutMs: timeoutMs)
}

/// `count` connections from `from`, each GET /health answered and left
/// open (keep-alive); the caller closes the fds.
private func keepAliveHealthChecks(port: Int, count: Int, from: String, headers: [String: String] = [:])
    -> (fds: [Int32], statuses: [Int?], answered: Int)
{
    var fds: [Int32] = []
    var statuses: [Int?] = []
    let extra = headers.map { "\($0.key): \($0.value)\r\n" }.joined()
    for _ in 0..<count {
        guard let fd = connectFrom(from, port: port) else {
            statuses.append(nil)
            continue
        }
        fds.append(fd)
        sendAll(fd, "GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\(extra)\r\n")
        statuses.append(readResponse(fd, timeoutMs: 30_000)?.status)
    }
    return (fds, statuses, statuses.filter { $0 == 200 }.count)
}
