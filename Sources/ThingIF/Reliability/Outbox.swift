// SPDX-License-Identifier: Apache-2.0

/// Requests to the framework (action results, state, firmware version, and
/// whatever else a part of the thing asks, e.g. a gateway's requests about
/// its end nodes) kept until the framework answers them, so that a lost
/// connection or a restart loses none: after every (re)connect the thing
/// sends all of them again. The one that adds an item says whether it is
/// persisted in the outbox's journal (`Item.journaled`: synced when added;
/// an acknowledgement is not synced, since a request sent twice is
/// harmless). Results are persisted by the command ledger, which holds them
/// until acknowledged (CommandLedger.owedResults), so they come in memory
/// only, as does a request made again at each connect.
///
/// A full state upload (PUT) supersedes every state upload still waiting
/// for the same thing (PUT or PATCH; a gateway's end nodes are other
/// things): those are dropped, so a resent old state can never overwrite a
/// newer one at the framework.
///
/// Bounded by `capacity` items. When it is full, the oldest state upload is
/// dropped to make room; when no state upload is left to drop, a new state
/// or other upload is refused (`.full`). Results are never dropped and
/// always admitted (they may take the outbox past `capacity`): the engine
/// stops taking new commands while `resultCount >= capacity`.
///
/// The outbox knows three kinds, by what it does with them, and no part of
/// the thing by name: a part tags its items (`Item.tag`, persisted, never
/// read here), and the pipeline hands the answer to a tagged item to that
/// part (CommandPipeline.handleReply).
///
/// Not thread-safe: the engine guards it with its lock.
final class Outbox {
    /// What the outbox does with an item: results are never dropped and
    /// are counted, state uploads supersede and are dropped first, other
    /// requests wait their turn.
    enum Kind: String, CaseIterable {
        case results, state, other
    }

    struct Item {
        var id: String
        var method: String
        var path: String
        var contentType: String?
        var body: [UInt8]
        var what: String
        var kind: Kind
        /// The name the part that added an item gave it (a gateway's
        /// "endNodeOnboarding", Gateway/EndNodeRequest): journaled as "k"
        /// in place of the kind, and never interpreted here. A tagged item
        /// is of kind other; its answer goes to the part that tagged it. A
        /// journal line whose "k" is none of the kinds loads as such an
        /// item: so journals from before tags (k "endNodeOnboarding", …)
        /// load as they were written. A tag is never a kind's name. nil: an
        /// untagged item (no allocation).
        var tag: String? = nil
        /// The command of a results request (acknowledged in the ledger).
        var commandID: String? = nil
        /// Written to the outbox's journal, as the one that adds it says:
        /// false for results (the ledger has them) and for a request made
        /// again at each connect. Items loaded from the journal are.
        var journaled = true
    }

    enum AddOutcome {
        /// Added; `dropped` lists the uploads it superseded or pushed out.
        case added(dropped: [Item], superseded: Bool)
        case full
    }

    static let fileName = "outbox.jsonl"

    var capacity: Int
    private let journal: Journal
    private(set) var items: [Item] = []

    init(storage: Storage, capacity: Int) {
        self.capacity = max(1, capacity)
        journal = Journal(storage: storage, name: Outbox.fileName)
        for r in journal.load() {
            guard let id = r["id"]?.stringValue else { continue }
            let op = r["op"]?.stringValue ?? ""
            if op.equals("add") {
                guard let method = r["m"]?.stringValue, let path = r["p"]?.stringValue,
                    let body = r["b"]?.stringValue
                else { continue }
                // A "k" that names no kind is a part's tag (Item.tag).
                let k = r["k"]?.stringValue ?? ""
                let kind = Kind(named: k)
                items.append(
                    Item(
                        id: id, method: method, path: path, contentType: r["ct"]?.stringValue,
                        body: Array(body.utf8), what: r["w"]?.stringValue ?? path, kind: kind ?? .other,
                        tag: kind == nil && !k.isEmpty ? k : nil))
            } else if op.equals("ack") || op.equals("drop") {
                items.removeAll { $0.id.equals(id) }
            }
        }
        resultCount = items.reduce(0) { $0 + ($1.kind == .results ? 1 : 0) }
    }

    /// How many results items it holds (kept as items change: read once per loop pass).
    private(set) var resultCount = 0

    private func encode(_ item: Item) -> JSON {
        let r = JSON.object()
        r.set("op", string: "add")
        r.set("id", string: item.id)
        r.set("m", string: item.method)
        r.set("p", string: item.path)
        if let ct = item.contentType { r.set("ct", string: ct) }
        r.set("b", string: String(decoding: item.body, as: UTF8.self))
        r.set("w", string: item.what)
        r.set("k", string: item.tag ?? item.kind.rawValue)
        return r
    }

    private func mark(_ op: String, _ id: String) -> Bool {
        let r = JSON.object()
        r.set("op", string: op)
        r.set("id", string: id)
        return journal.append(r, sync: false)
    }

    /// False: nothing is ever synced (THINGIF_OPT_DURABILITY none).
    var durable: Bool {
        get { journal.durable }
        set { journal.durable = newValue }
    }

    /// Keeps a new item, and persists it when it is `journaled` (results
    /// are not: the ledger has them). Returns nil when the journal could
    /// not be written.
    func add(_ item: Item) -> AddOutcome? {
        assert(item.kind != .results || !item.journaled, "results are the ledger's to persist")
        assert(item.tag == nil || item.kind == .other, "a tagged item is of kind other")
        let supersedes = item.kind == .state && item.method.equals("PUT")
        var drop = supersedes ? items.filter { $0.kind == .state && $0.path.equals(item.path) } : []
        if items.count - drop.count >= capacity && item.kind != .results {
            // Make room by dropping the oldest state upload; none left: refuse.
            guard !supersedes, let oldest = items.first(where: { $0.kind == .state }) else { return .full }
            drop.append(oldest)
        }
        for old in drop {
            guard mark("drop", old.id) else { return nil }
        }
        if !drop.isEmpty {
            let ids = Set(drop.map { ByteKey($0.id) })
            items.removeAll { ids.contains(ByteKey($0.id)) }
        }
        // One sync covers the drop marks before it (same file).
        if item.journaled {
            guard journal.append(encode(item)) else { return nil }
        } else if !drop.isEmpty {
            guard journal.sync() else { return nil }
        }
        items.append(item)
        if item.kind == .results { resultCount += 1 }
        // Results write nothing here, so they cannot make the journal longer.
        if item.journaled || !drop.isEmpty { compactIfNeeded() }
        return .added(dropped: drop, superseded: supersedes)
    }

    /// Removes an answered item; returns it, or nil when unknown.
    @discardableResult
    func ack(_ id: String) -> Item? {
        guard let i = items.firstIndex(where: { $0.id.equals(id) }) else { return nil }
        let item = items.remove(at: i)
        if item.kind == .results { resultCount -= 1 }
        if item.journaled {
            _ = mark("ack", id)
            compactIfNeeded()
        }
        return item
    }

    func item(_ id: String) -> Item? { items.first { $0.id.equals(id) } }

    /// Withdraws the items `matching` says, unanswered (a mark each, as an
    /// answer, synced when one was journaled: a withdrawn request never
    /// comes back after a crash); returns them.
    @discardableResult
    func withdraw(where matching: (Item) -> Bool) -> [Item] {
        let gone = items.filter(matching)
        for item in gone {
            _ = ack(item.id)
        }
        if gone.contains(where: { $0.journaled }) { _ = journal.sync() }
        return gone
    }

    /// Writes the unsynced marks that wait in memory (acknowledgements, drops).
    func writeOut() { journal.writeOut() }

    private func compactIfNeeded() {
        let journaled = items.reduce(0) { $0 + ($1.journaled ? 1 : 0) }
        guard journal.lineCount > 2 * journaled + 64 else { return }
        _ = journal.rewrite(items.filter { $0.journaled }.map(encode))
    }
}
