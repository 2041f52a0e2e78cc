// SPDX-License-Identifier: Apache-2.0

import ThingIF

/// SQLStore's trait registry (the statements SQLite and PostgreSQL share).
/// Every write is an INSERT … ON CONFLICT DO NOTHING and, when it inserted
/// nothing, a read of what is there: two hubs writing the same name at once
/// agree (one creates it, the other finds it), and a published version is
/// never overwritten.
extension SQLStore {
    public func putTraitVersion(trait: String, version: Int?, definition: String, now: Int64) -> (RegistryWrite, Int)? {
        use(nil) { c in
            // A new number may be taken by another hub between the read and
            // the insert: read again, a few times.
            for _ in 0..<8 {
                let result = try c.transaction { () throws -> (RegistryWrite, Int)? in
                    let n: Int
                    if let version {
                        n = version
                    } else {
                        n =
                            Int(
                                try c.first(
                                    "SELECT COALESCE(MAX(version), 0) FROM trait_versions WHERE trait = ?",
                                    [.text(trait)]
                                ) { $0.int(0) } ?? 0) + 1
                    }
                    let inserted = try c.run(
                        "INSERT INTO trait_versions (trait, version, definition, created_at) VALUES (?, ?, ?, ?)"
                            + " ON CONFLICT (trait, version) DO NOTHING",
                        [.text(trait), .int(Int64(n)), .text(definition), .int(now)])
                    if inserted == 1 { return (.created, n) }
                    guard version != nil else { return nil }
                    let old = try c.first(
                        "SELECT definition FROM trait_versions WHERE trait = ? AND version = ?",
                        [.text(trait), .int(Int64(n))]
                    ) { $0.string(0) }
                    return (old == definition ? .unchanged : .conflict, n)
                }
                if let result { return result }
            }
            return nil
        }
    }

    static func traitVersionRow(_ r: Connection.Row) -> TraitVersionRecord {
        TraitVersionRecord(trait: r.string(0), version: Int(r.int(1)), definition: r.string(2), createdAt: r.int(3))
    }

    public func traitVersion(trait: String, version: Int) -> StoreRead<TraitVersionRecord> {
        read { c in
            try c.first(
                "SELECT trait, version, definition, created_at FROM trait_versions WHERE trait = ? AND version = ?",
                [.text(trait), .int(Int64(version))], Self.traitVersionRow)
        }
    }

    public func traitVersions(trait: String) -> [TraitVersionRecord]? {
        try? attempt { c in
            try c.rows(
                "SELECT trait, version, definition, created_at FROM trait_versions WHERE trait = ? ORDER BY version",
                [.text(trait)], Self.traitVersionRow)
        }.get()
    }

    public func traits() -> [(trait: String, latest: Int)]? {
        try? attempt { c in
            try c.rows(
                "SELECT trait, MAX(version) FROM trait_versions GROUP BY trait ORDER BY trait" + Self.dialect.byteOrder,
                []
            ) { (trait: $0.string(0), latest: Int($0.int(1))) }
        }.get()
    }

    public func putThingType(_ thingType: String, now: Int64) -> RegistryWrite? {
        use(nil) { c in
            try c.run(
                "INSERT INTO thing_types (thing_type, created_at) VALUES (?, ?) ON CONFLICT (thing_type) DO NOTHING",
                [.text(thingType), .int(now)]) == 1 ? .created : .unchanged
        }
    }

    public func thingTypes() -> [String]? {
        try? attempt { c in
            try c.rows("SELECT thing_type FROM thing_types ORDER BY thing_type" + Self.dialect.byteOrder, []) {
                $0.string(0)
            }
        }.get()
    }

    public func putFirmwareVersion(thingType: String, firmwareVersion: String, now: Int64) -> RegistryWrite? {
        use(nil) { c in
            try c.transaction { () throws -> RegistryWrite in
                guard
                    try c.first("SELECT 1 FROM thing_types WHERE thing_type = ?", [.text(thingType)], { _ in true })
                        != nil
                else { return .missingThingType }
                return try c.run(
                    "INSERT INTO firmware_versions (thing_type, firmware_version, created_at) VALUES (?, ?, ?)"
                        + " ON CONFLICT (thing_type, firmware_version) DO NOTHING",
                    [.text(thingType), .text(firmwareVersion), .int(now)]) == 1 ? .created : .unchanged
            }
        }
    }

    public func firmwareVersions(thingType: String) -> StoreRead<[String]> {
        read { c in
            guard
                try c.first("SELECT 1 FROM thing_types WHERE thing_type = ?", [.text(thingType)], { _ in true }) != nil
            else { return nil }
            return try c.rows(
                "SELECT firmware_version FROM firmware_versions WHERE thing_type = ? ORDER BY firmware_version"
                    + Self.dialect.byteOrder, [.text(thingType)]
            ) { $0.string(0) }
        }
    }

    public func putTraitAlias(_ a: TraitAliasRecord) -> RegistryWrite? {
        use(nil) { c in
            try c.transaction { () throws -> RegistryWrite in
                guard
                    try c.first(
                        "SELECT 1 FROM firmware_versions WHERE thing_type = ? AND firmware_version = ?",
                        [.text(a.thingType), .text(a.firmwareVersion)], { _ in true }) != nil
                else { return .missingFirmwareVersion }
                guard
                    try c.first(
                        "SELECT 1 FROM trait_versions WHERE trait = ? AND version = ?",
                        [.text(a.trait), .int(Int64(a.traitVersion))], { _ in true }) != nil
                else { return .missingTraitVersion }
                let inserted = try c.run(
                    "INSERT INTO trait_aliases (thing_type, firmware_version, alias, trait, trait_version, created_at)"
                        + " VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (thing_type, firmware_version, alias) DO NOTHING",
                    [
                        .text(a.thingType), .text(a.firmwareVersion), .text(a.alias), .text(a.trait),
                        .int(Int64(a.traitVersion)), .int(a.createdAt)
                    ])
                if inserted == 1 { return .created }
                let old = try c.first(
                    "SELECT trait, trait_version FROM trait_aliases WHERE thing_type = ? AND firmware_version = ?"
                        + " AND alias = ?", [.text(a.thingType), .text(a.firmwareVersion), .text(a.alias)]
                ) { (trait: $0.string(0), version: Int($0.int(1))) }
                return old?.trait == a.trait && old?.version == a.traitVersion ? .unchanged : .conflict
            }
        }
    }

    /// Two statements: the firmware version's row, then its aliases joined
    /// to their definitions.
    public func traitEntry(thingType: String, firmwareVersion: String) -> StoreRead<[(TraitAliasRecord, String)]> {
        read { c in
            guard
                try c.first(
                    "SELECT 1 FROM firmware_versions WHERE thing_type = ? AND firmware_version = ?",
                    [.text(thingType), .text(firmwareVersion)], { _ in true }) != nil
            else { return nil }
            return try c.rows(
                "SELECT a.alias, a.trait, a.trait_version, a.created_at, v.definition FROM trait_aliases a"
                    + " JOIN trait_versions v ON v.trait = a.trait AND v.version = a.trait_version"
                    + " WHERE a.thing_type = ? AND a.firmware_version = ? ORDER BY a.alias" + Self.dialect.byteOrder,
                [.text(thingType), .text(firmwareVersion)]
            ) { r in
                (
                    TraitAliasRecord(
                        thingType: thingType, firmwareVersion: firmwareVersion, alias: r.string(0), trait: r.string(1),
                        traitVersion: Int(r.int(2)), createdAt: r.int(3)), r.string(4)
                )
            }
        }
    }

    public func hasFirmwareVersions() -> Bool? {
        try? attempt { c in try c.first("SELECT 1 FROM firmware_versions LIMIT 1", [], { _ in true }) ?? false }.get()
    }
}
