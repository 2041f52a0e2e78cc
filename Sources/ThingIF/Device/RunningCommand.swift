// SPDX-License-Identifier: Apache-2.0

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

/// Running one action: the handler lookup and the C call, for the pipeline
/// (CommandPipeline.run owns the order and the results).
extension Thing {
    /// Runs one handler; nil when the handler deferred its result.
    func runAction(_ call: ActionCall) -> ActionResult? {
        let command = call.command, name = call.name, alias = call.alias
        // The update offer's reserved alias is the library's own (Update/).
        if let alias, alias.equals(UpdateAgent.alias) {
            return name.equals(UpdateOffer.actionName)
                ? runUpdateOffer(call) : .failure(name, str("no action \"\(name)\" of alias \"\(alias)\""))
        }
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
        let ctx = ActionContext(
            thing: self, command: call.strings, name: name, alias: alias, params: call.params, index: call.index)
        let opaque = OpaquePointer(Unmanaged.passUnretained(ctx).toOpaque())
        withExtendedLifetime(ctx) {
            handler.callback(opaque, handler.userdata)
        }
        return ctx.deferred == nil ? ctx.result : nil
    }

    /// Completes a deferred action (any thread).
    func completeDeferred(_ d: DeferredAction, errorMessage: String?, data: JSON?) -> Int32 {
        guard pipeline.isPending(d.commandID, index: d.index) else { return THINGIF_ERR_STATE.code }
        var result = ActionResult(name: d.name, succeeded: errorMessage == nil, errorMessage: nil, data: data)
        if let m = errorMessage {
            result.errorMessage = ActionContext.truncate(m)
        }
        return pipeline.complete(d.commandID, index: d.index, result: result) ? OK : THINGIF_ERR_STATE.code
    }
}
