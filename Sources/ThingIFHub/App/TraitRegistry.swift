// SPDX-License-Identifier: Apache-2.0

import ThingIF
import ThingIFRules

/// The trait registry's entry of a thing (docs/decisions/kii-trait-registry.md):
/// where its thingType and firmwareVersion have a registered firmware
/// version, its aliases' definitions, which its commands, states and alias
/// reads are checked against; nil where none (the aliases are then the
/// reported state's). One reader for the app API and the thing's uploads.
final class TraitRegistry: @unchecked Sendable {
    let store: HubStore
    /// Whether any firmware version is registered, and when that was read.
    /// Entries only grow, so true stays true; false is read again after a
    /// second (another hub's first registration is seen within it; this
    /// hub's own at once: `registered()`).
    private let inUse = Locked<(at: Int64, value: Bool)>((at: 0, value: false))

    init(store: HubStore) { self.store = store }

    /// Whether an entry may exist: a hub whose registry is empty reads nothing more.
    func maybeInUse() -> Bool {
        let now = Platform.epochMs()
        let cached = inUse.withLock { $0 }
        if cached.value || now - cached.at < 1_000 { return cached.value }
        let value = store.hasFirmwareVersions() ?? true
        inUse.withLock { $0 = (at: now, value: value) }
        return value
    }

    /// This hub registered a firmware version.
    func registered() { inUse.withLock { $0 = (at: Platform.epochMs(), value: true) } }

    /// The entry of a thing type and firmware version: nil where none (or
    /// either is absent), 500 when the store cannot read it.
    func entry(thingType: String?, firmwareVersion: String?) -> Result<TraitEntry?, HubError> {
        guard let thingType, let firmwareVersion, TraitNames.isPathName(thingType),
            TraitNames.isPathName(firmwareVersion), maybeInUse()
        else { return .success(nil) }
        switch store.traitEntry(thingType: thingType, firmwareVersion: firmwareVersion) {
        case .notFound: return .success(nil)
        case .failed: return .failure(.storage)
        case .found(let rows):
            var aliases: [TraitAliasDefinition] = []
            for (a, text) in rows {
                // Stored only once it parsed: a row that does not is the store's fault.
                guard case .success(let d) = TraitDefinition.parse(Array(text.utf8)) else { return .failure(.storage) }
                aliases.append(
                    TraitAliasDefinition(alias: a.alias, trait: a.trait, version: a.traitVersion, definition: d))
            }
            return .success(TraitEntry(thingType: thingType, firmwareVersion: firmwareVersion, aliases: aliases))
        }
    }

    func entry(for thing: ThingRecord) -> Result<TraitEntry?, HubError> {
        entry(thingType: thing.thingType, firmwareVersion: thing.firmwareVersion)
    }

    /// A trait command checked against the thing's entry: 400 WRONG_COMMAND
    /// naming the alias or the action (`invalidFields`) when it does not
    /// fit. Schema commands name no trait and pass.
    func check(_ command: Command, for thing: ThingRecord) -> HubError? {
        guard command.shape == .trait else { return nil }
        let entry: TraitEntry
        switch self.entry(for: thing) {
        case .failure(let e): return e
        case .success(nil): return nil
        case .success(let e?): entry = e
        }
        for g in command.groups {
            for case .action(let name, let params) in g.entries {
                if let e = entry.checkAction(alias: g.alias ?? "", name: name, params: params) {
                    return .wrongCommand(e.message, field: e.field)
                }
            }
        }
        return nil
    }

    /// A state upload (a JSON object) checked against the thing's entry:
    /// 400 INVALID_INPUT_DATA naming the alias or the state field.
    func check(state upload: JSON, for thing: ThingRecord) -> HubError? {
        switch entry(for: thing) {
        case .failure(let e): return e
        case .success(nil): return nil
        case .success(let entry?):
            return entry.checkState(upload).map { HubError.invalid($0.message, field: $0.field) }
        }
    }
}
