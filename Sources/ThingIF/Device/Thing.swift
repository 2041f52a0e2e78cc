import CThingIF

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
        var maxPayload = WireLimits.maxPayload
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
        /// Commands dropped on arrival for their size whose commandID could be
        /// read: (commandID, reason), reported by the loop (at most inboxMax).
        var droppedCommands: [(id: String, reason: String)] = []
        var requestCounter = 0
        /// Requests waiting for the framework's answer (persisted).
        let outbox: Outbox
        /// The commands taken (persisted).
        let ledger: CommandLedger
        /// When each outbox item was last sent on this connection.
        var sentAt: [ByteKey: Int64] = [:]
        /// Commands whose results wait for deferred actions, by commandID.
        var running: [ByteKey: RunningCommand] = [:]
        /// True while the loop runs a batch of received messages: results
        /// finished meanwhile wait in `heldResults` for the batch's one sync.
        var batching = false
        var heldResults: [(commandID: String, thingID: String, body: [UInt8])] = []
        var interruptedReported = false
        /// Action sets and timer triggers (persisted).
        let automation: Automation
        /// Action sets queued by thingif_actionset_execute(), run by the loop.
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
    let thingIDCString = Locked<UnsafeMutablePointer<CChar>?>(nil)

    init?(appID: String, appKey: String, storageDir: String) {
        guard let s = Storage(directory: storageDir) else { return nil }
        self.appID = appID
        self.appKey = appKey
        self.storage = s
        shared = Locked(
            Shared(
                outbox: Outbox(storage: s, capacity: Thing.defaultOutboxCapacity),
                ledger: CommandLedger(storage: s, capacity: Thing.defaultLedgerCapacity),
                automation: Automation(storage: s)))
        if let problem = shared.withLock({ $0.automation.loadProblem }) { logger.error(Text(problem)) }
        // Results the framework had not acknowledged before the restart go
        // out again from the outbox (the ledger kept them).
        shared.withLock { s in
            for owed in s.ledger.owedResults() {
                _ = s.outbox.add(
                    Outbox.Item(
                        id: newRequestID(&s), method: "PUT",
                        path: Thing.resultsPath(thingID: owed.thingID, commandID: owed.commandID),
                        contentType: MediaType.json, body: owed.body,
                        what: str("results of command \(owed.commandID)"), kind: .results, commandID: owed.commandID))
            }
        }
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
