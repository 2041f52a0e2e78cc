/// The persisted record of the commands this thing has taken, so that a
/// command runs at most once: a command is marked "started" (fsync'd) before
/// its first handler runs and "done" with its results after the last. A
/// redelivered command that is done is not run again, its stored results are
/// sent again; one found "started" after a restart was cut off by a crash and
/// is reported as failed ("interrupted"), never re-run.
///
/// It remembers the newest `capacity` commands. Not thread-safe: the engine
/// uses it from the loop thread only.
final class CommandLedger {
    enum State {
        /// Running, or cut off; `skeleton` lists the actions (see `skeleton(of:)`).
        case started(skeleton: JSON)
        /// Finished; the action-results body as sent.
        case done(results: JSON)
    }

    static let fileName = "ledger.jsonl"

    var capacity: Int {
        didSet { capacity = max(1, capacity) }
    }
    private let journal: Journal
    private var states: [String: State] = [:]
    private var order: [String] = []
    /// Commands found started but not done when the ledger was loaded.
    private(set) var interrupted: [(id: String, skeleton: JSON)] = []

    /// Loads every remembered command, whatever `capacity` is: the handle's
    /// THINGIF_OPT_LEDGER_SIZE is set only after this runs, and trims from
    /// the next new command on.
    init(storage: Storage, capacity: Int) {
        self.capacity = Int.max
        journal = Journal(storage: storage, name: CommandLedger.fileName)
        for r in journal.load() {
            guard let id = r["c"]?.stringValue else { continue }
            if let results = r["r"] {
                record(id, .done(results: results))
            } else if let skeleton = r["a"] {
                record(id, .started(skeleton: skeleton))
            }
        }
        self.capacity = max(1, capacity)
        interrupted = order.compactMap { id in
            if case .started(let s) = states[id] { return (id, s) }
            return nil
        }
    }

    var count: Int { states.count }

    func state(of commandID: String) -> State? { states[commandID] }

    private func record(_ id: String, _ state: State) {
        if states.updateValue(state, forKey: id) == nil { order.append(id) }
        while order.count > capacity {
            states[order.removeFirst()] = nil
        }
    }

    /// Marks a command as started. False when it could not be persisted.
    func start(_ commandID: String, skeleton: JSON) -> Bool {
        persist(commandID, .started(skeleton: skeleton))
    }

    /// Marks a command as done with the results body it reported.
    func finish(_ commandID: String, results: JSON) -> Bool {
        guard persist(commandID, .done(results: results)) else { return false }
        interrupted.removeAll { $0.id == commandID }
        return true
    }

    /// One journal line: {"c": id, "a": skeleton} or {"c": id, "r": results}.
    private static func line(_ id: String, _ state: State) -> JSON {
        let r = JSON.object()
        r.set("c", string: id)
        switch state {
        case .started(let s): r.set("a", s)
        case .done(let res): r.set("r", res)
        }
        return r
    }

    private func persist(_ id: String, _ state: State) -> Bool {
        guard journal.append(CommandLedger.line(id, state)) else { return false }
        record(id, state)
        if journal.lineCount > 2 * capacity + 64 {
            _ = journal.rewrite(order.compactMap { id in states[id].map { CommandLedger.line(id, $0) } })
        }
        return true
    }

    /// The action names of a command, grouped as its results will be:
    /// [{"alias":"A","names":["turnPower",…]}] ("alias" absent for schema commands).
    static func skeleton(of command: Command) -> JSON {
        let groups = JSON.array()
        for g in command.groups {
            let o = JSON.object()
            if let alias = g.alias { o.set("alias", string: alias) }
            let names = JSON.array()
            for e in g.entries { if let n = JSON.string(e.name) { names.append(n) } }
            o.set("names", names)
            groups.append(o)
        }
        return groups
    }

    /// Failed results for every action of a skeleton.
    static func failedResults(skeleton: JSON, message: String) -> ActionResults {
        ActionResults(
            groups: skeleton.elements.map { g in
                ActionResults.Group(
                    alias: g["alias"]?.stringValue,
                    results: (g["names"]?.elements ?? []).map { .failure($0.stringValue ?? "", message) })
            })
    }
}
