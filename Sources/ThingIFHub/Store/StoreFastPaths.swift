// SPDX-License-Identifier: Apache-2.0

import ThingIF

/// The store's joined reads: what the hub's hot paths read in two calls
/// of the domain interface (ThingStore, CommandStore, UserStore), read in
/// one statement, one round trip. A store offers them by conforming (the
/// SQL stores do, through SQLStore; MemoryStore does not); the hub asks
/// once, when it is made, and otherwise makes the two calls
/// (`FastPaths`, the one place of the fallbacks). Each answers what the
/// two calls would.
public protocol StoreFastPaths: AnyObject, Sendable {
    /// As `thing(accessToken:)`, with that thing's command `commandID` or,
    /// when the thing is a gateway, one of its end nodes' now (nil when no
    /// command has that ID, or another thing has it) and the notification
    /// targets of a user's command read with it: what action results need,
    /// a thing's or an end node's through its gateway, in one statement on
    /// an SQL store. A
    /// failure of the store is `.failed`, not `.notFound`: results must
    /// never be refused (and dropped by the thing) for it.
    func thing(accessToken: String, command commandID: String) -> StoreRead<ThingAndCommand>
    /// As `user(accessToken:)`, with the thing `thingID` (nil when unknown)
    /// read with it: what the REST API's calls on one thing check first
    /// (the caller, then the thing it targets), in one statement on an SQL
    /// store. Whether the user may act on the thing is the caller's check.
    func user(accessToken: String, thing thingID: String) -> (user: UserRecord, thing: ThingRecord?)?
}

/// What `StoreFastPaths.thing(accessToken:command:)` reads.
public struct ThingAndCommand {
    public var thing: ThingRecord
    /// Nil when neither the thing nor (for a gateway) its end nodes have a
    /// command of that ID. Whose it is: its `thingID`.
    public var command: CommandRecord?
    /// For a command that a user issued, the app installations to tell of
    /// its results (`Notifications.targets`); nil when not read with
    /// it (another issuer, or a store that reads them apart).
    public var targets: [AppInstallation]?
}
