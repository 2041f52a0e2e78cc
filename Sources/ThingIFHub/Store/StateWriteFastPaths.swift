// SPDX-License-Identifier: Apache-2.0

import ThingIF

/// The store's one-statement state writes: a state upload written without
/// taking the thing's row first, and a whole state authorised and written
/// by the statement that reads the thing of the token. PostgresStore
/// offers them (each saves a round trip; on SQLite and in memory a read
/// costs none, and they do not); the hub asks once, when it is made
/// (`FastPaths`), and otherwise authorises and calls `applyState`.
public protocol StateWriteFastPaths: AnyObject, Sendable {
    /// As `applyState`, by a caller that read the thing's state as `old` a
    /// moment before: written without taking the row first (one round
    /// trip) while the row still holds `old`, else as `applyState` (the
    /// state has changed meanwhile). The state is the same either way; the
    /// one-statement write also says whether the thing has an enabled
    /// trigger (StateWrite).
    func applyState(thingID: String, method: String, upload: String, at: Int64, after old: String?) -> StateWrite?
    /// A whole state (PUT; `state` is `upload` as the hub stores it) by
    /// the thing of `accessToken`, written by the statement that reads that
    /// thing: one round trip on PostgreSQL where authorisation and
    /// `applyState(after:)` take two. It writes only when the token is
    /// `thingID`'s, over MQTT `clientID` is the topic of one of its
    /// installations (the checks of `FrameworkSide.authorized`), and the
    /// state is still the one the statement read. `.found`: the thing as
    /// it was before the write, and the write. `.notFound`: nothing written
    /// (a check failed, or the state changed meanwhile): the caller
    /// authorises and writes as usual, and so answers any refusal.
    /// `.failed`: the store failed.
    func putState(accessToken: String, thingID: String, clientID: String?, upload: String, state: String, at: Int64)
        -> StoreRead<StatePut>
}

/// What `StateWriteFastPaths.putState` wrote: the thing as it was before, and the write.
public struct StatePut {
    public var thing: ThingRecord
    public var write: StateWrite
}

/// What a state upload wrote (`FastPaths.applyState(…after:)`): the whole
/// state after it and, when the store read it in the same statement,
/// whether the thing has an enabled trigger. nil there means "not read":
/// the trigger engine reads the thing's triggers itself. A store with a
/// round trip per statement answers it, so that the upload of a thing
/// without triggers (most of them) costs one statement, not two.
public struct StateWrite: Sendable, Equatable {
    public var state: String
    public var hasEnabledTrigger: Bool?

    public init(state: String, hasEnabledTrigger: Bool? = nil) {
        self.state = state
        self.hasEnabledTrigger = hasEnabledTrigger
    }
}
