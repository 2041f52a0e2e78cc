// SPDX-License-Identifier: Apache-2.0

import CThingIF

/// What a gateway's firmware is told of an end node's membership
/// (thingif_end_node_cb; the values are enum thingif_end_node_event's).
struct EndNodeNotice {
    enum Event: Int32 {
        case added = 0
        case refused = 1
        case removed = 2
        case changed = 3
    }

    var event: Event
    var vendorThingID: String
    var thingID: String?
    /// The framework's errorCode and message (REFUSED), or nil.
    var detail: String? = nil
}

/// The end nodes a gateway carries (docs/GATEWAYS.md §8), by vendorThingID:
/// the thingID once the framework gave one, whether the firmware says the
/// device is reachable, and whether its removal waits for the framework.
/// Kept in storage_dir/end_nodes.json (written atomically and synced on
/// every change of membership; no password, no token; `online` is not kept:
/// every end node is offline when a handle is created).
///
/// Not thread-safe: the target resolver (GatewayTargets) holds it, in the
/// pipeline's state, behind the pipeline's lock.
struct EndNodeRegistry {
    struct Entry {
        var vendorThingID: String
        var thingID: String?
        var online = false
        /// thingif_end_node_remove() ran; the framework has not confirmed.
        var removing = false
    }

    static let fileName = "end_nodes.json"
    static let defaultMax = 100
    /// The most entries the framework's own events may make (the hub has
    /// its limit per gateway; this bounds memory whatever it says).
    static let hardMax = 100_000

    private(set) var entries: [Entry] = []
    var max = EndNodeRegistry.defaultMax
    /// Where each vendorThingID and each thingID is in `entries`: a lookup
    /// per command and per upload costs the same for 10 end nodes or 10,000
    /// (bench/gateway, gateway-one-journal.md).
    private var byVendorThingID: [ByteKey: Int] = [:]
    private var byThingID: [ByteKey: Int] = [:]

    /// Loads storage_dir/end_nodes.json (a build without gateways reads
    /// nothing); `problem` says why it could not be read.
    init(storage: Storage) {
        guard Gateways.built, let bytes = storage.read(Self.fileName, limit: 64 << 20) else { return }
        guard case .success(let j) = JSON.parse(bytes), let list = j["endNodes"], list.isArray else {
            problem = str("\(storage.path(Self.fileName)) is not a list of end nodes; starting with none")
            return
        }
        for e in list.elements {
            guard let v = e["vendorThingID"]?.stringValue, !v.isEmpty, index(vendorThingID: v) == nil else { continue }
            let t = e["thingID"]?.stringValue.flatMap { Topics.isSafeLevel($0) ? $0 : nil }
            append(Entry(vendorThingID: v, thingID: t, removing: e["removing"]?.boolValue ?? false))
        }
    }

    private(set) var problem: String?

    func index(vendorThingID v: String) -> Int? { byVendorThingID[ByteKey(v)] }
    func index(thingID t: String) -> Int? { byThingID[ByteKey(t)] }
    func entry(vendorThingID v: String) -> Entry? { index(vendorThingID: v).map { entries[$0] } }
    func entry(thingID t: String) -> Entry? { index(thingID: t).map { entries[$0] } }

    mutating func append(_ e: Entry) {
        entries.append(e)
        indexEntry(entries.count - 1)
    }

    /// Removes an entry (a membership change, rare): the positions after it
    /// move, so both maps are made again.
    mutating func remove(at i: Int) {
        entries.remove(at: i)
        byVendorThingID.removeAll(keepingCapacity: true)
        byThingID.removeAll(keepingCapacity: true)
        for j in entries.indices { indexEntry(j) }
    }

    mutating func update(_ i: Int, _ body: (inout Entry) -> Void) {
        let old = entries[i]
        body(&entries[i])
        let new = entries[i]
        if !old.vendorThingID.equals(new.vendorThingID) { byVendorThingID[ByteKey(old.vendorThingID)] = nil }
        if let t = old.thingID, !(new.thingID?.equals(t) ?? false) { byThingID[ByteKey(t)] = nil }
        indexEntry(i)
    }

    /// Maps entry i's names to i. Two entries with one thingID (a file
    /// written by hand) find the first, as a scan in order would.
    private mutating func indexEntry(_ i: Int) {
        byVendorThingID[ByteKey(entries[i].vendorThingID)] = i
        if let t = entries[i].thingID, byThingID[ByteKey(t)] == nil { byThingID[ByteKey(t)] = i }
    }

    /// Writes the registry (atomically, synced). False on an I/O error.
    func save(_ storage: Storage) -> Bool {
        let list = JSON.array()
        for e in entries {
            let o = JSON.object()
            o.set("vendorThingID", string: e.vendorThingID)
            if let t = e.thingID { o.set("thingID", string: t) }
            if e.removing { o.set("removing", .bool(true)) }
            list.append(o)
        }
        let root = JSON.object()
        root.set("endNodes", list)
        return storage.write(Self.fileName, root.dumpBytes())
    }
}
