// SPDX-License-Identifier: Apache-2.0

/// The persisted record of the commands this thing has taken, so that a
/// command runs at most once: a command is marked "started" (synced) before
/// its first handler runs and "done" with its results (synced) before they
/// are published. A redelivered command that is done is not run again, its
/// stored results are sent again; one found "started" after a restart was
/// cut off by a crash and is reported as failed ("interrupted"), never re-run.
///
/// The ledger also holds the results until the framework acknowledges them
/// (an unsynced "k" record: a lost acknowledgement only means the results
/// go out once more, which the framework ignores), so the outbox needs no
/// copy of them: two syncs per command, and fewer when the loop commits a
/// batch of commands with one (`sync: false`, then `flush()`).
///
/// A gateway's commands for its end nodes share the ledger: each record of
/// one names its end node (`"e"`), so that the command is reported for it
/// after a restart and never taken on another end node's topic
/// (docs/GATEWAYS.md §5).
///
/// It remembers the newest `capacity` commands. Not thread-safe: the engine
/// uses it from the loop thread only.
final class CommandLedger {
    enum State {
        /// Running, or cut off; `skeleton` lists the actions (the JSON text
        /// of `skeleton(of:)`).
        case started(skeleton: [UInt8])
        /// Finished; the action-results body as sent.
        case done(body: [UInt8])
        /// The hub cancelled it before it was taken (CommandCancel): when it
        /// arrives it is not run; every action fails with reason CANCELLED.
        case cancelled
    }

    /// Results the framework has not acknowledged yet: (commandID, thingID).
    private var unacknowledged: [ByteKey: String] = [:]
    /// The end node of each command taken for one (a gateway's); none: the thing's own.
    private var targets: [ByteKey: String] = [:]

    static let fileName = "ledger.jsonl"

    var capacity: Int {
        didSet { capacity = max(1, capacity) }
    }
    private let journal: Journal
    private var states: [ByteKey: State] = [:]
    private var order: [String] = []
    /// Commands found started but not done when the ledger was loaded.
    private(set) var interrupted: [(id: String, skeleton: [UInt8], target: String?)] = []

    /// Loads every remembered command, whatever `capacity` is: the handle's
    /// THINGIF_OPT_LEDGER_SIZE is set only after this runs, and trims from
    /// the next new command on.
    init(storage: Storage, capacity: Int) {
        self.capacity = Int.max
        journal = Journal(storage: storage, name: CommandLedger.fileName)
        for r in journal.load() {
            guard let id = r["c"]?.stringValue else { continue }
            if let e = r["e"]?.stringValue { targets[ByteKey(id)] = e }
            if let results = r["r"] {
                record(id, .done(body: results.dumpBytes()))
                // A "t" names the thing the results are owed to; earlier
                // versions kept them in the outbox instead.
                if let t = r["t"]?.stringValue, r["k"] == nil { unacknowledged[ByteKey(id)] = t }
            } else if let skeleton = r["a"] {
                record(id, .started(skeleton: skeleton.dumpBytes()))
            } else if r["x"] != nil {
                record(id, .cancelled)
            } else if r["k"] != nil {
                unacknowledged[ByteKey(id)] = nil
            }
        }
        self.capacity = max(1, capacity)
        interrupted = order.compactMap { id in
            if case .started(let s) = states[ByteKey(id)] { return (id, s, targets[ByteKey(id)]) }
            return nil
        }
    }

    var count: Int { states.count }

    func state(of commandID: String) -> State? { states[ByteKey(commandID)] }

    /// The end node a command was taken for; nil: the thing's own (or unknown).
    func target(of commandID: String) -> String? { targets[ByteKey(commandID)] }

    private func record(_ id: String, _ state: State) {
        if states.updateValue(state, forKey: ByteKey(id)) == nil { order.append(id) }
        // Results still owed are kept past the capacity.
        while order.count > capacity, let i = order.firstIndex(where: { unacknowledged[ByteKey($0)] == nil }) {
            let key = ByteKey(order.remove(at: i))
            states[key] = nil
            targets[key] = nil
        }
    }

    /// False: nothing is ever synced (THINGIF_OPT_DURABILITY none).
    var durable: Bool {
        get { journal.durable }
        set { journal.durable = newValue }
    }

    /// Marks a command as started; durable on return with `sync`, else
    /// after the next `flush()`. False when it could not be written.
    /// `target`: the end node it is for (nil: the thing's own).
    func start(_ commandID: String, skeleton: [UInt8], target: String? = nil, sync: Bool = true) -> Bool {
        persist(commandID, .started(skeleton: skeleton), thingID: nil, target: target, sync: sync)
    }

    /// Marks a command the thing has not taken as cancelled: a later
    /// delivery of it is refused, not run (also after a restart, once
    /// synced: `sync`, or the next `flush()`).
    func cancel(_ commandID: String, target: String? = nil, sync: Bool = true) -> Bool {
        persist(commandID, .cancelled, thingID: nil, target: target, sync: sync)
    }

    /// Marks a command as done with the results body it reported (JSON
    /// text, written into the record as is); with a `thingID`, the ledger
    /// holds the results until `acknowledge`. The command keeps the end
    /// node it was started or cancelled for, or takes `target`'s.
    func finish(_ commandID: String, body: [UInt8], thingID: String?, target: String? = nil, sync: Bool = true) -> Bool
    {
        let t = targets[ByteKey(commandID)] ?? target
        guard persist(commandID, .done(body: body), thingID: thingID, target: t, sync: sync) else { return false }
        interrupted.removeAll { $0.id.equals(commandID) }
        return true
    }

    /// Makes every record so far durable (one fdatasync at most).
    func flush() -> Bool { journal.sync() }

    /// Writes the unsynced records that wait in memory (acknowledgements).
    func writeOut() { journal.writeOut() }

    /// The framework has the results of `commandID`: an unsynced record.
    func acknowledge(_ commandID: String) {
        guard unacknowledged.removeValue(forKey: ByteKey(commandID)) != nil else { return }
        var line = Array(#"{"c":"#.utf8)
        line += JSON.quoted(commandID)
        line += Array(",\"k\":1}\n".utf8)
        _ = journal.append(line: line, sync: false)
        compactIfNeeded()
    }

    /// Results owed to the framework, oldest first: what the outbox sends
    /// again after a restart.
    func owedResults() -> [(commandID: String, thingID: String, body: [UInt8])] {
        order.compactMap { id in
            guard let t = unacknowledged[ByteKey(id)], case .done(let b)? = states[ByteKey(id)] else { return nil }
            return (id, t, b)
        }
    }

    /// One journal line: {"c": id, "a": skeleton}, {"c": id, "r": results,
    /// "t"?: thingID while owed} or {"c": id, "x": 1} (cancelled), each with
    /// "e": its end node when it is a gateway's end node's, built from bytes
    /// (the results body is written as the request carries it, not encoded again).
    private func line(_ id: String, _ state: State) -> [UInt8] {
        var out: [UInt8] = []
        switch state {
        case .started(let s):
            out.reserveCapacity(id.utf8.count + s.count + 16)
            out.append(contentsOf: #"{"c":"#.utf8)
            out += JSON.quoted(id)
            out.append(contentsOf: #","a":"#.utf8)
            out += s
        case .done(let body):
            out.reserveCapacity(id.utf8.count + body.count + 64)
            out.append(contentsOf: #"{"c":"#.utf8)
            out += JSON.quoted(id)
            out.append(contentsOf: #","r":"#.utf8)
            out += body
            if let t = unacknowledged[ByteKey(id)] {
                out.append(contentsOf: #","t":"#.utf8)
                out += JSON.quoted(t)
            }
        case .cancelled:
            out.append(contentsOf: #"{"c":"#.utf8)
            out += JSON.quoted(id)
            out.append(contentsOf: #","x":1"#.utf8)
        }
        if let e = targets[ByteKey(id)] {
            out.append(contentsOf: #","e":"#.utf8)
            out += JSON.quoted(e)
        }
        out.append(0x7D)
        out.append(0x0A)
        return out
    }

    private func persist(_ id: String, _ state: State, thingID: String?, target: String?, sync: Bool) -> Bool {
        if let thingID { unacknowledged[ByteKey(id)] = thingID }
        let previousTarget = targets[ByteKey(id)]
        if let target { targets[ByteKey(id)] = target }
        guard journal.append(line: line(id, state), sync: sync) else {
            if thingID != nil { unacknowledged[ByteKey(id)] = nil }
            targets[ByteKey(id)] = previousTarget
            return false
        }
        record(id, state)
        compactIfNeeded()
        return true
    }

    private func compactIfNeeded() {
        guard journal.lineCount > 3 * capacity + 64 else { return }
        _ = journal.rewrite(lines: order.compactMap { id in states[ByteKey(id)].map { line(id, $0) } })
    }

    /// The action names of a command, grouped as its results will be:
    /// [{"alias":"A","names":["turnPower",…]}] ("alias" absent for schema commands).
    static func skeleton(of command: Command) -> [UInt8] {
        var out: [UInt8] = [0x5B]
        for (i, g) in command.groups.enumerated() {
            out += i == 0 ? [0x7B] : [0x2C, 0x7B]
            if let alias = g.alias {
                out += Array(#""alias":"#.utf8)
                out += JSON.quoted(alias)
                out.append(0x2C)
            }
            out += Array(#""names":["#.utf8)
            for (k, e) in g.entries.enumerated() {
                if k > 0 { out.append(0x2C) }
                out += JSON.quoted(e.name)
            }
            out += [0x5D, 0x7D]
        }
        out.append(0x5D)
        return out
    }

    /// Failed results for every action of a skeleton.
    static func failedResults(skeleton: [UInt8], message: String) -> ActionResults {
        let groups: [JSON]
        if case .success(let j) = JSON.parse(skeleton) { groups = j.elements } else { groups = [] }
        return ActionResults(
            groups: groups.map { g in
                ActionResults.Group(
                    alias: g["alias"]?.stringValue,
                    results: (g["names"]?.elements ?? []).map { .failure($0.stringValue ?? "", message) })
            })
    }
}
