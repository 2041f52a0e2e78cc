// SPDX-License-Identifier: Apache-2.0

import ThingIF

/// A HubStore in memory: for tests and for a hub that needs to keep nothing.
public final class MemoryStore: HubStore, @unchecked Sendable {
    struct Data {
        var things: [String: ThingRecord] = [:]
        var byVendorID: [String: String] = [:]
        /// SHA-256 (hex) of a token -> the token's record.
        var tokens: [String: TokenEntry] = [:]
        var lastTokenPruneMs: Int64 = 0
        var byTopic: [String: String] = [:]
        /// thingID -> its installationIDs, oldest first.
        var installationOrder: [String: [String]] = [:]
        var history: [String: [StateSample]] = [:]
        var sampleSeq: Int64 = 0
        var commands: [String: CommandRecord] = [:]
        /// commandID -> when its notification may be claimed (claimUnnotified).
        var notifyDue: [String: Int64] = [:]
        var commandOrder: [String] = []
        var seq: Int64 = 0
        var users: [String: UserRecord] = [:]
        var usersByLogin: [String: String] = [:]
        var groups: [String: GroupRecord] = [:]
        var installations: [String: AppInstallation] = [:]
        /// Each app installation's place in the order they were added (the
        /// SQL stores' insertion order, for those made in one millisecond).
        var installationRank: [String: Int] = [:]
        var installationsAdded = 0
        var triggers: [String: ServerTriggerRecord] = [:]
        var triggerOrder: [String] = []
        var automations: [String: ThingAutomation] = [:]
        /// serial -> the certificate the things' CA signed (recordCertificate).
        var certificates: [String: IssuedCertificate] = [:]
        /// serial -> its revocation (revokedCertificates).
        var revoked: [String: RevokedCertificate] = [:]
        /// sha256 -> the image (ImageStore).
        var images: [String: ImageRecord] = [:]
        /// sha256 or an upload's key -> its chunks in order.
        var imageChunks: [String: [[UInt8]]] = [:]
        /// sha256 -> block size -> its block hash list.
        var blockHashLists: [String: [Int: [UInt8]]] = [:]
        /// jobID -> the update job (UpdateJobStore).
        var updateJobs: [String: UpdateJobRecord] = [:]
        /// rolloutID -> the rollout, and its members by thingID (RolloutStore).
        var rollouts: [String: RolloutRecord] = [:]
        var rolloutMembers: [String: [String: RolloutMember]] = [:]
        /// trait -> version -> the trait version (TraitStore).
        var traitVersions: [String: [Int: TraitVersionRecord]] = [:]
        /// thing type -> firmware version -> alias -> its alias record.
        var firmwareVersions: [String: [String: [String: TraitAliasRecord]]] = [:]
    }

    struct IssuedCertificate {
        var thingID: String
        var installationID: String
        var notAfter: Int64
    }

    struct TokenEntry {
        var kind: TokenKind
        var subjectID: String
        var createdAt: Int64
        var expiresAt: Int64
        var revoked: Bool
    }

    let data = Locked(Data())
    public let secrets: HubSecrets
    public let retention: StateRetention

    public init(secrets: HubSecrets = HubSecrets(), retention: StateRetention = StateRetention()) {
        self.secrets = secrets
        self.retention = retention
    }

    /// One lock: one call at a time.
    public var concurrentCalls: Int { 1 }

    /// Each call commits on its own.
    public func inOneTransaction(_ body: () -> Void) -> OneTransaction { .unsupported }

    // MARK: tokens

    func issue(_ d: inout Data, kind: TokenKind, subjectID: String) -> String {
        let now = Platform.epochMs()
        // Prune what can no longer be used, so the table stays bounded (a
        // pass over all tokens, so at most once a second).
        if now - d.lastTokenPruneMs >= 1000 {
            d.lastTokenPruneMs = now
            d.tokens = d.tokens.filter { !$0.value.revoked && ($0.value.expiresAt == 0 || $0.value.expiresAt > now) }
        }
        let raw = HubIDs.token()
        d.tokens[LibCrypto.sha256Hex(raw)] = TokenEntry(
            kind: kind, subjectID: subjectID, createdAt: now,
            expiresAt: secrets.expiry(kind, now: now), revoked: false)
        return raw
    }

    func subject(_ d: Data, kind: TokenKind, token: String) -> String? {
        guard let e = d.tokens[LibCrypto.sha256Hex(token)], e.kind == kind, !e.revoked else { return nil }
        guard e.expiresAt == 0 || e.expiresAt > Platform.epochMs() else { return nil }
        return e.subjectID
    }

    public func issueToken(kind: TokenKind, subjectID: String) -> String? {
        data.withLock { d in
            switch kind {
            case .user: guard d.users[subjectID] != nil else { return nil }
            case .thing: guard d.things[subjectID] != nil else { return nil }
            }
            return issue(&d, kind: kind, subjectID: subjectID)
        }
    }

    public func revokeToken(_ token: String) -> Bool {
        data.withLock { d in
            let h = LibCrypto.sha256Hex(token)
            guard let e = d.tokens[h], !e.revoked else { return false }
            d.tokens[h]!.revoked = true
            return true
        }
    }
}
