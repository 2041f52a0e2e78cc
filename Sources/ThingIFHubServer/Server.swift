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
        /// Where webhooks may go.
        public var webhooks: WebhookGuard
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
        /// Header and body timeouts, idle keep-alive timeout, connection cap.
        public var connections = HTTPConnectionLimits()
        /// The token of the operator's routes (POST …/things/import); nil: those routes are off.
        public var adminToken: String?

        public init(
            limits: HubLimits = HubLimits(), rateLimiter: RateLimiter? = nil,
            webhooks: WebhookGuard = WebhookGuard(), tlsCertFile: String? = nil, tlsKeyFile: String? = nil,
            metricsToken: String? = nil, eventTicketLifetimeMs: Int64 = 30_000
        ) {
            self.metricsToken = metricsToken
            self.eventTicketLifetimeMs = eventTicketLifetimeMs
            self.limits = limits
            self.rateLimiter = rateLimiter
            self.webhooks = webhooks
            self.tlsCertFile = tlsCertFile
            self.tlsKeyFile = tlsKeyFile
        }
    }

    public let hub: FrameworkSide
    public let host: String
    public let port: Int
    public let security: Security
    let notifier: Notifier
    let tickets: EventTickets
    private let log: @Sendable (String) -> Void
    private let logLevel: Logger.Level
    private let boundPort = Locked<Int?>(nil)

    /// Sets `hub.onCommandFinished` to deliver notifications. `port` 0 picks
    /// a free port (see `waitUntilListening`). `log` gets the hub's lines.
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
        let notifier = Notifier(hub: hub, webhooks: security.webhooks, log: log)
        self.notifier = notifier
        self.tickets = EventTickets(lifetimeMs: security.eventTicketLifetimeMs)
        hub.onCommandFinished = { notifier.commandFinished($0) }
        // Hubs sharing one database: results another hub handled reach the
        // event streams open here.
        if let feed = hub.store as? SharedResultsFeed {
            do {
                try feed.listenForResults { notifier.commandFinishedElsewhere($0) }
            } catch {
                log("cannot hear of other hubs' results (their commands reach no event stream here): \(error)")
            }
        }
    }

    /// Sends the notifications that the hub which recorded the results did
    /// not mark sent in time (see Notifier.sweep); thingif-hub calls it every
    /// second. Returns the commandIDs it notified.
    @discardableResult
    public func sweepNotifications(now: Int64 = Platform.epochMs()) -> [String] { notifier.sweep(now: now) }

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
    public func openEventStreams(_ installationID: String) -> Int { notifier.streams.openCount(installationID) }

    public func run() async throws {
        var logger = Logger(label: "thingif-hub.http")
        logger.logLevel = logLevel
        // Connection limits and timeouts (ConnectionGuard.swift); Connection: Close in
        // any case ends the connection (ConnectionClose.swift).
        let metrics = hub.metrics
        let http1 = HTTPServerBuilder.guardedHTTP1(security.connections) { metrics.refused($0) }
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
                availableConnectionsDelegate: maxConnections > 0 ? MaximumAvailableConnections(maxConnections) : nil),
            onServerRunning: { [boundPort, log, host, scheme] channel in
                let p = channel.localAddress?.port ?? 0
                boundPort.withLock { $0 = p }
                log("HTTP API on \(scheme)://\(host):\(p)/ (OpenAPI at /openapi.yaml)")
            },
            logger: logger
        )
        let streams = notifier.streams
        try await withGracefulShutdownHandler {
            try await app.run()
        } onGracefulShutdown: {
            streams.closeAll()
        }
        streams.closeAll()
        notifier.invalidate()
    }

    // MARK: routes

    func makeRouter() -> Router<BasicRequestContext> {
        let router = Router()
        router.middlewares.add(ErrorBodyMiddleware<BasicRequestContext>(log: log))
        let api = API(hub: hub, notifier: notifier, security: security, tickets: tickets)

        router.get("/health") { _, _ in Reply.json(200, Reply.object([("status", "ok")])) }
        router.get("/metrics") { [hub, security] request, _ in
            Metrics.response(hub: hub, token: security.metricsToken, authorization: request.headers[.authorization])
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
        router.get("/api/apps/{appID}/users/me") { try await api.me($0, $1) }
        router.get("/api/apps/{appID}/users/me/things") { try await api.myThings($0, $1) }
        router.post("/api/apps/{appID}/installations/{installationID}/events/tickets") {
            try await api.eventTicket($0, $1)
        }

        router.post("/api/apps/{appID}/users") { try await api.createUser($0, $1) }
        router.post("/api/apps/{appID}/things/import") { try await api.importThings($0, $1) }
        router.post("/api/apps/{appID}/oauth2/token") { try await api.token($0, $1) }
        router.post("/api/apps/{appID}/oauth2/revoke") { try await api.revoke($0, $1) }
        router.post("/api/apps/{appID}/groups") { try await api.createGroup($0, $1) }
        router.post("/api/apps/{appID}/installations") { try await api.createInstallation($0, $1) }
        router.delete("/api/apps/{appID}/installations/{installationID}") { try await api.deleteInstallation($0, $1) }
        router.get("/api/apps/{appID}/installations/{installationID}/events") { try await api.events($0, $1) }
        // Deleting a thing: the path of Thing-IF's targets, and Kii's own thing resource.
        router.delete("/api/apps/{appID}/targets/{target}") { try await api.deleteThing($0, $1) }
        router.delete("/api/apps/{appID}/things/{thingID}") { try await api.deleteThing($0, $1) }
        // The thing's own calls, as Kii's thing SDKs make them over HTTP (the
        // same router as over MQTT: FrameworkSide.thingRequestOverHTTP).
        // Onboarding by the thing shares POST …/onboardings with the owner's
        // forms, and installations with the apps' (see API.onboard and
        // API.createInstallation).
        router.get("/api/apps/{appID}/installations/{installationID}/mqtt-endpoint") {
            try await api.thingRequest($0, $1, .kii)
        }

        router.post("/thing-if/apps/{appID}/onboardings") { try await api.onboard($0, $1) }
        router.post("/thing-if/apps/{appID}/targets/{target}/commands") { try await api.postCommand($0, $1) }
        router.get("/thing-if/apps/{appID}/targets/{target}/commands") { try await api.listCommands($0, $1) }
        router.get("/thing-if/apps/{appID}/targets/{target}/commands/{commandID}") { try await api.getCommand($0, $1) }
        router.post("/thing-if/apps/{appID}/targets/{target}/commands/{commandID}/cancel") {
            try await api.cancelCommand($0, $1)
        }
        router.get("/thing-if/apps/{appID}/targets/{target}/states") { try await api.latestState($0, $1) }
        router.get("/thing-if/apps/{appID}/targets/{target}/states/aliases/{alias}") {
            try await api.latestState($0, $1)
        }
        router.get("/thing-if/apps/{appID}/targets/{target}/states/history") { try await api.stateHistory($0, $1) }
        router.post("/thing-if/apps/{appID}/targets/{target}/states/query") { try await api.queryStates($0, $1) }
        router.post("/thing-if/apps/{appID}/targets/{target}/states/aliases/{alias}/query") {
            try await api.queryStates($0, $1)
        }

        let t = "/thing-if/apps/{appID}/targets/{target}"
        router.post("\(t)/triggers") { try await api.createTrigger($0, $1) }
        router.get("\(t)/triggers") { try await api.listTriggers($0, $1) }
        router.get("\(t)/triggers/{triggerID}") { try await api.getTrigger($0, $1) }
        router.patch("\(t)/triggers/{triggerID}") { try await api.patchTrigger($0, $1) }
        router.put("\(t)/triggers/{triggerID}/enable") { try await api.enableTrigger($0, $1, true) }
        router.put("\(t)/triggers/{triggerID}/disable") { try await api.enableTrigger($0, $1, false) }
        router.delete("\(t)/triggers/{triggerID}") { try await api.deleteTrigger($0, $1) }

        router.put("\(t)/action-sets/{name}") { try await api.putActionSet($0, $1) }
        router.get("\(t)/action-sets") { try await api.listActionSets($0, $1) }
        router.delete("\(t)/action-sets/{name}") { try await api.deleteActionSet($0, $1) }
        router.put("\(t)/timer-triggers/{name}") { try await api.putTimerTrigger($0, $1) }
        router.get("\(t)/timer-triggers") { try await api.listTimerTriggers($0, $1) }
        router.get("\(t)/automation") { try await api.automationStatus($0, $1) }
        router.put("\(t)/automation-report") { try await api.thingRequest($0, $1, .thingIF) }
        router.put("\(t)/commands/{commandID}") { try await api.thingRequest($0, $1, .thingIF) }
        router.put("\(t)/commands/{commandID}/action-results") { try await api.thingRequest($0, $1, .thingIF) }
        router.put("\(t)/states") { try await api.thingRequest($0, $1, .thingIF) }
        router.patch("\(t)/states") { try await api.thingRequest($0, $1, .thingIF) }
        // Firmware version and thing type: the thing's calls (its token) and
        // the owner's (a user's token), one rule (FrameworkSide.thingField).
        for field in [ThingField.firmwareVersion, .thingType] {
            let path = "/thing-if/apps/{appID}/things/{thingID}/\(field.rawValue)"
            router.get(RouterPath(path)) { try await api.thingField($0, $1, field) }
            router.put(RouterPath(path)) { try await api.thingField($0, $1, field) }
        }
        router.put("\(t)/timer-triggers/{name}/enable") { try await api.enableTimerTrigger($0, $1, true) }
        router.put("\(t)/timer-triggers/{name}/disable") { try await api.enableTimerTrigger($0, $1, false) }
        router.delete("\(t)/timer-triggers/{name}") { try await api.deleteTimerTrigger($0, $1) }
        return router
    }
}

/// The handlers. Each checks, in order: the app, the bearer token, the
/// body (media type, size, JSON), then calls the app API, which checks
/// ownership and the fields; nothing is stored before every check passed.
struct API: Sendable {
    let hub: FrameworkSide
    let notifier: Notifier
    let security: HubServer.Security
    let tickets: EventTickets

    static let installationHeader = HTTPField.Name("X-Thingif-Installation-ID")!

    // MARK: checks

    func checkApp(_ context: BasicRequestContext) throws {
        guard context.parameters.get("appID") == hub.options.appID else { throw HubError.appNotFound }
    }

    /// The user whose token the request carries: 401 for none, an unknown
    /// token or a thing's token.
    func user(_ request: Request, _ context: BasicRequestContext) throws -> UserRecord {
        try checkApp(context)
        guard let value = request.headers[.authorization] else { throw HubError.unauthorized() }
        let parts = value.split(separator: " ", maxSplits: 1)
        guard parts.count == 2, parts[0].lowercased() == "bearer" else { throw HubError.unauthorized() }
        let token = String(parts[1]).trimmingSpaces()
        guard !token.isEmpty, let u = hub.user(token: token) else { throw HubError.invalidToken }
        try spend("user:" + u.userID)
        return u
    }

    /// The raw bearer token of the request (after `user` accepted it).
    func bearer(_ request: Request) -> String {
        let value = request.headers[.authorization] ?? ""
        let parts = value.split(separator: " ", maxSplits: 1)
        return parts.count == 2 ? String(parts[1]).trimmingSpaces() : ""
    }

    /// Takes one request of `key`'s budget: 429 with Retry-After when spent.
    func spend(_ key: String) throws {
        guard let limiter = security.rateLimiter else { return }
        let now = Platform.epochMs()
        guard limiter.allow(key, now: now) else {
            throw RateLimited(retryAfterSeconds: limiter.retryAfterSeconds(key, now: now))
        }
    }

    func object(_ request: Request) async throws -> JSON {
        try await Body.object(request, limit: security.limits.maxBody)
    }

    func param(_ context: BasicRequestContext, _ name: String) throws -> String {
        guard let raw = context.parameters.get(name), let v = raw.percentDecoded(), !v.isEmpty else {
            throw HubError.invalid("bad \(name) in the path")
        }
        return v
    }

    /// The thingID of a `thing:{thingID}` target that `user` may act on.
    /// The thing's budget is spent only after that check: a refused call
    /// (404 for a thing the caller does not own) spends the caller's budget
    /// (`user`), never its target's.
    func thingID(_ context: BasicRequestContext, _ user: UserRecord) throws -> String {
        try ownedThing(context, user).thingID
    }

    /// As `thingID`, with the thing's record.
    func ownedThing(_ context: BasicRequestContext, _ user: UserRecord) throws -> ThingRecord {
        let target = try param(context, "target")
        guard target.hasPrefix("thing:"), target.count > 6 else {
            throw HubError.notFound("TARGET_NOT_FOUND", "the target must be thing:{thingID}, not \(target)")
        }
        return try spendOwned(user, String(target.dropFirst(6)))
    }

    /// Checks that `user` owns (or is in a group that owns) thing `id`,
    /// then spends the thing's budget; returns the thing.
    @discardableResult
    func spendOwned(_ user: UserRecord, _ id: String) throws -> ThingRecord {
        let t = try value(hub.ownedThing(user: user, thingID: id))
        try spend("thing:" + id)
        return t
    }

    /// Spends the budgets of a call made before any identity: the source
    /// address's (X-Forwarded-For only from a trusted proxy) and the app's.
    func spendAnonymous(_ request: Request) throws {
        if let limiter = security.addressLimiter {
            let key = ClientAddress.key(
                peer: request.headers[HTTPConnectionLimits.peerHeader],
                forwardedFor: request.headers[HTTPConnectionLimits.forwardedFor], trusted: security.trustedProxies)
            let now = Platform.epochMs()
            guard limiter.allow(key, now: now) else {
                hub.metrics.refused("address_budget")
                throw RateLimited(retryAfterSeconds: limiter.retryAfterSeconds(key, now: now))
            }
        }
        if let limiter = security.appLimiter {
            let now = Platform.epochMs()
            guard limiter.allow("app", now: now) else {
                hub.metrics.refused("app_budget")
                throw RateLimited(retryAfterSeconds: limiter.retryAfterSeconds("app", now: now))
            }
        }
    }

    /// Runs costly work (a password hash, a broker credential hand-out) on
    /// the hub's CostlyWork pool; a full queue answers 503 with Retry-After
    /// at once. The handler's thread is never held meanwhile.
    func costly<T: Sendable>(_ body: @escaping @Sendable () -> T) async throws -> T {
        do {
            return try await hub.costly.run(body)
        } catch let busy as CostlyWork.Busy {
            hub.metrics.refused("costly_busy")
            throw busy
        }
    }

    func value<T>(_ r: Result<T, HubError>) throws -> T {
        switch r {
        case .success(let v): return v
        case .failure(let e): throw e
        }
    }

    func int64Query(_ request: Request, _ name: String) throws -> Int64? {
        guard let s = request.uri.queryParameters.get(name) else { return nil }
        guard let v = Int64(s) else { throw HubError.invalid("\(name) must be an integer, not \(s)") }
        return v
    }

    // MARK: users and groups

    func createUser(_ request: Request, _ context: BasicRequestContext) async throws -> Response {
        try checkApp(context)
        try spendAnonymous(request)
        let body = try await object(request)
        let loginName = try Body.optionalString(body, "loginName")
        let password = try Body.optionalString(body, "password")
        let u = try value(try await costly { [hub] in hub.createUser(loginName: loginName, password: password) })
        // "_accessToken" is the field Kii's clients read; "accessToken" stays for ours.
        let o = Reply.object([("userID", u.userID), ("accessToken", u.accessToken), ("_accessToken", u.accessToken)])
        if let l = u.loginName { o.set("loginName", string: l) }
        return Reply.json(201, o)
    }

    func token(_ request: Request, _ context: BasicRequestContext) async throws -> Response {
        try checkApp(context)
        try spendAnonymous(request)
        let body = try await object(request)
        if body["grant_type"]?.stringValue == "client_credentials" { return try appToken(body) }
        let name = try Body.requiredString(body, "username")
        let password = try Body.requiredString(body, "password")
        // Password guessing spends the login name's budget.
        try spend("login:" + name)
        let u = try value(try await costly { [hub] in hub.login(loginName: name, password: password) })
        let o = Reply.object([("access_token", u.accessToken), ("token_type", "Bearer"), ("id", u.userID)])
        let lifetime = hub.store.secrets.userTokenLifetime
        if lifetime > 0 { o.set("expires_in", .int(Int(lifetime))) }
        return Reply.json(200, o)
    }

    /// Kii's app ("anonymous") token, which Kii's thing SDKs fetch before
    /// onboarding by the thing: {"grant_type":"client_credentials",
    /// "client_id": appID, "client_secret": anything}. Kii no longer uses the
    /// app key and lets it be any value, and ebisu sends "dummy"; the token
    /// is random and stored nowhere, so it opens no route (onboarding by the
    /// thing, the one call it is for, takes the thing's password as the
    /// credential and ignores the bearer; every other route answers 403
    /// WRONG_TOKEN). Refusing a secret would protect nothing, so only the
    /// app ID is checked (docs/DECISIONS.md).
    func appToken(_ body: JSON) throws -> Response {
        let clientID = try Body.requiredString(body, "client_id")
        _ = try Body.requiredString(body, "client_secret")
        try spend("client:" + clientID)
        guard clientID == hub.options.appID else {
            throw HubError(400, "invalid_client", "client_id is not this app's appID")
        }
        return Reply.json(
            200, Reply.object([("access_token", "app." + HubIDs.token()), ("token_type", "Bearer")]))
    }

    /// Revokes a token of the caller's own (RFC 7009 style): {"token": …};
    /// without "token", the one the request carries. 204 either way for a
    /// token of the caller's; 400 for another's or an unknown one.
    func revoke(_ request: Request, _ context: BasicRequestContext) async throws -> Response {
        let user = try user(request, context)
        let body = try await object(request)
        let token = try Body.optionalString(body, "token") ?? bearer(request)
        guard hub.revoke(token: token, by: user) else {
            throw HubError.invalid("the token is not a valid token of the caller")
        }
        return Reply.noContent()
    }

    func createGroup(_ request: Request, _ context: BasicRequestContext) async throws -> Response {
        let user = try user(request, context)
        let body = try await object(request)
        let name = try Body.requiredString(body, "name")
        var members: [String] = []
        if let m = body["members"], !m.isNull {
            guard m.isArray else {
                throw HubError.invalid("\"members\" must be an array of userIDs, not \(m.typeName)")
            }
            for e in m.elements {
                guard let s = e.stringValue else { throw HubError.invalid("\"members\" must hold userID strings") }
                members.append(s)
            }
        }
        let g = try value(hub.createGroup(name: name, owner: user, members: members))
        return Reply.json(201, Reply.object([("groupID", g.groupID)]))
    }

    // MARK: a thing's calls over HTTP

    /// A thing's request over HTTP: the body (bounded by the path's limit)
    /// goes to the router that serves the same requests over MQTT.
    func thingRequest(_ request: Request, _ context: BasicRequestContext, _ kind: Topics.API) async throws
        -> Response
    {
        try checkApp(context)
        let prefix = "/\(kind.rawValue)/apps/\(hub.options.appID)/"
        guard let full = request.uri.path.percentDecoded(), full.hasPrefix(prefix) else {
            throw HubError.invalid("bad path \(request.uri.path)")
        }
        let path = String(full.dropFirst(prefix.count))
        let bootstrap = FrameworkSide.isBootstrap(api: kind, path: path)
        // Onboarding by the thing has no identity yet: the address's and
        // the app's budgets, spent before the body is read.
        if bootstrap && kind == .thingIF { try spendAnonymous(request) }
        let body = try await Body.bytes(request, limit: hub.maxBody(path: path))
        var headers: [(name: String, value: String)] = []
        if let a = request.headers[.authorization] { headers.append(("Authorization", a)) }
        if let c = request.headers[.contentType] { headers.append(("Content-Type", c)) }
        let req = KiiRequest(method: request.method.rawValue, headers: headers, body: body)
        guard bootstrap else { return Reply.kii(hub.thingRequestOverHTTP(req, api: kind, path: path)) }
        // Every bootstrap call hashes or hands out broker credentials: on the costly pool.
        return Reply.kii(try await costly { [hub] in hub.thingRequestOverHTTP(req, api: kind, path: path) })
    }

    /// True when the request carries a thing's token (not a user's).
    func isThingToken(_ request: Request) -> Bool {
        let token = bearer(request)
        return !token.isEmpty && hub.store.thing(accessToken: token) != nil
    }

    // MARK: installations and events

    func createInstallation(_ request: Request, _ context: BasicRequestContext) async throws -> Response {
        // A thing's MQTT installation (Kii's thing SDKs), with its token.
        if isThingToken(request) { return try await thingRequest(request, context, .kii) }
        let user = try user(request, context)
        let body = try await object(request)
        let type = try Body.requiredString(body, "deviceType")
        guard let kind = AppInstallation.Kind(rawValue: type) else {
            throw HubError.invalid("deviceType must be MQTT, SSE, WEBHOOK, IOS, ANDROID or JPUSH, not \(type)")
        }
        var url = try Body.optionalString(body, "webhookURL")
        if !kind.isDelivered {
            // Kii's installPush: the push service's token, 1 to 4096 bytes.
            let token = try Body.requiredString(body, "installationRegistrationID")
            guard (1...4096).contains(token.utf8.count), url == nil else {
                throw HubError.invalid("installationRegistrationID must be 1 to 4096 bytes, and no webhookURL")
            }
            url = token
        }
        if kind == .webhook, let url, case .refused(let why) = security.webhooks.checkAtInstallation(url) {
            throw HubError.invalid(why)
        }
        let i = try value(hub.addAppInstallation(user: user, kind: kind, webhookURL: url))
        let o = Reply.object([("installationID", i.installationID)])
        if kind == .mqtt {
            // Kii's KiiMqttInstallationResponse carries it too.
            o.set("installationRegistrationID", string: i.installationID)
        }
        if kind == .mqtt, let topic = i.target {
            o.set("mqttTopic", string: topic)
            // Where and as whom the app reads its notifications: a broker
            // client allowed only to subscribe to this topic.
            if let creds = try await costly({ [hub] in hub.pushCredentials(i) }) {
                let b = hub.advertisedBroker
                let ep = Reply.object([
                    ("host", b.host), ("username", creds.username), ("password", creds.password),
                    ("clientID", creds.username), ("mqttTopic", topic)
                ])
                ep.set("portTCP", JSON.int(b.port))
                ep.set("portSSL", JSON.int(b.tlsPort))
                o.set("mqttEndpoint", ep)
            }
        }
        return Reply.json(201, o)
    }

    func deleteInstallation(_ request: Request, _ context: BasicRequestContext) async throws -> Response {
        let user = try user(request, context)
        let id = try param(context, "installationID")
        guard hub.removeAppInstallation(user: user, installationID: id) else {
            throw HubError.notFound("INSTALLATION_NOT_FOUND", "no installation \(id) of this user")
        }
        notifier.streams.closeInstallation(id)
        hub.removePushCredentials(installationID: id)
        return Reply.noContent()
    }

    /// The event stream: bearer token, or `?ticket=` from POST …/events/tickets.
    func events(_ request: Request, _ context: BasicRequestContext) async throws -> Response {
        let user = try eventsUser(request, context)
        let id = try param(context, "installationID")
        guard let i = hub.store.appInstallation(id: id), i.userID == user.userID else {
            throw HubError.notFound("INSTALLATION_NOT_FOUND", "no installation \(id) of this user")
        }
        guard i.kind == .sse else { throw HubError.invalid("installation \(id) is \(i.kind.rawValue), not SSE") }
        let streams = notifier.streams
        let (streamID, stream) = streams.open(id, keepaliveSeconds: HTTPLimits.sseKeepaliveSeconds)
        var headers = HTTPFields()
        headers[.contentType] = "text/event-stream"
        headers[.cacheControl] = "no-cache"
        return Response(
            status: .ok, headers: headers,
            body: ResponseBody { writer in
                defer { streams.remove(id, streamID) }
                for await chunk in stream {
                    try await writer.write(chunk)
                }
                try await writer.finish(nil)
            })
    }

    // MARK: things

    /// The operator's enrollment: POST …/things/import with
    /// `Authorization: Bearer <adminToken>` and {"things":[{"vendorThingID",
    /// "thingPassword","thingType"?,"firmwareVersion"?}…]} (at most 100):
    /// {"imported":n,"existing":n,"failed":[{"vendorThingID","errorCode","message"}]}.
    func importThings(_ request: Request, _ context: BasicRequestContext) async throws -> Response {
        try checkApp(context)
        guard let admin = security.adminToken else {
            throw HubError.notFound("NOT_FOUND", "enrollment import is off: the hub has no adminToken")
        }
        let given = request.headers[.authorization].flatMap { $0.hasPrefix("Bearer ") ? String($0.dropFirst(7)) : nil }
        guard let given, Metrics.equalInConstantTime(Array(given.utf8), Array(admin.utf8)) else {
            throw HubError(403, "WRONG_TOKEN", "POST …/things/import needs Authorization: Bearer <adminToken>")
        }
        let body = try await object(request)
        guard let list = body["things"], list.isArray, (1...100).contains(list.elements.count) else {
            throw HubError.invalid("\"things\" must be an array of 1 to 100 objects")
        }
        var rows: [(String, String, String?, String?)] = []
        for e in list.elements {
            guard e.isObject else { throw HubError.invalid("each of \"things\" must be an object") }
            rows.append(
                (
                    try Body.requiredString(e, "vendorThingID"), try Body.requiredString(e, "thingPassword"),
                    try Body.optionalString(e, "thingType"), try Body.optionalString(e, "firmwareVersion")
                ))
        }
        let sendable = rows.map { Enrollment(vendorThingID: $0.0, password: $0.1, thingType: $0.2, firmware: $0.3) }
        let outcomes = try await costly { [hub] in
            sendable.map {
                hub.enroll(
                    vendorThingID: $0.vendorThingID, password: $0.password, thingType: $0.thingType,
                    firmwareVersion: $0.firmware)
            }
        }
        var imported = 0
        var existing = 0
        let failed = JSON.array()
        for (row, outcome) in zip(sendable, outcomes) {
            switch outcome {
            case .success(true): imported += 1
            case .success(false): existing += 1
            case .failure(let e):
                let f = Reply.object([
                    ("vendorThingID", row.vendorThingID), ("errorCode", e.code), ("message", e.message)
                ])
                failed.append(f)
            }
        }
        let o = JSON.object()
        o.set("imported", .int(imported))
        o.set("existing", .int(existing))
        o.set("failed", failed)
        return Reply.json(200, o)
    }

    struct Enrollment: Sendable {
        var vendorThingID: String
        var password: String
        var thingType: String?
        var firmware: String?
    }

    func onboard(_ request: Request, _ context: BasicRequestContext) async throws -> Response {
        // Onboarding by the thing itself (vendorThingID and password, no
        // user token): Kii's thing SDKs call this path with that media type.
        if request.headers[.contentType].map(MediaType.isOnboardingByThing) == true {
            return try await thingRequest(request, context, .thingIF)
        }
        let user = try user(request, context)
        let body = try await object(request)
        // Kii's two forms: by vendorThingID (OnboardingWithVendorThingIDByOwner) or,
        // for a thing that onboarded itself, by its thingID (OnboardingWithThingIDByOwner).
        let byThingID =
            request.headers[.contentType]?.contains("OnboardingWithThingIDByOwner") == true
            || (body["thingID"] != nil && body["vendorThingID"] == nil)
        let vendorThingID: String
        if byThingID {
            let tid = try Body.requiredString(body, "thingID")
            guard let known = hub.store.thing(id: tid)?.vendorThingID else {
                throw HubError.notFound("THING_NOT_FOUND", "no thing \(tid) in this app")
            }
            vendorThingID = known
        } else {
            vendorThingID = try Body.requiredString(body, "vendorThingID")
        }
        let password = try Body.requiredString(body, "thingPassword")
        let owner = try Body.requiredString(body, "owner")
        let thingType = try Body.optionalString(body, "thingType")
        let firmware = try Body.optionalString(body, "firmwareVersion")
        let interval = try Body.optionalString(body, "dataGroupingInterval")
        let outcome = try await costly { [hub] () -> Result<(ThingRecord, MQTTEndpoint?), HubError> in
            hub.onboardByOwner(
                user: user, vendorThingID: vendorThingID, password: password, owner: owner,
                thingType: thingType, firmwareVersion: firmware,
                dataGroupingInterval: interval
            ).map { ($0, hub.handoverEndpoint(for: $0)) }
        }
        let (t, endpoint) = try value(outcome)
        let o = Reply.object([("thingID", t.thingID), ("accessToken", t.accessToken)])
        if let ep = endpoint { o.set("mqttEndpoint", ep.encode()) }
        return Reply.json(200, o)
    }

    /// DELETE …/targets/thing:{thingID} or Kii's …/things/{thingID}: the
    /// owner deletes the thing and what belongs to it (FrameworkSide.removeThing); 204.
    func deleteThing(_ request: Request, _ context: BasicRequestContext) async throws -> Response {
        let user = try user(request, context)
        let tid: String
        if context.parameters.get("thingID") != nil {
            tid = try param(context, "thingID")
            try spendOwned(user, tid)
        } else {
            tid = try thingID(context, user)
        }
        try value(hub.deleteThing(user: user, thingID: tid))
        return Reply.noContent()
    }

    // MARK: commands

    func postCommand(_ request: Request, _ context: BasicRequestContext) async throws -> Response {
        let user = try user(request, context)
        let thing = try ownedThing(context, user)
        let body = try await object(request)
        let installation = request.headers[API.installationHeader].map { $0.trimmingSpaces() }
        let c = try value(hub.postCommand(user: user, owned: thing, form: body, installationID: installation))
        return Reply.json(201, Reply.object([("commandID", c.commandID)]))
    }

    func getCommand(_ request: Request, _ context: BasicRequestContext) async throws -> Response {
        let user = try user(request, context)
        let tid = try thingID(context, user)
        let cid = try param(context, "commandID")
        let c = try value(hub.getCommand(user: user, thingID: tid, commandID: cid))
        return Reply.json(200, hub.commandJSON(c))
    }

    /// POST …/commands/{commandID}/cancel (CommandLifecycle): 200 with the
    /// CANCELLED command; 409 COMMAND_NOT_CANCELLABLE with its commandState
    /// when results came first or the hub ended it; 404 as for a read.
    func cancelCommand(_ request: Request, _ context: BasicRequestContext) async throws -> Response {
        let user = try user(request, context)
        let tid = try thingID(context, user)
        let cid = try param(context, "commandID")
        let c = try value(hub.cancelCommand(user: user, thingID: tid, commandID: cid))
        return Reply.json(200, hub.commandJSON(c))
    }

    func listCommands(_ request: Request, _ context: BasicRequestContext) async throws -> Response {
        let user = try user(request, context)
        let tid = try thingID(context, user)
        var limit: Int?
        if let s = request.uri.queryParameters.get("bestEffortLimit") {
            guard let n = Int(s) else { throw HubError.invalid("bestEffortLimit must be a positive integer, not \(s)") }
            limit = n
        }
        let key: String? = request.uri.queryParameters.get("paginationKey").map { String($0) }
        let page = try value(hub.listCommands(user: user, thingID: tid, paginationKey: key, bestEffortLimit: limit))
        let list = JSON.array()
        for c in page.commands { list.append(hub.commandJSON(c)) }
        let o = JSON.object()
        o.set("commands", list)
        if let next = page.next { o.set("nextPaginationKey", string: next) }
        return Reply.json(200, o)
    }

    // MARK: state

    /// GET …/states, and …/states/aliases/{alias} (Kii's getTargetState
    /// for one trait alias: that alias's object of the current state).
    func latestState(_ request: Request, _ context: BasicRequestContext) async throws -> Response {
        let user = try user(request, context)
        let tid = try thingID(context, user)
        guard let state = try value(hub.latestState(user: user, thingID: tid)) else {
            throw HubError.notFound("STATE_NOT_FOUND", "\(tid) has not uploaded a state yet")
        }
        guard context.parameters.get("alias") != nil else { return Reply.json(200, text: state) }
        let alias = try param(context, "alias")
        guard case .success(let s) = JSON.parse(state), let a = s[alias], a.isObject else {
            throw HubError.notFound("STATE_NOT_FOUND", "the state of \(tid) has no trait alias \(alias)")
        }
        return Reply.json(200, a)
    }

    /// GET or PUT …/things/{thingID}/firmware-version or …/thing-type: with
    /// the thing's token, the thing's own call (the same router as over MQTT);
    /// with a user's, the owner's.
    func thingField(_ request: Request, _ context: BasicRequestContext, _ field: ThingField) async throws
        -> Response
    {
        if isThingToken(request) { return try await thingRequest(request, context, .thingIF) }
        let user = try user(request, context)
        let tid = try param(context, "thingID")
        try spendOwned(user, tid)
        if request.method == .get { return Reply.json(200, try value(hub.thingField(field, thingID: tid))) }
        let body = try await Body.bytes(request, limit: security.limits.maxBody)
        try value(hub.setThingField(field, thingID: tid, body: body))
        return Reply.noContent()
    }

    func stateHistory(_ request: Request, _ context: BasicRequestContext) async throws -> Response {
        let user = try user(request, context)
        let tid = try thingID(context, user)
        let from = try int64Query(request, "from") ?? 0
        let to = try int64Query(request, "to") ?? (Platform.epochMs() + 1)
        var limit: Int?
        if let s = request.uri.queryParameters.get("bestEffortLimit") {
            guard let n = Int(s), n > 0 else {
                throw HubError.invalid("bestEffortLimit must be a positive integer, not \(s)")
            }
            limit = n
        }
        let key: String? = request.uri.queryParameters.get("paginationKey").map { String($0) }
        let (groups, next) = try value(
            hub.stateHistory(
                user: user, thingID: tid, from: from, to: to, paginationKey: key,
                limit: limit, maxPage: security.limits.maxHistoryPage))
        let o = JSON.object()
        o.set("groupedResults", Self.groupedJSON(groups, alias: nil))
        if let next { o.set("nextPaginationKey", string: next) }
        return Reply.json(200, o)
    }

    /// History groups as Kii answers them: [{"range":{"from","to"},"objects":[{…state,"_created"}]}].
    /// With an alias, each object is the state of that trait alias, and samples without it are left out.
    static func groupedJSON(_ groups: [StateGroup], alias: String?) -> JSON {
        let results = JSON.array()
        for g in groups {
            let range = JSON.object()
            range.set("from", .int(Int(g.from)))
            range.set("to", .int(Int(g.to)))
            let group = JSON.object()
            group.set("range", range)
            group.set("objects", objectsJSON(g.samples, alias: alias))
            results.append(group)
        }
        return results
    }

    static func objectsJSON(_ samples: [StateSample], alias: String?) -> JSON {
        let objects = JSON.array()
        for s in samples {
            guard case .success(let p) = JSON.parse(s.state), p.isObject else { continue }
            let o: JSON
            if let alias {
                guard let a = p[alias], a.isObject, let copy = a.deepCopy() else { continue }
                o = copy
            } else {
                o = p
            }
            o.set("_created", .int(Int(s.at)))
            objects.append(o)
        }
        return objects
    }

    /// Kii's state query: POST …/states/query, and …/states/aliases/{alias}/query for a
    /// trait alias. {"query":{"clause":{"type":"all"|"withinTimeRange","lowerLimit","upperLimit"},
    /// "grouped"?},"bestEffortLimit"?,"paginationKey"?}: {"results":[…]} or, grouped,
    /// {"groupedResults":[…]}; objects carry "_created".
    func queryStates(_ request: Request, _ context: BasicRequestContext) async throws -> Response {
        let user = try user(request, context)
        let tid = try thingID(context, user)
        let alias = context.parameters.get("alias").map { String($0) }
        let body = try await object(request)
        guard let query = body["query"], query.isObject, let clause = query["clause"], clause.isObject,
            let type = clause["type"]?.stringValue
        else { throw HubError.invalid("\"query\" must be {\"clause\":{\"type\":…}}") }
        // Kii's aggregations (COUNT, MEAN, MAX, …) are not computed: refused
        // rather than answered with plain results the client would misread.
        if let a = query["aggregations"], !a.isNull {
            throw HubError.queryNotSupported("aggregations are not supported by this hub")
        }
        var from: Int64 = 0
        var to = Platform.epochMs() + 1
        switch type {
        case "all": break
        case "withinTimeRange":
            guard let lo = clause["lowerLimit"]?.intValue, let hi = clause["upperLimit"]?.intValue, lo >= 0, lo < hi
            else {
                throw HubError.invalid("withinTimeRange needs integer lowerLimit < upperLimit (milliseconds)")
            }
            from = Int64(lo)
            to = Int64(hi) + 1
        default:
            throw HubError.queryNotSupported("clause type \(type) is not supported: all or withinTimeRange")
        }
        let grouped = query["grouped"]?.boolValue ?? false
        if grouped && type != "withinTimeRange" {
            throw HubError.invalid("a grouped query needs a withinTimeRange clause")
        }
        var limit: Int?
        if let v = body["bestEffortLimit"], !v.isNull {
            guard let n = v.intValue, n > 0 else {
                throw HubError.invalid("bestEffortLimit must be a positive integer")
            }
            limit = n
        }
        let key = body["paginationKey"]?.stringValue
        let (groups, next) = try value(
            hub.stateHistory(
                user: user, thingID: tid, from: from, to: to, paginationKey: key, limit: limit,
                maxPage: security.limits.maxHistoryPage))
        let o = JSON.object()
        if grouped {
            o.set("groupedResults", Self.groupedJSON(groups, alias: alias))
        } else {
            o.set("results", Self.objectsJSON(groups.flatMap { $0.samples }, alias: alias))
        }
        if let next { o.set("nextPaginationKey", string: next) }
        return Reply.json(200, o)
    }

    // MARK: server triggers

    func createTrigger(_ request: Request, _ context: BasicRequestContext) async throws -> Response {
        let user = try user(request, context)
        let tid = try thingID(context, user)
        let body = try await object(request)
        let t = try value(hub.createTrigger(user: user, thingID: tid, body: body))
        return Reply.json(201, Reply.object([("triggerID", t.triggerID)]))
    }

    func listTriggers(_ request: Request, _ context: BasicRequestContext) async throws -> Response {
        let user = try user(request, context)
        let tid = try thingID(context, user)
        // Kii's paging: bestEffortLimit (at most 100 here) and the opaque
        // paginationKey of the previous page (an offset).
        var limit = 100
        if let s = request.uri.queryParameters.get("bestEffortLimit") {
            guard let n = Int(s), n > 0 else {
                throw HubError.invalid("bestEffortLimit must be a positive integer, not \(s)")
            }
            limit = min(n, 100)
        }
        var offset = 0
        if let s = request.uri.queryParameters.get("paginationKey") {
            guard let n = Int(s), n >= 0 else { throw HubError.invalid("paginationKey \(s) is not one this hub gave") }
            offset = n
        }
        let all = try value(hub.listTriggers(user: user, thingID: tid))
        let page = all.dropFirst(offset).prefix(limit)
        let list = JSON.array()
        for t in page { list.append(hub.triggerJSON(t)) }
        let o = JSON.object()
        o.set("triggers", list)
        if offset + page.count < all.count { o.set("nextPaginationKey", string: String(offset + page.count)) }
        return Reply.json(200, o)
    }

    func patchTrigger(_ request: Request, _ context: BasicRequestContext) async throws -> Response {
        let user = try user(request, context)
        let tid = try thingID(context, user)
        let id = try param(context, "triggerID")
        let body = try await object(request)
        return Reply.json(
            200, hub.triggerJSON(try value(hub.patchTrigger(user: user, thingID: tid, triggerID: id, body: body))))
    }

    func getTrigger(_ request: Request, _ context: BasicRequestContext) async throws -> Response {
        let user = try user(request, context)
        let tid = try thingID(context, user)
        let id = try param(context, "triggerID")
        return Reply.json(200, hub.triggerJSON(try value(hub.getTrigger(user: user, thingID: tid, triggerID: id))))
    }

    func enableTrigger(_ request: Request, _ context: BasicRequestContext, _ enabled: Bool) async throws -> Response {
        let user = try user(request, context)
        let tid = try thingID(context, user)
        let id = try param(context, "triggerID")
        try value(hub.setTriggerEnabled(user: user, thingID: tid, triggerID: id, enabled: enabled))
        return Reply.noContent()
    }

    func deleteTrigger(_ request: Request, _ context: BasicRequestContext) async throws -> Response {
        let user = try user(request, context)
        let tid = try thingID(context, user)
        let id = try param(context, "triggerID")
        try value(hub.deleteTrigger(user: user, thingID: tid, triggerID: id))
        return Reply.noContent()
    }

    // MARK: thing automation

    private static func list(_ key: String, _ items: [JSON]) -> JSON {
        let a = JSON.array()
        for i in items { a.append(i) }
        let o = JSON.object()
        o.set(key, a)
        return o
    }

    func putActionSet(_ request: Request, _ context: BasicRequestContext) async throws -> Response {
        let user = try user(request, context)
        let tid = try thingID(context, user)
        let name = try param(context, "name")
        let body = try await object(request)
        try value(hub.putActionSet(user: user, thingID: tid, name: name, body: body))
        return Reply.noContent()
    }

    func listActionSets(_ request: Request, _ context: BasicRequestContext) async throws -> Response {
        let user = try user(request, context)
        let tid = try thingID(context, user)
        return Reply.json(200, Self.list("actionSets", try value(hub.listActionSets(user: user, thingID: tid))))
    }

    func deleteActionSet(_ request: Request, _ context: BasicRequestContext) async throws -> Response {
        let user = try user(request, context)
        let tid = try thingID(context, user)
        let name = try param(context, "name")
        try value(hub.deleteActionSet(user: user, thingID: tid, name: name))
        return Reply.noContent()
    }

    func putTimerTrigger(_ request: Request, _ context: BasicRequestContext) async throws -> Response {
        let user = try user(request, context)
        let tid = try thingID(context, user)
        let name = try param(context, "name")
        let body = try await object(request)
        try value(hub.putTimerTrigger(user: user, thingID: tid, name: name, body: body))
        return Reply.noContent()
    }

    func automationStatus(_ request: Request, _ context: BasicRequestContext) async throws -> Response {
        let user = try user(request, context)
        let tid = try thingID(context, user)
        return Reply.json(200, try value(hub.automationStatus(user: user, thingID: tid)))
    }

    func listTimerTriggers(_ request: Request, _ context: BasicRequestContext) async throws -> Response {
        let user = try user(request, context)
        let tid = try thingID(context, user)
        return Reply.json(200, Self.list("timerTriggers", try value(hub.listTimerTriggers(user: user, thingID: tid))))
    }

    func enableTimerTrigger(_ request: Request, _ context: BasicRequestContext, _ enabled: Bool) async throws
        -> Response
    {
        let user = try user(request, context)
        let tid = try thingID(context, user)
        let name = try param(context, "name")
        try value(hub.setTimerTriggerEnabled(user: user, thingID: tid, name: name, enabled: enabled))
        return Reply.noContent()
    }

    func deleteTimerTrigger(_ request: Request, _ context: BasicRequestContext) async throws -> Response {
        let user = try user(request, context)
        let tid = try thingID(context, user)
        let name = try param(context, "name")
        try value(hub.deleteTimerTrigger(user: user, thingID: tid, name: name))
        return Reply.noContent()
    }
}
