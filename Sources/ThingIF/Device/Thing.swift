// SPDX-License-Identifier: Apache-2.0

import CThingIF

/// The pipeline of the library: libmosquitto and the system clock.
typealias DevicePipeline = CommandPipeline<MqttClient, SystemClock, Thing>

/// The engine behind one `thingif_t`: identity, configuration, the
/// connection, handlers, automation and threads. Commands and requests to
/// the framework go through its `pipeline`. The C facade only converts types
/// and calls in here.
///
/// Threads: any thread may call the public-facing methods. Network events
/// are processed only inside `loopOnce`, on the loop thread; user callbacks
/// run there too and never with `shared` locked.
final class Thing: @unchecked Sendable {
    struct Config {
        var host = "127.0.0.1"
        var port = 1883
        var tls: (cafile: String, certfile: String?, keyfile: String?)?
        /// thingif_set_claim_certificate(): onboarding's bootstrap connection
        /// authenticates with this certificate (CN `name`) instead of the app key.
        var claim: (name: String, certfile: String, keyfile: String)?
        var maxPayload = WireLimits.maxPayload
        /// THINGIF_OPT_INBOX_MAX: received messages held before the loop
        /// handles them. At the bound the socket is not read until the loop
        /// has handled one (docs/FAILURE_MODEL.md, "The inbox").
        var inboxMax = Pipeline.defaultInboxMax
        var keepaliveS = 60
        var requestTimeoutMs = 10_000
        var reconnectMinMs = 500
        var reconnectMaxMs = 30_000
        /// THINGIF_OPT_EXPIRY_SKEW_MS (CommandExpiry).
        var expirySkewMs = CommandExpiry.defaultSkewToleranceMs
        /// thingif_set_layout_position(): sent at onboarding by the thing.
        var layout = LayoutPosition.standalone
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
        /// Action sets and timer triggers (persisted).
        let automation: Automation
        /// Action sets queued by thingif_actionset_execute(), run by the loop.
        var pendingSets: [String] = []
        /// thingif_set_clock(); nil: the system clock.
        var clock: (callback: thingif_clock_cb, userdata: UnsafeMutableRawPointer?)?
        /// thingif_set_end_node_callback().
        var endNodeCallback: (thingif_end_node_cb, UnsafeMutableRawPointer?)?
        /// thingif_set_installer(): the update job's agent (Update/).
        var updater: UpdateAgent?

        init(automation: Automation) {
            self.automation = automation
        }
    }

    static let identityFile = "identity.json"
    static let sessionExpiryS: UInt32 = 7 * 24 * 3600

    let appID: String
    let appKey: String
    let storage: Storage
    let logger: Logger
    let shared: Locked<Shared>
    /// The way of commands and results: inbox, admission, ledger, running,
    /// group commit, outbox and publish (Pipeline/CommandPipeline.swift).
    /// Set once, at the end of init (it is given the thing itself); never
    /// nil after.
    private(set) var pipeline: DevicePipeline!
    /// C copy of the thingID for thingif_thing_id().
    let thingIDCString = Locked<UnsafeMutablePointer<CChar>?>(nil)
    /// C copies of end nodes' thingIDs for thingif_end_node_thing_id(), by thingID.
    let endNodeIDStrings = Locked<[ByteKey: UnsafeMutablePointer<CChar>]>([:])

    init?(appID: String, appKey: String, storageDir: String) {
        guard let s = Storage(directory: storageDir) else { return nil }
        self.appID = appID
        self.appKey = appKey
        self.storage = s
        let log = Logger()
        logger = log
        shared = Locked(Shared(automation: Automation(storage: s)))
        // The thing is the pipeline's owner (PipelineOwner): made once self
        // is whole, before any other call can reach it.
        pipeline = DevicePipeline(
            owner: self, storage: s, appID: appID, clock: SystemClock(), logger: log,
            requestPrefix: Platform.randomHex(bytes: 4))
        if let problem = shared.withLock({ $0.automation.loadProblem }) { logger.error(Text(problem)) }
    }

    deinit {
        thingIDCString.withLock { free($0) }
        endNodeIDStrings.withLock { table in for p in table.values { free(p) } }
    }

    // MARK: thread checks

    var isOnLoopThread: Bool {
        let me = pthread_self()
        return shared.withLock { s in s.loopThread.map { pthread_equal($0, me) != 0 } ?? false }
    }

    // MARK: configuration

    func configure(_ body: (inout Config) -> Int32) -> Int32 {
        let (rc, c) = shared.withLock { s in (body(&s.config), s.config) }
        pipeline.setLimits(
            .init(
                maxPayload: c.maxPayload, inboxMax: c.inboxMax, requestTimeoutMs: c.requestTimeoutMs,
                expirySkewMs: c.expirySkewMs))
        return rc
    }

    var config: Config { shared.withLock { $0.config } }

    // MARK: handlers

    func withHandlers(_ body: (inout HandlerRegistry) -> Void) {
        shared.withLock { body(&$0.handlers) }
    }

    func setStateProvider(_ cb: thingif_state_cb?, intervalMs: Int, userdata: UnsafeMutableRawPointer?) {
        shared.withLock {
            $0.provider = cb.map {
                StateProvider(
                    callback: $0, intervalMs: intervalMs, userdata: userdata,
                    nextAt: Platform.nowMs() + Int64(intervalMs))
            }
        }
    }

}

/// The pipeline's calls into the thing: action handlers
/// (RunningCommand.swift), the remote configuration and the wall clock
/// (AutomationEngine.swift), end-node notices (Gateway/Thing+EndNodes.swift).
extension Thing: PipelineOwner {}
