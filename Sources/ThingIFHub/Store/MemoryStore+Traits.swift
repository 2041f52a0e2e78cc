// SPDX-License-Identifier: Apache-2.0

import ThingIF

/// MemoryStore's trait registry, under its one lock.
extension MemoryStore {
    public func putTraitVersion(trait: String, version: Int?, definition: String, now: Int64) -> (RegistryWrite, Int)? {
        data.withLock { d in
            let n = version ?? ((d.traitVersions[trait]?.keys.max() ?? 0) + 1)
            if let old = d.traitVersions[trait]?[n] {
                return (old.definition == definition ? .unchanged : .conflict, n)
            }
            d.traitVersions[trait, default: [:]][n] = TraitVersionRecord(
                trait: trait, version: n, definition: definition, createdAt: now)
            return (.created, n)
        }
    }

    public func traitVersion(trait: String, version: Int) -> StoreRead<TraitVersionRecord> {
        data.withLock { d in d.traitVersions[trait]?[version].map { .found($0) } ?? .notFound }
    }

    public func traitVersions(trait: String) -> [TraitVersionRecord]? {
        data.withLock { d in (d.traitVersions[trait] ?? [:]).values.sorted { $0.version < $1.version } }
    }

    public func traits() -> [(trait: String, latest: Int)]? {
        data.withLock { d in
            d.traitVersions.compactMap { k, v in v.keys.max().map { (trait: k, latest: $0) } }.sorted {
                Array($0.trait.utf8).lexicographicallyPrecedes(Array($1.trait.utf8))
            }
        }
    }

    public func putThingType(_ thingType: String, now: Int64) -> RegistryWrite? {
        data.withLock { d in
            guard d.firmwareVersions[thingType] == nil else { return .unchanged }
            d.firmwareVersions[thingType] = [:]
            return .created
        }
    }

    public func thingTypes() -> [String]? {
        data.withLock { d in d.firmwareVersions.keys.sorted { Array($0.utf8).lexicographicallyPrecedes(Array($1.utf8)) }
        }
    }

    public func putFirmwareVersion(thingType: String, firmwareVersion: String, now: Int64) -> RegistryWrite? {
        data.withLock { d in
            guard let versions = d.firmwareVersions[thingType] else { return .missingThingType }
            guard versions[firmwareVersion] == nil else { return .unchanged }
            d.firmwareVersions[thingType]![firmwareVersion] = [:]
            return .created
        }
    }

    public func firmwareVersions(thingType: String) -> StoreRead<[String]> {
        data.withLock { d in
            guard let versions = d.firmwareVersions[thingType] else { return .notFound }
            return .found(versions.keys.sorted { Array($0.utf8).lexicographicallyPrecedes(Array($1.utf8)) })
        }
    }

    public func putTraitAlias(_ a: TraitAliasRecord) -> RegistryWrite? {
        data.withLock { d in
            guard let aliases = d.firmwareVersions[a.thingType]?[a.firmwareVersion] else {
                return .missingFirmwareVersion
            }
            guard d.traitVersions[a.trait]?[a.traitVersion] != nil else { return .missingTraitVersion }
            if let old = aliases[a.alias] {
                return old.trait == a.trait && old.traitVersion == a.traitVersion ? .unchanged : .conflict
            }
            d.firmwareVersions[a.thingType]![a.firmwareVersion]![a.alias] = a
            return .created
        }
    }

    public func traitEntry(thingType: String, firmwareVersion: String) -> StoreRead<[(TraitAliasRecord, String)]> {
        data.withLock { d in
            guard let aliases = d.firmwareVersions[thingType]?[firmwareVersion] else { return .notFound }
            return .found(
                aliases.values.sorted { Array($0.alias.utf8).lexicographicallyPrecedes(Array($1.alias.utf8)) }
                    .compactMap { a in d.traitVersions[a.trait]?[a.traitVersion].map { (a, $0.definition) } })
        }
    }

    public func hasFirmwareVersions() -> Bool? {
        data.withLock { d in d.firmwareVersions.values.contains { !$0.isEmpty } }
    }
}
