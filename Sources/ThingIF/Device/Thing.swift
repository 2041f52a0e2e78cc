import CThingIF

#if canImport(Glibc)
import Glibc
#endif

/// The engine behind one `thingif_t`: identity, connection, command
/// dispatch, requests to the framework. The C facade only converts types and
/// calls in here.
///
/// Threads: any thread may call the public-facing methods. Network events
/// are processed only inside `loopOnce`, on the loop thread; user callbacks
/// run there too and never with `shared` locked.
final class Thing: @unchecked Sendable {
    struct Config {
        var host = "127.0.0.1"
        var port = 1883
        var tls: (cafile: String, certfile: String?, keyfile: String?)?
        var maxPayload = 65536
        /// THINGIF_OPT_INBOX_MAX: received messages held before the loop
        /// handles them. At the bound the socket is not read until the loop
        /// has handled one (docs/FAILURE_MODEL.md, "The inbox").
        var inboxMax = Thing.defaultInboxMax
        var keepaliveS = 60
        var requestTimeoutMs = 10_000
        var reconnectMinMs = 500
        var reconnectMaxMs = 30_000
    }

    struct StateProvider {
        var callback: thingif_state_cb
        var intervalMs: Int
        var userdata: UnsafeMutableRawPointer?
        var nextAt: Int64
    }

    struct Shared {
        var config = Config()
        var identity: Identity?
        var handlers = HandlerRegistry()
        var provider: StateProvider?
        /// The thread inside loopOnce, if any.
        var loopThread: pthread_t?
        var ownThread: pthread_t?
        var stopRequested = false
        var client: MqttClient?
        var socketOpen = false
        var connected = false
        var subscribed = false
        var subscribeMid: Int32 = -1
        var reconnectAttempt = 0
        var nextConnectAt: Int64 = 0
        /// Received messages the loop has not handled yet; at most
        /// config.inboxMax (see received(_:)).
        var inbox: [MqttClient.Message] = []
        /// The most messages the inbox has held (a test hook).
        var inboxHighWater = 0
        var requestCounter = 0
        /// Requests waiting for the framework's answer (persisted).
        let outbox: Outbox
        /// The commands taken (persisted).
        let ledger: CommandLedger
        /// When each outbox item was last sent on this connection.
        var sentAt: [String: Int64] = [:]
        /// Commands whose results wait for deferred actions, by commandID.
        var running: [String: RunningCommand] = [:]
        var interruptedReported = false
        /// Action sets and timer triggers (persisted).
        let automation: Automation
        /// Action sets queued by thingif_action_set_execute(), run by the loop.
        var pendingSets: [String] = []
        /// thingif_set_clock(); nil: the system clock.
        var clock: (callback: thingif_clock_cb, userdata: UnsafeMutableRawPointer?)?

        init(outbox: Outbox, ledger: CommandLedger, automation: Automation) {
            self.outbox = outbox
            self.ledger = ledger
            self.automation = automation
        }
    }

    static let identityFile = "identity.json"
    static let sessionExpiryS: UInt32 = 7 * 24 * 3600
    static let sendBatch = 64
    static let defaultOutboxCapacity = 256
    static let defaultLedgerCapacity = 1000
    static let defaultInboxMax = 64

    let appID: String
    let appKey: String
    let storage: Storage
    let logger = Logger()
    let shared: Locked<Shared>
    /// Per-handle prefix of request IDs, so replies of an older run are not
    /// taken for this one's.
    let requestPrefix = Platform.randomHex(bytes: 4)
    /// C copy of the thingID for thingif_thing_id().
    private let thingIDCString = Locked<UnsafeMutablePointer<CChar>?>(nil)

    init?(appID: String, appKey: String, storageDir: String) {
        guard let s = Storage(directory: storageDir) else { return nil }
        self.appID = appID
        self.appKey = appKey
        self.storage = s
        shared = Locked(Shared(outbox: Outbox(storage: s, capacity: Thing.defaultOutboxCapacity),
                              ledger: CommandLedger(storage: s, capacity: Thing.defaultLedgerCapacity),
                              automation: Automation(storage: s)))
        if let problem = shared.withLock({ $0.automation.loadProblem }) { logger.error(problem) }
    }

    deinit {
        thingIDCString.withLock { free($0) }
    }

    // MARK: thread checks

    var isOnLoopThread: Bool {
        let me = pthread_self()
        return shared.withLock { s in s.loopThread.map { pthread_equal($0, me) != 0 } ?? false }
    }

    // MARK: configuration

    func configure(_ body: (inout Config) -> Int32) -> Int32 {
        shared.withLock { body(&$0.config) }
    }

    var config: Config { shared.withLock { $0.config } }

    // MARK: identity

    var thingIDPointer: UnsafePointer<CChar>? {
        thingIDCString.withLock { UnsafePointer($0) }
    }

    private func adopt(_ identity: Identity) {
        let previous = shared.withLock { s -> MqttClient? in
            let old = s.identity
            s.identity = identity
            guard old != identity else { return nil }
            // A new identity needs a new connection.
            s.reconnectAttempt = 0
            return Thing.detachClient(&s)
        }
        previous?.disconnect()
        thingIDCString.withLock { p in
            free(p)
            p = strdup(identity.thingID)
        }
    }

    private func storedIdentity() -> Identity? {
        guard let bytes = storage.read(Thing.identityFile), case .success(let j) = JSON.parse(bytes),
              let id = Identity.decode(j), id.appID == appID else { return nil }
        return id
    }

    private func store(_ identity: Identity) -> Bool {
        storage.write(Thing.identityFile, identity.encode().dumpBytes())
    }

    /// True while thingif_loop_start's thread runs or a thread is inside thingif_loop().
    var isLoopRunning: Bool { shared.withLock { $0.ownThread != nil || $0.loopThread != nil } }

    private func checkCanBlock() -> Int32 {
        if isOnLoopThread { return THINGIF_ERR_IN_CALLBACK.code }
        if isLoopRunning { return THINGIF_ERR_STATE.code }
        return OK
    }

    /// Onboarding by the thing (POST onboardings on a bootstrap connection).
    func onboard(vendorThingID: String, password: String, thingType: String?, firmwareVersion: String?,
                 properties: JSON?) -> Int32 {
        let rc = checkCanBlock()
        guard rc == OK else { return rc }
        if let stored = storedIdentity(), stored.vendorThingID == vendorThingID {
            logger.info("using the stored onboarding of \(vendorThingID): thing \(stored.thingID)")
            adopt(stored)
            return OK
        }
        let request = OnboardingRequest(vendorThingID: vendorThingID, thingPassword: password, thingType: thingType,
                                        firmwareVersion: firmwareVersion, thingProperties: properties)
        let session = BootstrapSession(thing: self, budgetMs: config.requestTimeoutMs)
        defer { session.close() }
        var status = session.open()
        guard status == OK else { return status }
        let reply: KiiResponse
        switch session.request(api: .thingIF, path: "onboardings", method: "POST", token: nil,
                               contentType: MediaType.onboardingByThing, body: request.encode().dumpBytes()) {
        case .failure(let e): return e.code
        case .success(let r): reply = r
        }
        guard reply.isSuccess else {
            logger.error("onboarding of \(vendorThingID) rejected: \(reply.status) \(reply.bodyText)")
            return THINGIF_ERR_REJECTED.code
        }
        guard case .success(let body) = JSON.parse(reply.body), let answer = OnboardingResponse.decode(body) else {
            logger.error("onboarding of \(vendorThingID): malformed answer: \(reply.bodyText)")
            return THINGIF_ERR_PROTOCOL.code
        }
        let identity = Identity(appID: appID, vendorThingID: vendorThingID, thingID: answer.thingID,
                                accessToken: answer.accessToken, endpoint: answer.mqttEndpoint)
        status = store(identity) ? OK : THINGIF_ERR_STORAGE.code
        guard status == OK else {
            logger.error("cannot write \(storage.path(Thing.identityFile))")
            return status
        }
        logger.info("onboarded \(vendorThingID) as thing \(answer.thingID)")
        adopt(identity)
        return OK
    }

    /// A thingID + token handed over by the app: create one installation and
    /// read its MQTT endpoint (Kii's thing SDK flow), unless stored.
    func useOnboarded(thingID: String, accessToken: String) -> Int32 {
        let rc = checkCanBlock()
        guard rc == OK else { return rc }
        if let stored = storedIdentity(), stored.thingID == thingID, stored.accessToken == accessToken {
            logger.info("using the stored MQTT installation of thing \(thingID)")
            adopt(stored)
            return OK
        }
        let session = BootstrapSession(thing: self, budgetMs: 2 * config.requestTimeoutMs)
        defer { session.close() }
        let status = session.open()
        guard status == OK else { return status }
        let body = JSON.object()
        body.set("deviceType", string: "MQTT")
        let created: KiiResponse
        switch session.request(api: .kii, path: "installations", method: "POST", token: accessToken,
                               contentType: MediaType.installationCreation, body: body.dumpBytes()) {
        case .failure(let e): return e.code
        case .success(let r): created = r
        }
        guard created.isSuccess else {
            logger.error("installation for thing \(thingID) rejected: \(created.status) \(created.bodyText)")
            return THINGIF_ERR_REJECTED.code
        }
        guard case .success(let cj) = JSON.parse(created.body), let installationID = cj["installationID"]?.stringValue,
              Topics.isSafeLevel(installationID) else {
            logger.error("installation for thing \(thingID): malformed answer: \(created.bodyText)")
            return THINGIF_ERR_PROTOCOL.code
        }
        var endpointReply: KiiResponse?
        for attempt in 0..<5 {
            switch session.request(api: .kii, path: "installations/\(installationID)/mqtt-endpoint", method: "GET",
                                   token: accessToken, contentType: nil, body: []) {
            case .failure(let e): return e.code
            case .success(let r):
                // Kii answers 503 while the endpoint is being prepared.
                let pause = 200 << attempt
                if r.status == 503 && attempt < 4 && Platform.nowMs() + Int64(pause) < session.deadline {
                    Platform.sleepMs(pause)
                    continue
                }
                endpointReply = r
            }
            break
        }
        guard let er = endpointReply, er.isSuccess else {
            logger.error("MQTT endpoint of thing \(thingID) refused: \(endpointReply?.status ?? 0) \(endpointReply?.bodyText ?? "")")
            return THINGIF_ERR_REJECTED.code
        }
        guard case .success(let ej) = JSON.parse(er.body), let endpoint = MQTTEndpoint.decode(ej) else {
            logger.error("MQTT endpoint of thing \(thingID): malformed answer: \(er.bodyText)")
            return THINGIF_ERR_PROTOCOL.code
        }
        let identity = Identity(appID: appID, vendorThingID: nil, thingID: thingID, accessToken: accessToken,
                                endpoint: endpoint)
        guard store(identity) else {
            logger.error("cannot write \(storage.path(Thing.identityFile))")
            return THINGIF_ERR_STORAGE.code
        }
        logger.info("thing \(thingID) uses MQTT installation \(endpoint.installationID)")
        adopt(identity)
        return OK
    }

    // MARK: handlers

    func withHandlers(_ body: (inout HandlerRegistry) -> Void) {
        shared.withLock { body(&$0.handlers) }
    }

    func setStateProvider(_ cb: thingif_state_cb?, intervalMs: Int, userdata: UnsafeMutableRawPointer?) {
        shared.withLock {
            $0.provider = cb.map {
                StateProvider(callback: $0, intervalMs: intervalMs, userdata: userdata,
                              nextAt: Platform.nowMs() + Int64(intervalMs))
            }
        }
    }

    // MARK: requests to the framework

    /// Persists a request in the outbox and sends it at once when connected;
    /// otherwise it goes out after the next connection. It stays in the
    /// outbox, and is sent again after each reconnect or request timeout,
    /// until the framework answers it.
    func sendRequest(method: String, path: String, contentType: String?, body: [UInt8], what: String,
                     kind: Outbox.Kind) -> Int32 {
        var notes: [String] = []
        let outcome = shared.withLock { s -> Result<(Outbox.Item, MqttClient, Identity)?, StatusError> in
            guard let id = s.identity else { return .failure(StatusError(THINGIF_ERR_NOT_ONBOARDED.code)) }
            let item = Outbox.Item(id: newRequestID(&s), method: method, path: path, contentType: contentType,
                                   body: body, what: what, kind: kind)
            switch s.outbox.add(item) {
            case nil:
                notes.append("cannot write the outbox in \(storage.directory); \(what) not sent")
                return .failure(StatusError(THINGIF_ERR_STORAGE.code))
            case .full?:
                notes.append("outbox full (\(s.outbox.capacity) requests waiting for the framework); \(what) refused")
                return .failure(StatusError(THINGIF_ERR_FULL.code))
            case .added(let dropped, let superseded)?:
                for old in dropped {
                    s.sentAt[old.id] = nil
                    if !superseded { notes.append("outbox full: dropped the oldest state upload, \(old.what)") }
                }
            }
            guard s.connected, let c = s.client else { return .success(nil) }
            s.sentAt[item.id] = Platform.nowMs()
            return .success((item, c, id))
        }
        for n in notes { logger.warning(n) }
        switch outcome {
        case .failure(let e): return e.code
        case .success(let ready):
            if let (item, client, identity) = ready { publish(item, on: client, identity: identity) }
            return OK
        }
    }

    private func newRequestID(_ s: inout Shared) -> String {
        s.requestCounter += 1
        return "\(requestPrefix)-\(s.requestCounter)"
    }

    private func publish(_ item: Outbox.Item, on client: MqttClient, identity: Identity) {
        var headers: [(name: String, value: String)] = [("Authorization", "Bearer \(identity.accessToken)")]
        if let ct = item.contentType { headers.append(("Content-Type", ct)) }
        headers.append((KiiFraming.requestIDHeader, item.id))
        let payload = KiiRequest(method: item.method, headers: headers, body: item.body).encode()
        let rc = client.publish(topic: Topics.request(clientID: client.clientID, appID: appID, path: item.path),
                                payload: payload, qos: 1, responseTopic: Topics.response(clientID: client.clientID),
                                correlationData: Array(item.id.utf8))
        if rc == MOSQ_ERR_SUCCESS.rawValue {
            logger.debug("sent \(item.what) (request \(item.id))")
        } else {
            // sentAt stays set: the next try comes after the request timeout,
            // and the items behind this one are not held up.
            logger.warning("could not send \(item.what) now (\(MqttClient.describe(rc))); it stays in the outbox")
        }
    }

    /// Sends every outbox item not sent on this connection, or sent longer
    /// ago than the request timeout without an answer.
    private func sendDue() {
        let now = Platform.nowMs()
        var late: [String] = []
        let batch = shared.withLock { s -> ([Outbox.Item], MqttClient, Identity)? in
            guard s.connected, let c = s.client, let id = s.identity else { return nil }
            let timeout = Int64(s.config.requestTimeoutMs)
            var due: [Outbox.Item] = []
            for item in s.outbox.items where due.count < Thing.sendBatch {
                if let sent = s.sentAt[item.id] {
                    guard now - sent >= timeout else { continue }
                    late.append(item.what)
                }
                s.sentAt[item.id] = now
                due.append(item)
            }
            return (due, c, id)
        }
        for w in late { logger.warning("no answer from the framework to \(w); sending it again") }
        guard let (items, client, identity) = batch else { return }
        for item in items { publish(item, on: client, identity: identity) }
    }

    func updateState(_ state: JSON, partial: Bool) -> Int32 {
        guard let tid = shared.withLock({ $0.identity?.thingID }) else { return THINGIF_ERR_NOT_ONBOARDED.code }
        return sendRequest(method: partial ? "PATCH" : "PUT", path: "targets/thing:\(tid)/states",
                           contentType: MediaType.json, body: state.dumpBytes(),
                           what: partial ? "partial state" : "state", kind: .state)
    }

    func updateFirmwareVersion(_ version: String) -> Int32 {
        guard let tid = shared.withLock({ $0.identity?.thingID }) else { return THINGIF_ERR_NOT_ONBOARDED.code }
        let body = JSON.object()
        body.set("firmwareVersion", string: version)
        return sendRequest(method: "PUT", path: "things/\(tid)/firmware-version",
                           contentType: "application/vnd.kii.ThingFirmwareVersionUpdateRequest+json",
                           body: body.dumpBytes(), what: "firmware version \(version)", kind: .other)
    }

    // MARK: the loop

    /// One turn of the loop on the calling thread.
    func loop(timeoutMs: Int) -> Int32 {
        let me = pthread_self()
        let entry = shared.withLock { s -> Int32 in
            if let t = s.loopThread { return pthread_equal(t, me) != 0 ? THINGIF_ERR_IN_CALLBACK.code : THINGIF_ERR_STATE.code }
            if let own = s.ownThread, pthread_equal(own, me) == 0 { return THINGIF_ERR_STATE.code }
            guard s.identity != nil else { return THINGIF_ERR_NOT_ONBOARDED.code }
            s.loopThread = me
            return OK
        }
        guard entry == OK else { return entry }
        defer { shared.withLock { $0.loopThread = nil } }
        return turn(timeoutMs: timeoutMs)
    }

    private func turn(timeoutMs: Int) -> Int32 {
        // Timers and queued action sets run offline too: their reports wait
        // in the outbox.
        runAutomation()
        let now = Platform.nowMs()
        let (open, wait) = shared.withLock { s -> (Bool, Int64) in (s.socketOpen, s.nextConnectAt - now) }
        if !open {
            if wait > 0 {
                Platform.sleepMs(Int(min(Int64(timeoutMs), wait)))
                return THINGIF_ERR_NO_CONN.code
            }
            guard connect() else { return THINGIF_ERR_NO_CONN.code }
        }
        // At the inbox bound the socket is not read: the broker holds what
        // follows (received(_:) keeps this from happening in practice).
        let (clientOpt, inboxFull) = shared.withLock { ($0.client, $0.inbox.count >= $0.config.inboxMax) }
        if !inboxFull, let client = clientOpt {
            let rc = client.loop(timeoutMs: timeoutMs)
            if rc != MOSQ_ERR_SUCCESS.rawValue {
                // libmosquitto does the TLS handshake inside the loop: a
                // failure before CONNACK is a handshake that failed (wrong
                // CA, refused certificate). An error, then quiet retries.
                if rc == MOSQ_ERR_TLS.rawValue && !shared.withLock({ $0.connected }) {
                    connectionLost("TLS handshake with the broker failed (\(MqttClient.describe(rc))); retrying after the backoff, never without TLS",
                                   handshake: true)
                } else {
                    connectionLost("connection to the broker lost: \(MqttClient.describe(rc))")
                }
            }
        }
        reportInterrupted()
        processInbox()
        runStateProvider()
        sendDue()
        return shared.withLock { $0.connected && $0.subscribed } ? OK : THINGIF_ERR_NO_CONN.code
    }

    private func scheduleReconnect(_ s: inout Shared) {
        // Full jitter: a uniform wait in [min, min(max, min * 2^attempt)].
        let cap = min(s.config.reconnectMaxMs, s.config.reconnectMinMs << min(s.reconnectAttempt, 20))
        let waitMs = Int.random(in: s.config.reconnectMinMs...max(s.config.reconnectMinMs, cap))
        s.reconnectAttempt += 1
        s.nextConnectAt = Platform.nowMs() + Int64(waitMs)
    }

    private func connectionLost(_ why: String, handshake: Bool = false) {
        // Both the loop's error and libmosquitto's disconnect callback report
        // one loss; only the first counts for the backoff.
        let attempt = shared.withLock { s -> Int? in
            guard s.socketOpen else { return nil }
            s.socketOpen = false
            s.connected = false
            s.subscribed = false
            s.sentAt.removeAll()
            scheduleReconnect(&s)
            return s.reconnectAttempt
        }
        guard let attempt else { return }
        if !handshake {
            logger.warning(why)
        } else if attempt <= 1 {
            logger.error(why)
        } else {
            logger.debug(why)
        }
    }

    /// Opens the thing's connection. CONNACK arrives in a later loop call.
    private func connect() -> Bool {
        let (identityOpt, config, existing) = shared.withLock { ($0.identity, $0.config, $0.client) }
        guard let identity = identityOpt else { return false }
        let ep = identity.endpoint
        let client: MqttClient
        if let existing {
            client = existing
        } else {
            guard let c = MqttClient(clientID: ep.mqttTopic, cleanStart: false) else {
                logger.error("cannot create an MQTT client")
                shared.withLock { scheduleReconnect(&$0) }
                return false
            }
            client = c
            _ = client.setCredentials(username: ep.username.isEmpty ? nil : ep.username,
                                      password: ep.password.isEmpty ? nil : ep.password)
            if let tls = config.tls {
                // Never a plain-text connection once TLS is set: a TLS setup
                // that fails is retried with the backoff, like a refused one.
                let rc = client.setTLS(cafile: tls.cafile, certfile: tls.certfile, keyfile: tls.keyfile)
                if rc != MOSQ_ERR_SUCCESS.rawValue {
                    let attempt = shared.withLock { s -> Int in
                        scheduleReconnect(&s)
                        return s.reconnectAttempt
                    }
                    let line = "TLS setup failed (\(MqttClient.describe(rc))); not connecting without TLS"
                    if attempt <= 1 { logger.error(line) } else { logger.debug(line) }
                    return false
                }
            }
            _ = client.setWill(topic: Topics.status(clientID: ep.mqttTopic), payload: Array("offline".utf8))
            client.onConnect = { [unowned self, unowned client] rc in self.connected(rc, client: client) }
            client.onDisconnect = { [unowned self] rc in
                self.connectionLost("disconnected from the broker: \(MqttClient.describeConnack(rc))")
            }
            client.onSubscribe = { [unowned self, unowned client] mid in
                let ready = self.shared.withLock { s -> Bool in
                    guard mid == s.subscribeMid else { return false }
                    s.subscribed = true
                    return true
                }
                // The birth message follows the last SUBACK, so "online" at the
                // framework means the thing's subscriptions are in place.
                if ready {
                    _ = client.publish(topic: Topics.status(clientID: client.clientID), payload: Array("online".utf8),
                                       qos: 1, retain: true)
                }
            }
            client.onMessage = { [unowned self] m in self.received(m) }
            client.onLog = { [unowned self] line in self.logger.debug("mqtt: \(line)") }
            shared.withLock { $0.client = client }
        }
        let host = ep.host.isEmpty ? config.host : ep.host
        let port = Thing.port(of: ep, config: config)
        let rc = client.connect(host: host, port: port, keepalive: config.keepaliveS, sessionExpiry: Thing.sessionExpiryS)
        if rc != MOSQ_ERR_SUCCESS.rawValue {
            let attempt = shared.withLock { s -> Int in
                scheduleReconnect(&s)
                return s.reconnectAttempt
            }
            if rc == MOSQ_ERR_TLS.rawValue {
                // The handshake may finish inside connect (or in the loop:
                // see turn()); either way the same line.
                let line = "TLS handshake with the broker failed (\(host):\(port): \(MqttClient.describe(rc))); retrying after the backoff, never without TLS"
                if attempt <= 1 { logger.error(line) } else { logger.debug(line) }
                return false
            }
            let tls = config.tls != nil ? " (TLS)" : ""
            let line = "cannot connect to \(host):\(port)\(tls): \(MqttClient.describe(rc))"
            if attempt <= 1 { logger.warning(line) } else { logger.debug(line) }
            return false
        }
        shared.withLock { $0.socketOpen = true }
        logger.debug("connecting to \(host):\(port) as \(ep.mqttTopic)")
        return true
    }

    /// The thing's port: with TLS, the endpoint's portSSL when it gives one,
    /// else thingif_set_broker's port, never portTCP; without TLS, portTCP
    /// when given, else thingif_set_broker's port.
    static func port(of ep: MQTTEndpoint, config: Config) -> Int {
        if config.tls != nil { return ep.portSSL > 0 ? ep.portSSL : config.port }
        return ep.portTCP > 0 ? ep.portTCP : config.port
    }

    /// Drops the connection, so that the next one is made with the current
    /// configuration (thingif_set_tls after onboarding). Not while a loop runs.
    func resetConnection() {
        shared.withLock { Thing.detachClient(&$0) }?.disconnect()
    }

    /// Forgets the connection (the caller disconnects the client returned),
    /// so that the next loop turn connects anew at once.
    private static func detachClient(_ s: inout Shared) -> MqttClient? {
        let c = s.client
        s.client = nil
        s.socketOpen = false
        s.connected = false
        s.subscribed = false
        s.nextConnectAt = 0
        return c
    }

    /// CONNACK (on the loop thread, inside libmosquitto's loop).
    private func connected(_ rc: Int32, client: MqttClient) {
        guard rc == 0 else {
            // The socket closes next; connectionLost schedules the retry, and
            // the backoff keeps growing until a CONNACK succeeds.
            logger.error("the broker refused the connection: \(MqttClient.describeConnack(rc))")
            return
        }
        let topic = client.clientID
        _ = client.subscribe(topic, qos: 1)
        _ = client.subscribe(Thing.configTopic(clientID: topic), qos: 1)
        let (_, mid) = client.subscribe(Topics.response(clientID: topic), qos: 1)
        shared.withLock { s in
            s.connected = true
            s.subscribeMid = mid
            s.reconnectAttempt = 0
            s.sentAt.removeAll()
        }
        logger.info("connected; commands arrive on \(topic)")
        sendDue()
    }

    // MARK: inbound

    /// A message from libmosquitto (loop thread, inside client.loop). One
    /// over THINGIF_OPT_MAX_PAYLOAD is dropped here, whatever its topic,
    /// before anything parses it. When the inbox reaches its bound, the
    /// loop handles messages now, before libmosquitto reads the next packet:
    /// the inbox never holds more than config.inboxMax, nothing is dropped,
    /// and while a slow handler runs the socket is not read, so the broker
    /// (and TCP) hold what follows.
    func received(_ m: MqttClient.Message) {
        let outcome = shared.withLock { s -> (oversize: Int?, full: Bool) in
            if m.payload.count > s.config.maxPayload { return (s.config.maxPayload, false) }
            s.inbox.append(m)
            s.inboxHighWater = max(s.inboxHighWater, s.inbox.count)
            return (nil, s.inbox.count >= s.config.inboxMax)
        }
        if let limit = outcome.oversize {
            logger.error("dropped a message of \(m.payload.count) bytes on \(m.topic): over the limit of \(limit) bytes (THINGIF_OPT_MAX_PAYLOAD)")
            return
        }
        if outcome.full { processInbox() }
    }

    private func processInbox() {
        while true {
            let next = shared.withLock { s -> (MqttClient.Message, Identity, Int)? in
                guard let id = s.identity else { return nil }
                // Results are never dropped: while they fill the outbox, new
                // commands wait here until the framework answers. The replies
                // behind them are taken, since they are what empties it. A
                // full inbox runs its commands anyway (results may exceed the
                // outbox's capacity): otherwise the socket would stay unread
                // and the replies that empty the outbox would never come.
                let commandsWait = s.outbox.resultCount >= s.outbox.capacity && s.inbox.count < s.config.inboxMax
                guard let i = s.inbox.firstIndex(where: { !commandsWait || $0.topic != id.endpoint.mqttTopic })
                else { return nil }
                return (s.inbox.remove(at: i), id, s.config.maxPayload)
            }
            guard let (message, identity, maxPayload) = next else { return }
            let topic = identity.endpoint.mqttTopic
            if message.topic == Topics.response(clientID: topic) {
                handleReply(message)
            } else if message.topic == topic {
                handleCommand(message.payload, identity: identity, maxPayload: maxPayload)
            } else if message.topic == Thing.configTopic(clientID: topic) {
                applyRemoteConfig(message.payload)
            } else {
                logger.debug("ignored a message on \(message.topic)")
            }
        }
    }

    private func handleReply(_ m: MqttClient.Message) {
        guard let reply = KiiResponse.decode(m.payload) else {
            logger.warning("ignored a malformed reply of \(m.payload.count) bytes")
            return
        }
        let rid = m.correlationData.map { String(decoding: $0, as: UTF8.self) } ?? reply.requestID ?? ""
        // 2xx: done. 4xx: the request itself is wrong and sending it again
        // cannot help. 5xx: keep it; it goes out again after the timeout.
        let retry = reply.status >= 500
        let item = shared.withLock { s -> Outbox.Item? in
            guard let item = s.outbox.item(rid) else { return nil }
            if !retry {
                s.outbox.ack(rid)
                s.sentAt[rid] = nil
            }
            return item
        }
        guard let item else {
            logger.debug("ignored a reply to unknown request \(rid)")
            return
        }
        if reply.isSuccess {
            logger.debug("framework accepted \(item.what): \(reply.status)")
        } else if retry {
            logger.warning("framework failed on \(item.what): \(reply.status) \(reply.bodyText); it will be sent again")
        } else {
            logger.error("framework rejected \(item.what): \(reply.status) \(reply.bodyText)")
        }
    }

    private func runStateProvider() {
        let now = Platform.nowMs()
        let due = shared.withLock { s -> StateProvider? in
            guard s.connected, var p = s.provider, p.nextAt <= now else { return nil }
            p.nextAt = now + Int64(p.intervalMs)
            s.provider = p
            return p
        }
        guard let p = due else { return }
        let handle = OpaquePointer(Unmanaged.passUnretained(self).toOpaque())
        guard let state = p.callback(handle, p.userdata) else { return }
        let j = JSON(owning: state)
        guard j.isObject else {
            logger.error("the state provider returned \(j.typeName), not an object; skipped")
            return
        }
        _ = updateState(j, partial: false)
    }

    // MARK: own thread

    func startThread() -> Int32 {
        if isOnLoopThread { return THINGIF_ERR_IN_CALLBACK.code }
        let ok = shared.withLock { s -> Int32 in
            if s.ownThread != nil || s.loopThread != nil { return THINGIF_ERR_STATE.code }
            if s.identity == nil { return THINGIF_ERR_NOT_ONBOARDED.code }
            s.stopRequested = false
            return OK
        }
        guard ok == OK else { return ok }
        var tid = pthread_t()
        let arg = Unmanaged.passUnretained(self).toOpaque()
        // Hold the lock over creation so the thread sees ownThread set.
        let rc = shared.withLock { s -> Int32 in
            let r = pthread_create(&tid, nil, { raw in
                let thing = Unmanaged<Thing>.fromOpaque(raw!).takeUnretainedValue()
                thing.threadMain()
                return nil
            }, arg)
            if r == 0 { s.ownThread = tid }
            return r
        }
        return rc == 0 ? OK : THINGIF_ERR_NOMEM.code
    }

    private func threadMain() {
        while !shared.withLock({ $0.stopRequested }) {
            _ = loop(timeoutMs: 100)
        }
    }

    func stopThread() -> Int32 {
        let me = pthread_self()
        let tid = shared.withLock { s -> Result<pthread_t, StatusError> in
            // Inside a callback of thingif_loop() too, as the header says.
            if let l = s.loopThread, pthread_equal(l, me) != 0 { return .failure(StatusError(THINGIF_ERR_IN_CALLBACK.code)) }
            guard let t = s.ownThread else { return .failure(StatusError(THINGIF_ERR_STATE.code)) }
            if pthread_equal(t, me) != 0 { return .failure(StatusError(THINGIF_ERR_IN_CALLBACK.code)) }
            s.stopRequested = true
            return .success(t)
        }
        switch tid {
        case .failure(let e): return e.code
        case .success(let t):
            pthread_join(t, nil)
            shared.withLock {
                $0.ownThread = nil
                $0.stopRequested = false
            }
            return OK
        }
    }

    /// Stops everything before the handle is freed.
    func shutdown() -> Int32 {
        let me = pthread_self()
        let inCallback = shared.withLock { s -> Bool in
            if let t = s.loopThread, pthread_equal(t, me) != 0 { return true }
            if let t = s.ownThread, pthread_equal(t, me) != 0 { return true }
            return false
        }
        if inCallback { return THINGIF_ERR_IN_CALLBACK.code }
        if shared.withLock({ $0.ownThread != nil }) { _ = stopThread() }
        let client = shared.withLock { s -> MqttClient? in
            let c = s.socketOpen ? s.client : nil
            s.client = nil
            s.socketOpen = false
            s.connected = false
            return c
        }
        if let client {
            // Reason 0x04: disconnect with Will, so the broker publishes "offline".
            client.disconnectWithWill()
            _ = client.loop(timeoutMs: 10)
        }
        return OK
    }
}
