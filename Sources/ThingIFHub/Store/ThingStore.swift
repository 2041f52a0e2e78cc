// SPDX-License-Identifier: Apache-2.0

import ThingIF

/// Things and what belongs to each: its MQTT installations and owners (its
/// end nodes, state history and certificates are EndNodeStore, StateStore
/// and CertificateStore). One part of HubStore (its conventions hold: times in milliseconds
/// since the Unix epoch, JSON as compact text, every method safe to call
/// from any thread).
public protocol ThingStore: AnyObject, Sendable {
    // MARK: things

    /// The first registration of a vendorThingID creates the thing (with a new
    /// thingID; the password is stored as its KDF hash); later ones must give
    /// the same password and thingType (a nil thingType matches), and update
    /// firmwareVersion and dataGroupingInterval when given. Every successful
    /// call issues a NEW access token, returned in the record's accessToken
    /// (earlier tokens stay valid until they expire or are revoked).
    ///
    /// `layoutPosition` is the layout the caller names: nil names none (a
    /// new thing is STANDALONE, a known one keeps its own). A layout is kept
    /// from the first registration on, so a known thing of another layout is
    /// `.wrongLayout`; so is an end node, named or not, and `.endNode` for
    /// every thing: an end node is made and found by `onboardEndNode`, which
    /// names its gateway, and its credentials onboard nothing else.
    /// Refusals write nothing.
    func registerThing(
        vendorThingID: String, password: String, thingType: String?, firmwareVersion: String?,
        dataGroupingInterval: String?, layoutPosition: LayoutPosition?
    ) -> Result<ThingRecord, RegisterError>
    func thing(id: String) -> ThingRecord?
    func thing(vendorThingID: String) -> ThingRecord?
    /// The thing whose token this is (the raw token; the store hashes it):
    /// `.notFound` when unknown, expired or revoked, `.failed` when the
    /// store failed. What authorises a thing's requests, which the hub
    /// answers 401 (dropped) for the first and 500 (sent again) for the
    /// second. The record's accessToken is empty.
    func thingRead(accessToken: String) -> StoreRead<ThingRecord>
    /// The thing `id`, `.failed` when the store failed: for a request
    /// that is refused (403, dropped) when the thing is not there and must
    /// be sent again (500) when the store could not say (a gateway's
    /// request for one of its end nodes).
    func thingRead(id: String) -> StoreRead<ThingRecord>
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
    /// their app installations, stay. A gateway's end nodes are deleted with
    /// it, each as this deletes a thing, in the same transaction: an end node
    /// without its gateway has no connection left to reach it. False,
    /// deleting nothing, when the thing is unknown or the store cannot write.
    func deleteThing(id: String) -> Bool
}

extension ThingStore {
    /// The thing whose token this is, nil when unknown, expired or revoked,
    /// or when the store failed (`thingRead` tells them apart).
    public func thing(accessToken: String) -> ThingRecord? { thingRead(accessToken: accessToken).value }
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
    /// Set when the thing is first registered, never changed afterwards.
    public var layoutPosition: LayoutPosition
    /// An end node's gateway; nil for every other thing.
    public var gatewayThingID: String?

    public init(
        thingID: String, vendorThingID: String?, passwordHash: String?, thingType: String?,
        firmwareVersion: String?, accessToken: String, dataGroupingInterval: String? = nil,
        installations: [String: String] = [:], owners: [String] = [], state: String? = nil,
        createdAt: Int64, layoutPosition: LayoutPosition = .standalone, gatewayThingID: String? = nil
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
        self.layoutPosition = layoutPosition
        self.gatewayThingID = gatewayThingID
    }
}

/// Names an end node in a gateway's list (`ThingStore.endNodes`): where the
/// next page starts after it. The hub's pagination key is made from it.
public struct EndNodeCursor: Sendable, Equatable {
    public var createdAt: Int64
    public var thingID: String

    public init(createdAt: Int64, thingID: String) {
        self.createdAt = createdAt
        self.thingID = thingID
    }

    /// The cursor of an end node of the list.
    public init(_ endNode: ThingRecord) {
        self.init(createdAt: endNode.createdAt, thingID: endNode.thingID)
    }

    /// Whether an end node comes after this one in the list's order.
    func precedes(_ t: ThingRecord) -> Bool {
        createdAt < t.createdAt || (createdAt == t.createdAt && thingID < t.thingID)
    }
}

/// What `ThingStore.onboardEndNode` did.
public enum EndNodeOnboarding: Sendable {
    /// The end node, with the new access token in accessToken; `created`
    /// false when it was this gateway's end node already.
    case onboarded(ThingRecord, created: Bool)
    /// No thing has the gateway's thingID.
    case noGateway
    /// The gateway's thingID names a thing whose layout is not GATEWAY.
    case notAGateway
    /// The vendorThingID is registered with another password.
    case wrongPassword
    /// The vendorThingID is a thing that is no end node (STANDALONE or GATEWAY).
    case notAnEndNode
    /// The vendorThingID is the end node of another gateway, this one.
    case otherGateway(String)
    /// The vendorThingID is registered with another thingType.
    case wrongType
    /// The gateway has `maxEndNodes` end nodes.
    case tooManyEndNodes
    /// The store could not write.
    case storage
}

/// What `ThingStore.setVendorThingID` did.
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
    /// A layout was named and the vendorThingID is registered with another
    /// one, or the layout named is ENDNODE.
    case wrongLayout
    /// The store could not write.
    case storage
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

extension StateStore {
    /// A page of every upload in the range (no range clauses).
    public func stateHistoryPage(thingID: String, from: Int64, to: Int64, after: Int64, limit: Int)
        -> (samples: [StateSample], next: Int64?)
    {
        stateHistoryPage(
            thingID: thingID, from: from, to: to, after: after, skip: 0, limit: limit, alias: nil, ranges: [])
    }

    /// An aggregation of every upload in the range (no range clauses).
    public func aggregateStates(
        thingID: String, alias: String?, field: String, kind: AggregationKind, from: Int64, to: Int64,
        bucketMs: Int64?
    ) -> [AggregateBucket]? {
        aggregateStates(
            thingID: thingID, alias: alias, field: field, kind: kind, from: from, to: to, bucketMs: bucketMs,
            ranges: [])
    }
}
