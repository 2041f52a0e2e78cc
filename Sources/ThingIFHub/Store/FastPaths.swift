// SPDX-License-Identifier: Apache-2.0

import ThingIF

/// The calls of the hub's hot paths that a store may serve in fewer round
/// trips: the store's own fast paths (`StoreFastPaths`,
/// `StateWriteFastPaths`) when it offers them, else the domain calls they
/// stand for. The choice is made once, when the hub is made (a cast per
/// request would look the conformance up each time); the fallbacks are
/// here and nowhere else. The same statements run as when each store
/// answered these calls itself.
struct FastPaths: Sendable {
    let store: HubStore
    /// The store's joined reads; nil for a store without them (MemoryStore).
    let reads: StoreFastPaths?
    /// The store's one-statement state writes; nil for a store without them
    /// (MemoryStore, SQLiteStore). `putState` has no fallback here: the
    /// caller's usual authorisation and write is it (and answers refusals).
    let stateWrites: StateWriteFastPaths?

    init(_ store: HubStore) {
        self.store = store
        reads = store as? StoreFastPaths
        stateWrites = store as? StateWriteFastPaths
    }

    /// `StoreFastPaths.thing(accessToken:command:)`, else two reads (three
    /// for an end node's command): the thing of the token, then the command
    /// if it is that thing's or, for a gateway, one of its end nodes' now;
    /// the targets are left to the caller (nil).
    func thing(accessToken: String, command commandID: String) -> StoreRead<ThingAndCommand> {
        if let reads { return reads.thing(accessToken: accessToken, command: commandID) }
        return store.thingRead(accessToken: accessToken).map { t in
            let command = store.command(id: commandID).flatMap { c -> CommandRecord? in
                if c.thingID == t.thingID { return c }
                guard t.layoutPosition == .gateway, let e = store.thing(id: c.thingID), e.layoutPosition == .endNode,
                    e.gatewayThingID == t.thingID
                else { return nil }
                return c
            }
            return ThingAndCommand(thing: t, command: command, targets: nil)
        }
    }

    /// `StoreFastPaths.user(accessToken:thing:)`, else two reads: the user
    /// of the token, then the thing.
    func user(accessToken: String, thing thingID: String) -> (user: UserRecord, thing: ThingRecord?)? {
        if let reads { return reads.user(accessToken: accessToken, thing: thingID) }
        return store.user(accessToken: accessToken).map { ($0, store.thing(id: thingID)) }
    }

    /// `StateWriteFastPaths.applyState(…after:)`, else `applyState`, which
    /// does not say whether the thing has an enabled trigger.
    func applyState(thingID: String, method: String, upload: String, at: Int64, after old: String?) -> StateWrite? {
        if let stateWrites {
            return stateWrites.applyState(thingID: thingID, method: method, upload: upload, at: at, after: old)
        }
        return store.applyState(thingID: thingID, method: method, upload: upload, at: at).map { StateWrite(state: $0) }
    }
}
