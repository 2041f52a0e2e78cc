// SPDX-License-Identifier: Apache-2.0

import CThingIF

import ThingIF
#if canImport(Glibc)
    import Glibc
#endif

/// The framework side of the protocol over MQTT: it answers onboarding and
/// installation requests, accepts action results, state and firmware
/// versions, and publishes commands to things. What it knows lives in a
/// HubStore (MemoryStore by default; SQLiteStore for thingif-hub). It reuses
/// the device library's wire codec and transport. FrameworkSide+AppAPI.swift adds the app
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
        /// The things' CA (ThingCertificates), read at start(): a thing that
        /// sends a CSR at onboarding gets a client certificate it signs.
        public var thingCA: ThingCAFiles?
        /// Days a thing's certificate is valid.
        public var thingCertDays = ThingCAFiles.defaultDays
        /// The broker listener where things connect with their certificate:
        /// the portSSL of an endpoint that carries one (needed with thingCA).
        public var advertisedCertPort: Int?
        /// Where the hub writes the things' CRL (ThingCRL.swift; needs
        /// thingCA): at start, after each revocation, and daily.
        public var thingCRL: String?
        /// The broker's pid file: after writing the CRL the hub sends that
        /// process SIGHUP (if it is a mosquitto), which makes it read its
        /// crlfile again.
        public var brokerPidFile: String?
        /// Whether the hub keeps things' broker clients in the
        /// dynamic-security plugin (with brokerUsername), or administers
        /// nothing there and hands out certificates only.
        public var brokerAdmin = BrokerAdminMode.dynsec
        /// Requests per MQTT client ID: a burst of `requestBurst`, refilled at
        /// `requestRatePerSecond`; beyond that, 429.
        public var requestRatePerSecond: Double = 200
        public var requestBurst = 2000
        /// Body limits (the same settings as the REST API's).
        public var limits = HubLimits()
        /// The costly work's pool (CostlyWork): threads, and jobs that may wait.
        public var costlyThreads = CostlyWork.defaultThreads
        public var costlyQueue = CostlyWork.defaultQueueLimit
        /// Bootstrap requests over MQTT (onboardings, installations, MQTT
        /// endpoints, whatever the client ID): one global budget; beyond
        /// it they are dropped without a reply (bootstrap_dropped_total).
        public var bootstrapRatePerSecond: Double = 20
        public var bootstrapBurst = 200
        /// Things a thing may create by onboarding itself, app-wide, per
        /// hour (a bucket of this size refilled over the hour); 0: no cap.
        public var thingsCreatedPerHour = 3600
        /// MQTT installations (broker clients) of apps: per user and per app; 0: no cap.
        public var mqttInstallationsPerUser = 16
        public var mqttInstallationsPerApp = 100_000
        /// Claim batches (the last part of a claim certificate's CN,
        /// claim.{appID}.{batch}) whose onboardings the hub refuses: a
        /// batch retired by its operator (docs/SECURITY.md).
        public var refusedClaims: Set<String> = []
        /// Devices onboard only with claim certificates: the hub makes no
        /// bootstrap identity (app ID + app key) in the broker's plugin, and
        /// removes one an earlier start made, so the app key opens nothing.
        public var claimsOnly = false
        /// Onboarding by the thing accepts only vendorThingIDs an operator
        /// registered before (`thingif things import`); false: open (Kii's way).
        public var enrollmentOnly = false
        /// Commands' expiry and the bounds after which an undelivered or
        /// unanswered command ends (CommandLifecycle.swift).
        public var lifetimes = CommandLifetimes()
        /// How long a cancel of a DELIVERED command waits for the thing's
        /// answer (ms) before it answers 202, the cancel pending (§9.1).
        public var cancelWaitMs: Int64 = CommandLifetimes.defaultCancelWaitMs

        public init(
            appID: String, appKey: String, brokerHost: String = "127.0.0.1", brokerPort: Int,
            advertisedHost: String? = nil, advertisedPort: Int? = nil, sharedSubscription: Bool = true,
            brokerUsername: String? = nil, brokerPassword: String? = nil, brokerTLS: TLSFiles? = nil,
            advertisedTLSPort: Int? = nil
        ) {
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

    /// How the broker learns the things' identities.
    public enum BrokerAdminMode: String, Sendable, Equatable {
        /// A client and role per installation in mosquitto's dynamic-security
        /// plugin (a password in each endpoint); with thingCA, certificates
        /// for things that send a CSR.
        case dynsec
        /// Nothing in the broker: things must send a CSR and get a
        /// certificate (needs thingCA); no password is ever handed out.
        case none
    }

    /// The things' CA: a PEM certificate and its PEM private key.
    public struct ThingCAFiles: Sendable, Equatable {
        public var certFile: String
        public var keyFile: String
        public static let defaultDays = 3650
        public static let maxDays = 36_500
        public init(certFile: String, keyFile: String) {
            self.certFile = certFile
            self.keyFile = keyFile
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
    struct Data {
        var requests = RecentLog<RequestRecord>(capacity: FrameworkSide.requestLogSize)
        var online: [String: Bool] = [:]  // thingID -> last status seen
        var commandTopic: [String: String] = [:]  // thingID -> the installation whose "online" came last
        var resultPosts: [String: Int] = [:]  // commandID -> how many times results arrived
        var resultPostOrder = RecentLog<String>(capacity: FrameworkSide.resultCountLimit)  // the same keys (bounded)
        var connack: Int32?
        var subscribedMids: Set<Int32> = []
        var expectedMids: Set<Int32> = []
        var subscriptionRefused = false
        // Delivery (FrameworkSide+Delivery.swift).
        var statusTopics: Set<String> = []  // client IDs that sent a status (thingif's library)
        var reachable: [String: Bool] = [:]  // thingID -> a silent installation had a subscription at the last attempt
        var rounds: [String: DeliveryRound] = [:]  // commandID -> the attempt in flight
        var pendingMids: [Int32: (commandID: String, topic: String)] = [:]
        var finishedRounds: [(String, DeliveryRound)] = []
        var reachedCommands: Set<String> = []  // reached a subscription; not yet marked in the store
        var retries: [String: DeliveryRetry] = [:]  // thingID -> next attempt
        var lifecycleSweepDueMs: Int64 = 0  // the next lifecycle sweep (CommandLifecycle.swift), monotonic ms
    }

    public let options: Options
    public let store: HubStore
    let client: MqttClient
    /// The broker's dynamic-security administration, when the hub has a
    /// broker identity (options.brokerUsername) and brokerAdmin is dynsec.
    let admin: BrokerAdmin?
    /// The things' CA, once start() has read options.thingCA.
    let thingCA = Locked<ThingCertificates?>(nil)
    /// The last CRL written (ThingCRL.swift); held while one is made.
    let crlState = Locked(ThingCRL.State())
    /// Why start() failed, when it did.
    public private(set) var startProblem: String?
    /// Requests kept for tests and logs: the newest ones only.
    public static let requestLogSize = 512
    /// How many commands' result deliveries are counted (the newest).
    public static let resultCountLimit = 20_000
    /// Wrong onboarding passwords per vendorThingID: a burst of 10, then one
    /// per 10 s; past that every attempt gets 429 (password guessing over the
    /// bootstrap identity). Right ones spend nothing: Kii's SDKs onboard at
    /// every start.
    let onboardingLimiter = RateLimiter(ratePerSecond: 0.1, burst: 10)
    /// Password hashing and broker credential hand-outs (CostlyWork): REST
    /// handlers and bootstrap requests over MQTT run them here.
    public let costly: CostlyWork
    /// The global budget of bootstrap requests over MQTT.
    let bootstrapLimiter: RateLimiter
    /// Things created by the thing itself, app-wide (nil: no cap).
    let creationLimiter: RateLimiter?
    let data = Locked(Data())
    /// Called for notable events (onboarding, results, state), on the request thread.
    public var onEvent: (@Sendable (String) -> Void)?
    /// Called when a command's results arrive (once), on the request thread,
    /// and when the hub ends it without results (EXPIRED, CANCELLED:
    /// CommandLifecycle.swift), on the thread that ended it (the delivery
    /// worker, the request thread, or a REST handler's for a cancel); a
    /// command that gets late results after its end is reported twice.
    /// With the command come its notification targets (notificationTargets),
    /// read where the command was written.
    public var onCommandFinished: (@Sendable (CommandRecord, [AppInstallation]) -> Void)?
    var appAPI: AppAPI { AppAPI(hub: self) }
    /// The server triggers: STATES ones run on state uploads; call `tick()`
    /// (thingif-hub does, every second) for the scheduled ones.
    public let triggerEngine = TriggerEngine()
    /// Requests per MQTT client: a thing's burst of state uploads passes,
    /// a flood gets 429.
    public let rateLimiter: RateLimiter
    /// Serializes changes of the things' automation configs.
    let automationLock = Locked(())
    /// The Prometheus metrics (GET /metrics).
    public let metrics = HubMetrics()
    /// Home Assistant's discovery, once enabled (HomeAssistant.swift).
    let homeAssistantBridge = Locked<HomeAssistantBridge?>(nil)
    /// Inbound messages waiting for the request threads (RequestLanes), while started.
    let requestQueue = Locked<RequestLanes?>(nil)
    /// At most this many inbound messages, or this many payload bytes, wait
    /// for the request threads; then the broker holds what follows.
    public static let requestQueueMax = 50_000
    public static let requestQueueMaxBytes = 64 << 20
    /// Held while a tracked command is published and its mid recorded, and
    /// by the PUBACK callback before it looks the mid up. The value counts
    /// the tracked publishes; it is an Int, not Void, because
    /// ThreadSanitizer takes the zero-sized value's accesses for accesses to
    /// the lock's own pointer beside it and reports a race that is none.
    let publishing = Locked(0)
    /// Per thing (striped): held while a command is found open, published
    /// and marked DELIVERED, and while a cancel finds it SENDING and ends
    /// it, so that a cancel answered at the hub alone never overlaps a
    /// publish (CommandLifecycle.swift). Int, not Void: see `publishing`.
    let commandGates: [Locked<Int>] = (0..<64).map { _ in Locked(0) }
    func commandGate(_ thingID: String) -> Locked<Int> {
        var h: UInt32 = 2_166_136_261
        for b in thingID.utf8 { h = (h ^ UInt32(b)) &* 16_777_619 }
        return commandGates[Int(h % UInt32(commandGates.count))]
    }
    /// The delivery worker (deliveryTick), while started.
    let deliveryTicker = Locked<Ticker?>(nil)
    /// Commands whose notification was sent, to be marked in the store
    /// (markNotifiedSoon).
    let notifiedMarks = Locked<[String]>([])

    public init?(_ options: Options, store: HubStore = MemoryStore()) {
        guard let c = MqttClient(clientID: "thingif-hub-\(Platform.randomHex(bytes: 6))", cleanStart: true) else {
            return nil
        }
        self.options = options
        self.client = c
        self.store = store
        rateLimiter = RateLimiter(ratePerSecond: options.requestRatePerSecond, burst: options.requestBurst)
        costly = CostlyWork(threads: options.costlyThreads, queueLimit: options.costlyQueue)
        bootstrapLimiter = RateLimiter(ratePerSecond: options.bootstrapRatePerSecond, burst: options.bootstrapBurst)
        creationLimiter =
            options.thingsCreatedPerHour > 0
            ? RateLimiter(
                ratePerSecond: Double(options.thingsCreatedPerHour) / 3600, burst: options.thingsCreatedPerHour) : nil
        if options.brokerUsername != nil && options.brokerAdmin == .dynsec {
            guard let a = BrokerAdmin(options: options) else { return nil }
            admin = a
        } else {
            admin = nil
        }
        triggerEngine.hub = self
    }

    // MARK: lifecycle

    /// Connects, subscribes and starts the MQTT and request threads. Blocks up to `timeoutMs`.
    public func start(timeoutMs: Int = 5000) -> Bool {
        startProblem = nil
        if let problem = loadThingCA() {
            startProblem = problem
            return false
        }
        // The CRL before anything else: a hub that cannot revoke does not run.
        if let path = options.thingCRL, let problem = publishCRL(force: true) {
            startProblem = "cannot write the things' CRL \(path): \(problem)"
            return false
        }
        costly.open()
        if let tls = options.brokerTLS {
            // Never a plain-text fallback: a TLS setup that fails stops here.
            guard
                client.setTLS(cafile: tls.caFile, certfile: tls.certFile, keyfile: tls.keyFile)
                    == MOSQ_ERR_SUCCESS.rawValue,
                admin?.setTLS(tls) ?? true
            else {
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
            if let problem = admin.provision(
                hubUsername: options.brokerUsername ?? "", appID: options.appID,
                appKey: options.appKey, bootstrap: !options.claimsOnly)
            {
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
            self.homeAssistant?.subscribe()
        }
        client.onSubscribe = { [unowned self] mid in self.data.withLock { _ = $0.subscribedMids.insert(mid) } }
        client.onSubscribeGranted = { [unowned self] _, codes in
            if codes.contains(where: { $0 >= 0x80 }) { self.data.withLock { $0.subscriptionRefused = true } }
        }
        // libmosquitto's thread only queues; request threads handle them,
        // each client's in order (a burst no longer waits in the broker's
        // queue): as many as the store serves calls at once.
        let queue = RequestLanes(
            count: store.concurrentCalls, capacity: Self.requestQueueMax, maxBytes: Self.requestQueueMaxBytes)
        guard queue.start(batch: Self.laneBatchMax, { [unowned self] ms in self.handleLane(ms) }) else {
            startProblem = "cannot start the request thread"
            return false
        }
        requestQueue.withLock { $0 = queue }
        client.onMessage = { [unowned self] m in self.accept(m, queue: queue) }
        client.onPublished = { [unowned self] mid, rc in self.published(mid: mid, reasonCode: rc) }
        guard let ticker = Ticker(periodMs: 250, { [unowned self] in self.deliveryTick() }) else {
            startProblem = "cannot start the delivery thread"
            return false
        }
        deliveryTicker.withLock { $0 = ticker }
        guard
            client.connect(host: options.brokerHost, port: options.brokerPort, keepalive: 30)
                == MOSQ_ERR_SUCCESS.rawValue,
            client.startThread() == MOSQ_ERR_SUCCESS.rawValue
        else { return false }
        let up = wait(timeoutMs: timeoutMs) {
            self.data.withLock { d in
                d.connack == 0 && d.expectedMids.count == Topics.hubSubscriptions(shared: false).count
                    && d.expectedMids.isSubset(of: d.subscribedMids)
            }
        }
        let (connack, refused) = data.withLock { ($0.connack, $0.subscriptionRefused) }
        if !up {
            startProblem =
                connack.map {
                    $0 == 0
                        ? "no SUBACK from the broker" : "the broker refused the hub: \(MqttClient.describeConnack($0))"
                }
                ?? "no CONNACK from the broker at \(options.brokerHost):\(options.brokerPort)"
        } else if refused {
            startProblem = "the broker refused the hub's subscriptions (its client lacks the rights)"
        }
        return up && !refused
    }

    /// Reads and checks the things' CA (options.thingCA) and the options
    /// that go with it. A CA that cannot be used stops the start: never a
    /// hub that quietly hands out passwords instead. Returns the problem.
    func loadThingCA() -> String? {
        if options.brokerAdmin == .none && options.thingCA == nil {
            return "--broker-admin none needs the things' CA (--thing-ca-cert and --thing-ca-key)"
        }
        if options.thingCRL != nil && options.thingCA == nil {
            return "--thing-crl needs the things' CA (--thing-ca-cert and --thing-ca-key), which signs the CRL"
        }
        if options.brokerPidFile != nil && options.thingCRL == nil {
            return "--broker-pid-file needs --thing-crl (the hub signals the broker only to read its CRL again)"
        }
        guard let files = options.thingCA else {
            thingCA.withLock { $0 = nil }
            return nil
        }
        guard let port = options.advertisedCertPort, (1...65535).contains(port) else {
            return "the things' CA needs --advertised-cert-port (the broker listener for things' certificates)"
        }
        guard (1...ThingCAFiles.maxDays).contains(options.thingCertDays) else {
            return "--thing-cert-days must be 1 to \(ThingCAFiles.maxDays), not \(options.thingCertDays)"
        }
        switch ThingCertificates.load(certFile: files.certFile, keyFile: files.keyFile) {
        case .failure(let p):
            return "the things' CA cannot be used: \(p.message)"
        case .success(let ca):
            thingCA.withLock { $0 = ca }
            return nil
        }
    }

    public func stop() {
        deliveryTicker.withLock { t in
            t?.stop()
            t = nil
        }
        client.disconnect()
        _ = client.stopThread(force: false)
        requestQueue.withLock { q in
            q?.close()
            q = nil
        }
        flushNotifiedMarks()
        costly.close()
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

    // MARK: delivery of commands

    /// Online: the thing announced `online` (thingif's library), or, for a
    /// thing whose installations send no status (Kii's SDKs), the broker
    /// had a subscription on one of them at the last delivery attempt.
    public func isOnline(_ thingID: String) -> Bool {
        data.withLock { ($0.online[thingID] ?? false) || ($0.reachable[thingID] ?? false) }
    }

    /// Online by its own status message only.
    func announcedOnline(_ thingID: String) -> Bool { data.withLock { $0.online[thingID] ?? false } }

    /// Stores a command and publishes it to the thing; false when the thing
    /// is unknown or the command ID exists. A command stored but not
    /// published (broker down) goes out with the thing's next birth message.
    public func send(
        _ command: Command, to thingID: String, issuer: String? = nil,
        installationID: String? = nil
    ) -> Bool {
        stored(command, to: thingID, issuer: issuer, installationID: installationID) != nil
    }

    /// As `send`, returning the stored record. `expiresAt` (ms): the
    /// command's expiry, which also travels in its payload (CommandLifecycle.swift).
    func stored(
        _ command: Command, to thingID: String, issuer: String?, installationID: String?, expiresAt: Int64? = nil
    ) -> CommandRecord? {
        guard let thing = store.thing(id: thingID) else { return nil }
        return stored(command, to: thing, issuer: issuer, installationID: installationID, expiresAt: expiresAt)
    }

    /// As `stored(_:to:…)` for a thing the caller has just read.
    func stored(
        _ command: Command, to thing: ThingRecord, issuer: String?, installationID: String?, expiresAt: Int64? = nil
    ) -> CommandRecord? {
        let thingID = thing.thingID
        var command = command
        command.expiresAt = expiresAt ?? command.expiresAt
        let expiresAt = command.expiresAt
        let payload = command.encode().dump()
        let now = Platform.epochMs()
        // One that expired already (a Command given with a past expiresAt)
        // is stored and ended, never published.
        if let expiresAt, expiresAt <= now {
            guard
                let record = insert(
                    command, thingID: thingID, issuer: issuer, installationID: installationID,
                    payload: payload, state: .sending, now: now)
            else { return nil }
            _ = mayPublish(record, now: now)
            return store.command(id: command.id) ?? record
        }
        // Every installation's topic (FrameworkSide+Delivery.swift); one that
        // announced itself online makes it delivered at once, as before. An
        // installation that announces itself (persistent session) gets it only
        // while the thing is online by its status: else the hub holds it until
        // the thing's next `online`, so that a command that expires or is
        // cancelled meanwhile never waits in the broker's session queue.
        // Under the thing's gate from the insert on, so a cancel or a resend
        // finds it stored and published or neither.
        return commandGate(thingID).withLock { gated -> CommandRecord? in
            gated &+= 1
            let (online, held) = data.withLock { d in
                let online = d.online[thingID] ?? false
                // Looked up under the lock: no copy of every status topic per command.
                return (online, online ? [] : Set(thing.installations.values.filter { d.statusTopics.contains($0) }))
            }
            let topics = thing.installations.values.filter { !held.contains($0) }.sorted()
            // Stored before it is published, so a result can never arrive
            // for a command the framework does not know; for a thing online
            // by its status, stored DELIVERED (one write, not two), and put
            // back to SENDING if the publish cannot be queued.
            let direct = online && !topics.isEmpty
            guard
                var record = insert(
                    command, thingID: thingID, issuer: issuer, installationID: installationID, payload: payload,
                    state: direct ? .delivered : .sending, now: now)
            else { return nil }
            let queued = startRound(
                commandID: command.id, thingID: thingID, payload: Array(payload.utf8), topics: topics)
            if direct && queued {
                metrics.commandDelivered()
            } else if direct {
                _ = store.markUndelivered(commandID: command.id, at: Platform.epochMs())
                record.state = .sending
            }
            return record
        }
    }

    /// Stores a new command (`stored`): with its expiry, in `state`.
    private func insert(
        _ command: Command, thingID: String, issuer: String?, installationID: String?, payload: String,
        state: CommandState, now: Int64
    ) -> CommandRecord? {
        let record = metrics.timed("insertCommand") {
            store.insertCommand(
                CommandRecord(
                    commandID: command.id, thingID: thingID, issuer: issuer ?? command.issuer,
                    issuingInstallationID: installationID, payload: payload, state: state, createdAt: now,
                    modifiedAt: now, expiresAt: command.expiresAt))
        }
        if record != nil { metrics.commandIssued() }
        return record
    }

    /// Publishes any bytes on the thing's command topic: that of the
    /// installation the thing last came online with (its status is retained,
    /// so a restarted hub learns it again), else the first of its
    /// installations. A thing can have several (an owner's onboarding makes
    /// one to hand over); commands go where the thing listens.
    public func publish(_ payload: [UInt8], to thingID: String) -> Bool {
        guard let topic = commandTopic(of: thingID) else { return false }
        return publishRaw(topic: topic, payload: payload)
    }

    /// The topic the thing's commands go to (see `publish(_:to:)`).
    public func commandTopic(of thingID: String) -> String? {
        guard let topics = store.thing(id: thingID)?.installations.values else { return nil }
        let live = data.withLock { $0.commandTopic[thingID] }
        return live.flatMap { topics.contains($0) ? $0 : nil } ?? topics.sorted().first
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

    public static func newCommandID() -> String { CommandForm.newCommandID() }

    /// Commands sent to a thing that have no results yet, oldest first.
    public func unanswered(of thingID: String) -> [String] {
        store.unansweredCommands(thingID: thingID).map(\.commandID)
    }

    /// Publishes again every open command of the thing that has no results
    /// (not an EXPIRED or CANCELLED one, nor one past its expiry): the thing
    /// runs each at most once, so this only fills gaps.
    @discardableResult
    public func resendUnanswered(to thingID: String) -> Int {
        var sent = 0
        let now = Platform.epochMs()
        for c in store.unansweredCommands(thingID: thingID) where mayPublish(c, now: now) {
            // Under the thing's gate, as read now: a cancel that ended it
            // at the hub meanwhile keeps it from being published.
            let published = commandGate(thingID).withLock { gated -> Bool in
                gated &+= 1
                guard let fresh = store.command(id: c.commandID), fresh.results == nil, fresh.state.isOpen,
                    publish(Array(c.payload.utf8), to: thingID)
                else { return false }
                _ = store.markDelivered(commandID: c.commandID, at: Platform.epochMs())
                return true
            }
            if published { sent += 1 }
        }
        metrics.commandDelivered(sent)
        return sent
    }
}
