import CThingIF

import ThingIF
#if canImport(Glibc)
import Glibc
#endif

/// The framework side of the protocol over MQTT: it answers onboarding and
/// installation requests, accepts action results, state and firmware
/// versions, and publishes commands to things. What it knows lives in a
/// HubStore (MemoryStore by default; SQLiteStore for thingif-hub). It reuses
/// the device library's wire codec and transport. AppAPI.swift adds the app
/// side that the REST API calls.
///
/// Threads: MQTT traffic is handled on libmosquitto's thread; every public
/// method may be called from any thread.
public final class FrameworkSide: @unchecked Sendable {
    public struct Options: Sendable {
        public var appID: String
        public var appKey: String
        public var brokerHost: String
        public var brokerPort: Int
        /// Host and port given to things in mqttEndpoint (default: the broker's).
        public var advertisedHost: String?
        public var advertisedPort: Int?
        /// Subscribe through the shared group $share/thingif-hub/… so that
        /// several framework processes split the request stream.
        public var sharedSubscription: Bool
        /// The hub's own broker identity: a dynamic-security client allowed
        /// to administer the plugin ($CONTROL/dynamic-security/#).
        public var brokerUsername: String?
        public var brokerPassword: String?
        /// TLS to the broker: the CA that signed its certificate, and an
        /// optional client certificate and key (mutual TLS).
        public var brokerTLS: TLSFiles?
        /// The broker's TLS port given to things in mqttEndpoint.portSSL (0: none).
        public var advertisedTLSPort: Int?
        /// Requests per MQTT client ID: a burst of `requestBurst`, refilled at
        /// `requestRatePerSecond`; beyond that, 429.
        public var requestRatePerSecond: Double = 200
        public var requestBurst = 2000
        /// Body limits (the same settings as the REST API's).
        public var limits = HubLimits()

        public init(appID: String, appKey: String, brokerHost: String = "127.0.0.1", brokerPort: Int,
                    advertisedHost: String? = nil, advertisedPort: Int? = nil, sharedSubscription: Bool = true,
                    brokerUsername: String? = nil, brokerPassword: String? = nil, brokerTLS: TLSFiles? = nil,
                    advertisedTLSPort: Int? = nil) {
            self.appID = appID
            self.appKey = appKey
            self.brokerHost = brokerHost
            self.brokerPort = brokerPort
            self.advertisedHost = advertisedHost
            self.advertisedPort = advertisedPort
            self.sharedSubscription = sharedSubscription
            self.brokerUsername = brokerUsername
            self.brokerPassword = brokerPassword
            self.brokerTLS = brokerTLS
            self.advertisedTLSPort = advertisedTLSPort
        }
    }

    public struct TLSFiles: Sendable, Equatable {
        public var caFile: String
        public var certFile: String?
        public var keyFile: String?
        public init(caFile: String, certFile: String? = nil, keyFile: String? = nil) {
            self.caFile = caFile
            self.certFile = certFile
            self.keyFile = keyFile
        }
    }

    public typealias ThingRecord = ThingIFHub.ThingRecord

    /// A request as received, for tests and logs.
    public struct RequestRecord: Sendable {
        public var clientID: String
        public var method: String
        public var path: String
        public var body: String
        public var status: Int
    }

    /// What only this process needs to know.
    private struct Data {
        var requests: [RequestRecord] = []
        var online: [String: Bool] = [:]                 // thingID -> last status seen
        var resultPosts: [String: Int] = [:]             // commandID -> how many times results arrived
        var resultPostOrder: [String] = []               // the same keys, oldest first (bounded)
        var connack: Int32?
        var subscribedMids: Set<Int32> = []
        var expectedMids: Set<Int32> = []
        var subscriptionRefused = false
    }

    public let options: Options
    public let store: HubStore
    private let client: MqttClient
    /// The broker's dynamic-security administration, when the hub has a
    /// broker identity (options.brokerUsername).
    let admin: BrokerAdmin?
    /// Why start() failed, when it did.
    public private(set) var startProblem: String?
    /// Requests kept for tests and logs: the newest ones only.
    public static let requestLogSize = 512
    /// How many commands' result deliveries are counted (the newest).
    public static let resultCountLimit = 20_000
    /// Onboarding attempts per vendorThingID: a burst of 10, then one per
    /// 10 s; more get 429 (password guessing over the bootstrap identity).
    let onboardingLimiter = RateLimiter(ratePerSecond: 0.1, burst: 10)
    private let data = Locked(Data())
    /// Called for notable events (onboarding, results, state), on the MQTT thread.
    public var onEvent: (@Sendable (String) -> Void)?
    /// Called once per command when its results arrive, on the MQTT thread.
    public var onCommandFinished: (@Sendable (CommandRecord) -> Void)?
    var appAPI: AppAPI { AppAPI(hub: self) }
    /// The server triggers: STATES ones run on state uploads; call `tick()`
    /// (thingif-hub does, every second) for the scheduled ones.
    public let triggerEngine = TriggerEngine()
    /// Requests per MQTT client: a thing's burst of state uploads passes,
    /// a flood gets 429.
    public let rateLimiter: RateLimiter
    /// Serializes changes of the things' automation configs.
    let automationLock = Locked(())

    public init?(_ options: Options, store: HubStore = MemoryStore()) {
        guard let c = MqttClient(clientID: "thingif-hub-\(Platform.randomHex(bytes: 6))", cleanStart: true) else {
            return nil
        }
        self.options = options
        self.client = c
        self.store = store
        rateLimiter = RateLimiter(ratePerSecond: options.requestRatePerSecond, burst: options.requestBurst)
        if options.brokerUsername != nil {
            guard let a = BrokerAdmin(options: options) else { return nil }
            admin = a
        } else {
            admin = nil
        }
        triggerEngine.hub = self
    }

    // MARK: lifecycle

    /// Connects, subscribes and starts the MQTT thread. Blocks up to `timeoutMs`.
    public func start(timeoutMs: Int = 5000) -> Bool {
        startProblem = nil
        if let tls = options.brokerTLS {
            // Never a plain-text fallback: a TLS setup that fails stops here.
            guard client.setTLS(cafile: tls.caFile, certfile: tls.certFile, keyfile: tls.keyFile) == MOSQ_ERR_SUCCESS.rawValue,
                  admin?.setTLS(tls) ?? true else {
                startProblem = "cannot use the TLS files (CA \(tls.caFile))"
                return false
            }
        }
        if options.brokerUsername != nil {
            _ = client.setCredentials(username: options.brokerUsername, password: options.brokerPassword)
        }
        if let admin {
            admin.onLog = { [weak self] line in self?.onEvent?(line) }
            guard admin.start(host: options.brokerHost, port: options.brokerPort, timeoutMs: timeoutMs) else {
                startProblem = "the broker did not accept the hub's admin connection as \(options.brokerUsername ?? "")"
                admin.stop()
                return false
            }
            if let problem = admin.provision(hubUsername: options.brokerUsername ?? "", appID: options.appID,
                                             appKey: options.appKey) {
                startProblem = problem
                admin.stop()
                return false
            }
        }
        client.onConnect = { [unowned self] rc in
            self.data.withLock { $0.connack = rc }
            guard rc == 0 else { return }
            for topic in Topics.hubSubscriptions(shared: self.options.sharedSubscription) {
                let mid = self.client.subscribe(topic, qos: 1).mid
                self.data.withLock { _ = $0.expectedMids.insert(mid) }
            }
        }
        client.onSubscribe = { [unowned self] mid in self.data.withLock { _ = $0.subscribedMids.insert(mid) } }
        client.onSubscribeGranted = { [unowned self] _, codes in
            if codes.contains(where: { $0 >= 0x80 }) { self.data.withLock { $0.subscriptionRefused = true } }
        }
        client.onMessage = { [unowned self] m in self.handle(m) }
        guard client.connect(host: options.brokerHost, port: options.brokerPort, keepalive: 30) == MOSQ_ERR_SUCCESS.rawValue,
              client.startThread() == MOSQ_ERR_SUCCESS.rawValue else { return false }
        let up = wait(timeoutMs: timeoutMs) {
            self.data.withLock { d in
                d.connack == 0 && d.expectedMids.count == Topics.hubSubscriptions(shared: false).count
                    && d.expectedMids.isSubset(of: d.subscribedMids)
            }
        }
        let (connack, refused) = data.withLock { ($0.connack, $0.subscriptionRefused) }
        if !up {
            startProblem = connack.map { $0 == 0 ? "no SUBACK from the broker" : "the broker refused the hub: \(MqttClient.describeConnack($0))" }
                ?? "no CONNACK from the broker at \(options.brokerHost):\(options.brokerPort)"
        } else if refused {
            startProblem = "the broker refused the hub's subscriptions (its client lacks the rights)"
        }
        return up && !refused
    }

    public func stop() {
        client.disconnect()
        _ = client.stopThread(force: false)
        admin?.stop()
    }

    /// Polls `condition` every 10 ms until it holds or `timeoutMs` passes.
    public func wait(timeoutMs: Int, _ condition: () -> Bool) -> Bool {
        let deadline = Platform.nowMs() + Int64(timeoutMs)
        while !condition() {
            if Platform.nowMs() >= deadline { return false }
            Platform.sleepMs(10)
        }
        return true
    }

    // MARK: operations for tests and the demo

    /// Onboarding by the app without an owner: registers (or finds) the thing
    /// and returns its thingID and access token, to hand over to the device.
    public func onboardByApp(vendorThingID: String, password: String, thingType: String? = nil) -> (thingID: String, accessToken: String)? {
        switch store.registerThing(vendorThingID: vendorThingID, password: password, thingType: thingType,
                                   firmwareVersion: nil, dataGroupingInterval: nil) {
        case .success(let t): return (t.thingID, t.accessToken)
        case .failure: return nil
        }
    }

    public func thing(_ thingID: String) -> ThingRecord? { store.thing(id: thingID) }
    public func thing(vendorThingID: String) -> ThingRecord? { store.thing(vendorThingID: vendorThingID) }

    public var requests: [RequestRecord] { data.withLock { $0.requests } }

    /// Things whose last status message said "online".
    public var onlineThings: [String] { data.withLock { d in d.online.filter(\.value).map(\.key).sorted() } }

    public func isOnline(_ thingID: String) -> Bool { data.withLock { $0.online[thingID] ?? false } }

    /// Waits for any thing to come online and returns its thingID.
    public func waitForOnlineThing(timeoutMs: Int) -> String? {
        var r: String?
        _ = wait(timeoutMs: timeoutMs) {
            r = onlineThings.first
            return r != nil
        }
        return r
    }

    public func waitForOnline(_ thingID: String, timeoutMs: Int) -> Bool {
        wait(timeoutMs: timeoutMs) { isOnline(thingID) }
    }

    /// Stores a command and publishes it to the thing; false when the thing
    /// is unknown or the command ID exists. A command stored but not
    /// published (broker down) goes out with the thing's next birth message.
    public func send(_ command: Command, to thingID: String, issuer: String? = nil,
                     installationID: String? = nil) -> Bool {
        stored(command, to: thingID, issuer: issuer, installationID: installationID) != nil
    }

    /// As `send`, returning the stored record.
    func stored(_ command: Command, to thingID: String, issuer: String?, installationID: String?) -> CommandRecord? {
        guard store.thing(id: thingID) != nil else { return nil }
        let payload = command.encode().dump()
        let now = Platform.epochMs()
        // Stored before it is published, so a result can never arrive for a
        // command the framework does not know.
        guard var record = store.insertCommand(CommandRecord(
            commandID: command.id, thingID: thingID, issuer: issuer ?? command.issuer,
            issuingInstallationID: installationID, payload: payload, createdAt: now, modifiedAt: now)) else { return nil }
        if publish(Array(payload.utf8), to: thingID) && isOnline(thingID)
            && store.markDelivered(commandID: command.id, at: Platform.epochMs()) {
            record.state = .delivered
        }
        return record
    }

    /// Builds and sends a schema command; returns its commandID.
    /// `actions` is the JSON text of the actions array.
    public func sendCommand(to thingID: String, schema: String, schemaVersion: Int, actions: String,
                            issuer: String = "user:demo", title: String? = nil, description: String? = nil,
                            metadata: String? = nil) -> String? {
        var doc = "{\"commandID\":\"\(FrameworkSide.newCommandID())\",\"schema\":\(quote(schema)),"
        doc += "\"schemaVersion\":\(schemaVersion),\"issuer\":\(quote(issuer)),\"actions\":\(actions)"
        if let title { doc += ",\"title\":\(quote(title))" }
        if let description { doc += ",\"description\":\(quote(description))" }
        if let metadata { doc += ",\"metadata\":\(metadata)" }
        doc += "}"
        guard case .success(let j) = JSON.parse(doc), case .success(let cmd) = Command.decode(j) else { return nil }
        return send(cmd, to: thingID) ? cmd.id : nil
    }

    /// Publishes any bytes on the thing's command topic (for bad-input tests).
    public func publish(_ payload: [UInt8], to thingID: String) -> Bool {
        guard let topic = store.thing(id: thingID)?.installations.values.sorted().first else { return false }
        return publishRaw(topic: topic, payload: payload)
    }

    /// Publishes any bytes on the thing's command topic; with `commandID`,
    /// first records a command of that ID for the thing, so that the results
    /// the thing reports for it are accepted (tests of bad payloads).
    public func publishRawCommand(_ payload: [UInt8], commandID: String?, to thingID: String) -> Bool {
        if let commandID { recordCommand(commandID, for: thingID) }
        return publish(payload, to: thingID)
    }

    /// Records a command of `commandID` for the thing without sending it
    /// (nothing when it exists), so that the thing's results for it are accepted.
    public func recordCommand(_ commandID: String, for thingID: String) {
        guard store.command(id: commandID) == nil else { return }
        let placeholder = JSON.object()
        placeholder.set("commandID", string: commandID)
        let now = Platform.epochMs()
        _ = store.insertCommand(CommandRecord(commandID: commandID, thingID: thingID, issuer: nil,
                                              issuingInstallationID: nil, payload: placeholder.dump(),
                                              createdAt: now, modifiedAt: now))
    }

    /// Publishes on any topic (QoS 1).
    public func publishRaw(topic: String, payload: [UInt8]) -> Bool {
        client.publish(topic: topic, payload: payload, qos: 1) == MOSQ_ERR_SUCCESS.rawValue
    }

    /// Publishes a retained message (QoS 1): the broker keeps it for
    /// subscribers that come later.
    public func publishRetained(topic: String, payload: [UInt8]) -> Bool {
        client.publish(topic: topic, payload: payload, qos: 1, retain: true) == MOSQ_ERR_SUCCESS.rawValue
    }

    public static func newCommandID() -> String { "cmd-" + Platform.randomHex(bytes: 8) }

    /// The action results the thing reported for a command (JSON text).
    public func results(of commandID: String) -> String? { store.command(id: commandID)?.results }

    /// How many times the thing reported results for a command.
    public func resultPostCount(of commandID: String) -> Int { data.withLock { $0.resultPosts[commandID] ?? 0 } }

    public func waitForResults(of commandID: String, timeoutMs: Int) -> String? {
        var r: String?
        _ = wait(timeoutMs: timeoutMs) {
            r = results(of: commandID)
            return r != nil
        }
        return r
    }

    public func waitForThing(vendorThingID: String, timeoutMs: Int) -> ThingRecord? {
        var r: ThingRecord?
        _ = wait(timeoutMs: timeoutMs) {
            r = thing(vendorThingID: vendorThingID)
            return r != nil
        }
        return r
    }

    /// Every state upload of the thing, oldest first: ("PUT" | "PATCH", the uploaded JSON text).
    public func stateUploads(of thingID: String) -> [(method: String, body: String)] {
        store.stateHistory(thingID: thingID, from: 0, to: .max).map { ($0.method, $0.upload) }
    }

    /// Waits until the thing has made at least `count` state uploads.
    public func waitForStateUploads(of thingID: String, count: Int, timeoutMs: Int) -> [(method: String, body: String)] {
        var r: [(method: String, body: String)] = []
        _ = wait(timeoutMs: timeoutMs) {
            r = stateUploads(of: thingID)
            return r.count >= count
        }
        return r
    }

    /// Commands sent to a thing that have no results yet, oldest first.
    public func unanswered(of thingID: String) -> [String] {
        store.unansweredCommands(thingID: thingID).map(\.commandID)
    }

    /// Publishes again every command of the thing that has no results: the
    /// thing runs each at most once, so this only fills gaps.
    @discardableResult
    public func resendUnanswered(to thingID: String) -> Int {
        var sent = 0
        for c in store.unansweredCommands(thingID: thingID) where publish(Array(c.payload.utf8), to: thingID) {
            sent += 1
            _ = store.markDelivered(commandID: c.commandID, at: Platform.epochMs())
        }
        return sent
    }

    // MARK: request handling (MQTT thread)

    private func handle(_ m: MqttClient.Message) {
        if let clientID = Topics.parseStatus(m.topic) {
            let up = m.payload == Array("online".utf8)
            guard let tid = store.thing(mqttTopic: clientID)?.thingID else { return }
            data.withLock { $0.online[tid] = up }
            onEvent?("\(tid) is \(up ? "online" : "offline")")
            if up {
                let n = resendUnanswered(to: tid)
                if n > 0 { onEvent?("sent \(n) unanswered command(s) to \(tid) again") }
            }
            return
        }
        guard let t = Topics.parseRequest(m.topic), Topics.isSafeLevel(t.clientID) else { return }
        let reply: KiiResponse
        var method = "?"
        let request = KiiRequest.decode(m.payload)
        if let req = request {
            method = req.method
            if req.body.count > maxBody(path: t.path) {
                reply = error(413, "REQUEST_TOO_LARGE", "the body is larger than \(maxBody(path: t.path)) bytes")
            } else if !rateLimiter.allow("mqtt:" + t.clientID, now: Platform.nowMs()) {
                reply = error(429, "TOO_MANY_REQUESTS", "too many requests from \(t.clientID); slow down")
            } else {
                reply = t.appID == options.appID
                    ? route(req, t) : error(404, "APP_NOT_FOUND", "app \(t.appID) is not served here")
            }
        } else {
            reply = error(400, "INVALID_INPUT_DATA", "the request is not in Kii's MQTT request format")
        }
        var answer = reply
        if let rid = request?.requestID {
            answer.headers.append((KiiFraming.requestIDHeader, rid))
        }
        let logged = RequestRecord(clientID: t.clientID, method: method, path: t.path,
                                   body: FrameworkSide.redacted(request?.body ?? [], path: t.path), status: reply.status)
        data.withLock {
            $0.requests.append(logged)
            if $0.requests.count > FrameworkSide.requestLogSize {
                $0.requests.removeFirst($0.requests.count - FrameworkSide.requestLogSize)
            }
        }
        // Always on the reply topic of the client ID the request came from
        // (the broker lets a client publish only under its own ID), never on
        // a Response Topic the request names: that would let any client make
        // the hub publish anywhere.
        _ = client.publish(topic: Topics.response(clientID: t.clientID), payload: answer.encode(), qos: 1,
                           correlationData: m.correlationData)
    }

    /// The body limit of a request path: state uploads have their own.
    private func maxBody(path: String) -> Int {
        path.hasSuffix("/states") ? options.limits.maxStateBody : options.limits.maxBody
    }

    private func error(_ status: Int, _ code: String, _ message: String) -> KiiResponse {
        KiiResponse(status: status, headers: [("Content-Type", MediaType.json)],
                    body: HubError(status, code, message).body.dumpBytes())
    }

    private func ok(_ status: Int, _ body: JSON? = nil) -> KiiResponse {
        guard let body else { return KiiResponse(status: status) }
        return KiiResponse(status: status, headers: [("Content-Type", MediaType.json)], body: body.dumpBytes())
    }

    private func route(_ req: KiiRequest, _ t: Topics.ParsedRequest) -> KiiResponse {
        let parts = t.path.split(separator: "/", omittingEmptySubsequences: false).map(String.init)
        switch (t.api, req.method, parts.count) {
        case (.thingIF, "POST", 1) where parts[0] == "onboardings":
            return onboardByThing(req)
        case (.kii, "POST", 1) where parts[0] == "installations":
            return createInstallation(req)
        case (.kii, "GET", 3) where parts[0] == "installations" && parts[2] == "mqtt-endpoint":
            return endpoint(req, installationID: parts[1])
        case (.thingIF, "PUT", 4) where parts[0] == "targets" && parts[2] == "commands":
            return commandReport(req, from: t.clientID, target: parts[1], commandID: parts[3])
        case (.thingIF, "PUT", 5) where parts[0] == "targets" && parts[2] == "commands" && parts[4] == "action-results":
            return actionResults(req, from: t.clientID, target: parts[1], commandID: parts[3])
        case (.thingIF, "PUT", 3) where parts[0] == "targets" && parts[2] == "states",
             (.thingIF, "PATCH", 3) where parts[0] == "targets" && parts[2] == "states":
            return state(req, from: t.clientID, target: parts[1])
        case (.thingIF, "PUT", 3) where parts[0] == "things" && parts[2] == "firmware-version":
            return firmwareVersion(req, from: t.clientID, thingID: parts[1])
        default:
            return error(404, "NOT_FOUND", "no \(req.method) \(t.path)")
        }
    }

    /// A new MQTT installation (topic) for a thing: its installationID and
    /// topic, or nil when the store fails.
    func newInstallation(for t: ThingRecord) -> (installationID: String, topic: String)? {
        let installationID = HubIDs.installationID()
        let topic = HubIDs.mqttTopic()
        guard store.addInstallation(thingID: t.thingID, installationID: installationID, mqttTopic: topic) else { return nil }
        return (installationID, topic)
    }

    /// The endpoint of an installation with fresh broker credentials: the
    /// broker client `topic`, bound to client ID `topic`, gets a new random
    /// password each time the endpoint is handed out (the old one stops
    /// working), so the hub stores none. nil when the broker refuses.
    private func endpoint(for t: ThingRecord, installationID: String, topic: String) -> MQTTEndpoint? {
        var username = ""
        var password = ""
        if let admin {
            guard let pw = admin.thingCredentials(topic: topic, appID: options.appID) else { return nil }
            username = topic
            password = pw
        }
        return MQTTEndpoint(installationID: installationID, host: options.advertisedHost ?? options.brokerHost,
                            portTCP: options.advertisedPort ?? options.brokerPort, portSSL: options.advertisedTLSPort ?? 0,
                            username: username, password: password, mqttTopic: topic, ttl: 2_147_483_647)
    }

    private var brokerRefused: KiiResponse {
        error(503, "BROKER_UNAVAILABLE", "the broker did not make the thing's MQTT credentials; try again")
    }

    private func onboardByThing(_ req: KiiRequest) -> KiiResponse {
        guard req.header("Content-Type") == MediaType.onboardingByThing else {
            return error(415, "UNSUPPORTED_MEDIA_TYPE", "Content-Type must be \(MediaType.onboardingByThing)")
        }
        guard case .success(let j) = JSON.parse(req.body), let o = OnboardingRequest.decode(j) else {
            return error(400, "INVALID_INPUT_DATA", "vendorThingID and thingPassword are required strings")
        }
        guard onboardingLimiter.allow("onboard:" + o.vendorThingID, now: Platform.nowMs()) else {
            return error(429, "TOO_MANY_REQUESTS", "too many onboarding attempts for \(o.vendorThingID); try again later")
        }
        switch store.registerThing(vendorThingID: o.vendorThingID, password: o.thingPassword, thingType: o.thingType,
                                   firmwareVersion: o.firmwareVersion, dataGroupingInterval: nil) {
        case .failure(.wrongPassword):
            return error(403, "WRONG_PASSWORD", "the password of \(o.vendorThingID) does not match")
        case .failure(.wrongType):
            return error(409, "THING_TYPE_MISMATCH", "\(o.vendorThingID) is registered with another thingType")
        case .failure(.storage):
            return error(500, HubError.storage.code, HubError.storage.message)
        case .success(let t):
            // A thing that onboards again keeps its MQTT installation (with
            // a new broker password).
            let installation: (installationID: String, topic: String)
            if let (iid, topic) = t.installations.sorted(by: { $0.key < $1.key }).first {
                installation = (iid, topic)
            } else if let fresh = newInstallation(for: t) {
                installation = fresh
            } else {
                return error(500, HubError.storage.code, HubError.storage.message)
            }
            guard let ep = endpoint(for: t, installationID: installation.installationID, topic: installation.topic) else {
                return brokerRefused
            }
            onEvent?("onboarded \(o.vendorThingID) as \(t.thingID), commands on \(ep.mqttTopic)")
            return ok(200, OnboardingResponse(thingID: t.thingID, accessToken: t.accessToken, mqttEndpoint: ep).encode())
        }
    }

    private enum Auth {
        case success(ThingRecord)
        case failure(KiiResponse)
    }

    /// The thing whose token the request carries, or a 401.
    private func authenticate(_ req: KiiRequest) -> Auth {
        guard let token = req.bearerToken else {
            return .failure(error(401, "UNAUTHORIZED", "an Authorization: Bearer token is required"))
        }
        guard var t = store.thing(accessToken: token) else {
            return .failure(error(401, "INVALID_ACCESS_TOKEN", "the access token is not valid"))
        }
        // A looked-up record has no raw token; the caller's is the one it knows.
        t.accessToken = token
        return .success(t)
    }

    /// The request's token must be the thing's, and the request must come
    /// from one of the thing's own MQTT installations (client IDs).
    private func authorize(_ req: KiiRequest, thingID: String, clientID: String) -> KiiResponse? {
        switch authenticate(req) {
        case .failure(let r): return r
        case .success(let t):
            guard t.thingID == thingID else { return error(403, "FORBIDDEN", "the token does not belong to \(thingID)") }
            guard t.installations.values.contains(clientID) else {
                return error(403, "FORBIDDEN", "client \(clientID) is not an MQTT installation of \(thingID)")
            }
            return nil
        }
    }

    private func createInstallation(_ req: KiiRequest) -> KiiResponse {
        let t: ThingRecord
        switch authenticate(req) {
        case .failure(let r): return r
        case .success(let x): t = x
        }
        guard case .success(let j) = JSON.parse(req.body), j["deviceType"]?.stringValue == "MQTT" else {
            return error(400, "INVALID_INPUT_DATA", "deviceType must be \"MQTT\"")
        }
        guard let (iid, _) = newInstallation(for: t) else {
            return error(500, HubError.storage.code, HubError.storage.message)
        }
        let body = JSON.object()
        body.set("installationID", string: iid)
        onEvent?("created MQTT installation \(iid) for \(t.thingID)")
        return ok(201, body)
    }

    private func endpoint(_ req: KiiRequest, installationID: String) -> KiiResponse {
        let t: ThingRecord
        switch authenticate(req) {
        case .failure(let r): return r
        case .success(let x): t = x
        }
        guard let topic = t.installations[installationID] else {
            return error(404, "INSTALLATION_NOT_FOUND", "no installation \(installationID) for \(t.thingID)")
        }
        guard let ep = endpoint(for: t, installationID: installationID, topic: topic) else { return brokerRefused }
        return ok(200, ep.encode())
    }

    private func thingID(fromTarget target: String) -> String? {
        target.hasPrefix("thing:") ? String(target.dropFirst(6)) : nil
    }

    private func actionResults(_ req: KiiRequest, from clientID: String, target: String, commandID: String) -> KiiResponse {
        guard let tid = thingID(fromTarget: target) else { return error(404, "TARGET_NOT_FOUND", "no target \(target)") }
        if let denied = authorize(req, thingID: tid, clientID: clientID) { return denied }
        guard case .success(let j) = JSON.parse(req.body), let parsed = ActionResults.decode(j) else {
            return error(400, "INVALID_INPUT_DATA", "the body must be {\"actionResults\":[…]}")
        }
        // Results only for a command this thing was given (by the hub, or
        // one it reported running by itself): never for another thing's.
        guard let command = store.command(id: commandID), command.thingID == tid else {
            return error(404, "COMMAND_NOT_FOUND", "\(tid) has no command \(commandID)")
        }
        data.withLock { d in
            if d.resultPosts[commandID] == nil {
                d.resultPostOrder.append(commandID)
                if d.resultPostOrder.count > FrameworkSide.resultCountLimit {
                    let excess = d.resultPostOrder.count - FrameworkSide.resultCountLimit
                    for k in d.resultPostOrder.prefix(excess) { d.resultPosts[k] = nil }
                    d.resultPostOrder.removeFirst(excess)
                }
            }
            d.resultPosts[commandID, default: 0] += 1
        }
        let text = j.dump()
        let now = Platform.epochMs()
        // Results count once: a repeat (the thing sends again until it has an
        // answer) is accepted and changes nothing.
        guard command.results == nil else { return ok(204) }
        let state: CommandState = parsed.all.allSatisfy(\.succeeded) ? .done : .incomplete
        // Results are idempotent by commandID: a repeat is accepted and ignored.
        if store.recordResults(commandID: commandID, results: text, state: state, at: now),
           let record = store.command(id: commandID) {
            onEvent?("results of \(commandID) from \(tid): \(text)")
            onCommandFinished?(record)
        }
        return ok(204)
    }

    /// A command the thing ran by itself (an action set, or a timer trigger
    /// on the device): stored once by commandID, so that apps see it.
    private func commandReport(_ req: KiiRequest, from clientID: String, target: String, commandID: String) -> KiiResponse {
        guard let tid = thingID(fromTarget: target) else { return error(404, "TARGET_NOT_FOUND", "no target \(target)") }
        if let denied = authorize(req, thingID: tid, clientID: clientID) { return denied }
        guard case .success(let j) = JSON.parse(req.body), j.isObject else {
            return error(400, "INVALID_INPUT_DATA", "the body must be a command object")
        }
        if let id = j["commandID"], id.stringValue != commandID {
            return error(400, "INVALID_INPUT_DATA", "commandID in the body is not \(commandID) of the path")
        }
        guard case .success(let command) = Command.decode(j) else {
            return error(400, "INVALID_INPUT_DATA", "the body is not a valid command")
        }
        if let issuer = command.issuer, issuer != "thing:\(tid)" {
            return error(400, "INVALID_INPUT_DATA", "the issuer of a command the thing reports must be thing:\(tid)")
        }
        guard store.command(id: commandID) == nil else { return ok(204) }   // a repeat
        let now = Platform.epochMs()
        if store.insertCommand(CommandRecord(commandID: commandID, thingID: tid, issuer: command.issuer ?? "thing:\(tid)",
                                             issuingInstallationID: nil, payload: j.dump(),
                                             createdAt: now, modifiedAt: now)) != nil {
            onEvent?("\(tid) reported command \(commandID) it ran by itself")
        }
        return ok(204)
    }

    private func state(_ req: KiiRequest, from clientID: String, target: String) -> KiiResponse {
        guard let tid = thingID(fromTarget: target) else { return error(404, "TARGET_NOT_FOUND", "no target \(target)") }
        if let denied = authorize(req, thingID: tid, clientID: clientID) { return denied }
        guard case .success(let j) = JSON.parse(req.body), j.isObject else {
            return error(400, "INVALID_INPUT_DATA", "the state must be a JSON object")
        }
        let old = store.thing(id: tid)?.state
        guard let merged = store.applyState(thingID: tid, method: req.method, upload: j.dump(), at: Platform.epochMs()) else {
            return error(500, HubError.storage.code, HubError.storage.message)
        }
        onEvent?("state of \(tid): \(merged)")
        triggerEngine.stateChanged(thingID: tid, old: old, new: merged)
        return ok(204)
    }

    private func firmwareVersion(_ req: KiiRequest, from clientID: String, thingID tid: String) -> KiiResponse {
        if let denied = authorize(req, thingID: tid, clientID: clientID) { return denied }
        guard case .success(let j) = JSON.parse(req.body), let v = j["firmwareVersion"]?.stringValue, !v.isEmpty else {
            return error(400, "INVALID_INPUT_DATA", "firmwareVersion must be a non-empty string")
        }
        _ = store.setFirmwareVersion(thingID: tid, v)
        onEvent?("firmware version of \(tid): \(v)")
        return ok(204)
    }

    private func quote(_ s: String) -> String { JSON.string(s)?.dump() ?? "\"\"" }

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
