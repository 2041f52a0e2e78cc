// SPDX-License-Identifier: Apache-2.0

import ThingIF

// The hub's storage interface. Everything the framework side and the app API
// keep lives behind it: MemoryStore for tests and embedded use, SQLiteStore
// (the default of thingif-hub) for data that outlives the process, and
// PostgresStore for several hubs that share one database.
//
// Times are milliseconds since the Unix epoch. JSON travels as compact text.
// Every method is safe to call from any thread.

/// Kii's command states.
public enum CommandState: String, Sendable, CaseIterable {
    /// Stored and published; the thing has not been seen to take it.
    case sending = "SENDING"
    /// Published while the thing was online and acknowledged by the broker.
    case delivered = "DELIVERED"
    /// Results arrived and every action succeeded.
    case done = "DONE"
    /// Results arrived and at least one action failed.
    case incomplete = "INCOMPLETE"
    /// The hub gave up on it before results arrived: its expiry passed, or
    /// it stayed undelivered or unanswered too long (`endReason` says
    /// which; CommandLifecycle.swift). It is never published again.
    case expired = "EXPIRED"
    /// Its issuer or an owner cancelled it before results arrived. It is
    /// never published again.
    case cancelled = "CANCELLED"

    /// SENDING or DELIVERED: the hub still publishes it and waits for results.
    public var isOpen: Bool { self == .sending || self == .delivered }
}

/// A thing the framework knows.
public struct ThingRecord: Sendable {
    public var thingID: String
    public var vendorThingID: String?
    /// The KDF hash of the thing's password (PasswordHash), never the password.
    public var passwordHash: String?
    public var thingType: String?
    public var firmwareVersion: String?
    /// The raw access token, only on the record that `registerThing` returns
    /// when it issues one; empty on every lookup (the store keeps only its
    /// SHA-256).
    public var accessToken: String
    /// "1_MINUTE", "15_MINUTES", "30_MINUTES", "1_HOUR" or "12_HOURS" (the
    /// state history grouping, set at onboarding); nil for none.
    public var dataGroupingInterval: String?
    /// installationID -> mqttTopic of the thing's MQTT installations.
    public var installations: [String: String]
    /// Owners as typed IDs: "user:{userID}" or "group:{groupID}".
    public var owners: [String]
    /// The latest full state (JSON text), after PATCHes applied.
    public var state: String?
    public var createdAt: Int64

    public init(
        thingID: String, vendorThingID: String?, passwordHash: String?, thingType: String?,
        firmwareVersion: String?, accessToken: String, dataGroupingInterval: String? = nil,
        installations: [String: String] = [:], owners: [String] = [], state: String? = nil,
        createdAt: Int64
    ) {
        self.thingID = thingID
        self.vendorThingID = vendorThingID
        self.passwordHash = passwordHash
        self.thingType = thingType
        self.firmwareVersion = firmwareVersion
        self.accessToken = accessToken
        self.dataGroupingInterval = dataGroupingInterval
        self.installations = installations
        self.owners = owners
        self.state = state
        self.createdAt = createdAt
    }
}

/// A command as the framework keeps it.
public struct CommandRecord: Sendable {
    public var commandID: String
    public var thingID: String
    /// Assigned by the store on insert: increasing per store, the listing order.
    public var seq: Int64
    /// "user:{userID}" (or any typed ID) of whoever issued it.
    public var issuer: String?
    /// The app installation the command was posted from (for notifications
    /// of pseudo users), if any.
    public var issuingInstallationID: String?
    /// The command exactly as published to the thing (wire JSON text).
    public var payload: String
    /// The action results body the thing reported (JSON text), once it did.
    public var results: String?
    public var state: CommandState
    public var createdAt: Int64
    public var modifiedAt: Int64
    /// When the command expires (ms), nil for no expiry of its own
    /// (`setCommandExpiry`; the bounds of CommandLifetimes apply to all).
    public var expiresAt: Int64?
    /// Why the hub ended it (EXPIRED or CANCELLED): "expired", "undelivered",
    /// "unanswered" or "cancelled" (`endCommand`). Kept when results arrive later.
    public var endReason: String?

    public init(
        commandID: String, thingID: String, seq: Int64 = 0, issuer: String?, issuingInstallationID: String?,
        payload: String, results: String? = nil, state: CommandState = .sending, createdAt: Int64,
        modifiedAt: Int64, expiresAt: Int64? = nil, endReason: String? = nil
    ) {
        self.expiresAt = expiresAt
        self.endReason = endReason
        self.commandID = commandID
        self.thingID = thingID
        self.seq = seq
        self.issuer = issuer
        self.issuingInstallationID = issuingInstallationID
        self.payload = payload
        self.results = results
        self.state = state
        self.createdAt = createdAt
        self.modifiedAt = modifiedAt
    }
}

/// An app user: a pseudo user (no login name) or a normal one.
public struct UserRecord: Sendable {
    public var userID: String
    public var loginName: String?
    /// A salted hash, never the password itself; nil for pseudo users.
    public var passwordHash: String?
    /// The raw access token, only on the record `createUser` returns; empty
    /// on every lookup (the store keeps only its SHA-256; login issues a new
    /// one with `issueToken`).
    public var accessToken: String
    public var pseudo: Bool { loginName == nil }
    public var createdAt: Int64

    public init(userID: String, loginName: String?, passwordHash: String?, accessToken: String, createdAt: Int64) {
        self.userID = userID
        self.loginName = loginName
        self.passwordHash = passwordHash
        self.accessToken = accessToken
        self.createdAt = createdAt
    }
}

/// A thing's certificate that was revoked (its thing deleted, or its MQTT
/// installation retired): what the things' CRL lists until `notAfter`.
public struct RevokedCertificate: Sendable, Equatable {
    /// The certificate's serial number: its DER bytes as lowercase hex.
    public var serial: String
    /// When it was revoked, and when it expires anyway (epoch ms).
    public var revokedAt: Int64
    public var notAfter: Int64

    public init(serial: String, revokedAt: Int64, notAfter: Int64) {
        self.serial = serial
        self.revokedAt = revokedAt
        self.notAfter = notAfter
    }
}

/// A group of users that can own things together.
public struct GroupRecord: Sendable {
    public var groupID: String
    public var name: String
    public var ownerUserID: String
    public var members: [String]

    public init(groupID: String, name: String, ownerUserID: String, members: [String]) {
        self.groupID = groupID
        self.name = name
        self.ownerUserID = ownerUserID
        self.members = members
    }
}

/// Where an app user is notified of command results.
public struct AppInstallation: Sendable {
    public enum Kind: String, Sendable, CaseIterable {
        /// A message on the installation's own MQTT topic.
        case mqtt = "MQTT"
        /// Server-Sent Events on GET …/installations/{id}/events.
        case sse = "SSE"
        /// An HTTP POST to `target`.
        case webhook = "WEBHOOK"
        /// Kii's push installations (APNs, FCM, JPush): kept with their
        /// installationRegistrationID in `target`, as Kii keeps them, so Kii
        /// clients install as usual; the hub reaches no push service and
        /// sends nothing to them (its channels are MQTT, SSE and webhooks).
        case ios = "IOS"
        case android = "ANDROID"
        case jpush = "JPUSH"

        /// Whether the hub itself delivers notifications to it.
        public var isDelivered: Bool { self == .mqtt || self == .sse || self == .webhook }
        /// Whether the notification sweep sends to it again for a hub that
        /// recorded the results and did not (MQTT, webhooks; not the event
        /// streams, each hub's own).
        public var isSwept: Bool { self == .mqtt || self == .webhook }
    }

    public var installationID: String
    public var userID: String
    public var kind: Kind
    /// The MQTT topic (MQTT) or URL (WEBHOOK); nil for SSE.
    public var target: String?
    public var createdAt: Int64

    public init(installationID: String, userID: String, kind: Kind, target: String?, createdAt: Int64) {
        self.installationID = installationID
        self.userID = userID
        self.kind = kind
        self.target = target
        self.createdAt = createdAt
    }
}

extension [AppInstallation] {
    /// Whether the notification sweep would send to any of them: a command
    /// ended or answered with none is never due for it (`recordResults` and
    /// `endCommand` with `swept` false) and needs no mark.
    public var anySwept: Bool { contains { $0.kind.isSwept } }
}

/// One state upload as stored for the history.
public struct StateSample: Sendable {
    public var thingID: String
    public var at: Int64
    public var method: String
    /// The uploaded JSON text.
    public var upload: String
    /// The whole state after this upload (JSON text).
    public var state: String
    /// Assigned by the store: increasing per store, the paging cursor.
    public var cursor: Int64

    public init(thingID: String, at: Int64, method: String, upload: String, state: String, cursor: Int64 = 0) {
        self.cursor = cursor
        self.thingID = thingID
        self.at = at
        self.method = method
        self.upload = upload
        self.state = state
    }
}

/// A server trigger (Thing-IF's trigger API) of a thing.
public struct ServerTriggerRecord: Sendable {
    public var triggerID: String
    public var thingID: String
    /// The trigger as created: {"predicate","command","title"?,"description"?} (JSON text).
    public var definition: String
    public var enabled: Bool
    /// STATES triggers: whether the condition matched the thing's state at
    /// the last evaluation; nil before the first.
    public var lastMatch: Bool?
    public var createdAt: Int64

    public init(
        triggerID: String, thingID: String, definition: String, enabled: Bool = true,
        lastMatch: Bool? = nil, createdAt: Int64
    ) {
        self.triggerID = triggerID
        self.thingID = thingID
        self.definition = definition
        self.enabled = enabled
        self.lastMatch = lastMatch
        self.createdAt = createdAt
    }
}

/// The automation a thing runs by itself (its action sets and timer
/// triggers), as the apps manage it remotely.
public struct ThingAutomation: Sendable {
    public var thingID: String
    /// {"actionSets":[…],"timerTriggers":[…]} (JSON text).
    public var config: String
    /// Increases with every change (1 for the first).
    public var version: Int64
    /// What the thing last said of a configuration it was sent (JSON text:
    /// {"version","applied","message"?,"reportedAt"}); nil when it has said
    /// nothing since the last change.
    public var report: String?

    public init(thingID: String, config: String, version: Int64, report: String? = nil) {
        self.thingID = thingID
        self.config = config
        self.version = version
        self.report = report
    }
}

/// Whose access token it is.
public enum TokenKind: String, Sendable, CaseIterable {
    case user
    case thing
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

/// How many state samples a thing keeps.
public struct StateRetention: Sendable, Equatable {
    /// The newest samples kept per thing; 0 for no limit.
    public var maxSamples: Int
    /// Samples older than this many days are dropped; 0 for no limit.
    public var maxAgeDays: Int
    public init(maxSamples: Int = 100_000, maxAgeDays: Int = 0) {
        self.maxSamples = maxSamples
        self.maxAgeDays = maxAgeDays
    }

    /// The SQL stores drop the samples beyond `maxSamples` once every this
    /// many uploads of a thing, not on each: finding the cut walks
    /// `maxSamples` index entries. A thing so has at most `maxSamples +
    /// pruneEvery - 1` samples (under 1/64 more); up to 127 samples it is
    /// every upload and exact.
    public var pruneEvery: Int { max(1, maxSamples / 64) }
}

/// What `HubStore.setVendorThingID` did.
public enum VendorThingIDChange: Sendable, Equatable {
    case changed
    /// Another thing has that vendorThingID.
    case taken
    /// No thing has that thingID.
    case noThing
    /// The store could not write.
    case storage
}

public enum RegisterError: Error, Sendable {
    /// The vendorThingID is registered with another password.
    case wrongPassword
    /// The vendorThingID is registered with another thingType.
    case wrongType
    /// The store could not write.
    case storage
}

public protocol HubStore: AnyObject, Sendable {
    /// The KDF cost and token lifetimes this store applies.
    var secrets: HubSecrets { get }

    // MARK: things

    /// The first registration of a vendorThingID creates the thing (with a new
    /// thingID; the password is stored as its KDF hash); later ones must give
    /// the same password and thingType (a nil thingType matches), and update
    /// firmwareVersion and dataGroupingInterval when given. Every successful
    /// call issues a NEW access token, returned in the record's accessToken
    /// (earlier tokens stay valid until they expire or are revoked).
    func registerThing(
        vendorThingID: String, password: String, thingType: String?, firmwareVersion: String?,
        dataGroupingInterval: String?
    ) -> Result<ThingRecord, RegisterError>
    func thing(id: String) -> ThingRecord?
    func thing(vendorThingID: String) -> ThingRecord?
    /// The thing whose token this is (the raw token; the store hashes it),
    /// nil when unknown, expired or revoked. The record's accessToken is empty.
    func thing(accessToken: String) -> ThingRecord?
    /// As `thing(accessToken:)`, telling a failure of the store (`.failed`)
    /// from an unknown token (`.notFound`): what authorises a thing's
    /// requests, which the hub answers 500 (sent again) for the first and
    /// 401 (dropped) for the second.
    func thingRead(accessToken: String) -> StoreRead<ThingRecord>
    func thing(mqttTopic: String) -> ThingRecord?
    /// False when the thing is unknown or the store cannot write.
    func addInstallation(thingID: String, installationID: String, mqttTopic: String) -> Bool
    /// The thing's MQTT installations, oldest (first added) first.
    func installationsOldestFirst(thingID: String) -> [(installationID: String, mqttTopic: String)]
    /// Removes one MQTT installation of a thing (a retired one), and revokes
    /// the certificates recorded for it (`recordCertificate`) in the same
    /// transaction; false when it was not there or the store cannot write.
    func removeInstallation(thingID: String, installationID: String) -> Bool
    func setFirmwareVersion(thingID: String, _ version: String) -> Bool
    /// Kii's ThingTypeUpdateRequest; false when the thing is unknown.
    func setThingType(thingID: String, _ thingType: String) -> Bool
    /// Adds an owner ("user:…" or "group:…"); adding one twice is a no-op.
    func addOwner(thingID: String, owner: String) -> Bool
    /// Kii's VendorThingIDUpdateRequest: a new vendorThingID and password
    /// (hashed by the caller) for thing `thingID`, in one write.
    func setVendorThingID(thingID: String, vendorThingID: String, passwordHash: String) -> VendorThingIDChange
    /// The things any of `owners` ("user:…", "group:…") owns, by thingID.
    func things(ownedBy owners: [String]) -> [ThingRecord]
    /// Deletes the thing and everything that belongs to it, in one
    /// transaction: its MQTT installations, owners, state and state history,
    /// commands (with their results), server triggers, automation config and
    /// access tokens; the certificates recorded for it move to the revoked
    /// list (`revokedCertificates`). Its vendorThingID is free again afterwards (a new
    /// registration makes a new thing). The owners' users and groups, and
    /// their app installations, stay. False, deleting nothing, when the thing
    /// is unknown or the store cannot write.
    func deleteThing(id: String) -> Bool

    // MARK: state

    /// Stores an upload: PUT replaces the state, PATCH merges the object's
    /// members into it. Returns the whole state after it, nil for an unknown thing.
    func applyState(thingID: String, method: String, upload: String, at: Int64) -> String?
    /// How many calls the store serves side by side.
    var concurrentCalls: Int { get }
    /// Runs `body` with every call this thread makes to the store inside
    /// one write transaction, so that a request lane's messages share one
    /// commit (SQLite: other threads' calls wait for it; PostgreSQL: they
    /// wait only for the rows it wrote). `.unsupported`: the store does not
    /// do this, or could not begin, and `body` did not run.
    func inOneTransaction(_ body: () -> Void) -> OneTransaction
    /// Uploads with from <= at < to, oldest first.
    func stateHistory(thingID: String, from: Int64, to: Int64) -> [StateSample]
    /// At most `limit` uploads with from <= at < to, oldest first, starting
    /// after the sample whose cursor is `after` (0: from the first). Returns
    /// the cursor of the last sample when more may follow.
    func stateHistoryPage(thingID: String, from: Int64, to: Int64, after: Int64, limit: Int)
        -> (samples: [StateSample], next: Int64?)
    /// One aggregation of a field of the uploads with from <= at < to:
    /// `state[alias][field]` (`state[field]` without an alias), per bucket
    /// of `bucketMs` counted from the epoch (nil: the range is one bucket),
    /// for the buckets that have uploads, oldest first. COUNT counts values
    /// other than null; the others take the numbers and pass over the rest;
    /// MIN and MAX also give the upload holding the value (the earliest on
    /// ties). One statement on the SQL stores (StateAggregates.swift). nil:
    /// the store failed.
    func aggregateStates(
        thingID: String, alias: String?, field: String, kind: AggregationKind, from: Int64, to: Int64,
        bucketMs: Int64?
    ) -> [AggregateBucket]?

    // MARK: commands

    /// Stores a new command (its state and expiry as given); returns it
    /// with `seq` assigned, nil when the commandID exists already or the
    /// store cannot write.
    func insertCommand(_ command: CommandRecord) -> CommandRecord?
    func command(id: String) -> CommandRecord?
    /// Sets the state (delivered) and modifiedAt of those of `commandIDs`
    /// that are open and have no results yet, in as few statements as the
    /// store can (one per `StoreRules.batchMax`); returns them.
    func markDelivered(commandIDs: [String], at: Int64) -> Set<String>
    /// Puts a DELIVERED command without results back to SENDING (its
    /// publish could not be queued after it was stored DELIVERED); false
    /// when it is not DELIVERED or has results.
    func markUndelivered(commandID: String, at: Int64) -> Bool
    /// Stores the first results of a command and its final state. Returns
    /// false, changing nothing, when the command already has results (results
    /// are idempotent by commandID) or is unknown. With `swept`, the
    /// command's notification (MQTT, webhooks) is then due: a sweep may
    /// claim it from `at + StoreRules.notificationGraceMs` on, unless
    /// `markNotified` came first. Without, it is never due (the command
    /// has no target a sweep sends to).
    func recordResults(commandID: String, results: String, state: CommandState, at: Int64, swept: Bool) -> Bool
    /// The hub that sent these commands' notifications says so: no sweep
    /// claims them afterwards. Returns how many were due (the others are
    /// unknown, have no results, or were marked).
    func markNotified(commandIDs: [String]) -> Int
    /// Claims at most `limit` commands whose notification is due at `now`
    /// (results recorded, not marked notified, grace or earlier claim over),
    /// oldest first, and makes each due again only at `now + leaseMs`: the
    /// caller sends them and marks them notified; if it dies first, another
    /// sweep takes them after the lease. Of sweeps running at once (hubs on
    /// one PostgreSQL) each command goes to one.
    func claimUnnotified(now: Int64, leaseMs: Int64, limit: Int) -> [CommandRecord]
    /// A thing's commands with seq > afterSeq, ascending, at most `limit`.
    func commands(thingID: String, afterSeq: Int64, limit: Int) -> [CommandRecord]
    /// A thing's commands without results, ascending (EXPIRED and CANCELLED
    /// ones too: they may still get results; callers that publish filter
    /// on `state.isOpen`).
    func unansweredCommands(thingID: String) -> [CommandRecord]

    // MARK: command lifecycle (CommandLifecycle.swift)

    /// Sets when a command expires (ms); false when it is unknown.
    func setCommandExpiry(commandID: String, expiresAt: Int64) -> Bool
    /// Ends an open command (SENDING or DELIVERED, no results) in `state`
    /// (EXPIRED or CANCELLED) with `reason`, and makes its notification due
    /// (with `swept`) as `recordResults` does. False, changing nothing, when
    /// the command is unknown, has results or is not open (of two hubs
    /// ending it, one wins).
    func endCommand(commandID: String, state: CommandState, reason: String, at: Int64, swept: Bool) -> Bool
    /// At most `limit` open commands, oldest first, that are due to end at
    /// `now`: past their `expiresAt`, or SENDING and created at or before
    /// `sentBefore`, or DELIVERED and last delivered at or before
    /// `deliveredBefore` (nil: no such bound).
    func commandsDueToEnd(now: Int64, sentBefore: Int64?, deliveredBefore: Int64?, limit: Int) -> [CommandRecord]

    // MARK: users, groups, app installations

    /// nil when the loginName is taken or the store cannot write. The record
    /// carries the user's first access token.
    func createUser(loginName: String?, passwordHash: String?) -> UserRecord?
    func user(id: String) -> UserRecord?
    /// The user whose token this is (the raw token; the store hashes it),
    /// nil when unknown, expired or revoked. The record's accessToken is empty.
    func user(accessToken: String) -> UserRecord?
    func user(loginName: String) -> UserRecord?
    func createGroup(name: String, ownerUserID: String, members: [String]) -> GroupRecord?
    func group(id: String) -> GroupRecord?
    /// Groups the user owns or belongs to.
    func groups(ofUser userID: String) -> [GroupRecord]
    func addAppInstallation(userID: String, kind: AppInstallation.Kind, target: String?) -> AppInstallation?
    func appInstallation(id: String) -> AppInstallation?
    func appInstallations(userID: String) -> [AppInstallation]
    /// Where a user's command's notifications go, in one call: all of the
    /// user's installations, or for a pseudo user only the one it issued
    /// the command from; none for an unknown user.
    func notificationInstallations(userID: String, issuingInstallationID: String?) -> [AppInstallation]
    /// How many app installations of `kind` the app has (all users).
    func countAppInstallations(kind: AppInstallation.Kind) -> Int
    /// False when unknown or not the user's.
    func removeAppInstallation(id: String, userID: String) -> Bool
    /// Replaces a user's password hash (a legacy hash re-hashed at login).
    func setPasswordHash(userID: String, _ hash: String) -> Bool
    /// Deletes user `id` in one transaction: the user, every token of it,
    /// its app installations (returned, for the hub to close their event
    /// streams and broker logins), its ownership of things ("user:{id}")
    /// and its group memberships. Its things, their commands and triggers,
    /// and the groups it created stay. nil when there is no such user or the
    /// store cannot write.
    func deleteUser(id: String) -> [AppInstallation]?

    // MARK: things' certificates (revocation)

    /// Records a certificate the things' CA signed for one of the thing's
    /// MQTT installations (serial: its DER bytes as lowercase hex;
    /// notAfter: epoch ms), so that deleting the thing or retiring the
    /// installation revokes it. Every certificate is recorded: a thing that
    /// onboards again (same topic, a new certificate) adds a serial. False
    /// when the thing is unknown or the store cannot write: the caller then
    /// hands the certificate out to nobody.
    func recordCertificate(thingID: String, installationID: String, serial: String, notAfter: Int64) -> Bool
    /// The revoked certificates that have not expired at `now`, by serial;
    /// expired ones (revoked or still recorded) are deleted first, so both
    /// lists keep only certificates a broker would still accept. nil when
    /// the store cannot read: the caller must not write an empty CRL then.
    func revokedCertificates(now: Int64) -> [RevokedCertificate]?

    // MARK: tokens

    /// A new raw token for the subject, valid for the lifetime `secrets`
    /// gives its kind; nil when the store cannot write. Expired tokens are
    /// pruned here.
    func issueToken(kind: TokenKind, subjectID: String) -> String?
    /// Revokes a raw token; false when it is unknown or already revoked.
    func revokeToken(_ token: String) -> Bool

    // MARK: server triggers

    /// Stores a new trigger; false when its ID exists or the store cannot write.
    func insertTrigger(_ trigger: ServerTriggerRecord) -> Bool
    func trigger(id: String) -> ServerTriggerRecord?
    /// A thing's triggers in the order they were created.
    func triggers(thingID: String) -> [ServerTriggerRecord]
    /// Every trigger of every thing, in the order they were created.
    func allTriggers() -> [ServerTriggerRecord]
    /// False when the trigger is unknown or the store cannot write.
    func setTriggerEnabled(id: String, enabled: Bool) -> Bool
    /// Disables an enabled trigger; true only for the call that disabled it,
    /// so a SCHEDULE_ONCE trigger fires once even where two hubs see it due.
    func claimTrigger(id: String) -> Bool
    /// Whether this hub runs the schedules (SCHEDULE and SCHEDULE_ONCE
    /// triggers) now. Of the hubs sharing a store one does: a store that one
    /// hub uses (memory, SQLite) always says yes; PostgreSQL says yes to the
    /// hub that holds its schedule lock, which passes to another hub when
    /// that hub's session ends. Called once a tick.
    func holdsScheduleLease() -> Bool
    /// Replaces a trigger's definition (PATCH) and forgets its last match.
    func updateTrigger(id: String, definition: String) -> Bool
    func setTriggerLastMatch(id: String, lastMatch: Bool?) -> Bool
    func deleteTrigger(id: String) -> Bool

    // MARK: thing automation

    /// The thing's automation config; nil before the first save.
    func automation(thingID: String) -> ThingAutomation?
    /// Replaces the thing's automation config and increments its version
    /// (forgetting the thing's last report); returns the stored record, nil
    /// for an unknown thing or a storage error.
    func saveAutomation(thingID: String, config: String) -> ThingAutomation?
    /// Keeps the thing's report on the configuration; false when the thing
    /// has no configuration or the store fails.
    func saveAutomationReport(thingID: String, report: String) -> Bool
}

/// A store that several hubs share and that tells each of them of the
/// results another one recorded, so that a hub can notify its own event
/// streams (SSE) of commands another hub finished. PostgresStore is one
/// (LISTEN/NOTIFY).
public protocol SharedResultsFeed: AnyObject {
    /// Calls `handler` with the commandID of every command whose results
    /// another store on the same data records, from a thread of its own.
    func listenForResults(_ handler: @escaping @Sendable (_ commandID: String) -> Void) throws
}

extension HubStore {
    /// How many calls the store serves side by side (the hub runs as many
    /// request threads): one for a store behind one lock.
    public var concurrentCalls: Int { 1 }

    /// A store that commits each call on its own.
    public func inOneTransaction(_ body: () -> Void) -> OneTransaction { .unsupported }

    /// One command's `markDelivered(commandIDs:at:)`.
    public func markDelivered(commandID: String, at: Int64) -> Bool {
        markDelivered(commandIDs: [commandID], at: at).contains(commandID)
    }

    /// One command's `markNotified(commandIDs:)`: false when it was not due.
    public func markNotified(commandID: String) -> Bool { markNotified(commandIDs: [commandID]) == 1 }

    /// For a store that does not fail (MemoryStore).
    public func thingRead(accessToken: String) -> StoreRead<ThingRecord> {
        thing(accessToken: accessToken).map { .found($0) } ?? .notFound
    }

    /// Results whose notification a sweep may send (`swept`).
    public func recordResults(commandID: String, results: String, state: CommandState, at: Int64) -> Bool {
        recordResults(commandID: commandID, results: results, state: state, at: at, swept: true)
    }

    /// An end whose notification a sweep may send (`swept`).
    public func endCommand(commandID: String, state: CommandState, reason: String, at: Int64) -> Bool {
        endCommand(commandID: commandID, state: state, reason: reason, at: at, swept: true)
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

/// A read that tells "there is none" from "the store failed": the hub
/// answers a thing's request 500 for the second, which the thing sends
/// again, where a 4xx would make it drop the request for good.
public enum StoreRead<Value> {
    case found(Value)
    case notFound
    case failed

    /// The value when found.
    public var value: Value? {
        if case .found(let v) = self { return v }
        return nil
    }

    public func map<U>(_ transform: (Value) -> U) -> StoreRead<U> {
        switch self {
        case .found(let v): return .found(transform(v))
        case .notFound: return .notFound
        case .failed: return .failed
        }
    }
}

extension StoreRead: Sendable where Value: Sendable {}
