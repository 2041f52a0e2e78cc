// SPDX-License-Identifier: Apache-2.0

// The REST API of thingif-hub (Hummingbird). See docs/openapi.yaml.

import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdCore
import HummingbirdTLS
import NIOSSL
import Logging
import NIOCore
import ServiceLifecycle
import ThingIF
import ThingIFHub

/// The app side of the hub over HTTP: Thing-IF's REST paths on top of
/// FrameworkSide's app API, plus result notifications (MQTT, SSE, webhook).
///
/// It is a ServiceLifecycle Service: run it in a ServiceGroup (thingif-hub
/// does, with SIGTERM/SIGINT as graceful shutdown signals). A graceful
/// shutdown ends the open event streams, then the HTTP server.
public final class HubServer: Service, @unchecked Sendable {
    /// The REST API's defences, from the hub's settings.
    public struct Security: Sendable {
        /// Body size limits (413) and the history page cap.
        public var limits: HubLimits
        /// Per-user and per-thing request budgets (429); nil for none.
        public var rateLimiter: RateLimiter?
        /// PEM certificate chain and private key: serve HTTPS instead of HTTP.
        public var tlsCertFile: String?
        public var tlsKeyFile: String?
        /// When set, GET /metrics requires `Authorization: Bearer <metricsToken>`.
        public var metricsToken: String?
        /// How long an event stream ticket (POST …/events/tickets) stays valid:
        /// at most 60 s.
        public var eventTicketLifetimeMs: Int64
        /// Budgets where there is no identity yet (sign-up, login, token,
        /// onboarding by the thing over HTTP): per source address (IPv4 /32,
        /// IPv6 /64) and for the whole app; nil for none.
        public var addressLimiter: RateLimiter?
        public var appLimiter: RateLimiter?
        /// Peers whose X-Forwarded-For is believed (addresses or CIDR
        /// prefixes); from anyone else it is ignored.
        public var trustedProxies: [String] = []
        /// Header and body timeouts, idle keep-alive timeout, connection caps
        /// (global and per client address).
        public var connections = HTTPConnectionLimits()
        /// The token of the operator's routes (POST …/things/import); nil: those routes are off.
        public var adminToken: String?

        public init(
            limits: HubLimits = HubLimits(), rateLimiter: RateLimiter? = nil,
            tlsCertFile: String? = nil, tlsKeyFile: String? = nil,
            metricsToken: String? = nil, eventTicketLifetimeMs: Int64 = 30_000
        ) {
            self.metricsToken = metricsToken
            self.eventTicketLifetimeMs = eventTicketLifetimeMs
            self.limits = limits
            self.rateLimiter = rateLimiter
            self.tlsCertFile = tlsCertFile
            self.tlsKeyFile = tlsKeyFile
        }
    }

    public let hub: FrameworkSide
    public let host: String
    public let port: Int
    public let security: Security
    let tickets: EventTickets
    private let log: @Sendable (String) -> Void
    private let logLevel: Logger.Level
    private let boundPort = Locked<Int?>(nil)

    /// The REST API of `hub`. `port` 0 picks a free port (see
    /// `waitUntilListening`). `log` gets the HTTP layer's lines.
    public init(
        hub: FrameworkSide, host: String = "127.0.0.1", port: Int = 8080, security: Security = Security(),
        logLevel: Logger.Level = .warning, log: @escaping @Sendable (String) -> Void = { _ in }
    ) {
        self.hub = hub
        self.host = host
        self.port = port
        self.security = security
        self.log = log
        self.logLevel = logLevel
        self.tickets = EventTickets(lifetimeMs: security.eventTicketLifetimeMs)
    }

    /// The port the server listens on, once it does.
    public var listeningPort: Int? { boundPort.withLock { $0 } }

    /// Waits (bounded) until the server listens; returns its port.
    public func waitUntilListening(timeoutMs: Int = 10_000) async -> Int? {
        let deadline = Platform.nowMs() + Int64(timeoutMs)
        while Platform.nowMs() < deadline {
            if let p = listeningPort { return p }
            try? await Task.sleep(nanoseconds: 10_000_000)
        }
        return listeningPort
    }

    /// How many event stream tickets are outstanding (for tests).
    public var outstandingEventTickets: Int { tickets.outstanding }

    /// How many event streams of an installation are open (for tests).
    public func openEventStreams(_ installationID: String) -> Int {
        hub.notifications.streams.openCount(installationID)
    }

    public func run() async throws {
        var logger = Logger(label: "thingif-hub.http")
        logger.logLevel = logLevel
        // Connection limits and timeouts, the global cap's share per address
        // (ConnectionGuard.swift); Connection: Close in any case ends the
        // connection (ConnectionClose.swift).
        let metrics = hub.metrics
        let http1 = HTTPServerBuilder.guardedHTTP1(security.connections, trustedProxies: security.trustedProxies) {
            metrics.refused($0)
        }
        var server: HTTPServerBuilder = http1
        var scheme = "http"
        if let cert = security.tlsCertFile, let key = security.tlsKeyFile {
            // A TLS setup that fails stops the server: no fallback to plain HTTP.
            let chain = try NIOSSLCertificate.fromPEMFile(cert).map { NIOSSLCertificateSource.certificate($0) }
            let tls = TLSConfiguration.makeServerConfiguration(
                certificateChain: chain,
                privateKey: .privateKey(try NIOSSLPrivateKey(file: key, format: .pem)))
            server = try .tls(http1, tlsConfiguration: tls)
            scheme = "https"
        }
        let maxConnections = security.connections.maxConnections
        let app = Application(
            router: makeRouter(),
            server: server,
            configuration: .init(
                address: .hostname(host, port: port), serverName: "thingif-hub",
                backlog: HTTPConnectionLimits.backlog(maxConnections: maxConnections),
                availableConnectionsDelegate: maxConnections > 0 ? MaximumAvailableConnections(maxConnections) : nil),
            onServerRunning: { [boundPort, log, host, scheme] channel in
                let p = channel.localAddress?.port ?? 0
                boundPort.withLock { $0 = p }
                log("HTTP API on \(scheme)://\(host):\(p)/ (OpenAPI at /openapi.yaml)")
            },
            logger: logger
        )
        let streams = hub.notifications.streams
        try await withGracefulShutdownHandler {
            try await app.run()
        } onGracefulShutdown: {
            streams.closeAll()
        }
        streams.closeAll()
    }

    // MARK: routes

    func makeRouter() -> Router<APIContext> {
        let router = Router(context: APIContext.self)
        router.middlewares.add(ErrorBodyMiddleware<APIContext>(log: log))
        let api = API(hub: hub, security: security, tickets: tickets)

        router.get("/health") { _, _ in Reply.json(200, Reply.object([("status", "ok")])) }
        router.get("/metrics") { [hub, security] request, _ in
            MetricsRoute.response(
                hub: hub, token: security.metricsToken, authorization: request.headers[.authorization])
        }
        let openAPI = OpenAPIDocument.load()
        router.get("/openapi.yaml") { _, _ in
            guard let openAPI else {
                return Reply.error(
                    HubError.notFound("NOT_FOUND", "the OpenAPI document is not installed beside thingif-hub"))
            }
            var headers = HTTPFields()
            headers[.contentType] = "application/yaml"
            return Response(status: .ok, headers: headers, body: .init(byteBuffer: ByteBuffer(bytes: openAPI)))
        }

        // The web dashboard: static files, no token; every data call carries the user's.
        // A browser sent to the hub's root lands on it.
        let dashboard = DashboardFiles.load()
        router.get("/") { _, _ in Response(status: .found, headers: [.location: "/dashboard/"]) }
        router.get("/dashboard") { _, _ in DashboardFiles.response(dashboard, name: "index.html") }
        router.get("/dashboard/{file}") { [hub] _, context in
            let name = context.parameters.get("file").map { String($0) } ?? ""
            // The page's one setting: which app this hub serves.
            if name == "config.json" { return DashboardFiles.config(appID: hub.options.appID) }
            return DashboardFiles.response(dashboard, name: name)
        }
        // The REST API, one collection per resource (Routes/).
        for routes in [
            api.userRoutes, api.installationRoutes, api.thingRoutes, api.commandRoutes, api.stateRoutes,
            api.triggerRoutes, api.automationRoutes, api.thingCallRoutes, api.endNodeRoutes, api.imageRoutes,
            api.updateRoutes, api.rolloutRoutes, api.traitRoutes
        ] {
            router.addRoutes(routes)
        }
        return router
    }
}
