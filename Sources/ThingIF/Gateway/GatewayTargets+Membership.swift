// SPDX-License-Identifier: Apache-2.0

import CThingIF

/// What thingif_end_node_remove() does next (GatewayTargets.removal).
enum EndNodeRemovalStep {
    case failed(Int32)
    /// It had no thingID yet: forgotten; its onboarding is to be withdrawn.
    case forgotten
    case delete(path: String)
}

/// The registry's changes (docs/GATEWAYS.md §2, §4, §7): the firmware's own
/// (add, remove), the hub's word (events, answers, the list read) and the
/// list read's bookkeeping. Each saves the registry; the caller holds the
/// pipeline's lock and, after it, tells the firmware and the broker.
extension GatewayTargets {
    // MARK: the firmware's calls

    /// thingif_end_node_add: `v` registered (synced), online; OK or why not.
    mutating func register(_ v: String, storage: Storage) -> Int32 {
        guard registry.index(vendorThingID: v) == nil else { return THINGIF_ERR_EXISTS.code }
        guard registry.entries.count < registry.max else { return THINGIF_ERR_TOO_MANY.code }
        registry.append(.init(vendorThingID: v, thingID: nil, online: true))
        guard registry.save(storage) else {
            registry.remove(at: registry.entries.count - 1)
            return THINGIF_ERR_STORAGE.code
        }
        return OK
    }

    /// Forgets `v`, as if it had never been added (its onboarding failed).
    mutating func unregister(_ v: String, storage: Storage) {
        if let i = registry.index(vendorThingID: v) { registry.remove(at: i) }
        _ = registry.save(storage)
    }

    /// thingif_end_node_remove: one with a thingID is marked removing (its
    /// commands are refused) and its DELETE is to go out; one still waiting
    /// for its onboarding is forgotten at once.
    mutating func removal(_ v: String, gateway: String, storage: Storage) -> EndNodeRemovalStep {
        guard let i = registry.index(vendorThingID: v) else { return .failed(THINGIF_ERR_NOT_FOUND.code) }
        let e = registry.entries[i]
        guard let thingID = e.thingID else {
            registry.remove(at: i)
            guard registry.save(storage) else {
                registry.append(e)
                return .failed(THINGIF_ERR_STORAGE.code)
            }
            return .forgotten
        }
        if e.removing { return .failed(OK) }
        registry.update(i) { $0.removing = true }
        guard registry.save(storage) else {
            registry.update(i) { $0.removing = false }
            return .failed(THINGIF_ERR_STORAGE.code)
        }
        return .delete(path: str("things/\(gateway)/end-nodes/\(thingID)"))
    }

    /// The DELETE of `v` could not be queued: no longer removing.
    mutating func removalFailed(_ v: String, storage: Storage) {
        if let i = registry.index(vendorThingID: v) { registry.update(i) { $0.removing = false } }
        _ = registry.save(storage)
    }

    /// An onboarding the framework refused: true when `v` was still
    /// waiting for it (then forgotten).
    mutating func refused(_ v: String, storage: Storage) -> Bool {
        guard let i = registry.index(vendorThingID: v), registry.entries[i].thingID == nil else { return false }
        registry.remove(at: i)
        _ = registry.save(storage)
        return true
    }

    // MARK: the hub's word

    /// The hub says end node `id` is `v`: a new one, one whose onboarding
    /// answered, one renamed, or one whose vendorThingID now names another
    /// thing (the hub's word wins). The notices for the firmware, in order
    /// (GATEWAYS.md §7), and whether `id`'s status is to be published (a new
    /// topic here: a rename changes none), with its online flag.
    mutating func learn(
        thingID id: String, vendorThingID v: String, storage: Storage, logger: Logger
    ) -> (notices: [EndNodeNotice], status: Bool?) {
        var notices: [EndNodeNotice] = []
        var newTopic = true
        syncSeen?.insert(ByteKey(id))
        let byVendor = registry.index(vendorThingID: v)
        let byThing = registry.index(thingID: id)
        switch (byVendor, byThing) {
        case (let i?, let j?) where i == j:
            return ([], nil)  // known as it is
        case (let i?, nil) where registry.entries[i].thingID == nil:
            registry.update(i) { $0.thingID = id }
            notices.append(.init(event: .added, vendorThingID: v, thingID: id))
        case (let i?, let j):
            // v named another thing here: the hub's word wins.
            if let j {
                let old = registry.entries[j]
                notices.append(.init(event: .removed, vendorThingID: old.vendorThingID, thingID: id))
                registry.remove(at: j)
            }
            let k = j.map { $0 < i ? i - 1 : i } ?? i
            registry.update(k) { $0.thingID = id }
            notices.append(.init(event: .changed, vendorThingID: v, thingID: id))
        case (nil, let j?):
            newTopic = false
            registry.update(j) { $0.vendorThingID = v }
            notices.append(.init(event: .changed, vendorThingID: v, thingID: id))
        case (nil, nil):
            guard registry.entries.count < EndNodeRegistry.hardMax else {
                logger.error("end node \(id) (\(v)) not kept: this gateway holds \(EndNodeRegistry.hardMax) already")
                return ([], nil)
            }
            registry.append(.init(vendorThingID: v, thingID: id))
            notices.append(.init(event: .added, vendorThingID: v, thingID: id))
        }
        if !registry.save(storage) {
            logger.error("cannot write \(storage.path(EndNodeRegistry.fileName)); end node \(v) kept in memory only")
        }
        guard newTopic, let e = registry.entry(thingID: id) else { return (notices, nil) }
        return (notices, e.online)
    }

    /// End node `id` is gone at the hub: its entry, when it was known.
    mutating func forget(thingID id: String, storage: Storage, logger: Logger) -> EndNodeRegistry.Entry? {
        guard let i = registry.index(thingID: id) else { return nil }
        let e = registry.entries[i]
        registry.remove(at: i)
        if syncSeen != nil { syncForgotten.insert(ByteKey(id)) }
        if !registry.save(storage) {
            logger.error(
                "cannot write \(storage.path(EndNodeRegistry.fileName)); end node \(id)'s removal kept in memory only")
        }
        return e
    }

    // MARK: the list read after each connect

    /// A read begins: nothing seen, nothing forgotten yet.
    mutating func syncStarted() {
        syncSeen = []
        syncForgotten = []
    }

    /// The whole list is read: the end nodes with a thingID that it did not
    /// name are gone (an onboarding still waiting has none).
    mutating func syncEnded() -> [String] {
        guard let seen = syncSeen else { return [] }
        syncSeen = nil
        syncForgotten = []
        return registry.entries.compactMap { e in e.thingID.flatMap { seen.contains(ByteKey($0)) ? nil : $0 } }
    }
}
