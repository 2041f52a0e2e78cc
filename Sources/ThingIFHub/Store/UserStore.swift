// SPDX-License-Identifier: Apache-2.0

import ThingIF

/// App users, their groups and app installations (where they are told of
/// their commands' results), and the access tokens of users and things.
/// One part of HubStore.
public protocol UserStore: AnyObject, Sendable {
    // MARK: users

    /// nil when the loginName is taken or the store cannot write. The record
    /// carries the user's first access token.
    func createUser(loginName: String?, passwordHash: String?) -> UserRecord?
    func user(id: String) -> UserRecord?
    /// The user whose token this is (the raw token; the store hashes it),
    /// nil when unknown, expired or revoked. The record's accessToken is empty.
    func user(accessToken: String) -> UserRecord?
    func user(loginName: String) -> UserRecord?
    /// Replaces a user's password hash (a legacy hash re-hashed at login).
    func setPasswordHash(userID: String, _ hash: String) -> Bool
    /// Deletes user `id` in one transaction: the user, every token of it,
    /// its app installations (returned, for the hub to close their event
    /// streams and broker logins), its ownership of things ("user:{id}")
    /// and its group memberships. Its things, their commands and triggers,
    /// and the groups it created stay. nil when there is no such user or the
    /// store cannot write.
    func deleteUser(id: String) -> [AppInstallation]?

    // MARK: groups

    func createGroup(name: String, ownerUserID: String, members: [String]) -> GroupRecord?
    func group(id: String) -> GroupRecord?
    /// Groups the user owns or belongs to.
    func groups(ofUser userID: String) -> [GroupRecord]

    // MARK: app installations

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

    // MARK: tokens

    /// A new raw token for the subject, valid for the lifetime `secrets`
    /// gives its kind; nil when the store cannot write. Expired tokens are
    /// pruned here.
    func issueToken(kind: TokenKind, subjectID: String) -> String?
    /// Revokes a raw token; false when it is unknown or already revoked.
    func revokeToken(_ token: String) -> Bool
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

/// Whose access token it is.
public enum TokenKind: String, Sendable, CaseIterable {
    case user
    case thing
}
