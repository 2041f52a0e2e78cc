// SPDX-License-Identifier: Apache-2.0

import ThingIF
import ThingIFRules

/// The trait registry, defined by the operator and read by the app
/// (docs/decisions/kii-trait-registry.md): Kii's bodies and answers. The
/// REST routes authenticate the caller; the names, bodies and the store's
/// answers are checked here, and nothing is stored before every check passed.
extension AppAPI {
    /// The thing-side reader of the registry (the uploads' and the commands' checks).
    var traits: TraitRegistry { stateUploads.traits }

    /// A name of the registry's paths, or 400 naming `what`.
    static func checkName(_ s: String, _ what: String) -> HubError? {
        TraitNames.isPathName(s)
            ? nil
            : .invalid(
                "\(what) must be 1 to \(TraitLimits.maxName) letters, digits, '-', '_' or '.' (Kii's pattern)",
                field: what)
    }

    static func storageRefused(_ w: RegistryWrite) -> HubError {
        HubError(500, "STORAGE_ERROR", "the registry answered \(w) where it could not")
    }

    /// POST …/traits/{trait}/versions (`version` nil: the next) or PUT
    /// …/versions/{n}: 201 when stored, 200 when that version has this
    /// definition already, 409 when it has another.
    public func defineTraitVersion(trait: String, version: Int?, body: [UInt8]) -> Result<
        (status: Int, version: Int), HubError
    > {
        if let e = Self.checkName(trait, "trait") { return .failure(e) }
        if case .failure(let e) = TraitDefinition.parse(body) { return .failure(.invalid(e.message, field: e.field)) }
        guard case .success(let j) = JSON.parse(body) else {
            return .failure(.invalid("a trait definition must be JSON"))
        }
        guard
            let (w, n) = store.putTraitVersion(
                trait: trait, version: version, definition: TraitDefinition.canonical(j), now: Platform.epochMs())
        else { return .failure(.storage) }
        switch w {
        case .created: return .success((201, n))
        case .unchanged: return .success((200, n))
        case .conflict: return .failure(.traitVersionExists(trait, n))
        default: return .failure(Self.storageRefused(w))
        }
    }

    /// GET …/traits/{trait}/versions/{n}: the definition as stored, with
    /// "trait", "traitVersion" and "createdAt".
    public func traitVersion(trait: String, version: Int) -> Result<JSON, HubError> {
        switch store.traitVersion(trait: trait, version: version) {
        case .failed: return .failure(.storage)
        case .notFound: return .failure(.traitVersionNotFound(trait, version))
        case .found(let r):
            guard case .success(let o) = JSON.parse(r.definition), o.isObject else { return .failure(.storage) }
            o.set("trait", string: r.trait)
            o.set("traitVersion", .int(r.version))
            o.set("createdAt", .int64(r.createdAt))
            return .success(o)
        }
    }

    /// GET …/traits/{trait}/versions: {"trait","versions":[{"traitVersion","createdAt"}]}.
    public func traitVersionList(trait: String) -> Result<JSON, HubError> {
        guard let versions = store.traitVersions(trait: trait) else { return .failure(.storage) }
        guard !versions.isEmpty else { return .failure(.traitNotFound(trait)) }
        let list = JSON.array()
        for v in versions {
            let o = JSON.object()
            o.set("traitVersion", .int(v.version))
            o.set("createdAt", .int64(v.createdAt))
            list.append(o)
        }
        let o = JSON.object()
        o.set("trait", string: trait)
        o.set("versions", list)
        return .success(o)
    }

    /// GET …/traits: {"traits":[{"trait","latestVersion"}]}.
    public func traitList() -> Result<JSON, HubError> {
        guard let traits = store.traits() else { return .failure(.storage) }
        let list = JSON.array()
        for t in traits {
            let o = JSON.object()
            o.set("trait", string: t.trait)
            o.set("latestVersion", .int(t.latest))
            list.append(o)
        }
        let o = JSON.object()
        o.set("traits", list)
        return .success(o)
    }

    /// PUT …/configuration/thing-types/{thingType}: 201 new, 204 there.
    /// Kii's body (ThingTypeConfigurationRequest: verification code flows)
    /// may be an object or absent; this hub keeps none of it.
    public func defineThingType(_ thingType: String, body: [UInt8]) -> Result<Int, HubError> {
        if let e = Self.checkName(thingType, "thingType") { return .failure(e) }
        if !body.isEmpty {
            guard case .success(let j) = JSON.parse(body), j.isObject else {
                return .failure(
                    .invalid("the body must be empty or a JSON object (Kii's ThingTypeConfigurationRequest)"))
            }
        }
        switch store.putThingType(thingType, now: Platform.epochMs()) {
        case nil: return .failure(.storage)
        case .created: return .success(201)
        case .unchanged: return .success(204)
        case let w?: return .failure(Self.storageRefused(w))
        }
    }

    /// GET …/configuration/thing-types: [{"thingType"}], as Kii answers.
    public func thingTypeList() -> Result<JSON, HubError> {
        guard let types = store.thingTypes() else { return .failure(.storage) }
        let list = JSON.array()
        for t in types {
            let o = JSON.object()
            o.set("thingType", string: t)
            list.append(o)
        }
        return .success(list)
    }

    /// PUT …/thing-types/{thingType}/firmware-versions/{fw}: 201 new, 204
    /// there, 404 THING_TYPE_NOT_FOUND.
    public func defineFirmwareVersion(thingType: String, firmwareVersion: String) -> Result<Int, HubError> {
        if let e = Self.checkName(thingType, "thingType") ?? Self.checkName(firmwareVersion, "firmwareVersion") {
            return .failure(e)
        }
        let w = store.putFirmwareVersion(
            thingType: thingType, firmwareVersion: firmwareVersion, now: Platform.epochMs())
        if w == .created || w == .unchanged { traits.registered() }
        switch w {
        case nil: return .failure(.storage)
        case .created: return .success(201)
        case .unchanged: return .success(204)
        case .missingThingType: return .failure(.thingTypeNotFound(thingType))
        case let w?: return .failure(Self.storageRefused(w))
        }
    }

    /// GET …/thing-types/{thingType}/firmware-versions: {"results":[{"firmwareVersion"}]}.
    public func firmwareVersionList(thingType: String) -> Result<JSON, HubError> {
        switch store.firmwareVersions(thingType: thingType) {
        case .failed: return .failure(.storage)
        case .notFound: return .failure(.thingTypeNotFound(thingType))
        case .found(let versions):
            let list = JSON.array()
            for v in versions {
                let o = JSON.object()
                o.set("firmwareVersion", string: v)
                list.append(o)
            }
            let o = JSON.object()
            o.set("results", list)
            return .success(o)
        }
    }

    /// PUT …/firmware-versions/{fw}/aliases/{alias}, Kii's
    /// TraitAliasCreationRequest {"trait","traitVersion"}: 201 new, 204 the
    /// same there, 409 bound to another, 404 for a firmware version or a
    /// trait version that is not there.
    public func defineTraitAlias(thingType: String, firmwareVersion: String, alias: String, body: [UInt8]) -> Result<
        Int, HubError
    > {
        if let e = Self.checkName(thingType, "thingType") ?? Self.checkName(firmwareVersion, "firmwareVersion")
            ?? Self.checkName(alias, "alias")
        {
            return .failure(e)
        }
        guard case .success(let j) = JSON.parse(body), j.isObject else {
            return .failure(.invalid("the body must be a JSON object {\"trait\",\"traitVersion\"}"))
        }
        let trait: String
        do {
            trait = try FormFields.requiredString(j, "trait")
        } catch {
            return .failure(error)
        }
        if let e = Self.checkName(trait, "trait") { return .failure(e) }
        guard let version = TraitNames.version(j["traitVersion"]) else {
            return .failure(
                .invalid("\"traitVersion\" is required: a number (or a string of digits) from 1", field: "traitVersion")
            )
        }
        let record = TraitAliasRecord(
            thingType: thingType, firmwareVersion: firmwareVersion, alias: alias, trait: trait, traitVersion: version,
            createdAt: Platform.epochMs())
        switch store.putTraitAlias(record) {
        case nil: return .failure(.storage)
        case .created: return .success(201)
        case .unchanged: return .success(204)
        case .missingFirmwareVersion: return .failure(.firmwareVersionNotFound(thingType, firmwareVersion))
        case .missingTraitVersion: return .failure(.traitVersionNotFound(trait, version))
        case .conflict:
            let old = traitAliasRecord(thingType: thingType, firmwareVersion: firmwareVersion, alias: alias)
            return .failure(
                .traitAliasExists(alias, (try? old.get())?.0.trait ?? "?", (try? old.get())?.0.traitVersion ?? 0))
        case let w?: return .failure(Self.storageRefused(w))
        }
    }

    func traitAliasRecord(thingType: String, firmwareVersion: String, alias: String) -> Result<
        (TraitAliasRecord, String), HubError
    > {
        switch store.traitEntry(thingType: thingType, firmwareVersion: firmwareVersion) {
        case .failed: return .failure(.storage)
        case .notFound: return .failure(.firmwareVersionNotFound(thingType, firmwareVersion))
        case .found(let rows):
            guard let row = rows.first(where: { $0.0.alias == alias }) else { return .failure(.traitAliasNotFound) }
            return .success(row)
        }
    }

    static func aliasJSON(_ a: TraitAliasRecord) -> JSON {
        let o = JSON.object()
        o.set("alias", string: a.alias)
        o.set("thingType", string: a.thingType)
        o.set("firmwareVersion", string: a.firmwareVersion)
        o.set("trait", string: a.trait)
        o.set("traitVersion", .int(a.traitVersion))
        return o
    }

    /// GET …/firmware-versions/{fw}/aliases: {"aliases":[{"alias","trait","traitVersion",…}]}, as Kii answers.
    public func traitAliasList(thingType: String, firmwareVersion: String) -> Result<JSON, HubError> {
        switch store.traitEntry(thingType: thingType, firmwareVersion: firmwareVersion) {
        case .failed: return .failure(.storage)
        case .notFound: return .failure(.firmwareVersionNotFound(thingType, firmwareVersion))
        case .found(let rows):
            let list = JSON.array()
            for (a, _) in rows { list.append(Self.aliasJSON(a)) }
            let o = JSON.object()
            o.set("aliases", list)
            return .success(o)
        }
    }

    /// GET …/aliases/{alias}: the alias and its trait version's definition.
    public func traitAlias(thingType: String, firmwareVersion: String, alias: String) -> Result<JSON, HubError> {
        traitAliasRecord(thingType: thingType, firmwareVersion: firmwareVersion, alias: alias).flatMap { a, text in
            guard case .success(let d) = JSON.parse(text) else { return .failure(.storage) }
            let o = Self.aliasJSON(a)
            o.set("definition", d)
            return .success(o)
        }
    }

    /// Whether the trait registry's entry for the thing (its type and
    /// `firmwareVersion`, else its own) defines `alias`; nil where no entry
    /// exists (the aliases are then those of the reported state).
    public func traitAliasDefined(_ alias: String, on owned: OwnedThing, firmwareVersion: String? = nil) -> Result<
        Bool?, HubError
    > {
        traits.entry(
            thingType: owned.thing.thingType, firmwareVersion: firmwareVersion ?? owned.thing.firmwareVersion
        ).map { e in e.map { $0.alias(alias) != nil } }
    }
    /// GET …/targets/thing:{thingID}/traits (the thing's owner): its
    /// registry entry for the dashboard's controls and the CLI's checks,
    /// {"thingType","firmwareVersion","registered","aliases":[{"alias",
    /// "trait","traitVersion","definition"}]}; "registered" false (and no
    /// aliases) where its type and firmware version have no entry.
    public func traitEntry(of owned: OwnedThing) -> Result<JSON, HubError> {
        let o = JSON.object()
        let (tt, fw) = (owned.thing.thingType, owned.thing.firmwareVersion)
        if let tt { o.set("thingType", string: tt) }
        if let fw { o.set("firmwareVersion", string: fw) }
        o.set("registered", .bool(false))
        guard let tt, let fw, TraitNames.isPathName(tt), TraitNames.isPathName(fw), traits.maybeInUse() else {
            return .success(o)
        }
        switch store.traitEntry(thingType: tt, firmwareVersion: fw) {
        case .failed: return .failure(.storage)
        case .notFound: return .success(o)
        case .found(let rows):
            let list = JSON.array()
            for (a, text) in rows {
                guard case .success(let d) = JSON.parse(text), d.isObject else { return .failure(.storage) }
                let x = JSON.object()
                x.set("alias", string: a.alias)
                x.set("trait", string: a.trait)
                x.set("traitVersion", .int(a.traitVersion))
                x.set("definition", d)
                list.append(x)
            }
            o.set("registered", .bool(true))
            o.set("aliases", list)
            return .success(o)
        }
    }
}
