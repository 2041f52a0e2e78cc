// SPDX-License-Identifier: Apache-2.0

import ThingIF

/// The hub's storage interface. Everything the framework side and the app
/// API keep lives behind it: MemoryStore for tests and embedded use,
/// SQLiteStore (the default of thingif-hub) for data that outlives the
/// process, and PostgresStore for several hubs that share one database.
///
/// It is the interfaces of the seven aggregates (ThingStore, EndNodeStore,
/// StateStore, CertificateStore, CommandStore, UserStore, AutomationStore) and what belongs to the store as a whole:
/// the secrets it applies to every password and token, how many calls it
/// serves at once (its connections, whichever aggregate a call is on),
/// and one transaction that calls on any of them share. The calls fused to
/// save round trips are apart, in protocols a store may also conform to
/// (StoreFastPaths, StateWriteFastPaths), and the hub falls back to these
/// calls without them (FastPaths).
///
/// Times are milliseconds since the Unix epoch. JSON travels as compact
/// text. Every method is safe to call from any thread.
public protocol HubStore:
    ThingStore, EndNodeStore, StateStore, CertificateStore, CommandStore, UserStore, AutomationStore, ImageStore,
    UpdateJobStore, RolloutStore, TraitStore
{
    /// The KDF cost and token lifetimes this store applies.
    var secrets: HubSecrets { get }
    /// How many calls the store serves side by side (the hub runs as many
    /// request threads): one for a store behind one lock, the pool's size
    /// on PostgreSQL.
    var concurrentCalls: Int { get }
    /// Runs `body` with every call this thread makes to the store inside
    /// one write transaction, so that a request lane's messages share one
    /// commit (SQLite: other threads' calls wait for it; PostgreSQL: they
    /// wait only for the rows it wrote). `.unsupported`: the store does not
    /// do this (MemoryStore: each call commits on its own), or could not
    /// begin, or this thread is in one already, and `body` did not run.
    func inOneTransaction(_ body: () -> Void) -> OneTransaction
}

/// How the store treats secrets: the KDF cost of passwords and the lifetime
/// of the tokens it issues. Tokens are kept only as SHA-256 (hex).
public struct HubSecrets: Sendable, Equatable {
    /// PBKDF2-HMAC-SHA256 iterations for new password hashes (users' and things').
    public var passwordIterations: Int
    /// Seconds a user's token stays valid; 0 for no expiry.
    public var userTokenLifetime: Int64
    /// Seconds a thing's token stays valid; 0 for no expiry.
    public var thingTokenLifetime: Int64

    /// Users' tokens live 30 days; things' tokens do not expire by time (a
    /// device in the field does not log in again by itself) but can be revoked.
    public init(
        passwordIterations: Int = PasswordHash.defaultIterations,
        userTokenLifetime: Int64 = 30 * 86_400, thingTokenLifetime: Int64 = 0
    ) {
        self.passwordIterations = passwordIterations
        self.userTokenLifetime = userTokenLifetime
        self.thingTokenLifetime = thingTokenLifetime
    }

    func lifetime(_ kind: TokenKind) -> Int64 { kind == .user ? userTokenLifetime : thingTokenLifetime }

    /// When a token issued at `now` (ms) expires, in ms; 0 for never.
    func expiry(_ kind: TokenKind, now: Int64) -> Int64 {
        let l = lifetime(kind)
        return l > 0 ? now + l * 1000 : 0
    }
}

/// How `HubStore.inOneTransaction` ended.
public enum OneTransaction: Equatable, Sendable {
    /// Every write of the body is stored.
    case committed
    /// The body ran, and the commit failed: none of its writes may be
    /// stored (a statement that failed with an I/O error may have ended the
    /// transaction early, and then those after it were stored one by one).
    case failed
    /// The body ran, a call in it failed, and the store undid all of it
    /// (PostgreSQL: one failed statement spoils its transaction): nothing
    /// of it is stored; the caller runs each part again on its own.
    case undone
    /// The body did not run.
    case unsupported
}
