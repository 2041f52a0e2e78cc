// SPDX-License-Identifier: Apache-2.0

import Foundation
import Testing
import ThingIF
@testable import ThingIFHub

/// The trait registry's storage on every store (memory, SQLite, PostgreSQL
/// where installed, always in CI): published trait versions and aliases
/// are immutable, a write that names what is not there is refused, and a
/// refused write changes nothing.
@Suite("Trait store", .offPool)
struct TraitStoreTests {
    static let definition = #"{"actions":[{"turnPower":{"payloadSchema":{"type":"boolean"}}}]}"#
    static func w(_ r: (RegistryWrite, Int)?) -> String { r.map { "\($0.0) \($0.1)" } ?? "failed" }
    static let other = #"{"actions":[{"turnPower":{"payloadSchema":{"type":"integer"}}}]}"#

    @Test(
        "Trait versions: numbered in order, the same again unchanged, another refused and nothing changed",
        arguments: StoreFactory.all)
    func versions(_ factory: StoreFactory) throws {
        let (s, cleanup) = try factory.make(.fastForTests, StateRetention())
        defer { cleanup() }
        #expect(
            Self.w(s.putTraitVersion(trait: "AC", version: nil, definition: Self.definition, now: 1)) == "created 1")
        #expect(Self.w(s.putTraitVersion(trait: "AC", version: nil, definition: Self.other, now: 2)) == "created 2")
        #expect(Self.w(s.putTraitVersion(trait: "AC", version: 2, definition: Self.other, now: 3)) == "unchanged 2")
        #expect(Self.w(s.putTraitVersion(trait: "AC", version: 1, definition: Self.other, now: 4)) == "conflict 1")
        #expect(s.traitVersion(trait: "AC", version: 1).value?.definition == Self.definition, "a refusal changed it")
        #expect(s.traitVersion(trait: "AC", version: 1).value?.createdAt == 1)
        #expect(Self.w(s.putTraitVersion(trait: "AC", version: 7, definition: Self.definition, now: 5)) == "created 7")
        #expect(
            Self.w(s.putTraitVersion(trait: "AC", version: nil, definition: Self.definition, now: 6)) == "created 8")
        #expect(s.traitVersions(trait: "AC")?.map(\.version) == [1, 2, 7, 8])
        #expect(s.traitVersions(trait: "none")?.isEmpty == true)
        if case .notFound = s.traitVersion(trait: "AC", version: 3) {} else { Issue.record("version 3 found") }
        _ = s.putTraitVersion(trait: "Humidity", version: nil, definition: Self.definition, now: 7)
        #expect(s.traits()?.map { "\($0.trait)=\($0.latest)" } == ["AC=8", "Humidity=1"])
    }

    @Test(
        "Thing types, firmware versions and aliases: what they name must be there; an alias does not change",
        arguments: StoreFactory.all)
    func aliases(_ factory: StoreFactory) throws {
        let (s, cleanup) = try factory.make(.fastForTests, StateRetention())
        defer { cleanup() }
        #expect(s.hasFirmwareVersions() == false)
        #expect(s.putFirmwareVersion(thingType: "AC", firmwareVersion: "v1", now: 1) == .missingThingType)
        #expect(s.putThingType("AC", now: 1) == .created)
        #expect(s.putThingType("AC", now: 2) == .unchanged)
        #expect(s.putFirmwareVersion(thingType: "AC", firmwareVersion: "v1", now: 1) == .created)
        #expect(s.putFirmwareVersion(thingType: "AC", firmwareVersion: "v1", now: 2) == .unchanged)
        #expect(s.putFirmwareVersion(thingType: "AC", firmwareVersion: "v3", now: 3) == .created)
        #expect(s.hasFirmwareVersions() == true)
        #expect(s.thingTypes() == ["AC"])
        #expect(s.firmwareVersions(thingType: "AC").value == ["v1", "v3"])
        if case .notFound = s.firmwareVersions(thingType: "none") {
        } else {
            Issue.record("an unknown thing type listed")
        }
        func alias(_ a: String, fw: String = "v1", trait: String = "AirConditioner", version: Int = 1)
            -> TraitAliasRecord
        {
            TraitAliasRecord(
                thingType: "AC", firmwareVersion: fw, alias: a, trait: trait, traitVersion: version, createdAt: 9)
        }
        #expect(s.putTraitAlias(alias("A")) == .missingTraitVersion)
        _ = s.putTraitVersion(trait: "AirConditioner", version: nil, definition: Self.definition, now: 1)
        _ = s.putTraitVersion(trait: "AirConditioner", version: nil, definition: Self.other, now: 1)
        #expect(s.putTraitAlias(alias("A", fw: "v2")) == .missingFirmwareVersion)
        #expect(s.putTraitAlias(alias("A")) == .created)
        #expect(s.putTraitAlias(alias("A")) == .unchanged)
        #expect(s.putTraitAlias(alias("A", version: 2)) == .conflict)
        #expect(s.putTraitAlias(alias("A", version: 3)) == .missingTraitVersion)
        let entry = try #require(s.traitEntry(thingType: "AC", firmwareVersion: "v1").value)
        #expect(entry.map(\.0.alias) == ["A"] && entry.first?.0.traitVersion == 1, "a refusal changed the alias")
        #expect(entry.first?.1 == Self.definition)
        // v3 is registered with no alias: an entry, empty (Kii's 404 for every alias).
        #expect(s.traitEntry(thingType: "AC", firmwareVersion: "v3").value?.isEmpty == true)
        if case .notFound = s.traitEntry(thingType: "AC", firmwareVersion: "v9") {
        } else {
            Issue.record("v9 has an entry")
        }
    }
}
