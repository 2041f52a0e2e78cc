// SPDX-License-Identifier: Apache-2.0

import ThingIF

/// SQLStore's things' certificates (the statements SQLite and PostgreSQL share).
extension SQLStore {
    // MARK: things' certificates

    /// Moves the recorded certificates the clause selects (of one thing, or
    /// of one of its installations) to the revoked list: one rule for
    /// deleting a thing and retiring an installation. Expired ones are only
    /// deleted (no broker accepts them any more).
    static func revokeCertificates(_ c: Connection, of clause: String, _ values: [String]) throws {
        let now = Platform.epochMs()
        let bound = values.map { SQLValue.text($0) }
        try c.run(
            "INSERT INTO revoked_certificates (serial, revoked_at, not_after) SELECT serial, ?, not_after"
                + " FROM thing_certificates WHERE " + clause + " AND not_after > ? ON CONFLICT (serial) DO NOTHING",
            [.int(now)] + bound + [.int(now)])
        try c.run("DELETE FROM thing_certificates WHERE " + clause, bound)
    }

    public func recordCertificate(thingID: String, installationID: String, serial: String, notAfter: Int64) -> Bool {
        ifThingExists(thingID) { c in
            try c.run(
                "INSERT INTO thing_certificates (serial, thing_id, installation_id, not_after, issued_at)"
                    + " VALUES (?, ?, ?, ?, ?)",
                [.text(serial), .text(thingID), .text(installationID), .int(notAfter), .int(Platform.epochMs())])
        }
    }

    public func gatewayCertificateTopics() -> [String]? {
        // Deduplicated and sorted here: one installation may hold several
        // certificates, and PostgreSQL takes no ORDER BY … COLLATE on a DISTINCT.
        (try? attempt { c in
            try c.rows(
                "SELECT i.mqtt_topic FROM thing_installations i"
                    + " JOIN things t ON t.thing_id = i.thing_id"
                    + " JOIN thing_certificates c ON c.thing_id = i.thing_id AND c.installation_id = i.installation_id"
                    + " WHERE t.layout_position = ?",
                [.text(LayoutPosition.gateway.rawValue)]
            ) { $0.string(0) }
        }.get()).map { Array(Set($0)).sorted() }
    }

    public func revokedCertificates(now: Int64) -> [RevokedCertificate]? {
        switch attempt({ c in
            try c.transaction { () throws -> [RevokedCertificate] in
                try c.run("DELETE FROM revoked_certificates WHERE not_after <= ?", [.int(now)])
                try c.run("DELETE FROM thing_certificates WHERE not_after <= ?", [.int(now)])
                return try c.rows(
                    "SELECT serial, revoked_at, not_after FROM revoked_certificates ORDER BY serial"
                        + Self.dialect.byteOrder, []
                ) { RevokedCertificate(serial: $0.string(0), revokedAt: $0.int(1), notAfter: $0.int(2)) }
            }
        }) {
        case .success(let list): return list
        case .failure: return nil
        }
    }

    /// In one transaction: a gateway's end nodes, then the thing. The
    /// thing's row is locked first, as onboardEndNode locks its gateway's,
    /// so an end node onboarded meanwhile is either deleted too or refused
    /// (no gateway any more).
    public func deleteThing(id: String) -> Bool {
        use(false) { c in
            try c.transaction {
                guard
                    try c.first(
                        "SELECT 1 FROM things WHERE thing_id = ?" + Self.dialect.forUpdate, [.text(id)], { _ in true })
                        != nil
                else { return false }
                let endNodes = try c.rows("SELECT thing_id FROM things WHERE gateway_thing_id = ?", [.text(id)]) {
                    $0.string(0)
                }
                for e in endNodes { _ = try Self.delete(c, thing: e) }
                return try Self.delete(c, thing: id)
            }
        }
    }

    /// Deletes one thing, children first; the tables without a foreign key
    /// on the thing (commands, triggers, tokens) are the reason it is
    /// spelled out rather than left to ON DELETE CASCADE.
    /// True when it deleted the thing's row.
    static func delete(_ c: Connection, thing id: String) throws -> Bool {
        let t: [SQLValue] = [.text(id)]
        try revokeCertificates(c, of: "thing_id = ?", [id])
        for table in [
            "commands", "triggers", "thing_automation", "state_samples", "thing_installations", "thing_owners"
        ] {
            try c.run("DELETE FROM " + table + " WHERE thing_id = ?", t)
        }
        try c.run("DELETE FROM tokens WHERE kind = ? AND subject_id = ?", [.text(TokenKind.thing.rawValue), .text(id)])
        return try c.run("DELETE FROM things WHERE thing_id = ?", t) == 1
    }
}
