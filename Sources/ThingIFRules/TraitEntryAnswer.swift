// SPDX-License-Identifier: Apache-2.0

import ThingIF

// A thing's registry entry as the hub answers it to the thing's owner
// (GET /thing-if/apps/{appID}/targets/thing:{thingID}/traits, for the CLI
// and the dashboard; docs/decisions/trait-driven-controls.md):
// {"thingType","firmwareVersion","registered":true,"aliases":[{"alias",
// "trait","traitVersion","definition"}…]}, or "registered":false where the
// thing's type and firmware version have no entry. The definitions are read
// back with the parser that stored them.

extension TraitEntry {
    /// nil where the thing has no entry; a definition the parser refuses
    /// is refused by its alias and field.
    public static func parse(answer j: JSON) -> Result<TraitEntry?, RuleError> {
        guard j.isObject else { return .failure(RuleError("the thing's traits must be a JSON object")) }
        guard j["registered"]?.boolValue == true else { return .success(nil) }
        guard let tt = j["thingType"]?.stringValue, let fw = j["firmwareVersion"]?.stringValue,
            let list = j["aliases"], list.isArray
        else {
            return .failure(RuleError("a registered entry names its thingType, firmwareVersion and aliases"))
        }
        var aliases: [TraitAliasDefinition] = []
        for (i, a) in list.elements.enumerated() {
            guard a.isObject, let alias = a["alias"]?.stringValue, let trait = a["trait"]?.stringValue,
                let version = TraitNames.version(a["traitVersion"]), let d = a["definition"]
            else {
                return .failure(
                    RuleError(
                        "aliases[\(i)] must have alias, trait, traitVersion and definition", field: "aliases[\(i)]"))
            }
            switch TraitDefinition.parse(d) {
            case .failure(let e): return .failure(RuleError("alias \(alias): \(e.message)", field: e.field))
            case .success(let definition):
                aliases.append(
                    TraitAliasDefinition(alias: alias, trait: trait, version: version, definition: definition))
            }
        }
        return .success(TraitEntry(thingType: tt, firmwareVersion: fw, aliases: aliases))
    }
}
