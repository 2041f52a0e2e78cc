// SPDX-License-Identifier: Apache-2.0

import CThingIF
import ThingIF

/// What things ask of the framework (Kii's thing API), over MQTT and over
/// HTTP: the router in front of the request handlers.
///
/// Over MQTT each request on p/{clientID}/thing-if/… or …/api/… is
/// classified once (`Inbound`, `RequestRoute`), framed, size- and
/// rate-limited, handed to the handler of its kind (`Handlers`) and
/// answered on p/{clientID}/resp only. libmosquitto's thread only queues
/// (`accept`): bootstrap requests go to the costly work's pool, the rest to
/// the request lanes, each client's in order (`open`), where a run of
/// results and states shares one commit (ThingRequests+Lanes). Statuses,
/// end nodes' statuses and claims are handled here too. Given the store,
/// the MQTT client, the handlers and the components it tells of statuses,
/// never the hub.
public final class ThingRequests: @unchecked Sendable {
    /// A request as received, for tests and logs.
    public struct Record: Sendable {
        public var clientID: String
        public var method: String
        public var path: String
        public var body: String
        public var status: Int
    }

    /// What this process saw of the things' requests (bounded).
    struct Seen {
        var requests = RecentLog<Record>(capacity: ThingRequests.logSize)
    }

    /// Requests kept for tests and logs: the newest ones only.
    public static let logSize = 512
    /// At most this many inbound messages, or this many payload bytes, wait
    /// for the request threads; then the broker holds what follows.
    public static let queueMax = 50_000
    public static let queueMaxBytes = 64 << 20

    /// The handler of each request kind (`route`'s rows), each given the few
    /// parts it uses; FrameworkSide makes them once.
    struct Handlers {
        let onboarding: OnboardingRequests
        let results: ResultRequests
        let states: StateRequests
        let endNodes: EndNodeRequests
        let fields: FieldRequests
        let updates: UpdateRequests
    }

    let options: FrameworkSide.Options
    let store: HubStore
    let client: MqttClient
    let handlers: Handlers
    /// Who each request acts for (its token, its client ID).
    let authorization: RequestAuthorization
    /// A claim needs the things' CA (`claimRefusal`).
    let authority: ThingAuthority
    /// Things' statuses: where commands go, and the resends on "online".
    let delivery: CommandDelivery
    let homeAssistant: HomeAssistant
    /// Gateways' end-node statuses (Gateways/).
    let endNodes: EndNodes
    /// Which requests this hub serves (the partitioned mode, Partitions/).
    let partitions: HubPartitions
    let metrics: HubMetrics
    let events: HubEvents
    let costly: CostlyWork
    let seen = Locked(Seen())
    /// Inbound messages waiting for the request threads, while open.
    let lanes = Locked<RequestLanes?>(nil)

    /// Requests per MQTT client ID (or token over HTTP): a thing's burst of
    /// state uploads passes, a flood gets 429.
    let rateLimiter: RateLimiter
    /// How much of an onboarding's payload `accept` scans for an end-node
    /// media type: the request line and headers Kii's clients send fit.
    static let headPeek = 2048
    /// The global budget of refused end-node onboardings on Kii's
    /// …/onboardings over MQTT (no token, or one that is not the named
    /// gateway's from its own client ID): answers within it, the rest
    /// dropped. A gateway whose token checked out never spends it: it
    /// spends its client ID's budget (`triageEndNodeOnboarding`).
    let endNodeRefusalLimiter: RateLimiter
    /// Where Kii's end-node onboardings over MQTT have their token checked
    /// (`accept`): one thread and a bounded queue of its own, so that this
    /// work, which anyone with the app key can send, runs neither on the
    /// request lanes that serve commands nor on the costly pool's threads,
    /// which a gateway's KDF needs; beyond the queue it is dropped.
    let endNodeTriage = CostlyWork(threads: 1, queueLimit: ThingRequests.endNodeTriageQueue)
    /// How many of those wait at most: some seconds of a legitimate burst,
    /// a fraction of a second of a flood.
    static let endNodeTriageQueue = 1024
    /// The global budget of bootstrap requests over MQTT.
    let bootstrapLimiter: RateLimiter

    init(
        options: FrameworkSide.Options, store: HubStore, client: MqttClient, handlers: Handlers,
        authorization: RequestAuthorization, authority: ThingAuthority, delivery: CommandDelivery,
        homeAssistant: HomeAssistant, endNodes: EndNodes, partitions: HubPartitions, metrics: HubMetrics,
        events: HubEvents, costly: CostlyWork
    ) {
        self.options = options
        self.store = store
        self.client = client
        self.handlers = handlers
        self.authorization = authorization
        self.authority = authority
        self.delivery = delivery
        self.homeAssistant = homeAssistant
        self.endNodes = endNodes
        self.partitions = partitions
        self.metrics = metrics
        self.events = events
        self.costly = costly
        rateLimiter = RateLimiter(ratePerSecond: options.requestRatePerSecond, burst: options.requestBurst)
        bootstrapLimiter = RateLimiter(ratePerSecond: options.bootstrapRatePerSecond, burst: options.bootstrapBurst)
        endNodeRefusalLimiter = RateLimiter(
            ratePerSecond: options.bootstrapRatePerSecond,
            burst: max(options.bootstrapBurst, options.limits.maxEndNodesPerGateway))
    }

    /// Starts the request lanes: as many as the store serves calls at once.
    func open() -> Bool {
        let queue = RequestLanes(count: store.concurrentCalls, capacity: Self.queueMax, maxBytes: Self.queueMaxBytes)
        guard queue.start(batch: Self.laneBatchMax, { [unowned self] ms in self.handleLane(ms) }) else { return false }
        lanes.withLock { $0 = queue }
        endNodeTriage.open()
        handlers.updates.serving.open()
        return true
    }

    /// Stops the lanes; what waits in them is dropped (the things send it again).
    func close() {
        endNodeTriage.close()
        handlers.updates.serving.close()
        lanes.withLock { q in
            q?.close()
            q = nil
        }
    }

    /// Where things' block and hash-page reads run, within their bounds.
    public var updateServing: UpdateServing { handlers.updates.serving }

    /// The requests seen, oldest first (the newest `logSize`).
    public var log: [Record] { seen.withLock { $0.requests.all } }

    /// How many times results arrived for a command (of the newest `ResultRequests.countLimit`).
    public func resultPosts(of commandID: String) -> Int { handlers.results.posts(of: commandID) }

    /// A request body as the request log keeps it: a thing's password is
    /// not kept.
    static func redacted(_ body: [UInt8], path: String) -> String {
        guard path == "onboardings", case .success(let j) = JSON.parse(body), j.isObject else {
            return String(decoding: body, as: UTF8.self)
        }
        if j["thingPassword"] != nil { j.set("thingPassword", string: "(not kept)") }
        return j.dump()
    }
}

extension ThingRequests {
    // MARK: request handling (the request thread, RequestLane)

    /// libmosquitto's network thread: the message is classified once
    /// (`Inbound`), then bootstrap requests go to the costly work's pool
    /// within one global budget (beyond it, or when the pool's queue is
    /// full, they are dropped and counted, so a flood with a new client ID
    /// in every topic buys nothing); the rest (things' own requests,
    /// status, Home Assistant) to the request lanes, each client's in order.
    /// Claim onboardings (c/{CN}/{clientID}/onboardings) are bootstrap
    /// work too: within the same budget, on the same pool, never on the
    /// request threads where things' commands and results are served.
    ///
    /// A gateway's end-node onboarding on Kii's …/onboardings (the
    /// OnboardingEndNodeWith… media type, which the bootstrap identity may
    /// publish under any client ID, so the broker proves nothing of who
    /// sent it) goes to the end-node triage instead, where its token is
    /// checked before any budget is spent: a gateway's then spends its
    /// client ID's budget and only its KDF reaches the costly pool; a
    /// token-less or refused one spends the refusals' budget of its own
    /// (`triageEndNodeOnboarding`). So a flood of them starves no gateway,
    /// and the things' onboardings keep the bootstrap budget. The media
    /// type is found here by a scan of the payload's head
    /// (`headNamesEndNode`, no allocation), and checked again in full on
    /// the triage (415 when the head misled). libthingif sends its
    /// end-node onboardings on POST things/{gw}/end-nodes instead, which
    /// only the gateway's own role may publish: its request lane.
    ///
    /// In the partitioned mode every hub receives every request: one of a
    /// partition this hub does not hold (`Inbound.partitionKey`) is
    /// another hub's, dropped here before anything of its payload is read
    /// or any budget spent (foreign_requests_dropped_total); the thing's
    /// outbox sends it again under the same request ID.
    func accept(_ message: MqttClient.Message) {
        let m = Inbound(message)
        if let key = m.partitionKey, !partitions.serves(key) {
            metrics.foreignDropped.increment()
            return
        }
        let bootstrap: Bool
        switch m.kind {
        case .request(let t, let route):
            if route == .onboarding, Self.headNamesEndNode(message.payload) {
                if !endNodeTriage.trySubmit({ [weak self] in self?.triageEndNodeOnboarding(m, t) }) {
                    metrics.refused("end_node_onboarding_busy")
                }
                return
            }
            bootstrap = route.isBootstrap
        case .claim: bootstrap = true
        default: bootstrap = false
        }
        guard bootstrap else {
            lanes.withLock { $0 }?.push(m)
            return
        }
        guard bootstrapLimiter.allow("bootstrap", now: Platform.nowMs()) else {
            metrics.bootstrapOverBudget.increment()
            return
        }
        guard costly.trySubmit({ [weak self] in self?.handle(m) }) else {
            metrics.bootstrapBusy.increment()
            return
        }
    }

    /// A message from the request lanes (a thing's request, status, an
    /// end node's status, Home Assistant's) or the costly pool (bootstrap).
    func handle(_ inbound: Inbound) {
        let m = inbound.message
        switch inbound.kind {
        case .request(let t, let route):
            // A client ID that is a claim certificate's CN is a claim
            // identity using the thing patterns its CN also matches
            // (p/%u/…): its answer would go to p/{CN}/resp, which every
            // holder of that certificate may read. Dropped without a reply;
            // claims go through c/….
            guard Topics.isSafeLevel(t.clientID), !t.clientID.hasPrefix(Topics.claimPrefix) else { return }
            // Always on the reply topic of the client ID the request came
            // from (the broker lets a client publish only under its own
            // ID), never on a Response Topic the request names: that would
            // let any client make the hub publish anywhere.
            serve(
                m, clientID: t.clientID, route: route, logPath: t.path,
                replyTopic: Topics.response(clientID: t.clientID)
            ) { req in
                guard t.appID == options.appID else {
                    return .now(.refusal(404, "APP_NOT_FOUND", "app \(t.appID) is not served here"))
                }
                return dispatch(req, route: route, path: t.path, clientID: t.clientID)
            }
        case .claim(let name, let clientID):
            if homeAssistant.handle(m) { return }
            handleClaim(m, name: name, clientID: clientID)
        case .status(let clientID):
            if homeAssistant.handle(m) { return }
            statusChanged(clientID: clientID, up: m.payload == Array("online".utf8))
        case .endNodeStatus(let clientID, let endNode):
            if homeAssistant.handle(m) { return }
            // One token of the gateway's own budget per status, as per
            // request. A cleared one costs nothing, nor does a retained one
            // the broker hands over at this hub's subscription (the flag is
            // set only then): one per topic, so a gateway with more end
            // nodes than its burst keeps them all across a hub's restart.
            guard m.payload.isEmpty || m.retain || rateLimiter.allow("mqtt:" + clientID, now: Platform.nowMs())
            else {
                endNodes.beyondBudget(clientID: clientID, endNode: endNode, payload: m.payload)
                return
            }
            endNodes.statusReceived(clientID: clientID, endNode: endNode, payload: m.payload)
        case .badEndNodeStatus:
            if homeAssistant.handle(m) { return }
            // Every message on the status subscription is taken or cleared,
            // before any budget: a level no gateway or end node can have
            // (empty, over 256 bytes, '+', '#', NUL) and a status beyond its
            // sender's budget are cleared unread, at the cost of one empty
            // publish and no store read (docs/GATEWAYS.md §7).
            endNodes.refused(topic: m.topic, payload: m.payload, defence: "end_node_status")
        case .other:
            _ = homeAssistant.handle(m)
        }
    }

    /// A thing's status ("online" or anything else) on p/{clientID}/status.
    private func statusChanged(clientID: String, up: Bool) {
        guard let thing = store.thing(mqttTopic: clientID) else {
            delivery.forgetDeleted(clientID: clientID)
            return
        }
        let tid = thing.thingID
        let online = delivery.statusChanged(thingID: tid, clientID: clientID, up: up)
        metrics.setOnline(online)
        homeAssistant.availabilityChanged(thingID: tid, online: up)
        if thing.layoutPosition == .gateway { endNodes.gatewayStatusChanged(thing) }
        events.event("\(tid) is \(up ? "online" : "offline")")
        // Every hub follows the statuses; the holder of the thing's
        // partition alone resends (all of them in the shared mode).
        guard up, partitions.serves(clientID) else { return }
        let n = delivery.resendUnanswered(to: tid)
        if n > 0 { events.event("sent \(n) unanswered command(s) to \(tid) again") }
        // A gateway's end nodes online through this installation.
        if thing.layoutPosition == .gateway {
            let m = delivery.resendToEndNodes(through: clientID)
            if m > 0 { events.event("sent \(m) unanswered end-node command(s) through \(clientID) again") }
        }
    }

    /// What a request's checks decided: its answer now, or costly work (a
    /// KDF) whose answer the costly pool gives.
    enum Served {
        case now(KiiResponse)
        case costly(() -> KiiResponse)
        /// Work that answers by itself, exactly once, through the function
        /// it is given (an update job's block read, on UpdateServing's pool).
        case later((@escaping (KiiResponse) -> Void) -> Void)
    }

    /// One request over MQTT, framed as Kii frames it: decoded, its body
    /// size and its client's budget checked, `handle`d, logged and counted,
    /// and answered on `replyTopic` with its request ID and Correlation Data.
    /// `spendsBudget` false: the caller decided the budget (the end-node
    /// triage's refusals). A `.costly` answer is given from the costly
    /// pool, or 503 SERVICE_BUSY at once when its queue is full.
    func serve(
        _ m: MqttClient.Message, clientID: String, route: RequestRoute, logPath: String,
        replyTopic: String, spendsBudget: Bool = true, _ handle: (KiiRequest) -> Served
    ) {
        let served: Served
        let request = KiiRequest.decode(m.payload)
        if let req = request {
            if req.body.count > maxBody(route) {
                served = .now(.refusal(413, "REQUEST_TOO_LARGE", "the body is larger than \(maxBody(route)) bytes"))
            } else if spendsBudget && !rateLimiter.allow("mqtt:" + clientID, now: Platform.nowMs()) {
                served = .now(.refusal(429, "TOO_MANY_REQUESTS", "too many requests from \(clientID); slow down"))
            } else {
                served = handle(req)
            }
        } else {
            served = .now(.refusal(400, "INVALID_INPUT_DATA", "the request is not in Kii's MQTT request format"))
        }
        switch served {
        case .now(let reply):
            answer(m, request, reply, clientID: clientID, route: route, logPath: logPath, replyTopic: replyTopic)
        case .later(let start):
            start { [weak self] reply in
                self?.answer(
                    m, request, reply, clientID: clientID, route: route, logPath: logPath, replyTopic: replyTopic)
            }
        case .costly(let work):
            let queued = costly.trySubmit { [weak self] in
                self?.answer(
                    m, request, work(), clientID: clientID, route: route, logPath: logPath, replyTopic: replyTopic)
            }
            if !queued {
                answer(
                    m, request, KiiResponse.refusal(503, "SERVICE_BUSY", "the hub is busy; try again later"),
                    clientID: clientID,
                    route: route, logPath: logPath, replyTopic: replyTopic)
            }
        }
    }

    /// `reply` to `m`, logged, counted and published on `replyTopic` with
    /// its request ID and Correlation Data.
    private func answer(
        _ m: MqttClient.Message, _ request: KiiRequest?, _ reply: KiiResponse, clientID: String,
        route: RequestRoute, logPath: String, replyTopic: String
    ) {
        var answer = reply
        if let rid = request?.requestID { answer.headers.append((KiiFraming.requestIDHeader, rid)) }
        let method = request?.method ?? "?"
        logRequest(clientID: clientID, method: method, path: logPath, body: request?.body ?? [], status: reply.status)
        metrics.request(kind: route.metricKind, status: reply.status)
        // An answer says "stored": not before the lane's commit (AfterCommit).
        afterCommit {
            _ = self.client.publish(
                topic: replyTopic, payload: answer.encode(), qos: 1, correlationData: m.correlationData)
        }
    }

    /// A claim onboarding (docs/PROTOCOL.md §4.3): `name` is the CN of the
    /// client's certificate (the broker lets it write only under its own CN
    /// and client ID), `clientID` its client ID. Only a claim name of this
    /// hub's app, not refused by the operator, onboards; the body is an
    /// onboarding by the thing, handled as one, and must carry a CSR. The
    /// answer goes to c/{CN}/{clientID}/resp, which only that client reads.
    func handleClaim(_ m: MqttClient.Message, name: String, clientID: String) {
        serve(
            m, clientID: clientID, route: .onboarding, logPath: "claim " + name,
            replyTopic: Topics.claimResponse(name: name, clientID: clientID)
        ) { req in
            if let refusal = claimRefusal(name) {
                metrics.refused("claim")
                events.event("claim onboarding refused: \(refusal)")
                return .now(.refusal(403, "CLAIM_REFUSED", refusal))
            }
            guard req.method == "POST" else { return .now(.refusal(404, "NOT_FOUND", "no \(req.method) onboardings")) }
            return .now(handlers.onboarding.byThing(req, claim: name))
        }
    }

    /// Why a claim name does not onboard here (nil: it does): not a claim
    /// CN, another app's, a batch the operator refused, or a hub without
    /// the things CA (a claim onboarding gets a certificate only).
    func claimRefusal(_ name: String) -> String? {
        guard let parts = Topics.claimParts(name) else { return "\(name) is not a claim certificate's name" }
        guard parts.appID == options.appID else { return "the claim \(name) is not for app \(options.appID)" }
        if options.refusedClaims.contains(parts.batch) {
            return "the claim batch \(parts.batch) is refused by this hub's operator"
        }
        if authority.ca == nil { return "this hub has no things CA: it takes no claim onboardings" }
        return nil
    }

    /// A thing's request over HTTP (Kii's thing SDKs make these calls over
    /// REST): the same routes and checks as over MQTT, with the thing's
    /// token as the only credential, since HTTP has no client ID. `path` is
    /// what follows /thing-if/apps/{appID}/ or /api/apps/{appID}/, `route`
    /// what the REST layer read of it; the caller has checked the appID and
    /// read at most `maxBody(route)` bytes.
    /// Budgets: per token; a tokenless onboarding by the thing spends the
    /// address's and the app's budgets at the REST layer (spendAnonymous,
    /// which the operator sets), not one key shared by every device of the
    /// app, which capped an app's onboardings over HTTP at
    /// requestRatePerSecond whatever the operator had set.
    public func overHTTP(_ req: KiiRequest, route: RequestRoute, path: String) -> KiiResponse {
        let reply: KiiResponse
        let budgetKey = req.bearerToken.map { "http:" + $0 } ?? (route == .onboarding ? nil : "http:")
        if req.body.count > maxBody(route) {
            reply = KiiResponse.refusal(413, "REQUEST_TOO_LARGE", "the body is larger than \(maxBody(route)) bytes")
        } else if let budgetKey, !rateLimiter.allow(budgetKey, now: Platform.nowMs()) {
            reply = KiiResponse.refusal(429, "TOO_MANY_REQUESTS", "too many requests with this token; slow down")
        } else {
            reply = self.route(req, route, path: path, clientID: nil)
        }
        logRequest(clientID: "(http)", method: req.method, path: path, body: req.body, status: reply.status)
        return reply
    }

    func logRequest(clientID: String, method: String, path: String, body: [UInt8], status: Int) {
        let logged = Record(
            clientID: clientID, method: method, path: path,
            body: Self.redacted(body, path: path), status: status)
        seen.withLock { _ = $0.requests.append(logged) }
    }

    /// The body limit of a request: state uploads have their own.
    public func maxBody(_ route: RequestRoute) -> Int {
        if case .update = route { return UpdateReport.maxBytes }
        return route.isStateUpload ? options.limits.maxStateBody : options.limits.maxBody
    }

    /// The router of a request over MQTT from `clientID`: the rows whose
    /// answer is costly work (libthingif's end-node onboarding, POST
    /// things/{gw}/end-nodes, checked on the gateway's lane, its KDF on the
    /// costly pool; no route over HTTP), then `route`'s, which answer now.
    func dispatch(_ req: KiiRequest, route r: RequestRoute, path: String, clientID: String) -> Served {
        if case .endNodes(let gw, let rest, nil) = r, rest.isEmpty, req.method == "POST", !gw.isEmpty {
            return handlers.endNodes.onLane(req, gatewayThingID: gw, clientID: clientID)
        }
        // A block or hash page: checked here, read on UpdateServing's pool.
        if case .update(let tid, let job, let part) = r, r.isUpdateRead {
            let updates = handlers.updates
            switch updates.check(req, thingID: tid, jobID: job, part, clientID: clientID) {
            case .refused(let refusal): return .now(refusal)
            case .read(let read):
                return .later { answer in
                    let queued = updates.serving.submit(
                        read.job.thingID, cost: read.cost, read: { updates.read(read) }, answer: answer)
                    if !queued { answer(updates.busy()) }
                }
            }
        }
        return .now(route(req, r, path: path, clientID: clientID))
    }

    /// `route` of a path not read yet (the tests' way in).
    func route(_ req: KiiRequest, api: Topics.API, path: String, clientID: String?) -> KiiResponse {
        route(req, RequestRoute(api: api, path: path), path: path, clientID: clientID)
    }

    /// One router for both transports: one row per request kind and
    /// method, each handed to its handler. `clientID` is the MQTT client
    /// the request came from (it must be one of the thing's
    /// installations), nil over HTTP.
    func route(_ req: KiiRequest, _ r: RequestRoute, path: String, clientID: String?) -> KiiResponse {
        switch (r, req.method) {
        case (.onboarding, "POST"):
            // On the costly work's pool: `accept` sends it there over MQTT, the REST layer over HTTP.
            if EndNodeRequests.isEndNodeOnboarding(req) { return handlers.endNodes.byGateway(req, clientID: clientID) }
            return handlers.onboarding.byThing(req)
        case (.installation, "POST"):
            return handlers.onboarding.installation(req, overHTTP: clientID == nil)
        case (.mqttEndpoint(let installationID), "GET"):
            return handlers.onboarding.endpoint(req, installationID: installationID, overHTTP: clientID == nil)
        case (.commandReport(let target, let commandID), "PUT"):
            return authorization.forTarget(req, target, clientID: clientID) {
                handlers.results.commandReport(req, thingID: $0.thingID, commandID: commandID)
            }
        case (.actionResults(let target, let commandID), "PUT"):
            return handlers.results.request(req, target: target, commandID: commandID, clientID: clientID)
        case (.states(let target), "PUT"), (.states(let target), "PATCH"):
            return handlers.states.request(req, target: target, clientID: clientID)
        case (.endNodes(let gw, let rest, let query), "GET") where rest.count <= 1,
            (.endNodes(let gw, let rest, let query), "DELETE") where rest.count == 1,
            (.endNodes(let gw, let rest, let query), "PUT") where rest.count == 2 && rest[1] == "connection":
            return handlers.endNodes.call(req, gatewayThingID: gw, rest: rest, query: query, clientID: clientID)
        case (.thingField(let thingID, let field), "PUT"), (.thingField(let thingID, let field), "GET"):
            return handlers.fields.request(req, field, from: clientID, thingID: thingID)
        case (.update(let thingID, let jobID, .report), _):
            return handlers.updates.report(req, thingID: thingID, jobID: jobID, clientID: clientID)
        case (.update(let thingID, let jobID, let part), _):
            // Over HTTP (no lane to keep free: the caller waits), within the same bounds.
            let updates = handlers.updates
            switch updates.check(req, thingID: thingID, jobID: jobID, part, clientID: clientID) {
            case .refused(let refusal): return refusal
            case .read(let read):
                return updates.serving.inline(read.job.thingID, cost: read.cost) { updates.read(read) }
                    ?? updates.busy()
            }
        case (.automationReport(let target), "PUT"):
            return authorization.forTarget(req, target, clientID: clientID, endNodes: false) {
                handlers.fields.automationReport(req, thingID: $0.thingID)
            }
        default:
            return .refusal(404, "NOT_FOUND", "no \(req.method) \(path)")
        }
    }
}
