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
/// accepting, and new connections wait in the listen backlog), and at most
/// `maxConnectionsPerAddress` of them from one client address (IPv4 /32,
/// IPv6 /64; beyond it a new one is closed at once, see AddressConnections),
/// so that one address never fills the global cap.
public struct HTTPConnectionLimits: Sendable, Equatable {
    public var headerTimeoutSeconds: Int
    public var bodyTimeoutSeconds: Int
    public var idleTimeoutSeconds: Int
    public var maxConnections: Int
    public var maxConnectionsPerAddress: Int

    public static let defaultHeaderTimeout = 10
    public static let defaultBodyTimeout = 30
    public static let defaultIdleTimeout = 60
    public static let defaultMaxConnections = 1000
    /// A tenth of the global cap: ten addresses to fill it. A browser or an
    /// app holds at most 6 HTTP/1.1 connections to one host (event streams
    /// included), so this is some 16 of them at their most, or far more
    /// people behind one NAT as they usually are (docs/DECISIONS.md).
    public static let defaultMaxConnectionsPerAddress = 100

    /// 0 turns a limit off.
    public init(
        headerTimeoutSeconds: Int = defaultHeaderTimeout, bodyTimeoutSeconds: Int = defaultBodyTimeout,
        idleTimeoutSeconds: Int = defaultIdleTimeout, maxConnections: Int = defaultMaxConnections,
        maxConnectionsPerAddress: Int = defaultMaxConnectionsPerAddress
    ) {
        self.headerTimeoutSeconds = headerTimeoutSeconds
        self.bodyTimeoutSeconds = bodyTimeoutSeconds
        self.idleTimeoutSeconds = idleTimeoutSeconds
        self.maxConnections = maxConnections
        self.maxConnectionsPerAddress = maxConnectionsPerAddress
    }

    /// The listen backlog: as long as the global cap (HAProxy's default for
    /// a frontend), at least Hummingbird's 256; the kernel cuts it to
    /// net.core.somaxconn (4096 by default). An address that re-opens each
    /// connection the hub refuses keeps the backlog full of its own; with
    /// Hummingbird's 256 another client's SYN was then dropped now and then
    /// and it connected only on the retry, a second later (bench/abuse).
    static func backlog(maxConnections: Int) -> Int { max(256, maxConnections) }

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
    /// Gets the name of the defence that closed the connection.
    let onRefused: @Sendable (String) -> Void

    init(limits: HTTPConnectionLimits, onRefused: @escaping @Sendable (String) -> Void) {
        self.limits = limits
        self.onRefused = onRefused
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
            onRefused(p == .head ? "header_timeout" : "body_timeout")
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

/// Open HTTP connections by client address (ClientAddress's keys: IPv4 /32,
/// IPv6 /64), each at most `limit`. Thread-safe; an address whose count
/// returns to zero is forgotten, so the table never holds more entries than
/// there are open connections.
public final class AddressConnections: Sendable {
    public let limit: Int
    private let counts = Locked([String: Int]())

    public init(limit: Int) { self.limit = limit }

    /// Counts one more connection of `key`; false, counting nothing, when
    /// `key` already has `limit`.
    public func take(_ key: String) -> Bool {
        counts.withLock { c in
            let n = c[key, default: 0]
            guard n < limit else { return false }
            c[key] = n + 1
            return true
        }
    }

    /// One connection of `key` fewer.
    public func give(_ key: String) {
        counts.withLock { c in
            guard let n = c[key] else { return }
            c[key] = n > 1 ? n - 1 : nil
        }
    }

    public func count(_ key: String) -> Int { counts.withLock { $0[key, default: 0] } }

    /// Addresses with a connection open.
    public var addresses: Int { counts.withLock { $0.count } }
}

/// One connection's place in AddressConnections, on the channel's event
/// loop. A direct client's connection counts for its peer address from
/// accept to close. A trusted proxy's connection counts for the forwarded
/// address of the request it carries, from the request's head to its
/// response's end: the proxy's pooled keep-alive connections carry one
/// client's request after another's, and an idle one is nobody's.
final class AddressSlot: @unchecked Sendable {
    let table: AddressConnections
    /// The peer is a trusted proxy.
    let proxied: Bool
    let trusted: [String]
    private var key: String?
    private var closed = false

    init(table: AddressConnections, proxied: Bool, trusted: [String]) {
        self.table = table
        self.proxied = proxied
        self.trusted = trusted
    }

    /// Counts the connection for `newKey` instead of what it counted for;
    /// false, counting for nothing, when `newKey` is at its limit.
    func hold(_ newKey: String) -> Bool {
        if key == newKey { return true }
        release()
        guard !closed, table.take(newKey) else { return false }
        key = newKey
        return true
    }

    func release() {
        if let k = key { table.give(k) }
        key = nil
    }

    /// When the channel is closed.
    func close() {
        closed = true
        release()
    }
}

/// After the HTTP decoder: a head starts the body clock, the end stops it;
/// the head gets the peer's address. From a trusted proxy, the head's
/// forwarded address takes the connection's slot (AddressSlot) until the
/// response ends; over that address's limit the request gets 503 and the
/// connection is closed.
final class RequestPartsHandler: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPRequestPart
    typealias InboundOut = HTTPRequestPart
    typealias OutboundIn = HTTPResponsePart
    typealias OutboundOut = HTTPResponsePart
    let clock: RequestClock
    let slot: AddressSlot?
    /// Over the limit: the rest of the connection's input is dropped.
    private var refusing = false

    init(_ clock: RequestClock, slot: AddressSlot? = nil) {
        self.clock = clock
        self.slot = slot?.proxied == true ? slot : nil
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard !refusing else { return }
        switch unwrapInboundIn(data) {
        case .head(var head):
            let peer = context.channel.remoteAddress?.ipAddress
            if let slot {
                let key = ClientAddress.key(
                    peer: peer, forwardedFor: head.headerFields[HTTPConnectionLimits.forwardedFor],
                    trusted: slot.trusted)
                guard slot.hold(key) else {
                    refuse(context: context)
                    return
                }
            }
            clock.enter(.body, context: context)
            head.headerFields[RequestPartsHandler.peer] = nil
            if let peer { head.headerFields[RequestPartsHandler.peer] = peer }
            context.fireChannelRead(wrapInboundOut(.head(head)))
        case .end:
            clock.enter(.idle, context: context)
            context.fireChannelRead(data)
        case .body:
            context.fireChannelRead(data)
        }
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        if let slot, case .end = unwrapOutboundIn(data) { slot.release() }
        context.write(data, promise: promise)
    }

    /// 503 SERVICE_BUSY with Retry-After, as when the costly work is full,
    /// so that the proxy passes it on rather than taking the hub for down.
    private func refuse(context: ChannelHandlerContext) {
        refusing = true
        clock.enter(.idle, context: context)
        clock.onRefused(AddressConnections.defence)
        let body = ByteBuffer(
            string: #"{"errorCode":"SERVICE_BUSY","message":"too many open connections from this address"}"#)
        var fields = HTTPFields()
        fields[.contentType] = "application/json"
        fields[.contentLength] = String(body.readableBytes)
        fields[.retryAfter] = "1"
        fields[.connection] = "close"
        context.write(
            wrapOutboundOut(.head(HTTPResponse(status: .serviceUnavailable, headerFields: fields))), promise: nil)
        context.write(wrapOutboundOut(.body(body)), promise: nil)
        let channel = context.channel
        context.writeAndFlush(wrapOutboundOut(.end(nil))).whenComplete { _ in channel.close(promise: nil) }
    }

    static let peer = HTTPConnectionLimits.peerHeader
}

extension AddressConnections {
    /// refused_total's label for a connection over its address's limit.
    static let defence = "address_connections"

    /// A connection's setup that refused it.
    struct OverLimit: Error {}
}

/// HTTP/1.1 as Hummingbird serves it, with the request clocks in front and
/// the connections counted by address.
struct GuardedHTTP1Channel: ServerChildChannel {
    typealias Value = HTTP1Channel.Value
    let responder: HTTPChannelHandler.Responder
    let limits: HTTPConnectionLimits
    /// nil: no limit per address.
    let addresses: AddressConnections?
    let trustedProxies: [String]
    let onRefused: @Sendable (String) -> Void

    func inner(_ clock: RequestClock?, _ slot: AddressSlot? = nil) -> HTTP1Channel {
        let idle: TimeAmount? = limits.idleTimeoutSeconds > 0 ? .seconds(Int64(limits.idleTimeoutSeconds)) : nil
        guard let clock else {
            return HTTP1Channel(responder: responder, configuration: .init(idleTimeout: idle))
        }
        return HTTP1Channel(
            responder: responder,
            configuration: .init(
                additionalChannelHandlers: [RequestPartsHandler(clock, slot: slot), ConnectionCloseNormalizer()],
                idleTimeout: idle))
    }

    func setup(channel: any Channel, logger: Logger) -> EventLoopFuture<Value> {
        var slot: AddressSlot?
        if let addresses, let peer = channel.remoteAddress?.ipAddress {
            let s = AddressSlot(
                table: addresses, proxied: ClientAddress.isTrusted(peer, trustedProxies), trusted: trustedProxies)
            if !s.proxied && !s.hold(ClientAddress.prefixKey(peer)) {
                // Over the limit: closed here, before NIO registers it with
                // its event loop (which comes after a setup that succeeded;
                // Hummingbird never sees a setup that failed). So a refusal
                // is an accept and a close: an address that re-opens as
                // fast as it can is drained fast from the listen backlog
                // that other addresses' connections wait in. Closing it
                // fires its closeFuture, which gives back its place in the
                // global cap (MaximumAvailableConnections).
                onRefused(AddressConnections.defence)
                channel.close(promise: nil)
                return channel.eventLoop.makeFailedFuture(AddressConnections.OverLimit())
            }
            channel.closeFuture.whenComplete { _ in s.close() }
            slot = s
        }
        let clock = RequestClock(limits: limits, onRefused: onRefused)
        do {
            try channel.pipeline.syncOperations.addHandler(FirstByteHandler(clock))
        } catch {
            return channel.eventLoop.makeFailedFuture(error)
        }
        return inner(clock, slot).setup(channel: channel, logger: logger)
    }

    func handle(value: Value, logger: Logger) async {
        await inner(nil).handle(value: value, logger: logger)
    }
}

extension HTTPServerBuilder {
    /// HTTP/1.1 with the hub's connection limits; `onRefused` gets the name
    /// of the defence that closed a connection (refused_total's label).
    static func guardedHTTP1(
        _ limits: HTTPConnectionLimits, trustedProxies: [String], onRefused: @escaping @Sendable (String) -> Void
    ) -> HTTPServerBuilder {
        let addresses =
            limits.maxConnectionsPerAddress > 0 ? AddressConnections(limit: limits.maxConnectionsPerAddress) : nil
        return HTTPServerBuilder { responder in
            GuardedHTTP1Channel(
                responder: responder, limits: limits, addresses: addresses, trustedProxies: trustedProxies,
                onRefused: onRefused)
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
        return "v6:" + LibCrypto.hex(Array(b[0..<8])) + "::/64"
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
