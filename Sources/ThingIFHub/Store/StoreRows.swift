// SPDX-License-Identifier: Apache-2.0

import ThingIF

/// A result row of an SQL store (SQLite or PostgreSQL): columns by index.
protocol StoreRow {
    /// The column as text, nil for NULL.
    func text(_ i: Int32) -> String?
    /// The column as an integer (0 for NULL).
    func int(_ i: Int32) -> Int64
    func isNull(_ i: Int32) -> Bool
    /// The column as bytes (a BLOB or BYTEA; empty for NULL).
    func bytes(_ i: Int32) -> [UInt8]
}

extension StoreRow {
    func string(_ i: Int32) -> String { text(i) ?? "" }
}

/// What the SQL stores read, written once: the column lists of their
/// SELECTs and how a row becomes a record. SQLiteStore and PostgresStore
/// keep the same tables and columns (booleans as 0/1 integers, times as
/// integer milliseconds), so each select and decoder serves both.
enum StoreRows {
    static let thingColumns = """
        SELECT thing_id, vendor_thing_id, password_hash, thing_type, firmware_version,
               data_grouping_interval, state, created_at, layout_position, gateway_thing_id FROM things
        """

    /// A thing without its installations and owners (the stores add those).
    /// Only LayoutPosition's raw values are ever written to layout_position;
    /// anything else would read as STANDALONE, the column's default.
    static func thing(_ r: some StoreRow) -> ThingRecord {
        ThingRecord(
            thingID: r.string(0), vendorThingID: r.text(1), passwordHash: r.text(2), thingType: r.text(3),
            firmwareVersion: r.text(4), accessToken: "", dataGroupingInterval: r.text(5), state: r.text(6),
            createdAt: r.int(7), layoutPosition: LayoutPosition(rawValue: r.string(8)) ?? .standalone,
            gatewayThingID: r.text(9))
    }

    /// A thing with its installations and owners from one row (each
    /// store's one-statement thing read): column 10 holds the installations
    /// as "installationID US topic" joined by RS, column 11 the owners joined
    /// by RS; control characters no ID or topic level can hold
    /// (Topics.isSafeLevel; owners are "user:"/"group:" and a hub ID).
    /// How many columns `thingWithLists` reads (a row may have more after them).
    static let thingWithListsCount: Int32 = 12

    static func thingWithLists(_ r: some StoreRow) -> ThingRecord {
        var t = thing(r)
        for pair in split(r.text(10), by: 0x1E) {
            let kv = split(pair, by: 0x1F)
            if kv.count == 2 { t.installations[kv[0]] = kv[1] }
        }
        t.owners = split(r.text(11), by: 0x1E)
        return t
    }

    /// The columns of a row from `offset` on, as a row of their own: a
    /// joined SELECT's second record, read by that record's decoder.
    struct ShiftedRow<Row: StoreRow>: StoreRow {
        let row: Row
        let offset: Int32
        init(_ row: Row, by offset: Int32) {
            self.row = row
            self.offset = offset
        }
        func text(_ i: Int32) -> String? { row.text(i + offset) }
        func int(_ i: Int32) -> Int64 { row.int(i + offset) }
        func isNull(_ i: Int32) -> Bool { row.isNull(i + offset) }
        func bytes(_ i: Int32) -> [UInt8] { row.bytes(i + offset) }
    }

    private static func split(_ s: String?, by byte: UInt8) -> [String] {
        guard let s, !s.isEmpty else { return [] }
        return s.utf8.split(separator: byte, omittingEmptySubsequences: false).map {
            String(decoding: $0, as: UTF8.self)
        }
    }

    static let sampleColumns = "SELECT thing_id, at, method, upload, state, id FROM state_samples"

    static func sample(_ r: some StoreRow) -> StateSample {
        StateSample(
            thingID: r.string(0), at: r.int(1), method: r.string(2), upload: r.string(3), state: r.string(4),
            cursor: r.int(5))
    }

    /// The columns `command` reads, in its order.
    static let commandFields = """
        command_id, thing_id, seq, issuer, issuing_installation_id, payload, results, state,
               created_at, modified_at, expires_at, end_reason
        """
    static let commandColumns = "SELECT " + commandFields + " FROM commands"
    /// How many columns `command` reads.
    static let commandCount: Int32 = 12

    static func command(_ r: some StoreRow) -> CommandRecord {
        CommandRecord(
            commandID: r.string(0), thingID: r.string(1), seq: r.int(2), issuer: r.text(3),
            issuingInstallationID: r.text(4), payload: r.string(5), results: r.text(6),
            state: CommandState(rawValue: r.string(7)) ?? .sending, createdAt: r.int(8),
            modifiedAt: r.int(9), expiresAt: r.isNull(10) ? nil : r.int(10), endReason: r.text(11))
    }

    static let userColumns = "SELECT user_id, login_name, password_hash, created_at FROM users"
    /// How many columns `user` reads.
    static let userCount: Int32 = 4

    static func user(_ r: some StoreRow) -> UserRecord {
        UserRecord(
            userID: r.string(0), loginName: r.text(1), passwordHash: r.text(2), accessToken: "",
            createdAt: r.int(3))
    }

    static let groupColumns = "SELECT group_id, name, owner_user_id FROM groups"

    /// A group without its members (the stores add those).
    static func group(_ r: some StoreRow) -> GroupRecord {
        GroupRecord(groupID: r.string(0), name: r.string(1), ownerUserID: r.string(2), members: [])
    }

    /// The columns `installation` reads, in its order, of app_installations as `i`.
    static let installationFields = "i.installation_id, i.user_id, i.kind, i.target, i.created_at"
    static let installationColumns = "SELECT " + installationFields + " FROM app_installations i"

    static func installation(_ r: some StoreRow) -> AppInstallation {
        AppInstallation(
            installationID: r.string(0), userID: r.string(1),
            kind: AppInstallation.Kind(rawValue: r.string(2)) ?? .sse, target: r.text(3),
            createdAt: r.int(4))
    }

    static let triggerColumns =
        "SELECT trigger_id, thing_id, definition, enabled, last_match, created_at FROM triggers"

    static func trigger(_ r: some StoreRow) -> ServerTriggerRecord {
        ServerTriggerRecord(
            triggerID: r.string(0), thingID: r.string(1), definition: r.string(2),
            enabled: r.int(3) != 0, lastMatch: r.isNull(4) ? nil : r.int(4) != 0,
            createdAt: r.int(5))
    }

    static let automationColumns = "SELECT thing_id, config, version, report FROM thing_automation"

    static func automation(_ r: some StoreRow) -> ThingAutomation {
        ThingAutomation(thingID: r.string(0), config: r.string(1), version: r.int(2), report: r.text(3))
    }
}

/// The rules both SQL stores apply in code, beside StateMerge and HubIDs.
public enum StoreRules {
    /// How long after its results a command's notification may be claimed
    /// by a sweep (the hub that recorded them normally marks it sent well
    /// within this).
    public static let notificationGraceMs: Int64 = 5_000

    /// At most this many commandIDs in one statement of a batch call
    /// (`markDelivered(commandIDs:at:)`, `markNotified(commandIDs:)`).
    public static let batchMax = 256

    /// `ids` in statements' portions: each at most `batchMax` long and
    /// padded (by repeating its last ID, which changes nothing in an `IN`
    /// list) to 1, 16 or `batchMax` IDs, so that PostgreSQL prepares three
    /// statement texts, not one per length.
    static func batches(_ ids: [String]) -> [[String]] {
        var out: [[String]] = []
        var i = 0
        while i < ids.count {
            var part = Array(ids[i..<min(ids.count, i + batchMax)])
            i += part.count
            let size = part.count == 1 ? 1 : part.count <= 16 ? 16 : batchMax
            part += Array(repeating: part[part.count - 1], count: size - part.count)
            out.append(part)
        }
        return out
    }

    /// "(?, ?, …)" for `n` values.
    static func placeholders(_ n: Int) -> String {
        "(" + Array(repeating: "?", count: n).joined(separator: ", ") + ")"
    }

    /// Whether a registration with `thingType` may go on for a thing of
    /// `known` type: a nil type on either side matches.
    static func typeMatches(_ thingType: String?, known: String?) -> Bool {
        guard let thingType, let known else { return true }
        return thingType == known
    }

    /// The target an app installation is stored with: MQTT ones are
    /// notified on their own topic, the others keep what was given.
    static func installationTarget(kind: AppInstallation.Kind, id: String, given: String?) -> String? {
        kind == .mqtt ? HubIDs.notificationTopic(id) : given
    }

    /// The cutoff (ms) below which samples are dropped, nil for no age limit.
    static func oldestKept(_ retention: StateRetention, at: Int64) -> Int64? {
        retention.maxAgeDays > 0 ? at - Int64(retention.maxAgeDays) * 86_400_000 : nil
    }
}
