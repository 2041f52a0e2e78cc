// SPDX-License-Identifier: Apache-2.0

import ThingIF
import ThingIFRules

// The words of `thingif command send` for a trait command (Thing-IF v1,
// actions grouped by alias), checked against the thing's trait registry
// entry with the hub's own rule (ThingIFRules' TraitEntry.checkAction)
// before anything is sent:
//
//   AirConditionerAlias/turnPower=true AirConditionerAlias/setPresetTemperature=25
//   LampAlias/setColor red=255 green=0 blue=0
//
// `ALIAS/ACTION=VALUE` gives the action's value (JSON when it reads as
// JSON, else a string); `ALIAS/ACTION` followed by key=value words gives it
// an object of them; `ALIAS/ACTION` alone gives {} (null where the entry's
// schema for it is null). Consecutive actions of one alias form one group.

/// One action of a trait command.
struct TraitAction: Equatable {
    var alias: String
    var name: String
    /// nil: neither `=VALUE` nor key=value words were given.
    var value: JSONValue?
}

enum TraitActions {
    /// The alias and the rest of a word that names one (`ALIAS/…`, the '/'
    /// before any '='); nil for a schema action or a parameter.
    static func aliased(_ word: String) -> (alias: String, rest: Substring)? {
        let head = word.prefix { $0 != "=" }
        guard let slash = head.firstIndex(of: "/") else { return nil }
        return (String(word[..<slash]), word[word.index(after: slash)...])
    }

    /// The actions of a trait command when any word names an alias, else
    /// nil (a schema command, `Actions.parse(words:)`).
    static func parse(words: [String]) throws -> [TraitAction]? {
        guard words.contains(where: { aliased($0) != nil }) else { return nil }
        var out: [TraitAction] = []
        // The key=value words of the last action, when it takes them.
        var params: [(String, JSONValue)]?
        func close() {
            if let p = params, !p.isEmpty { out[out.count - 1].value = .object(p) }
        }
        for word in words {
            if let (alias, rest) = aliased(word) {
                close()
                guard TraitNames.isPathName(alias) else {
                    throw ActionParseError(
                        message: "'\(word)': an alias is 1 to \(TraitLimits.maxName) letters, digits, '-', '_' or '.'")
                }
                let name = String(rest.prefix { $0 != "=" })
                guard TraitNames.isMemberName(name) else {
                    throw ActionParseError(message: "'\(word)' names no action after '\(alias)/'")
                }
                let value = rest.count > name.count ? Actions.value(String(rest.dropFirst(name.count + 1))) : nil
                out.append(TraitAction(alias: alias, name: name, value: value))
                params = value == nil ? [] : nil
            } else if let eq = word.firstIndex(of: "=") {
                guard let last = out.last else {
                    throw ActionParseError(
                        message: "'\(word)' comes before any action: name the action first (e.g. Alias/setMode \(word))"
                    )
                }
                guard params != nil else {
                    throw ActionParseError(
                        message:
                            "'\(word)': \(last.alias)/\(last.name) has its value already; give either \(last.alias)/\(last.name)=VALUE or key=value words"
                    )
                }
                let key = String(word[..<eq])
                guard !key.isEmpty else {
                    throw ActionParseError(message: "'\(word)' has no parameter name before '='")
                }
                guard !params!.contains(where: { $0.0 == key }) else {
                    throw ActionParseError(message: "parameter '\(key)' is given twice for action \(last.name)")
                }
                params!.append((key, Actions.value(String(word[word.index(after: eq)...]))))
            } else {
                throw ActionParseError(
                    message:
                        "'\(word)' names no alias: in a trait command every action is ALIAS/ACTION (e.g. AirConditionerAlias/turnPower=true)"
                )
            }
        }
        close()
        return out
    }

    /// A trait command's actions given as --raw JSON (`[{"ALIAS":[{"action":value}…]}…]`),
    /// else nil (the items' values are not arrays: a schema command).
    static func parse(raw: JSONValue) throws -> [TraitAction]? {
        let items = raw.arrayValue ?? []
        let groups = items.compactMap { $0.objectValue?.first }
        guard groups.contains(where: { $0.1.arrayValue != nil }) else { return nil }
        var out: [TraitAction] = []
        for (i, (alias, list)) in groups.enumerated() {
            guard let actions = list.arrayValue, !actions.isEmpty else {
                throw ActionParseError(
                    message: "--raw: item \(i + 1) (alias \(alias)) must hold a non-empty array of actions")
            }
            for a in actions {
                guard let members = a.objectValue, members.count == 1 else {
                    throw ActionParseError(
                        message: "--raw: alias \(alias)'s actions must be objects with one member, {\"action\": value}")
                }
                out.append(TraitAction(alias: alias, name: members[0].0, value: members[0].1))
            }
        }
        return out
    }

    /// The command's `actions`, grouped by alias, each checked against
    /// `entry` (when the thing has one) by the hub's rule: a refusal is a
    /// usage error naming the alias, the action and the field.
    static func command(_ actions: [TraitAction], entry: TraitEntry?) throws -> JSONValue {
        var groups: [(String, [JSONValue])] = []
        for a in actions {
            let schema = entry?.alias(a.alias)?.definition.action(a.name)?.schema
            let value = a.value ?? (schema?.kind == .null ? .null : .object([]))
            if let entry, let e = entry.checkAction(alias: a.alias, name: a.name, params: try jansson(value)) {
                throw ActionParseError(
                    message:
                        "\(a.alias)/\(a.name): \(e.message) (the trait registry's entry for \(entry.thingType) \(entry.firmwareVersion); nothing was sent)"
                )
            }
            let item = JSONValue.object([(a.name, value)])
            if let last = groups.last, last.0 == a.alias {
                groups[groups.count - 1].1.append(item)
            } else {
                groups.append((a.alias, [item]))
            }
        }
        return .array(groups.map { .object([($0.0, .array($0.1))]) })
    }

    /// The value as the rules' JSON (jansson takes no bare scalar: read as
    /// the one element of an array).
    static func jansson(_ v: JSONValue) throws -> JSON {
        guard case .success(let a) = JSON.parse("[" + v.text + "]"), let e = a.elements.first else {
            throw ActionParseError(message: "a parameter value is not JSON: \(v.text.prefix(80))")
        }
        return e
    }

    /// The thing's entry (GET …/targets/thing:{id}/traits), nil where none.
    static func entry(_ client: HubClient, thingID: String) throws -> TraitEntry? {
        let answer = try client.call("GET", client.target(thingID) + "/traits")
        guard case .success(let j) = JSON.parse(answer.text) else {
            throw HubClientError(description: "the hub's answer for \(thingID)'s traits is not JSON")
        }
        switch TraitEntry.parse(answer: j) {
        case .failure(let e): throw HubClientError(description: "\(thingID)'s trait registry entry: \(e.message)")
        case .success(let entry): return entry
        }
    }
}
