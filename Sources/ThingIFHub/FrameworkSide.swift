// SPDX-License-Identifier: Apache-2.0

import CThingIF

import ThingIF
#if canImport(Glibc)
    import Glibc
#endif

/// The framework side: it wires the hub's components to one store, one MQTT
/// client and one scheduler, and starts and stops them. Each component is
/// given what it needs, never the hub:
/// - `thingRequests` (ThingRequests/): what things ask over MQTT and HTTP,
///   with `installations`, their MQTT installations and endpoints;
/// - `delivery` (Commands/): storing, publishing and ending commands;
/// - `presence` (Presence/): who is online, through which installation,
///   and the end nodes behind their gateways;
/// - `notifications` (Notifications/): telling commands' issuers;
/// - `app` (App/): the app's rules, which the REST API calls, with
///   `removal`, deleting a thing;
/// - `triggerEngine` and `automation` (Automation/): server triggers, and
///   the configs things run by themselves;
/// - `authority` (Certificates/): the things' CA and CRL;
/// - `homeAssistant` (HomeAssistant/) and the broker's administration (Broker/).
/// What it knows lives in a HubStore (MemoryStore by default; SQLite or
/// PostgreSQL for thingif-hub). It reuses the device library's wire codec
/// and transport.
///
/// Threads: MQTT traffic is handled on libmosquitto's thread; every public
/// method may be called from any thread.
public final class FrameworkSide: @unchecked Sendable {
    public struct Options: Sendable {
        public var appID: String
        public var appKey: String
        public var brokerHost: String
        public var brokerPort: Int
        /// /metrics counts the end-node gauges at most once in this many ms:
        /// it is open by default, and the count walks every end node's
        /// presence under its lock (Presence, HubMetrics.countEndNodes).
        /// Not a setting; the tests read the gauges at once with 0.
        public var endNodeGaugeIntervalMs: Int64 = 1000
        /// Host and port given to things in mqttEndpoint (default: the broker's).
        public var advertisedHost: String?
        public var advertisedPort: Int?
        /// How several hubs split the things' requests (SubscriptionMode):
        /// by the broker's CONNACK (auto), through the shared group
        /// $share/thingif-hub/…, or by partitions leased in the store.
        public var subscriptions: SubscriptionMode
        /// In the partitioned mode: how long a round of the partitions'
        /// leases holds (ms), and how often the scheduler renews them. A
        /// dead hub's partitions are taken over a lease after its last
        /// round (docs/SCALING.md, "Partitioned requests").
        public var partitionLeaseMs: Int64 = 6000
        public var partitionTickMs: Int64 = 1000
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
        /// The broker's acl_file, where the hub keeps the end-node rights
        /// of gateways with certificates (GatewayRules; needs thingCA):
        /// written at start and whenever they change, then SIGHUP as for
        /// the CRL. Without it a gateway with a certificate can neither
        /// read its end nodes' commands nor publish their statuses.
        public var brokerACL: String?
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
        /// Where webhook notifications may go (WebhookGuard).
        public var webhooks = WebhookGuard()
        /// Whether the hub's scheduler runs the server triggers' schedules
        /// (TriggerEngine.tick) and the sweep of notifications another hub
        /// did not send (Notifications.sweep) every second. Off, a caller
        /// drives them at times of its own (tests with a clock of theirs).
        public var runsSchedules = true

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
            // Without the shared group the one hub served everything: what
            // the partitioned mode does with a store only it uses.
            subscriptions = sharedSubscription ? .auto : .partitioned
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

    /// What only this process needs to know.
    struct Data {
        var connack: Int32?
        var subscribedMids: Set<Int32> = []
        var expectedMids: Set<Int32> = []
        var subscriptionRefused = false
    }

    public let options: Options
    public let store: HubStore
    /// The store's fast paths, or the domain calls they stand for: chosen
    /// once, here, for the hot paths (FastPaths).
    let fastPaths: FastPaths
    let client: MqttClient
    /// The broker's dynamic-security administration, when the hub has a
    /// broker identity (options.brokerUsername) and brokerAdmin is dynsec.
    let admin: BrokerAdmin?
    /// The things' CA and CRL (Certificates/).
    let authority: ThingAuthority
    /// The things' MQTT installations and their endpoints (ThingRequests/).
    public let installations: ThingInstallations
    /// What things ask over MQTT and HTTP (ThingRequests/).
    public let thingRequests: ThingRequests
    /// Deleting a thing: the store's rows, the broker's and the hub's (App/).
    let removal: ThingRemoval
    /// Gateways' end nodes on the broker: statuses, presence, clearing (Gateways/).
    let endNodes: EndNodes
    /// Why start() failed, when it did.
    public private(set) var startProblem: String?
    /// Password hashing and broker credential hand-outs (CostlyWork): REST
    /// handlers and bootstrap requests over MQTT run them here.
    public let costly: CostlyWork
    let data = Locked(Data())
    /// Where every component reports events and log lines.
    public let events = HubEvents()
    /// Called for notable events (onboarding, results, state), on the thread
    /// that saw them.
    public var onEvent: HubEvents.Sink? {
        get { events.onEvent }
        set { events.onEvent = newValue }
    }
    /// Called with lines for the operator (a webhook that failed, a sweep
    /// that sent another hub's notifications).
    public var onLog: HubEvents.Sink? {
        get { events.onLog }
        set { events.onLog = newValue }
    }
    /// Tells commands' issuers that they finished (MQTT, SSE, webhooks).
    public let notifications: Notifications
    /// Stores commands, publishes them and ends them; knows which things are online.
    public let delivery: CommandDelivery
    /// Who is online (Presence/).
    public let presence: Presence
    /// The app API's rules (App/AppAPI.swift).
    public let app: AppAPI
    /// The server triggers: STATES ones run on state uploads; call `tick()`
    /// (thingif-hub does, every second) for the scheduled ones.
    public let triggerEngine: TriggerEngine
    /// The automation configs things run by themselves (Automation/AutomationConfigs.swift).
    public let automation: AutomationConfigs
    /// The Prometheus metrics (GET /metrics).
    public let metrics: HubMetrics
    /// What the last image uploads held and staged (ImageUploadStats).
    public let imageUploads: ImageUploadStats
    /// Home Assistant's discovery: always there, off until enabled (HomeAssistant/).
    public let homeAssistant: HomeAssistant
    /// Which requests this hub serves in the partitioned mode (Partitions/).
    public let partitions: HubPartitions
    /// The periodic work (`jobs`), while started.
    let scheduler = Locked<Scheduler?>(nil)

    public init?(_ options: Options, store: HubStore = MemoryStore()) {
        // libmosquitto's Receive Maximum (20): a larger window let a
        // bootstrap flood's messages stand in front of things' requests
        // (docs/decisions/hub-request-lanes.md, "Rejected").
        guard let c = MqttClient(clientID: "thingif-hub-\(Platform.randomHex(bytes: 6))", cleanStart: true) else {
            return nil
        }
        self.options = options
        metrics = HubMetrics(endNodeCountIntervalMs: options.endNodeGaugeIntervalMs)
        self.client = c
        self.store = store
        fastPaths = FastPaths(store)
        let partitions = HubPartitions(
            mode: options.subscriptions, hubID: c.clientID, store: store, leaseMs: options.partitionLeaseMs,
            metrics: metrics, events: events)
        self.partitions = partitions
        notifications = Notifications(
            store: store, metrics: metrics, client: c, events: events, webhooks: options.webhooks)
        let presence = Presence()
        self.presence = presence
        delivery = CommandDelivery(
            store: store, client: c, metrics: metrics, events: events, notifications: notifications,
            lifetimes: options.lifetimes, presence: presence)
        UpdateJobEnds.watchOffers(store: store, delivery: delivery)
        costly = CostlyWork(threads: options.costlyThreads, queueLimit: options.costlyQueue)
        if options.brokerUsername != nil && options.brokerAdmin == .dynsec {
            guard let a = BrokerAdmin(options: options) else { return nil }
            admin = a
        } else {
            admin = nil
        }
        let engine = TriggerEngine(store: store, delivery: delivery, lifetimes: options.lifetimes, events: events)
        triggerEngine = engine
        let automation = AutomationConfigs(
            store: store, client: c, now: { engine.now() })
        self.automation = automation
        // One reader of the trait registry for the uploads' checks and Home Assistant's entities.
        let traits = TraitRegistry(store: fastPaths.store)
        homeAssistant = HomeAssistant(
            store: store, client: c, delivery: delivery, presence: presence, metrics: metrics, events: events,
            traits: traits, partitions: partitions, admin: admin, brokerAdmin: options.brokerAdmin)
        authority = ThingAuthority(options: options, store: store, events: events)
        let installations = ThingInstallations(
            options: options, store: store, client: c, admin: admin, authority: authority, presence: presence,
            events: events)
        self.installations = installations
        let endNodes = EndNodes(
            store: store, client: c, delivery: delivery, presence: presence, metrics: metrics, events: events,
            homeAssistant: homeAssistant)
        self.endNodes = endNodes
        let removal = ThingRemoval(
            store: store, client: c, admin: admin, authority: authority, delivery: delivery,
            triggerEngine: engine, homeAssistant: homeAssistant, endNodes: endNodes, metrics: metrics, events: events)
        self.removal = removal
        // Wrong passwords per vendorThingID, shared by the things' and the
        // end nodes' onboardings (EndNodeRules.guesses).
        let endNodeRules = EndNodeRules(
            store: store, guesses: RateLimiter(ratePerSecond: 0.1, burst: 10), limits: options.limits)
        let stateUploads = StateUploads(
            fastPaths: fastPaths, metrics: metrics, triggerEngine: engine, homeAssistant: homeAssistant, events: events,
            traits: traits)
        // The thing requests: one handler per request kind, each given what it uses.
        let authorization = RequestAuthorization(store: store)
        let fields = ThingFields(store: store, events: events)
        let handlers = ThingRequests.Handlers(
            onboarding: OnboardingRequests(
                options: options, store: store, installations: installations, delivery: delivery, metrics: metrics,
                events: events, authorization: authorization, guesses: endNodeRules.guesses),
            results: ResultRequests(
                store: store, fastPaths: fastPaths, notifications: notifications, metrics: metrics, events: events,
                authorization: authorization),
            states: StateRequests(
                fastPaths: fastPaths, metrics: metrics, stateUploads: stateUploads, authorization: authorization),
            endNodes: EndNodeRequests(
                store: store, endNodeRules: endNodeRules, removal: removal, presence: presence, endNodes: endNodes,
                events: events, authorization: authorization, maxPage: options.limits.maxHistoryPage),
            fields: FieldRequests(fields: fields, store: store, events: events, authorization: authorization),
            updates: UpdateRequests(
                store: store, delivery: delivery, authorization: authorization,
                serving: UpdateServing(limits: options.limits), metrics: metrics))
        thingRequests = ThingRequests(
            options: options, store: store, client: c, handlers: handlers, authorization: authorization,
            authority: authority, delivery: delivery, homeAssistant: homeAssistant, endNodes: endNodes,
            partitions: partitions, metrics: metrics, events: events, costly: costly)
        let imageUploads = ImageUploadStats()
        self.imageUploads = imageUploads
        app = AppAPI(
            store: store, options: options, fastPaths: fastPaths, delivery: delivery, presence: presence,
            triggerEngine: engine, removal: removal, endNodes: endNodes, endNodeRules: endNodeRules,
            stateUploads: stateUploads, fields: fields, metrics: metrics, admin: admin, automation: automation,
            installations: installations, imageUploads: imageUploads)
    }

    // MARK: lifecycle

    /// Connects, subscribes and starts the MQTT and request threads. Blocks up to `timeoutMs`.
    public func start(timeoutMs: Int = 5000) -> Bool {
        startProblem = nil
        if let problem = authority.load() {
            startProblem = problem
            return false
        }
        // The CRL before anything else: a hub that cannot revoke does not run.
        if let path = options.thingCRL, let problem = authority.publishCRL(force: true) {
            startProblem = "cannot write the things' CRL \(path): \(problem)"
            return false
        }
        if let path = options.brokerACL, let problem = authority.publishGatewayRules(force: true) {
            startProblem = "cannot write the gateways' broker rights into \(path): \(problem)"
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
        // The partitions' takeover: the open commands of the things online
        // in what this hub took (their "online" may have come while another
        // hub held them, or none did).
        partitions.onGained = { [unowned self] gained in
            let n = self.delivery.resendToOnline { gained >> UInt64(HubPartitions.partition(of: $0)) & 1 == 1 }
            if n > 0 { self.events.event("partitions: sent \(n) unanswered command(s) again to things online") }
        }
        client.onConnectProperties = { [unowned self] rc, properties in
            self.data.withLock { $0.connack = rc }
            guard rc == 0 else { return }
            let shared = self.partitions.connected(
                sharedAvailable: MqttClient.sharedSubscriptionsAvailable(properties))
            for topic in Topics.hubSubscriptions(shared: shared) {
                let mid = self.client.subscribe(topic, qos: 1).mid
                self.data.withLock { _ = $0.expectedMids.insert(mid) }
            }
            self.homeAssistant.subscribe()
        }
        client.onSubscribe = { [unowned self] mid in self.data.withLock { _ = $0.subscribedMids.insert(mid) } }
        client.onSubscribeGranted = { [unowned self] _, codes in
            if codes.contains(where: { $0 >= 0x80 }) { self.data.withLock { $0.subscriptionRefused = true } }
        }
        // libmosquitto's thread only queues; request threads handle them,
        // each client's in order (a burst does not wait in the broker's queue).
        guard thingRequests.open() else {
            startProblem = "cannot start the request thread"
            return false
        }
        client.onMessage = { [unowned self] m in self.thingRequests.accept(m) }
        client.onPublished = { [unowned self] mid, rc in self.delivery.published(mid: mid, reasonCode: rc) }
        notifications.open()
        let scheduler = Scheduler(jobs)
        guard scheduler.start() else {
            startProblem = "cannot start the scheduler's thread"
            return false
        }
        self.scheduler.withLock { $0 = scheduler }
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
        } else if options.runsSchedules {
            // What a hub stopped before it could end (the scheduler's job
            // then does so every minute).
            app.jobEnds.endExpiredOffers()
        }
        // Partitioned: this hub's first round now, not a tick later, so that
        // it serves its share from the start.
        if up && !refused { partitions.tick() }
        return up && !refused
    }

    /// The periodic work the scheduler runs while the hub does.
    var jobs: [Scheduler.Job] {
        var jobs: [Scheduler.Job] = [
            .init(name: "delivery", periodMs: 250) { [unowned self] _ in self.delivery.deliveryTick() },
            .init(name: "notified marks", periodMs: 250) { [unowned self] _ in self.notifications.flushMarks() },
            .init(name: "CRL", periodMs: 250) { [unowned self] now in self.authority.tick(nowMs: now) },
            .init(name: "command lifecycle", periodMs: CommandLifetimes.sweepPeriodMs) { [unowned self] _ in
                self.delivery.lifecycleTick()
            },
            .init(name: "partitions", periodMs: options.partitionTickMs) { [unowned self] _ in self.partitions.tick() }
        ]
        if options.runsSchedules {
            jobs.append(
                .init(name: "trigger schedules", periodMs: 1000) { [unowned self] _ in self.triggerEngine.tick() })
            jobs.append(
                .init(name: "notification sweep", periodMs: 1000) { [unowned self] _ in self.notifications.sweep() })
            jobs.append(.init(name: "rollout releases", periodMs: 1000) { [unowned self] _ in self.app.rolloutTick() })
            jobs.append(
                .init(name: "expired offers", periodMs: 60_000) { [unowned self] _ in
                    self.app.jobEnds.endExpiredOffers()
                })
        }
        return jobs
    }

    public func stop() {
        scheduler.withLock { s in
            s?.stop()
            s = nil
        }
        partitions.leave()
        client.disconnect()
        _ = client.stopThread(force: false)
        thingRequests.close()
        notifications.close()
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

    public static func newCommandID() -> String { CommandForm.newCommandID() }
}
