// SPDX-License-Identifier: Apache-2.0

import HTTPTypes
import Hummingbird
import HummingbirdCore
import Logging
import NIOCore
import NIOHTTPTypes
import ThingIF
import ThingIFHub
#if canImport(Glibc)
    import Glibc
#endif

/// The HTTP connection settings against slow and many clients: a request's
/// head must arrive within `headerTimeout` of its first byte, its body within
/// `bodyTimeout` of its head; a keep-alive connection idle for `idleTimeout`
/// is closed (Hummingbird's own idle timeout); at most `maxConnections` are
/// open (Hummingbird's MaximumAvailableConnections: beyond it the hub stops
/// accepting, and new connections wait in the listen backlog).
public struct HTTPConnectionLimits: Sendable, Equatable {
    public var headerTimeoutSeconds: Int
    public var bodyTimeoutSeconds: Int
    public var idleTimeoutSeconds: Int
    public var maxConnections: Int

    public static let defaultHeaderTimeout = 10
    public static let defaultBodyTimeout = 30
    public static let defaultIdleTimeout = 60
    public static let defaultMaxConnections = 1000

    /// 0 turns a limit off.
    public init(
        headerTimeoutSeconds: Int = defaultHeaderTimeout, bodyTimeoutSeconds: Int = defaultBodyTimeout,
        idleTimeoutSeconds: Int = defaultIdleTimeout, maxConnections: Int = defaultMaxConnections
    ) {
        self.headerTimeoutSeconds = headerTimeoutSeconds
        self.bodyTimeoutSeconds = bodyTimeoutSeconds
        self.idleTimeoutSeconds = idleTimeoutSeconds
        self.maxConnections = maxConnections
    }

    /// The header the hub sets on every request to the peer's address (any
    /// copy a client sent is removed first), for the per-address budgets.
    static let peerHeader = HTTPField.Name("X-Thingif-Peer-Address")!
    static let forwardedFor = HTTPField.Name("X-Forwarded-For")!
}

/// One connection's progress, shared by its two handlers (both on the
/// channel's event loop).
final class RequestClock: @unchecked Sendable {
    enum Phase { case idle, head, body }
    var phase = Phase.idle
    /// Bumped on every change of phase: a deadline set in an earlier one is void.
    var generation = 0
    let limits: HTTPConnectionLimits
    let onTimeout: @Sendable (String) -> Void

    init(limits: HTTPConnectionLimits, onTimeout: @escaping @Sendable (String) -> Void) {
        self.limits = limits
        self.onTimeout = onTimeout
    }

    func enter(_ p: Phase, context: ChannelHandlerContext) {
        phase = p
        generation += 1
        let seconds: Int
        switch p {
        case .idle: return
        case .head: seconds = limits.headerTimeoutSeconds
        case .body: seconds = limits.bodyTimeoutSeconds
        }
        guard seconds > 0 else { return }
        let g = generation
        let channel = context.channel
        context.eventLoop.scheduleTask(in: .seconds(Int64(seconds))) { [self] in
            guard generation == g else { return }
            onTimeout(p == .head ? "header_timeout" : "body_timeout")
            channel.close(promise: nil)
        }
    }
}

/// First in the pipeline: the first bytes of a request start its header clock.
final class FirstByteHandler: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer
    let clock: RequestClock
    init(_ clock: RequestClock) { self.clock = clock }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        if clock.phase == .idle { clock.enter(.head, context: context) }
        context.fireChannelRead(data)
    }
}

/// After the HTTP decoder: a head starts the body clock, the end stops it;
/// the head gets the peer's address.
final class RequestPartsHandler: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPRequestPart
    typealias InboundOut = HTTPRequestPart
    let clock: RequestClock
    init(_ clock: RequestClock) { self.clock = clock }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(var head):
            clock.enter(.body, context: context)
            head.headerFields[RequestPartsHandler.peer] = nil
            if let ip = context.channel.remoteAddress?.ipAddress {
                head.headerFields[RequestPartsHandler.peer] = ip
            }
            context.fireChannelRead(wrapInboundOut(.head(head)))
        case .end:
            clock.enter(.idle, context: context)
            context.fireChannelRead(data)
        case .body:
            context.fireChannelRead(data)
        }
    }

    static let peer = HTTPConnectionLimits.peerHeader
}

/// HTTP/1.1 as Hummingbird serves it, with the request clocks in front.
struct GuardedHTTP1Channel: ServerChildChannel {
    typealias Value = HTTP1Channel.Value
    let responder: HTTPChannelHandler.Responder
    let limits: HTTPConnectionLimits
    let onTimeout: @Sendable (String) -> Void

    func inner(_ clock: RequestClock?) -> HTTP1Channel {
        let idle: TimeAmount? = limits.idleTimeoutSeconds > 0 ? .seconds(Int64(limits.idleTimeoutSeconds)) : nil
        guard let clock else {
            return HTTP1Channel(responder: responder, configuration: .init(idleTimeout: idle))
        }
        return HTTP1Channel(
            responder: responder,
            configuration: .init(
                additionalChannelHandlers: [RequestPartsHandler(clock), ConnectionCloseNormalizer()],
                idleTimeout: idle))
    }

    func setup(channel: any Channel, logger: Logger) -> EventLoopFuture<Value> {
        let clock = RequestClock(limits: limits, onTimeout: onTimeout)
        do {
            try channel.pipeline.syncOperations.addHandler(FirstByteHandler(clock))
        } catch {
            return channel.eventLoop.makeFailedFuture(error)
        }
        return inner(clock).setup(channel: channel, logger: logger)
    }

    func handle(value: Value, logger: Logger) async {
        await inner(nil).handle(value: value, logger: logger)
    }
}

extension HTTPServerBuilder {
    /// HTTP/1.1 with the hub's connection limits.
    static func guardedHTTP1(_ limits: HTTPConnectionLimits, onTimeout: @escaping @Sendable (String) -> Void)
        -> HTTPServerBuilder
    {
        HTTPServerBuilder { responder in
            GuardedHTTP1Channel(responder: responder, limits: limits, onTimeout: onTimeout)
        }
    }
}

/// The client's address for budgets: the peer, or, when the peer is a
/// trusted proxy, the right-most X-Forwarded-For entry that is not one
/// (entries further left are the client's own word). IPv4 by /32, IPv6 by
/// its /64 (one subscriber's usual allocation); IPv4-mapped IPv6 as IPv4.
public enum ClientAddress {
    public static func key(peer: String?, forwardedFor: String?, trusted: [String]) -> String {
        guard let peer else { return "unknown" }
        var client = peer
        if isTrusted(peer, trusted), let xff = forwardedFor {
            for entry in xff.split(separator: ",").reversed() {
                let a = String(entry).trimmingSpaces()
                guard parse(a) != nil else { break }
                client = a
                if !isTrusted(a, trusted) { break }
            }
        }
        return prefixKey(client)
    }

    /// 4 or 16 bytes.
    public static func parse(_ s: String) -> [UInt8]? {
        var v4 = in_addr()
        if inet_pton(AF_INET, s, &v4) == 1 {
            return withUnsafeBytes(of: &v4) { Array($0) }
        }
        var v6 = in6_addr()
        if inet_pton(AF_INET6, s, &v6) == 1 {
            let b = withUnsafeBytes(of: &v6) { Array($0) }
            if b[0..<10].allSatisfy({ $0 == 0 }) && b[10] == 0xff && b[11] == 0xff { return Array(b[12...]) }
            return b
        }
        return nil
    }

    public static func prefixKey(_ s: String) -> String {
        guard let b = parse(s) else { return "other:" + s }
        if b.count == 4 { return "v4:" + b.map(String.init).joined(separator: ".") }
        return "v6:" + Crypto.hex(Array(b[0..<8])) + "::/64"
    }

    /// An address, or an address with a /bits suffix in range.
    public static func isValidNetwork(_ s: String) -> Bool {
        let parts = s.split(separator: "/", maxSplits: 1).map(String.init)
        guard let a = parse(parts[0]) else { return false }
        guard parts.count == 2 else { return true }
        return Int(parts[1]).map { (0...(a.count * 8)).contains($0) } ?? false
    }

    /// Whether `address` is one of `trusted`: addresses or CIDR prefixes
    /// ("10.0.0.0/8", "fd00::/8").
    public static func isTrusted(_ address: String, _ trusted: [String]) -> Bool {
        guard let a = parse(address) else { return false }
        for t in trusted {
            let parts = t.split(separator: "/", maxSplits: 1).map(String.init)
            guard let net = parse(parts[0]), net.count == a.count else { continue }
            let bits = parts.count == 2 ? (Int(parts[1]) ?? -1) : a.count * 8
            guard (0...(a.count * 8)).contains(bits) else { continue }
            var ok = true
            for i in 0..<a.count {
                let take = min(8, max(0, bits - i * 8))
                let mask: UInt8 = take == 0 ? 0 : UInt8(truncatingIfNeeded: 0xff << (8 - take))
                if a[i] & mask != net[i] & mask {
                    ok = false
                    break
                }
            }
            if ok { return true }
        }
        return false
    }
}
