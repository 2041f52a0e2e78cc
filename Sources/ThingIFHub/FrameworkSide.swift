import CThingIF

import ThingIF
#if canImport(Glibc)
import Glibc
#endif

/// The framework side of the protocol over MQTT: it answers onboarding and
/// installation requests, accepts action results, state and firmware
/// versions, and publishes commands to things. It keeps everything in memory.
/// It reuses the device library's wire codec and transport.
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
        /// A directory where things, commands and results are journaled, so
        /// that a restarted framework side knows them; nil keeps memory only.
        public var storageDirectory: String?

        public init(appID: String, appKey: String, brokerHost: String = "127.0.0.1", brokerPort: Int,
                    advertisedHost: String? = nil, advertisedPort: Int? = nil, sharedSubscription: Bool = true,
                    storageDirectory: String? = nil) {
            self.storageDirectory = storageDirectory
            self.appID = appID
            self.appKey = appKey
            self.brokerHost = brokerHost
            self.brokerPort = brokerPort
            self.advertisedHost = advertisedHost
            self.advertisedPort = advertisedPort
            self.sharedSubscription = sharedSubscription
        }
    }

    public struct ThingRecord: Sendable {
        public var thingID: String
        public var vendorThingID: String?
        public var password: String?
        public var thingType: String?
        public var firmwareVersion: String?
        public var accessToken: String
        /// installationID -> mqttTopic
        public var installations: [String: String]
        /// The latest full state (JSON text), after PATCHes applied.
        public var state: String?
        /// Every state upload, in order: ("PUT" | "PATCH", JSON text).
        public var stateUploads: [(method: String, body: String)]
    }

    /// A request as received, for tests and logs.
    public struct RequestRecord: Sendable {
        public var clientID: String
        public var method: String
        public var path: String
        public var body: String
        public var status: Int
    }

    private struct Data {
        var things: [String: ThingRecord] = [:]          // by thingID
        var byVendorID: [String: String] = [:]           // vendorThingID -> thingID
        var byToken: [String: String] = [:]              // accessToken -> thingID
        var byTopic: [String: String] = [:]              // mqttTopic -> thingID
        var results: [String: String] = [:]              // commandID -> action-results JSON text
        var resultPosts: [String: Int] = [:]             // commandID -> how many times results arrived
        var commands: [String: String] = [:]             // commandID -> thingID
        var payloads: [String: [UInt8]] = [:]            // commandID -> command as sent
        var commandOrder: [String] = []
        var requests: [RequestRecord] = []
        var online: [String: Bool] = [:]                 // thingID -> last status seen
        var connack: Int32?
        var subscribedMids: Set<Int32> = []
        var expectedMids: Set<Int32> = []
    }

    public let options: Options
    private let client: MqttClient
    private let data = Locked(Data())
    private let journal: Journal?
    /// Called for notable events (onboarding, results, state), on the MQTT thread.
    public var onEvent: (@Sendable (String) -> Void)?

    public init?(_ options: Options) {
        guard let c = MqttClient(clientID: "thingif-hub-\(Platform.randomHex(bytes: 6))", cleanStart: true) else {
            return nil
        }
        self.options = options
        self.client = c
        if let dir = options.storageDirectory {
            guard let storage = Storage(directory: dir) else { return nil }
            journal = Journal(storage: storage, name: "framework.jsonl")
            let records = journal!.load()
            data.withLock { d in for r in records { FrameworkSide.replay(r, into: &d) } }
        } else {
            journal = nil
        }
    }

    // MARK: persistence

    /// Appends a record to the journal (when there is one). Called with the
    /// data lock held, so the journal's order is the order of changes.
    private func persist(_ fields: [(String, String)]) {
        guard let journal else { return }
        let r = JSON.object()
        for (k, v) in fields { r.set(k, string: v) }
        _ = journal.append(r)
    }

    private static func replay(_ r: JSON, into d: inout Data) {
        func f(_ k: String) -> String? { r[k]?.stringValue.flatMap { $0.isEmpty ? nil : $0 } }
        switch f("t") {
        case "thing":
            guard let id = f("id"), let token = f("token") else { return }
            d.things[id] = ThingRecord(thingID: id, vendorThingID: f("vendor"), password: f("password"),
                                       thingType: f("type"), firmwareVersion: f("firmware"), accessToken: token,
                                       installations: [:], state: nil, stateUploads: [])
            if let v = f("vendor") { d.byVendorID[v] = id }
            d.byToken[token] = id
        case "inst":
            guard let id = f("id"), let iid = f("installation"), let topic = f("topic") else { return }
            d.things[id]?.installations[iid] = topic
            d.byTopic[topic] = id
        case "cmd":
            guard let cid = f("command"), let id = f("id"), let p = f("payload") else { return }
            if d.commands.updateValue(id, forKey: cid) == nil { d.commandOrder.append(cid) }
            d.payloads[cid] = Array(p.utf8)
        case "res":
            guard let cid = f("command"), let body = f("body") else { return }
            d.results[cid] = body
            d.resultPosts[cid, default: 0] += 1
        case "state":
            guard let id = f("id"), let body = f("state") else { return }
            d.things[id]?.state = body
        default:
            return
        }
    }

    /// Commands sent to a thing that have no results yet, oldest first.
    public func unanswered(of thingID: String) -> [String] {
        data.withLock { d in d.commandOrder.filter { d.commands[$0] == thingID && d.results[$0] == nil } }
    }

    /// Publishes again every command of the thing that has no results: the
    /// thing runs each at most once, so this only fills gaps.
    @discardableResult
    public func resendUnanswered(to thingID: String) -> Int {
        let pending = data.withLock { d in
            d.commandOrder.filter { d.commands[$0] == thingID && d.results[$0] == nil }.compactMap { d.payloads[$0] }
        }
        var sent = 0
        for p in pending where publish(p, to: thingID) { sent += 1 }
        return sent
    }

    // MARK: lifecycle

    /// Connects, subscribes and starts the MQTT thread. Blocks up to `timeoutMs`.
    public func start(timeoutMs: Int = 5000) -> Bool {
        client.onConnect = { [unowned self] rc in
            self.data.withLock { $0.connack = rc }
            guard rc == 0 else { return }
            for topic in Topics.hubSubscriptions(shared: self.options.sharedSubscription) {
                let mid = self.client.subscribe(topic, qos: 1).mid
                self.data.withLock { _ = $0.expectedMids.insert(mid) }
            }
        }
        client.onSubscribe = { [unowned self] mid in self.data.withLock { _ = $0.subscribedMids.insert(mid) } }
        client.onMessage = { [unowned self] m in self.handle(m) }
        guard client.connect(host: options.brokerHost, port: options.brokerPort, keepalive: 30) == MOSQ_ERR_SUCCESS.rawValue,
              client.startThread() == MOSQ_ERR_SUCCESS.rawValue else { return false }
        return wait(timeoutMs: timeoutMs) {
            self.data.withLock { d in
                d.connack == 0 && d.expectedMids.count == Topics.hubSubscriptions(shared: false).count && d.expectedMids.isSubset(of: d.subscribedMids)
            }
        }
    }

    public func stop() {
        client.disconnect()
        _ = client.stopThread(force: false)
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

    // MARK: app-side operations

    /// Onboarding by the app: registers (or finds) the thing and returns its
    /// thingID and access token, to hand over to the device.
    public func onboardByApp(vendorThingID: String, password: String, thingType: String? = nil) -> (thingID: String, accessToken: String)? {
        data.withLock { d in
            switch register(&d, vendorThingID: vendorThingID, password: password, thingType: thingType, firmwareVersion: nil) {
            case .success(let t): return (t.thingID, t.accessToken)
            case .failure: return nil
            }
        }
    }

    public func thing(_ thingID: String) -> ThingRecord? { data.withLock { $0.things[thingID] } }

    public func thing(vendorThingID: String) -> ThingRecord? {
        data.withLock { d in d.byVendorID[vendorThingID].flatMap { d.things[$0] } }
    }

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

    /// Publishes a command to the thing; returns false when the thing or an
    /// MQTT topic for it is unknown.
    public func send(_ command: Command, to thingID: String) -> Bool {
        let payload = command.encode().dumpBytes()
        // Recorded before it is published, so a result can never arrive for
        // a command the framework does not know.
        let known = data.withLock { d -> Bool in
            guard d.things[thingID] != nil else { return false }
            if d.commands.updateValue(thingID, forKey: command.id) == nil { d.commandOrder.append(command.id) }
            d.payloads[command.id] = payload
            persist([("t", "cmd"), ("command", command.id), ("id", thingID),
                     ("payload", String(decoding: payload, as: UTF8.self))])
            return true
        }
        return known && publish(payload, to: thingID)
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
        guard let topic = data.withLock({ d in d.things[thingID]?.installations.values.first }) else { return false }
        return client.publish(topic: topic, payload: payload, qos: 1) == MOSQ_ERR_SUCCESS.rawValue
    }

    public static func newCommandID() -> String { "cmd-" + Platform.randomHex(bytes: 8) }

    /// The action results the thing reported for a command (JSON text).
    public func results(of commandID: String) -> String? { data.withLock { $0.results[commandID] } }

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

    /// Waits until the thing has made at least `count` state uploads.
    public func waitForStateUploads(of thingID: String, count: Int, timeoutMs: Int) -> [(method: String, body: String)] {
        var r: [(method: String, body: String)] = []
        _ = wait(timeoutMs: timeoutMs) {
            r = thing(thingID)?.stateUploads ?? []
            return r.count >= count
        }
        return r
    }

    // MARK: request handling (MQTT thread)

    private func handle(_ m: MqttClient.Message) {
        if let clientID = Topics.parseStatus(m.topic) {
            let up = m.payload == Array("online".utf8)
            let tid = data.withLock { d -> String? in
                guard let tid = d.byTopic[clientID] else { return nil }
                d.online[tid] = up
                return tid
            }
            if let tid {
                onEvent?("\(tid) is \(up ? "online" : "offline")")
                if up {
                    let n = resendUnanswered(to: tid)
                    if n > 0 { onEvent?("sent \(n) unanswered command(s) to \(tid) again") }
                }
            }
            return
        }
        guard let t = Topics.parseRequest(m.topic) else { return }
        let reply: KiiResponse
        var method = "?"
        if let req = KiiRequest.decode(m.payload) {
            method = req.method
            reply = t.appID == options.appID
                ? route(req, t) : error(404, "APP_NOT_FOUND", "app \(t.appID) is not served here")
        } else {
            // Without a Response Topic the answer would go to the request
            // topic, where this hub (or another) would read it again: stay
            // silent rather than answer an answer.
            guard m.responseTopic != nil else { return }
            reply = error(400, "INVALID_INPUT_DATA", "the request is not in Kii's MQTT request format")
        }
        var answer = reply
        if let rid = KiiRequest.decode(m.payload)?.requestID {
            answer.headers.append((KiiFraming.requestIDHeader, rid))
        }
        data.withLock {
            $0.requests.append(RequestRecord(clientID: t.clientID, method: method, path: t.path,
                                             body: String(decoding: KiiRequest.decode(m.payload)?.body ?? [], as: UTF8.self),
                                             status: reply.status))
        }
        // MQTT 3.1.1 clients have no Response Topic: answer on the request topic.
        _ = client.publish(topic: m.responseTopic ?? m.topic, payload: answer.encode(), qos: 1,
                           correlationData: m.correlationData)
    }

    private func error(_ status: Int, _ code: String, _ message: String) -> KiiResponse {
        let body = JSON.object()
        body.set("errorCode", string: code)
        body.set("message", string: message)
        return KiiResponse(status: status, headers: [("Content-Type", MediaType.json)], body: body.dumpBytes())
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
        case (.thingIF, "PUT", 5) where parts[0] == "targets" && parts[2] == "commands" && parts[4] == "action-results":
            return actionResults(req, target: parts[1], commandID: parts[3])
        case (.thingIF, "PUT", 3) where parts[0] == "targets" && parts[2] == "states",
             (.thingIF, "PATCH", 3) where parts[0] == "targets" && parts[2] == "states":
            return state(req, target: parts[1])
        case (.thingIF, "PUT", 3) where parts[0] == "things" && parts[2] == "firmware-version":
            return firmwareVersion(req, thingID: parts[1])
        default:
            return error(404, "NOT_FOUND", "no \(req.method) \(t.path)")
        }
    }

    private enum RegisterError: Error { case wrongPassword, wrongType }

    private func register(_ d: inout Data, vendorThingID: String, password: String, thingType: String?,
                          firmwareVersion: String?) -> Result<ThingRecord, RegisterError> {
        if let id = d.byVendorID[vendorThingID], var t = d.things[id] {
            guard t.password == password else { return .failure(.wrongPassword) }
            if let thingType, let known = t.thingType, known != thingType { return .failure(.wrongType) }
            if let firmwareVersion { t.firmwareVersion = firmwareVersion }
            d.things[id] = t
            return .success(t)
        }
        let thingID = "th." + Platform.randomHex(bytes: 10)
        let t = ThingRecord(thingID: thingID, vendorThingID: vendorThingID, password: password, thingType: thingType,
                            firmwareVersion: firmwareVersion, accessToken: Platform.randomHex(bytes: 20),
                            installations: [:], state: nil, stateUploads: [])
        persist([("t", "thing"), ("id", thingID), ("vendor", vendorThingID), ("password", password),
                 ("type", thingType ?? ""), ("firmware", firmwareVersion ?? ""), ("token", t.accessToken)])
        d.things[thingID] = t
        d.byVendorID[vendorThingID] = thingID
        d.byToken[t.accessToken] = thingID
        return .success(t)
    }

    private func newInstallation(_ d: inout Data, thingID: String) -> (String, MQTTEndpoint)? {
        guard var t = d.things[thingID] else { return nil }
        let installationID = Platform.randomHex(bytes: 10)
        let topic = "t" + Platform.randomHex(bytes: 11)
        t.installations[installationID] = topic
        d.things[thingID] = t
        d.byTopic[topic] = thingID
        persist([("t", "inst"), ("id", thingID), ("installation", installationID), ("topic", topic)])
        return (installationID, endpoint(for: t, installationID: installationID, topic: topic))
    }

    private func endpoint(for t: ThingRecord, installationID: String, topic: String) -> MQTTEndpoint {
        MQTTEndpoint(installationID: installationID, host: options.advertisedHost ?? options.brokerHost,
                     portTCP: options.advertisedPort ?? options.brokerPort, portSSL: 0, username: t.thingID,
                     password: t.accessToken, mqttTopic: topic, ttl: 2_147_483_647)
    }

    private func onboardByThing(_ req: KiiRequest) -> KiiResponse {
        guard req.header("Content-Type") == MediaType.onboardingByThing else {
            return error(415, "UNSUPPORTED_MEDIA_TYPE", "Content-Type must be \(MediaType.onboardingByThing)")
        }
        guard case .success(let j) = JSON.parse(req.body), let o = OnboardingRequest.decode(j) else {
            return error(400, "INVALID_INPUT_DATA", "vendorThingID and thingPassword are required strings")
        }
        let outcome: Result<(ThingRecord, String, MQTTEndpoint), RegisterError> = data.withLock { d in
            switch register(&d, vendorThingID: o.vendorThingID, password: o.thingPassword, thingType: o.thingType,
                            firmwareVersion: o.firmwareVersion) {
            case .failure(let e): return .failure(e)
            case .success(let t):
                let (iid, ep) = newInstallation(&d, thingID: t.thingID)!
                return .success((d.things[t.thingID]!, iid, ep))
            }
        }
        switch outcome {
        case .failure(.wrongPassword):
            return error(403, "WRONG_PASSWORD", "the password of \(o.vendorThingID) does not match")
        case .failure(.wrongType):
            return error(409, "THING_TYPE_MISMATCH", "\(o.vendorThingID) is registered with another thingType")
        case .success(let (t, _, ep)):
            onEvent?("onboarded \(o.vendorThingID) as \(t.thingID), commands on \(ep.mqttTopic)")
            return ok(200, OnboardingResponse(thingID: t.thingID, accessToken: t.accessToken, mqttEndpoint: ep).encode())
        }
    }

    /// The thing whose token the request carries, or a 401.
    private enum Auth {
        case success(ThingRecord)
        case failure(KiiResponse)
    }

    private func authenticate(_ req: KiiRequest) -> Auth {
        guard let token = req.bearerToken else {
            return .failure(error(401, "UNAUTHORIZED", "an Authorization: Bearer token is required"))
        }
        guard let t = data.withLock({ d in d.byToken[token].flatMap { d.things[$0] } }) else {
            return .failure(error(401, "INVALID_ACCESS_TOKEN", "the access token is not valid"))
        }
        return .success(t)
    }

    private func authorize(_ req: KiiRequest, thingID: String) -> KiiResponse? {
        switch authenticate(req) {
        case .failure(let r): return r
        case .success(let t):
            return t.thingID == thingID ? nil : error(403, "FORBIDDEN", "the token does not belong to \(thingID)")
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
        guard let (iid, _) = data.withLock({ newInstallation(&$0, thingID: t.thingID) }) else {
            return error(404, "THING_NOT_FOUND", "no thing \(t.thingID)")
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
        return ok(200, endpoint(for: t, installationID: installationID, topic: topic).encode())
    }

    private func thingID(fromTarget target: String) -> String? {
        target.hasPrefix("thing:") ? String(target.dropFirst(6)) : nil
    }

    private func actionResults(_ req: KiiRequest, target: String, commandID: String) -> KiiResponse {
        guard let tid = thingID(fromTarget: target) else { return error(404, "TARGET_NOT_FOUND", "no target \(target)") }
        if let denied = authorize(req, thingID: tid) { return denied }
        guard case .success(let j) = JSON.parse(req.body), ActionResults.decode(j) != nil else {
            return error(400, "INVALID_INPUT_DATA", "the body must be {\"actionResults\":[…]}")
        }
        let text = j.dump()
        let first = data.withLock { d -> Bool in
            d.resultPosts[commandID, default: 0] += 1
            guard d.results[commandID] == nil else { return false }
            d.results[commandID] = text
            persist([("t", "res"), ("command", commandID), ("body", text)])
            return true
        }
        // Results are idempotent by commandID: a repeat is accepted and ignored.
        if first { onEvent?("results of \(commandID) from \(tid): \(text)") }
        return ok(204)
    }

    private func state(_ req: KiiRequest, target: String) -> KiiResponse {
        guard let tid = thingID(fromTarget: target) else { return error(404, "TARGET_NOT_FOUND", "no target \(target)") }
        if let denied = authorize(req, thingID: tid) { return denied }
        guard case .success(let j) = JSON.parse(req.body), j.isObject else {
            return error(400, "INVALID_INPUT_DATA", "the state must be a JSON object")
        }
        let text = data.withLock { d -> String in
            var t = d.things[tid]!
            var merged = j
            if req.method == "PATCH", let old = t.state, case .success(let o) = JSON.parse(old) {
                json_object_update(o.raw, j.raw)
                merged = o
            }
            t.state = merged.dump()
            t.stateUploads.append((req.method, j.dump()))
            d.things[tid] = t
            persist([("t", "state"), ("id", tid), ("state", t.state!)])
            return t.state!
        }
        onEvent?("state of \(tid): \(text)")
        return ok(204)
    }

    private func firmwareVersion(_ req: KiiRequest, thingID tid: String) -> KiiResponse {
        if let denied = authorize(req, thingID: tid) { return denied }
        guard case .success(let j) = JSON.parse(req.body), let v = j["firmwareVersion"]?.stringValue, !v.isEmpty else {
            return error(400, "INVALID_INPUT_DATA", "firmwareVersion must be a non-empty string")
        }
        data.withLock { $0.things[tid]?.firmwareVersion = v }
        onEvent?("firmware version of \(tid): \(v)")
        return ok(204)
    }

    private func quote(_ s: String) -> String { JSON.string(s)?.dump() ?? "\"\"" }
}
