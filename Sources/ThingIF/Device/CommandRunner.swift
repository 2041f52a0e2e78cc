import CThingIF

/// A command whose actions are running or deferred: the results collect
/// here, by action index, until every action has one.
final class RunningCommand {
    let id: String
    let thingID: String
    /// (alias, number of actions) per group, to rebuild the grouped results.
    let layout: [(alias: String?, count: Int)]
    var results: [ActionResult?]
    var outstanding: Int

    init(_ command: Command, thingID: String) {
        id = command.id
        self.thingID = thingID
        layout = command.groups.map { ($0.alias, $0.entries.count) }
        results = Array(repeating: nil, count: command.actionCount)
        outstanding = command.actionCount
    }

    var actionResults: ActionResults {
        var groups: [ActionResults.Group] = []
        var i = 0
        for (alias, count) in layout {
            groups.append(
                ActionResults.Group(
                    alias: alias,
                    results: (i..<i + count).map {
                        results[$0] ?? .failure("", "no result")
                    }))
            i += count
        }
        return ActionResults(groups: groups)
    }
}

/// What `thingif_action_defer()` hands out: completes one action later,
/// from any thread.
final class DeferredAction {
    /// The thing, or nil once thingif_destroy() has run. Embedded Swift has no
    /// weak references, so the handle finds its thing in `LiveThings`.
    var thing: Thing? { LiveThings.thing(key) }
    private let key: LiveThings.Key
    let commandID: String
    let index: Int
    let name: String

    init(thing: Thing, commandID: String, index: Int, name: String) {
        self.key = LiveThings.remember(thing)
        self.commandID = commandID
        self.index = index
        self.name = name
    }
}

/// The things that deferred handles point at and thingif_destroy() has not
/// released yet: what a weak reference did before Embedded Swift. A key holds
/// a generation, so a new thing at a freed thing's address is not taken for it.
enum LiveThings {
    struct Key: Equatable {
        let id: ObjectIdentifier
        let generation: UInt64
    }

    private struct Table {
        var things: [ObjectIdentifier: (thing: Unmanaged<Thing>, generation: UInt64)] = [:]
        var nextGeneration: UInt64 = 1
    }

    private static let table = Locked(Table())

    static func remember(_ thing: Thing) -> Key {
        let id = ObjectIdentifier(thing)
        return table.withLock { t in
            if let e = t.things[id] { return Key(id: id, generation: e.generation) }
            let g = t.nextGeneration
            t.nextGeneration += 1
            t.things[id] = (Unmanaged.passUnretained(thing), g)
            return Key(id: id, generation: g)
        }
    }

    /// The thing, retained while the lock is held, so thingif_destroy() cannot
    /// free it in between; nil when it is gone.
    static func thing(_ key: Key) -> Thing? {
        table.withLock { t in
            guard let e = t.things[key.id], e.generation == key.generation else { return nil }
            return e.thing.takeUnretainedValue()
        }
    }

    /// Called by thingif_destroy() before it releases the thing.
    static func forget(_ thing: Thing) {
        _ = table.withLock { $0.things.removeValue(forKey: ObjectIdentifier(thing)) }
    }
}

extension Thing {
    static let interruptedMessage = "interrupted: the thing stopped while this command ran; it was not run again"

    /// What the loop made of a received command before running anything.
    enum Admission {
        /// Not a command it can run (logged; reported when nameable).
        case refused
        case running(String)
        case done(String, body: [UInt8], alreadyQueued: Bool)
        case interrupted(String, skeleton: [UInt8])
        /// New: recorded as started (durable once the ledger is flushed,
        /// unless `persisted` is false: the ledger could not be written).
        case new(Command, persisted: Bool)

        var isNew: Bool {
            if case .new = self { return true }
            return false
        }
    }

    /// A command payload from the thing's topic (loop thread), run at once.
    func handleCommand(_ payload: [UInt8], identity: Identity, maxPayload: Int) {
        execute(admit(payload, identity: identity, maxPayload: maxPayload, sync: true), identity: identity)
    }

    /// Decodes a command and, when it is new, records it as started: synced
    /// at once with `sync`, else by the caller's `ledger.flush()` before
    /// `execute` (group commit: one sync for every command of a loop pass).
    func admit(_ payload: [UInt8], identity: Identity, maxPayload: Int, sync: Bool) -> Admission {
        let command: Command
        switch Command.decode(payload, maxSize: maxPayload) {
        case .failure(let e):
            logger.error(Text(e.message))
            if let id = e.commandID { reportDropped(id, reason: e.message, thingID: identity.thingID) }
            return .refused
        case .success(let c):
            command = c
        }
        let resultsPath = Thing.resultsPath(thingID: identity.thingID, commandID: command.id)
        return shared.withLock { s -> Admission in
            if s.running[ByteKey(command.id)] != nil { return .running(command.id) }
            switch s.ledger.state(of: command.id) {
            case .done(let r)?:
                return .done(
                    command.id, body: r,
                    alreadyQueued: s.outbox.items.contains { $0.path.equals(resultsPath) }
                        || s.heldResults.contains { $0.commandID.equals(command.id) })
            case .started(let skeleton)?: return .interrupted(command.id, skeleton: skeleton)
            case nil:
                let ok = s.ledger.start(command.id, skeleton: CommandLedger.skeleton(of: command), sync: sync)
                s.running[ByteKey(command.id)] = RunningCommand(command, thingID: identity.thingID)
                return .new(command, persisted: ok)
            }
        }
    }

    func execute(_ admission: Admission, identity: Identity) {
        switch admission {
        case .refused:
            return
        case .running(let id):
            logger.info("command \(id) arrived again while it still runs; ignored")
        case .done(let id, let results, let queued):
            logger.info("command \(id) arrived again; it ran already\(queued ? "" : ": sending its results again")")
            if !queued { _ = sendResults(results, commandID: id, thingID: identity.thingID) }
        case .interrupted(let id, let skeleton):
            logger.warning("command \(id) arrived again after it was cut off; reporting it as interrupted")
            finishInterrupted(id, skeleton: skeleton, thingID: identity.thingID)
        case .new(let command, let persisted):
            if !persisted {
                logger.error(
                    "cannot record command \(command.id) in \(storage.path(CommandLedger.fileName)); running it without the at-most-once guard"
                )
            }
            run(command)
        }
    }

    /// A command dropped before its actions could be read, whose commandID
    /// could: recorded as done and reported once (ActionResults.dropped), so
    /// that it gets an outcome; a repeat of it changes nothing.
    func reportDropped(_ id: String, reason: String, thingID: String) {
        let body = ActionResults.dropped(reason: reason).dumpBytes()
        let first = shared.withLock { s -> Bool in
            guard s.running[ByteKey(id)] == nil, s.ledger.state(of: id) == nil else { return false }
            _ = s.ledger.finish(id, body: body, thingID: thingID)
            return true
        }
        if first {
            logger.warning("reporting command \(id) as dropped, with every action failed")
            _ = sendResults(body, commandID: id, thingID: thingID)
        }
    }

    static func resultsPath(thingID: String, commandID: String) -> String {
        str("targets/thing:\(thingID)/commands/\(commandID)/action-results")
    }

    func sendResults(_ body: [UInt8], commandID: String, thingID: String) -> Int32 {
        sendRequest(
            method: "PUT", path: Thing.resultsPath(thingID: thingID, commandID: commandID),
            contentType: MediaType.json, body: body, what: str("results of command \(commandID)"),
            kind: .results, commandID: commandID)
    }

    /// Reports the commands that a crash cut off, once per handle.
    func reportInterrupted() {
        let work = shared.withLock { s -> ([(id: String, skeleton: [UInt8])], String)? in
            guard !s.interruptedReported, let id = s.identity else { return nil }
            s.interruptedReported = true
            return (s.ledger.interrupted, id.thingID)
        }
        guard let (list, thingID) = work else { return }
        for (id, skeleton) in list {
            logger.warning("command \(id) was cut off by a restart; reporting it as interrupted")
            finishInterrupted(id, skeleton: skeleton, thingID: thingID)
        }
    }

    private func finishInterrupted(_ id: String, skeleton: [UInt8], thingID: String) {
        let results = CommandLedger.failedResults(skeleton: skeleton, message: Thing.interruptedMessage).bytes()
        _ = shared.withLock { $0.ledger.finish(id, body: results, thingID: thingID) }
        _ = sendResults(results, commandID: id, thingID: thingID)
    }

    /// Runs a command's actions in order; each result lands in its
    /// RunningCommand, and the last one sends the results.
    func run(_ command: Command) {
        let strings = CommandStrings(command)
        var index = 0
        for g in command.groups {
            for e in g.entries {
                switch e {
                case .invalid(let name, let reason):
                    logger.warning(Text(reason))
                    complete(command.id, index: index, result: .failure(name, reason))
                case .action(let name, let params):
                    if let result = runAction(
                        name: name, params: params, alias: g.alias, command: command,
                        strings: strings, index: index)
                    {
                        complete(command.id, index: index, result: result)
                    }
                }
                index += 1
            }
        }
    }

    /// Runs one handler; nil when the handler deferred its result.
    private func runAction(
        name: String, params: JSON, alias: String?, command: Command, strings: CommandStrings,
        index: Int
    ) -> ActionResult? {
        let handler = shared.withLock {
            $0.handlers.lookup(schema: command.schema, version: command.schemaVersion, alias: alias, action: name)
        }
        guard let handler else {
            let scope: String
            if let alias {
                scope = str("alias \"\(alias)\"")
            } else if let schema = command.schema {
                scope = str("schema \"\(schema)\" version \(command.schemaVersion)")
            } else {
                scope = "a command without schema"
            }
            return .failure(name, str("no handler for action \"\(name)\" of \(scope)"))
        }
        let ctx = ActionContext(thing: self, command: strings, name: name, alias: alias, params: params, index: index)
        let opaque = OpaquePointer(Unmanaged.passUnretained(ctx).toOpaque())
        withExtendedLifetime(ctx) {
            handler.callback(opaque, handler.userdata)
        }
        return ctx.deferred == nil ? ctx.result : nil
    }

    /// Records one action's result; sends the results when it was the last.
    func complete(_ commandID: String, index: Int, result: ActionResult) {
        let finished = shared.withLock { s -> RunningCommand? in
            guard let rc = s.running[ByteKey(commandID)], index < rc.results.count, rc.results[index] == nil else {
                return nil
            }
            rc.results[index] = result
            rc.outstanding -= 1
            guard rc.outstanding == 0 else { return nil }
            s.running[ByteKey(commandID)] = nil
            return rc
        }
        guard let rc = finished else { return }
        let results = rc.actionResults.bytes()
        // Durable before they are published: at once, or, inside a batch of
        // the loop, with the batch's one sync (processInbox).
        let outcome = shared.withLock { s -> (recorded: Bool, held: Bool) in
            let ok = s.ledger.finish(rc.id, body: results, thingID: rc.thingID, sync: !s.batching)
            if s.batching { s.heldResults.append((rc.id, rc.thingID, results)) }
            return (ok, s.batching)
        }
        if !outcome.recorded {
            logger.error("cannot record the results of command \(rc.id) in \(storage.path(CommandLedger.fileName))")
        }
        if !outcome.held { _ = sendResults(results, commandID: rc.id, thingID: rc.thingID) }
    }

    /// Completes a deferred action (any thread).
    func completeDeferred(_ d: DeferredAction, errorMessage: String?, data: JSON?) -> Int32 {
        let known = shared.withLock { s in
            s.running[ByteKey(d.commandID)]?.results[d.index] == nil && s.running[ByteKey(d.commandID)] != nil
        }
        guard known else { return THINGIF_ERR_STATE.code }
        var result = ActionResult(name: d.name, succeeded: errorMessage == nil, errorMessage: nil, data: data)
        if let m = errorMessage {
            result.errorMessage = ActionContext.truncate(m)
        }
        complete(d.commandID, index: d.index, result: result)
        return OK
    }
}
