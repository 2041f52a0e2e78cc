// SPDX-License-Identifier: Apache-2.0

import ThingIF

/// A trait version as stored: its definition is the canonical JSON
/// (TraitRegistry.canonical) of what was accepted.
public struct TraitVersionRecord: Sendable, Equatable {
    public let trait: String
    public let version: Int
    public let definition: String
    public let createdAt: Int64

    public init(trait: String, version: Int, definition: String, createdAt: Int64) {
        self.trait = trait
        self.version = version
        self.definition = definition
        self.createdAt = createdAt
    }
}

/// An alias: `trait` version `traitVersion` for a thing type and firmware version.
public struct TraitAliasRecord: Sendable, Equatable {
    public let thingType: String
    public let firmwareVersion: String
    public let alias: String
    public let trait: String
    public let traitVersion: Int
    public let createdAt: Int64

    public init(
        thingType: String, firmwareVersion: String, alias: String, trait: String, traitVersion: Int, createdAt: Int64
    ) {
        self.thingType = thingType
        self.firmwareVersion = firmwareVersion
        self.alias = alias
        self.trait = trait
        self.traitVersion = traitVersion
        self.createdAt = createdAt
    }
}

/// What a write of the registry did. Nothing but `created` changes anything.
public enum RegistryWrite: Sendable, Equatable {
    case created
    /// The same was there already.
    case unchanged
    /// Something else is there under that name: published, immutable.
    case conflict
    case missingThingType
    case missingFirmwareVersion
    case missingTraitVersion
}

/// Kii's trait registry (docs/decisions/kii-trait-registry.md). One part of
/// HubStore (its conventions hold). Entries only grow: trait versions and
/// aliases are immutable once stored, and nothing is deleted. nil: the
/// store failed.
public protocol TraitStore: AnyObject, Sendable {
    /// Stores a trait version: `version` nil takes the next after the
    /// trait's highest. The version it wrote or found.
    func putTraitVersion(trait: String, version: Int?, definition: String, now: Int64) -> (RegistryWrite, Int)?
    func traitVersion(trait: String, version: Int) -> StoreRead<TraitVersionRecord>
    /// A trait's versions in order ([] for an unknown trait).
    func traitVersions(trait: String) -> [TraitVersionRecord]?
    /// Every trait with its highest version, by name.
    func traits() -> [(trait: String, latest: Int)]?
    func putThingType(_ thingType: String, now: Int64) -> RegistryWrite?
    func thingTypes() -> [String]?
    /// `.missingThingType` for an unregistered thing type.
    func putFirmwareVersion(thingType: String, firmwareVersion: String, now: Int64) -> RegistryWrite?
    /// `.notFound` for an unregistered thing type.
    func firmwareVersions(thingType: String) -> StoreRead<[String]>
    /// `.missingFirmwareVersion` or `.missingTraitVersion` for what it names
    /// that is not there.
    func putTraitAlias(_ alias: TraitAliasRecord) -> RegistryWrite?
    /// The entry's aliases, each with its trait version's definition, by
    /// alias; `.notFound` when the firmware version is not registered.
    func traitEntry(thingType: String, firmwareVersion: String) -> StoreRead<[(TraitAliasRecord, String)]>
    /// Whether any firmware version is registered (the registry is in use).
    func hasFirmwareVersions() -> Bool?
}
