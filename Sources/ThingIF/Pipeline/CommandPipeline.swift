// SPDX-License-Identifier: Apache-2.0

import CThingIF

/// Monotonic milliseconds, as the pipeline reads them (request timeouts).
protocol PipelineClock {
    func nowMs() -> Int64
}

/// The library's clock: CLOCK_MONOTONIC.
struct SystemClock: PipelineClock {
    @inline(__always) func nowMs() -> Int64 { Platform.nowMs() }
}

/// What the pipeline asks of its owner (the Thing; a test's rig), given
/// once, at creation. A generic parameter, not closures set afterwards: the
/// calls are direct, and no message can meet a pipeline not wired yet.
protocol PipelineOwner: AnyObject {
    /// Runs one action's handler (the handler lookup and the C call); nil
    /// when the handler deferred its result (it comes later through
    /// `complete`).
    func runAction(_ call: ActionCall) -> ActionResult?
    /// The remote configuration (p/{mqttTopic}/config).
    func applyRemoteConfig(_ payload: [UInt8])
    /// The thing's wall clock (epoch ms), which judges an arriving
    /// command's expiry: thingif_set_clock's, else the system's.
    func epochNow() -> Int64
    /// A gateway's end node joined, was refused, left or was renamed: the
    /// firmware is told (loop thread, no lock held).
    func notify(_ notice: EndNodeNotice)
    /// Test hook: told every step passed, with the commandID when one is
    /// known (the Thing's does nothing, and is compiled away).
    func passed(_ step: PipelineStep, _ commandID: String?)
    /// A reply to a request sent with `sendTransient` (an update job's
    /// block requests): true when the owner took it.
    func transientReply(_ requestID: String, _ reply: KiiResponse) -> Bool
}

extension PipelineOwner {
    @inline(__always) func passed(_ step: PipelineStep, _ commandID: String?) {}
    func transientReply(_ requestID: String, _ reply: KiiResponse) -> Bool { false }
}

/// The points between two steps of a command's way through the pipeline:
/// where a crash can cut it. `PipelineOwner.passed` (a test hook) is told
/// each one as it is passed.
enum PipelineStep {
    /// A message entered the inbox.
    case received
    /// A new command was recorded "started" (not yet synced).
    case admitted
    /// The batch's "started" records (and the results held before them) are durable.
    case startSynced
    /// A command's last result came in; its "done" record is written (held for the batch's sync, or synced).
    case finished
    /// The held results of a batch are durable.
    case resultsSynced
    /// A request (results, state, …) was handed to the transport.
    case published
    /// The framework's answer removed a request from the outbox.
    case acknowledged
}

/// What the pipeline made of a received command before running anything.
enum CommandAdmission {
    /// Not a command it can run (logged; reported when nameable).
    case refused
    case running(String)
    case done(String, body: [UInt8], alreadyQueued: Bool)
    case interrupted(String, skeleton: [UInt8])
    /// The ledger holds it for another target (a hub fault or a replay):
    /// not run and not reported.
    case foreign(String)
    /// New: recorded as started (durable once the ledger is flushed,
    /// unless `persisted` is false: the ledger could not be written).
    case new(Command, persisted: Bool)
    /// The hub cancelled it before it arrived (the ledger says so): not
    /// run; every action fails with reason CANCELLED.
    case cancelled(Command)

    var isNew: Bool {
        if case .new = self { return true }
        return false
    }
}

/// What a received message is (CommandPipeline.classify): told once, then
/// each step of `runBatch` takes the kind it handles.
enum MessageKind {
    case command(Addressee)
    case cancel(String, Addressee)
    /// A message on a gateway's end-node events topic: the hub's membership
    /// event, taken as it was told (`takeMembership`), or one malformed or
    /// about another end node, dropped.
    case membership
    case reply
    case config
    case other

    /// Whom a command or a cancel is addressed to.
    var addressee: Addressee? {
        switch self {
        case .command(let to), .cancel(_, let to): return to
        default: return nil
        }
    }
}

/// One action for the pipeline's owner to run (the handler lookup and the C
/// call are the owner's: `PipelineOwner.runAction`).
struct ActionCall {
    let command: Command
    let strings: CommandStrings
    let target: CommandTarget
    let alias: String?
    let name: String
    let params: JSON
    let index: Int
}

/// Names the pipeline shares with the rest of the core (not generic).
enum Pipeline {
    static let interruptedMessage = "interrupted: the thing stopped while this command ran; it was not run again"
    /// The most outbox items sent in one loop turn.
    static let sendBatch = 64
    static let defaultOutboxCapacity = 256
    static let defaultLedgerCapacity = 1000
    static let defaultInboxMax = 64

    static func resultsPath(thingID: String, commandID: String) -> String {
        str("targets/thing:\(thingID)/commands/\(commandID)/action-results")
    }
}

/// The way of a command through the thing, from the message to its
/// acknowledged results, with one owner for each step:
///
/// | step | owner (method) |
/// |---|---|
/// | inbox: bounded, oversized dropped (a nameable command reported dropped) | `received(_:)`, `reportDropped` |
/// | taking a batch (commands wait while results fill the outbox; commands that waited for the end-node list first) | `processInbox(canRead:)`, `GatewayTargets.takeAwaiting` |
/// | classifying each message once: command, cancel, membership event, reply, configuration | `classify` |
/// | membership events (a gateway's): the registry, the firmware told | `classify` → `takeMembership`, `endNodeEvent` (Gateway/) |
/// | whom each command is for: the thing's own target, an end node's, a refusal, or held for the list read | `resolveTargets` → `GatewayTargets.target(for:)`, `holdForList` |
/// | cancels: recorded in the ledger before the batch's commands | `cancel` |
/// | admission: decode, dedupe against running and the ledger, record "started" | `admit` |
/// | group commit of the starts (one sync) | `runBatch` |
/// | refusals (an end node not carried or being removed), expiry | `execute` |
/// | running: actions in order, results by index | `run`, `complete` |
/// | held results: "done" recorded, waiting for the batch's sync | `complete` → `heldResults` |
/// | group commit of the results, then publish | `publishDurably` |
/// | publish: outbox, request IDs, resend after reconnect or timeout | `sendRequest`, `sendDue` |
/// | acknowledgement: outbox and ledger | `handleReply` |
/// | the gateway's own requests answered (onboarding, removal, list read) | `endNodeReplied` (Gateway/) |
/// | the remote configuration | `PipelineOwner.applyRemoteConfig` |
///
/// Its state is behind one lock of its own (`state`); no user code runs
/// with it held. The owner (Thing) keeps identity, configuration, the
/// connection and the handlers, and hands the pipeline the transport while
/// it is connected (`attach`/`detach`); it is given once, at creation, as
/// the pipeline's `PipelineOwner`. Whom each command is for is the target
/// resolver's (`GatewayTargets`, Gateway/). Generic over the transport, the
/// clock and the owner so that the fast tests run it with fakes (no
/// broker), and the Embedded build specialises it for `MqttClient`.
final class CommandPipeline<T: Transport, C: PipelineClock, O: PipelineOwner>: @unchecked Sendable {
    typealias Held = (commandID: String, thingID: String, body: [UInt8])

    /// The limits the owner's configuration sets (THINGIF_OPT_*).
    struct Limits {
        var maxPayload = WireLimits.maxPayload
        /// THINGIF_OPT_INBOX_MAX: received messages held before they are handled.
        var inboxMax = Pipeline.defaultInboxMax
        var requestTimeoutMs = 10_000
        /// THINGIF_OPT_EXPIRY_SKEW_MS: how far the thing's clock may be ahead
        /// before an arriving command counts as expired (CommandExpiry).
        var expirySkewMs = CommandExpiry.defaultSkewToleranceMs
    }

    struct State {
        var limits = Limits()
        var identity: Identity?
        /// The transport while connected (from CONNACK to the loss).
        var transport: T?
        /// Received messages not handled yet; at most limits.inboxMax.
        var inbox: [TransportMessage] = []
        /// The most messages the inbox has held (a test hook).
        var inboxHighWater = 0
        /// Commands dropped on arrival for their size whose commandID could
        /// be read: (commandID, reason, target), reported by the next pass.
        var droppedCommands: [(id: String, reason: String, target: CommandTarget)] = []
        /// Commands whose results wait for actions (running or deferred).
        var running: [ByteKey: RunningCommand] = [:]
        /// True while a batch runs: results finished meanwhile wait in
        /// `heldResults` for the batch's one sync.
        var batching = false
        var heldResults: [Held] = []
        var interruptedReported = false
        /// The commands taken (persisted).
        let ledger: CommandLedger
        /// Requests waiting for the framework's answer (persisted).
        let outbox: Outbox
        /// When each outbox item was last sent on this connection.
        var sentAt: [ByteKey: Int64] = [:]
        var requestCounter = 0
        /// Whom each command is for: the thing's own target and, on a
        /// gateway, its end nodes (the target resolver, Gateway/).
        var targets: GatewayTargets
    }

    let state: Locked<State>
    let clock: C
    let logger: Logger
    let storage: Storage
    let appID: String
    /// Per-handle prefix of request IDs, so replies of an older run are not
    /// taken for this one's.
    let requestPrefix: String
    /// The handlers, the remote configuration, the wall clock and the
    /// end-node callback (PipelineOwner). unowned(unsafe): the owner owns
    /// the pipeline and outlives it.
    unowned(unsafe) let owner: O

    init(
        owner: O, storage: Storage, appID: String, clock: C, logger: Logger, requestPrefix: String,
        outboxCapacity: Int = Pipeline.defaultOutboxCapacity, ledgerCapacity: Int = Pipeline.defaultLedgerCapacity
    ) {
        self.owner = owner
        self.storage = storage
        self.appID = appID
        self.clock = clock
        self.logger = logger
        self.requestPrefix = requestPrefix
        state = Locked(
            State(
                ledger: CommandLedger(storage: storage, capacity: ledgerCapacity),
                outbox: Outbox(storage: storage, capacity: outboxCapacity),
                targets: GatewayTargets(storage: storage)))
        if let problem = state.withLock({ $0.targets.registry.problem }) { logger.error(Text(problem)) }
        // Results the framework had not acknowledged before the restart go
        // out again from the outbox (the ledger kept them).
        state.withLock { s in
            for owed in s.ledger.owedResults() {
                _ = s.outbox.add(
                    Outbox.Item(
                        id: newRequestID(&s), method: "PUT",
                        path: Pipeline.resultsPath(thingID: owed.thingID, commandID: owed.commandID),
                        contentType: MediaType.json, body: owed.body,
                        what: str("results of command \(owed.commandID)"), kind: .results, commandID: owed.commandID,
                        journaled: false))
            }
        }
    }

    @inline(__always) private func passed(_ step: PipelineStep, _ id: String? = nil) {
        owner.passed(step, id)
    }

    // MARK: the owner's settings

    func adopt(_ identity: Identity) { state.withLock { $0.identity = identity } }
    func setLimits(_ limits: Limits) { state.withLock { $0.limits = limits } }
    func setOutboxCapacity(_ n: Int) { state.withLock { $0.outbox.capacity = n } }
    func setLedgerCapacity(_ n: Int) { state.withLock { $0.ledger.capacity = n } }
    func setDurable(_ durable: Bool) {
        state.withLock {
            $0.ledger.durable = durable
            $0.outbox.durable = durable
        }
    }

    /// CONNACK: requests go out on `transport` from now on, every one again.
    func attach(_ transport: T) {
        state.withLock {
            $0.transport = transport
            $0.sentAt.removeAll()
        }
    }

    /// The connection is gone: requests wait in the outbox.
    func detach() {
        state.withLock {
            $0.transport = nil
            $0.sentAt.removeAll()
        }
    }

    var inboxIsFull: Bool { state.withLock { $0.inbox.count >= $0.limits.inboxMax } }

    /// Writes the unsynced marks (acknowledgements) to the files, once a loop pass.
    func writeOut() {
        state.withLock {
            $0.ledger.writeOut()
            $0.outbox.writeOut()
        }
    }

    // MARK: the inbox

    /// A message from the transport (loop thread, inside its loop). One over
    /// THINGIF_OPT_MAX_PAYLOAD is dropped here, whatever its topic, before
    /// anything parses it. When the inbox reaches its bound, the messages are
    /// handled now, before the transport reads the next packet: the inbox
    /// never holds more than limits.inboxMax, nothing is dropped, and while a
    /// slow handler runs the socket is not read, so the broker (and TCP) hold
    /// what follows.
    func received(_ m: TransportMessage) {
        let outcome = state.withLock { s -> (oversize: Int?, full: Bool) in
            if m.payload.count > s.limits.maxPayload {
                // A command whose commandID its first bytes give is reported
                // as dropped, so that it gets an outcome.
                if let id = s.identity,
                    let to = GatewayTargets.addressee(of: m.topic, identity: id, gateway: s.targets.gateway),
                    s.droppedCommands.count < s.limits.inboxMax,
                    let commandID = Command.recoverID(m.payload)
                {
                    s.droppedCommands.append(
                        (
                            commandID,
                            str(
                                "dropped a command of \(m.payload.count) bytes: over the limit of \(s.limits.maxPayload) bytes (THINGIF_OPT_MAX_PAYLOAD)"
                            ),
                            s.targets.target(for: to, identity: id)
                        ))
                }
                return (s.limits.maxPayload, false)
            }
            s.inbox.append(m)
            s.inboxHighWater = max(s.inboxHighWater, s.inbox.count)
            return (nil, s.inbox.count >= s.limits.inboxMax)
        }
        if let limit = outcome.oversize {
            logger.error(
                "dropped a message of \(m.payload.count) bytes on \(m.topic): over the limit of \(limit) bytes (THINGIF_OPT_MAX_PAYLOAD)"
            )
            return
        }
        passed(.received)
        if outcome.full { processInbox() }
    }

    /// Handles what the inbox holds, batch by batch (see `runBatch`).
    /// `canRead` (the loop's own call, not one from inside the transport's
    /// callback): after a batch whose results wait for their sync, the
    /// transport is read once more without waiting, so that the commands
    /// already there share that sync with the results (one sync per batch
    /// under load).
    func processInbox(canRead: Bool = false) {
        let drops = state.withLock { s -> [(id: String, reason: String, target: CommandTarget)] in
            defer { s.droppedCommands.removeAll() }
            return s.droppedCommands
        }
        for d in drops { reportDropped(d.id, reason: d.reason, target: d.target) }
        var owed: [Held] = []
        while true {
            let taken = state.withLock { s -> ([TransportMessage], Identity, Int, Bool)? in
                guard let id = s.identity else { return nil }
                // Results are never dropped: while they fill the outbox, new
                // commands wait here until the framework answers. The replies
                // behind them are taken, since they are what empties it. A
                // full inbox runs its commands anyway (results may exceed the
                // outbox's capacity): otherwise the socket would stay unread
                // and the replies that empty the outbox would never come.
                // So with the outbox full of results, only the oldest
                // commands that bring the inbox below its bound are taken.
                var commandsTaken =
                    s.outbox.resultCount >= s.outbox.capacity ? max(0, s.inbox.count - s.limits.inboxMax + 1) : Int.max
                var batch = s.targets.takeAwaiting()
                var waiting: [TransportMessage] = []
                let gateway = s.targets.gateway
                for m in s.inbox {
                    if GatewayTargets.addressee(of: m.topic, identity: id, gateway: gateway) == nil {
                        batch.append(m)
                    } else if commandsTaken > 0 {
                        batch.append(m)
                        commandsTaken -= 1
                    } else {
                        waiting.append(m)
                    }
                }
                guard !batch.isEmpty else { return nil }
                s.inbox = waiting
                s.batching = true
                return (batch, id, s.limits.maxPayload, gateway)
            }
            guard let (batch, identity, maxPayload, gateway) = taken else { break }
            runBatch(batch, identity: identity, maxPayload: maxPayload, gateway: gateway, publishing: owed)
            owed = state.withLock { s in
                defer { s.heldResults.removeAll() }
                return s.heldResults
            }
            if !owed.isEmpty, canRead, let transport = state.withLock({ $0.transport }) {
                readAvailable(transport)
            }
        }
        owed += state.withLock { s in
            s.batching = false
            defer { s.heldResults.removeAll() }
            return s.heldResults
        }
        publishDurably(owed)
    }

    /// Reads what the transport already holds, without waiting, up to the
    /// inbox bound. libmosquitto reads one packet per loop call when no
    /// QoS 2 flow is open, so without this a pass would hold one command
    /// and a batch (and its sync) would serve one command under load.
    func readAvailable(_ transport: T) {
        // Bounded: acknowledgements of our own publishes do not fill the inbox.
        for _ in 0..<1024 {
            guard transport.hasInput, !inboxIsFull, transport.loop(timeoutMs: 0) == 0 else { return }
        }
    }

    /// One sync for every results record so far, then the results go out.
    func publishDurably(_ held: [Held]) {
        guard !held.isEmpty else { return }
        if !state.withLock({ $0.ledger.flush() }) {
            logger.error("cannot sync the results in \(storage.path(CommandLedger.fileName))")
        }
        passed(.resultsSynced)
        for h in held { _ = sendResults(h.body, commandID: h.commandID, thingID: h.thingID) }
    }

    /// Handles the messages of one loop pass, in order, with group commit:
    /// every new command is recorded as started, then one sync (which also
    /// makes durable the results of the batch before, `previous`, published
    /// right after it), then they run. The results they finish are recorded
    /// and wait in `heldResults` for the next sync. So a pass costs one or
    /// two syncs however many commands it holds (one at a time: two per
    /// command, the floor of at-most-once with nothing lost). A crash
    /// within a pass reports its commands that had not run as interrupted
    /// (docs/FAILURE_MODEL.md).
    func runBatch(
        _ batch: [TransportMessage], identity: Identity, maxPayload: Int, gateway: Bool, publishing previous: [Held]
    ) {
        // What each message is, read once (`classify`); a gateway's
        // membership events are taken there, before any target is resolved.
        let inbound = batch.map { classify($0, identity: identity, gateway: gateway) }
        // Whom each command and cancel is for (the resolver).
        let targets = resolveTargets(batch, inbound, identity: identity)
        // Cancels next: one behind its command in the same batch still
        // reaches it before it runs.
        var cancelsRecorded = false
        for i in inbound.indices {
            if case .cancel(let id, _) = inbound[i], let target = targets[i], cancel(id, target: target) {
                cancelsRecorded = true
            }
        }
        var admitted: [(CommandAdmission, CommandTarget)?] = []
        admitted.reserveCapacity(batch.count)
        for (i, m) in batch.enumerated() {
            guard let target = targets[i], case .command = inbound[i] else {
                admitted.append(nil)
                continue
            }
            admitted.append(
                (admit(m.payload, identity: identity, target: target, maxPayload: maxPayload, sync: false), target))
        }
        let newCommands = admitted.contains { $0?.0.isNew == true }
        if newCommands || cancelsRecorded || !previous.isEmpty {
            if !state.withLock({ $0.ledger.flush() }) {
                logger.error(
                    "cannot sync \(storage.path(CommandLedger.fileName)); running commands without the at-most-once guard"
                )
            }
            passed(.startSynced)
        }
        for h in previous { _ = sendResults(h.body, commandID: h.commandID, thingID: h.thingID) }
        for (i, (m, a)) in zip(batch, admitted).enumerated() {
            if let (a, target) = a {
                execute(a, target: target)
                continue
            }
            switch inbound[i] {
            case .reply: handleReply(m)
            case .config: owner.applyRemoteConfig(m.payload)
            case .other: logger.debug("ignored a message on \(m.topic)")
            case .command, .cancel, .membership: continue  // taken above
            }
        }
    }

    /// What one received message is, told once by its topic and, on a
    /// command topic, by its payload: a reply, the configuration, a
    /// membership event (a gateway's end-node events topic only, taken at
    /// once: `takeMembership`); on a command topic a cancel (CommandCancel),
    /// else a command (one that does not decode is bad input, as always).
    func classify(_ m: TransportMessage, identity: Identity, gateway: Bool) -> MessageKind {
        guard let to = GatewayTargets.addressee(of: m.topic, identity: identity, gateway: gateway) else {
            let own = identity.endpoint.mqttTopic
            if m.topic.equals(Topics.response(clientID: own)) { return .reply }
            if m.topic.equals(Topics.config(clientID: own)) { return .config }
            if takeMembership(m, identity: identity, gateway: gateway) { return .membership }
            return .other
        }
        if let id = CommandCancel.commandID(of: m.payload) { return .cancel(id, to) }
        return .command(to)
    }

    // MARK: admission

    /// Decodes a command and, when it is new, records it as started: synced
    /// at once with `sync`, else by the caller's `ledger.flush()` before
    /// `execute` (group commit: one sync for every command of a loop pass).
    func admit(_ payload: [UInt8], identity: Identity, target: CommandTarget, maxPayload: Int, sync: Bool)
        -> CommandAdmission
    {
        let command: Command
        switch Command.decode(payload, maxSize: maxPayload) {
        case .failure(let e):
            logger.error(Text(e.message))
            if let id = e.commandID { reportDropped(id, reason: e.message, target: target) }
            return .refused
        case .success(let c):
            command = c
        }
        let resultsPath = Pipeline.resultsPath(thingID: target.thingID, commandID: command.id)
        let admission = state.withLock { s -> CommandAdmission in
            let known = s.ledger.state(of: command.id) != nil || s.running[ByteKey(command.id)] != nil
            if known && !s.ledger.target(of: command.id).equals(target.endNode) { return .foreign(command.id) }
            if s.running[ByteKey(command.id)] != nil { return .running(command.id) }
            switch s.ledger.state(of: command.id) {
            case .done(let r)?:
                return .done(
                    command.id, body: r,
                    alreadyQueued: s.outbox.items.contains { $0.path.equals(resultsPath) }
                        || s.heldResults.contains { $0.commandID.equals(command.id) })
            case .started(let skeleton)?: return .interrupted(command.id, skeleton: skeleton)
            case .cancelled?:
                s.running[ByteKey(command.id)] = RunningCommand(command, thingID: target.thingID)
                return .cancelled(command)
            case nil:
                let ok = s.ledger.start(
                    command.id, skeleton: CommandLedger.skeleton(of: command), target: target.endNode, sync: sync)
                s.running[ByteKey(command.id)] = RunningCommand(command, thingID: target.thingID)
                return .new(command, persisted: ok)
            }
        }
        if admission.isNew { passed(.admitted, command.id) }
        return admission
    }

    func execute(_ admission: CommandAdmission, target: CommandTarget) {
        switch admission {
        case .refused:
            return
        case .foreign(let id):
            logger.warning(
                "command \(id) arrived for \(target.thingID), but this thing took it for another; not run, not reported"
            )
        case .running(let id):
            logger.info("command \(id) arrived again while it still runs; ignored")
        case .done(let id, let results, let queued):
            logger.info("command \(id) arrived again; it ran already\(queued ? "" : ": sending its results again")")
            if !queued { _ = sendResults(results, commandID: id, thingID: target.thingID) }
        case .interrupted(let id, let skeleton):
            logger.warning("command \(id) arrived again after it was cut off; reporting it as interrupted")
            finishInterrupted(id, skeleton: skeleton, thingID: target.thingID)
        case .cancelled(let command):
            logger.warning("command \(command.id) was cancelled by the hub before it ran; not run")
            for (i, r) in CommandCancel.refusal(command).enumerated() {
                complete(command.id, index: i, result: r)
            }
        case .new(let command, let persisted):
            if !persisted {
                logger.error(
                    "cannot record command \(command.id) in \(storage.path(CommandLedger.fileName)); running it without the at-most-once guard"
                )
            }
            if let refusal = target.refusalText {
                logger.warning("command \(command.id) for end node \(target.thingID) not run: \(refusal.message)")
                for (i, r) in ActionResult.refusals(command, message: refusal.message, reason: refusal.reason)
                    .enumerated()
                {
                    complete(command.id, index: i, result: r)
                }
                return
            }
            if command.expiresAt != nil {
                let now = owner.epochNow()
                let skew = state.withLock { $0.limits.expirySkewMs }
                if CommandExpiry.isExpired(expiresAt: command.expiresAt, now: now, skewToleranceMs: skew) {
                    logger.warning(
                        "command \(command.id) arrived expired (at \(command.expiresAt ?? 0), now \(now) by this thing's clock); not run"
                    )
                    for (i, r) in CommandExpiry.refusal(command, now: now, skewToleranceMs: skew).enumerated() {
                        complete(command.id, index: i, result: r)
                    }
                    return
                }
            }
            run(command, target: target)
        }
    }

    /// A cancel from the hub (CommandCancel), before the batch's commands
    /// are admitted. A command this thing has not taken (not received, or
    /// waiting in this batch or the inbox) is recorded cancelled in the
    /// ledger (synced with the batch's starts): it is never run, also when
    /// it comes again after a restart. One that started or finished is
    /// not touched: its results go as usual. True when it was recorded.
    func cancel(_ commandID: String, target: CommandTarget) -> Bool {
        let outcome = state.withLock { s -> (recorded: Bool, note: String) in
            let known = s.ledger.state(of: commandID) != nil || s.running[ByteKey(commandID)] != nil
            if known && !s.ledger.target(of: commandID).equals(target.endNode) {
                return (false, "this thing took it for another target")
            }
            if s.running[ByteKey(commandID)] != nil { return (false, "it is running") }
            switch s.ledger.state(of: commandID) {
            case .started?: return (false, "it started")
            case .done?: return (false, "it ran already")
            case .cancelled?: return (false, "it is cancelled already")
            case nil:
                guard s.ledger.cancel(commandID, target: target.endNode, sync: false) else {
                    return (false, "the ledger cannot be written")
                }
                return (true, "")
            }
        }
        if outcome.recorded {
            logger.info("command \(commandID) cancelled by the hub; it will not run")
        } else {
            logger.info("ignored the hub's cancel of command \(commandID): \(outcome.note)")
        }
        return outcome.recorded
    }

    /// A command made on the thing (an action set, a timer trigger): recorded
    /// as started (synced), then run like a received one.
    func runLocal(_ command: Command, thingID: String) {
        let persisted = state.withLock { s -> Bool in
            let ok = s.ledger.start(command.id, skeleton: CommandLedger.skeleton(of: command))
            s.running[ByteKey(command.id)] = RunningCommand(command, thingID: thingID)
            return ok
        }
        if !persisted { logger.error("cannot record command \(command.id) in \(storage.path(CommandLedger.fileName))") }
        run(command, target: .own(thingID))
    }

    /// A command dropped before its actions could be read, whose commandID
    /// could: recorded as done and reported once (ActionResults.dropped), so
    /// that it gets an outcome; a repeat of it changes nothing.
    func reportDropped(_ id: String, reason: String, target: CommandTarget) {
        let body = ActionResults.dropped(reason: reason).dumpBytes()
        let first = state.withLock { s -> Bool in
            guard s.running[ByteKey(id)] == nil, s.ledger.state(of: id) == nil else { return false }
            _ = s.ledger.finish(id, body: body, thingID: target.thingID, target: target.endNode)
            return true
        }
        if first {
            logger.warning("reporting command \(id) as dropped, with every action failed")
            _ = sendResults(body, commandID: id, thingID: target.thingID)
        }
    }

    /// Reports the commands that a crash cut off, once per handle (once an identity is known).
    func reportInterrupted() {
        let work = state.withLock { s -> ([(id: String, skeleton: [UInt8], target: String?)], String)? in
            guard !s.interruptedReported, let id = s.identity else { return nil }
            s.interruptedReported = true
            return (s.ledger.interrupted, id.thingID)
        }
        guard let (list, thingID) = work else { return }
        for (id, skeleton, target) in list {
            logger.warning("command \(id) was cut off by a restart; reporting it as interrupted")
            finishInterrupted(id, skeleton: skeleton, thingID: target ?? thingID)
        }
    }

    private func finishInterrupted(_ id: String, skeleton: [UInt8], thingID: String) {
        let results = CommandLedger.failedResults(skeleton: skeleton, message: Pipeline.interruptedMessage).bytes()
        _ = state.withLock { $0.ledger.finish(id, body: results, thingID: thingID) }
        _ = sendResults(results, commandID: id, thingID: thingID)
    }

    // MARK: running

    /// Runs a command's actions in order; each result lands in its
    /// RunningCommand, and the last one records and sends the results.
    func run(_ command: Command, target: CommandTarget) {
        let strings = CommandStrings(command, target: target)
        var index = 0
        for g in command.groups {
            for e in g.entries {
                switch e {
                case .invalid(let name, let reason):
                    logger.warning(Text(reason))
                    complete(command.id, index: index, result: .failure(name, reason))
                case .action(let name, let params):
                    let call = ActionCall(
                        command: command, strings: strings, target: target, alias: g.alias, name: name,
                        params: params, index: index)
                    if let result = owner.runAction(call) {
                        complete(command.id, index: index, result: result)
                    }
                }
                index += 1
            }
        }
    }

    /// Whether an action of a running command still waits for its result
    /// (a deferred one).
    func isPending(_ commandID: String, index: Int) -> Bool {
        state.withLock { s in
            guard let rc = s.running[ByteKey(commandID)], index < rc.results.count else { return false }
            return rc.results[index] == nil
        }
    }

    /// Records one action's result (any thread). When it was the last, the
    /// results are recorded "done" and sent: at once, or, inside a batch of
    /// the loop, after the batch's one sync (processInbox). False when the
    /// action was not waiting for a result.
    @discardableResult
    func complete(_ commandID: String, index: Int, result: ActionResult) -> Bool {
        let finished = state.withLock { s -> (known: Bool, done: RunningCommand?) in
            guard let rc = s.running[ByteKey(commandID)], index < rc.results.count, rc.results[index] == nil else {
                return (false, nil)
            }
            rc.results[index] = result
            rc.outstanding -= 1
            guard rc.outstanding == 0 else { return (true, nil) }
            s.running[ByteKey(commandID)] = nil
            return (true, rc)
        }
        guard let rc = finished.done else { return finished.known }
        let results = rc.actionResults.bytes()
        // Durable before they are published.
        let outcome = state.withLock { s -> (recorded: Bool, held: Bool) in
            let ok = s.ledger.finish(rc.id, body: results, thingID: rc.thingID, sync: !s.batching)
            if s.batching { s.heldResults.append((rc.id, rc.thingID, results)) }
            return (ok, s.batching)
        }
        if !outcome.recorded {
            logger.error("cannot record the results of command \(rc.id) in \(storage.path(CommandLedger.fileName))")
        }
        passed(.finished, rc.id)
        if !outcome.held {
            passed(.resultsSynced, rc.id)
            _ = sendResults(results, commandID: rc.id, thingID: rc.thingID)
        }
        return true
    }

    // MARK: publish: requests to the framework

    func sendResults(_ body: [UInt8], commandID: String, thingID: String) -> Int32 {
        sendRequest(
            method: "PUT", path: Pipeline.resultsPath(thingID: thingID, commandID: commandID),
            contentType: MediaType.json, body: body, what: str("results of command \(commandID)"),
            kind: .results, journaled: false, commandID: commandID)
    }

    /// Persists a request in the outbox and sends it at once when connected;
    /// otherwise it goes out after the next connection. It stays in the
    /// outbox, and is sent again after each reconnect or request timeout,
    /// until the framework answers it.
    func sendRequest(
        method: String, path: String, contentType: String?, body: [UInt8], what: String,
        kind: Outbox.Kind, tag: String? = nil, journaled: Bool = true, commandID: String? = nil
    ) -> Int32 {
        var notes: [String] = []
        let now = clock.nowMs()
        let outcome = state.withLock { s -> Result<(Outbox.Item, T, Identity)?, StatusError> in
            guard let id = s.identity else { return .failure(StatusError(THINGIF_ERR_NOT_ONBOARDED.code)) }
            let item = Outbox.Item(
                id: newRequestID(&s), method: method, path: path, contentType: contentType,
                body: body, what: what, kind: kind, tag: tag, commandID: commandID, journaled: journaled)
            switch s.outbox.add(item) {
            case nil:
                notes.append(str("cannot write the outbox in \(storage.directory); \(what) not sent"))
                return .failure(StatusError(THINGIF_ERR_STORAGE.code))
            case .full?:
                notes.append(
                    str("outbox full (\(s.outbox.capacity) requests waiting for the framework); \(what) refused"))
                return .failure(StatusError(THINGIF_ERR_FULL.code))
            case .added(let dropped, let superseded)?:
                for old in dropped {
                    s.sentAt[ByteKey(old.id)] = nil
                    if !superseded { notes.append(str("outbox full: dropped the oldest state upload, \(old.what)")) }
                }
            }
            guard let t = s.transport else { return .success(nil) }
            s.sentAt[ByteKey(item.id)] = now
            return .success((item, t, id))
        }
        for n in notes { logger.warning(Text(n)) }
        switch outcome {
        case .failure(let e): return e.code
        case .success(let ready):
            if let (item, transport, identity) = ready { publish(item, on: transport, identity: identity) }
            return OK
        }
    }

    /// A request that is not persisted and not sent again (an update job's
    /// block request: its owner asks again after a timeout): sent now, or
    /// nil when not connected. Its reply goes to `PipelineOwner.transientReply`.
    func sendTransient(method: String, path: String) -> String? {
        let ready = state.withLock { s -> (String, T, Identity)? in
            guard let t = s.transport, let id = s.identity else { return nil }
            return (newRequestID(&s), t, id)
        }
        guard let (rid, transport, identity) = ready else { return nil }
        let item = Outbox.Item(
            id: rid, method: method, path: path, contentType: nil, body: [], what: str("\(method) \(path)"),
            kind: .other, journaled: false)
        return publish(item, on: transport, identity: identity) ? rid : nil
    }

    func newRequestID(_ s: inout State) -> String {
        s.requestCounter += 1
        return str("\(requestPrefix)-\(s.requestCounter)")
    }

    @discardableResult
    func publish(_ item: Outbox.Item, on transport: T, identity: Identity) -> Bool {
        var headers: [(name: String, value: String)] = [("Authorization", str("Bearer \(identity.accessToken)"))]
        if let ct = item.contentType { headers.append(("Content-Type", ct)) }
        headers.append((KiiFraming.requestIDHeader, item.id))
        let payload = KiiRequest(method: item.method, headers: headers, body: item.body).encode()
        let clientID = transport.clientID
        let rc = transport.publish(
            topic: Topics.request(clientID: clientID, appID: appID, path: item.path),
            payload: payload, qos: 1, retain: false, responseTopic: Topics.response(clientID: clientID),
            correlationData: Array(item.id.utf8))
        if rc == 0 {
            logger.debug("sent \(item.what) (request \(item.id))")
            passed(.published, item.commandID)
        } else {
            // sentAt stays set: the next try comes after the request timeout,
            // and the items behind this one are not held up.
            logger.warning("could not send \(item.what) now (\(T.describe(rc))); it stays in the outbox")
        }
        return rc == 0
    }

    /// Sends every outbox item not sent on this connection, or sent longer
    /// ago than the request timeout without an answer.
    func sendDue() {
        let now = clock.nowMs()
        var late: [String] = []
        let batch = state.withLock { s -> ([Outbox.Item], T, Identity)? in
            guard let t = s.transport, let id = s.identity else { return nil }
            let timeout = Int64(s.limits.requestTimeoutMs)
            var due: [Outbox.Item] = []
            for item in s.outbox.items where due.count < Pipeline.sendBatch {
                if let sent = s.sentAt[ByteKey(item.id)] {
                    guard now - sent >= timeout else { continue }
                    late.append(item.what)
                }
                s.sentAt[ByteKey(item.id)] = now
                due.append(item)
            }
            return (due, t, id)
        }
        for w in late { logger.warning("no answer from the framework to \(w); sending it again") }
        guard let (items, transport, identity) = batch else { return }
        for item in items { publish(item, on: transport, identity: identity) }
    }

    // MARK: acknowledgement

    func handleReply(_ m: TransportMessage) {
        guard let reply = KiiResponse.decode(m.payload) else {
            logger.warning("ignored a malformed reply of \(m.payload.count) bytes")
            return
        }
        let rid = m.correlationData.map { String(decoding: $0, as: UTF8.self) } ?? reply.requestID ?? ""
        // 2xx: done. 5xx and 429 (the framework's budget for this client is
        // spent): keep it; it goes out again after the timeout, which is
        // the slowing down a 429 asks for. Any other 4xx: the request itself
        // is wrong and sending it again cannot help.
        let retry = reply.isWorthRetrying
        let item = state.withLock { s -> Outbox.Item? in
            guard let item = s.outbox.item(rid) else { return nil }
            if !retry {
                if let cid = s.outbox.ack(rid)?.commandID { s.ledger.acknowledge(cid) }
                s.sentAt[ByteKey(rid)] = nil
            }
            return item
        }
        guard let item else {
            if owner.transientReply(rid, reply) { return }
            logger.debug("ignored a reply to unknown request \(rid)")
            return
        }
        if !retry { passed(.acknowledged, item.commandID) }
        if reply.isSuccess {
            logger.debug("framework accepted \(item.what): \(reply.status)")
        } else if retry {
            logger.warning(
                "framework answered \(item.what) with \(reply.status) \(reply.bodyText); it will be sent again")
        } else {
            logger.error("framework rejected \(item.what): \(reply.status) \(reply.bodyText)")
        }
        // A tagged item is a part's own request (today only the gateway's,
        // Gateway/): its answer is that part's to read, whatever the tag.
        if item.tag != nil { endNodeReplied(item, reply, retry: retry) }
    }
}
