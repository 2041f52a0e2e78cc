// SPDX-License-Identifier: Apache-2.0

// The words of `thingif command send` turned into Thing-IF actions:
//
//   turnPower power=true setPresetTemperature presetTemperature=25 setFanSpeed fanSpeed=5
//
// A word without '=' starts an action; `key=value` words after it are its
// parameters. A value that is valid JSON (true, 25, "x", {"a":1}, [1,2], null)
// is taken as that JSON; anything else is a string. An action without
// parameters gets {}.

struct ActionParseError: Error, Equatable, CustomStringConvertible {
    var message: String
    var description: String { message }
}

enum Actions {
    /// The actions array, e.g. `[{"turnPower":{"power":true}}]`.
    static func parse(words: [String]) throws -> JSONValue {
        var actions: [(String, [(String, JSONValue)])] = []
        for word in words {
            if let eq = word.firstIndex(of: "=") {
                let key = String(word[..<eq])
                let raw = String(word[word.index(after: eq)...])
                guard !actions.isEmpty else {
                    throw ActionParseError(
                        message: "'\(word)' comes before any action: name the action first (e.g. turnPower \(word))")
                }
                guard !key.isEmpty else {
                    throw ActionParseError(message: "'\(word)' has no parameter name before '='")
                }
                let name = actions[actions.count - 1].0
                if actions[actions.count - 1].1.contains(where: { $0.0 == key }) {
                    throw ActionParseError(message: "parameter '\(key)' is given twice for action \(name)")
                }
                actions[actions.count - 1].1.append((key, value(raw)))
            } else {
                guard !word.isEmpty else { throw ActionParseError(message: "an empty word is not an action name") }
                guard !word.hasPrefix("-"), !word.contains(where: { $0 == " " || $0 == "{" || $0 == "[" || $0 == "\"" })
                else {
                    throw ActionParseError(message: "'\(word)' is not an action name (use key=value for parameters)")
                }
                actions.append((word, []))
            }
        }
        guard !actions.isEmpty else { throw ActionParseError(message: "no action given (e.g. turnPower power=true)") }
        return .array(actions.map { .object([($0.0, .object($0.1))]) })
    }

    /// A parameter value: JSON when it parses as JSON, else the text itself.
    static func value(_ raw: String) -> JSONValue {
        (try? JSONValue.parse(raw)) ?? .string(raw)
    }

    /// Checks an actions array given as JSON (`--raw`): a non-empty array of
    /// objects with exactly one member each.
    static func parse(raw: String) throws -> JSONValue {
        let v: JSONValue
        do { v = try JSONValue.parse(raw) } catch {
            throw ActionParseError(message: "--raw is not valid JSON: \(error)")
        }
        guard let items = v.arrayValue, !items.isEmpty else {
            throw ActionParseError(
                message: #"--raw must be a non-empty JSON array of actions, e.g. [{"turnPower":{"power":true}}]"#)
        }
        for (i, item) in items.enumerated() {
            guard let members = item.objectValue, members.count == 1 else {
                throw ActionParseError(
                    message: "--raw: action \(i + 1) must be an object with one member, {\"actionName\": {…}}")
            }
        }
        return v
    }

    /// The CLI's own syntax for an actions array: `turnPower power=true, setFanSpeed fanSpeed=5`.
    static func summary(_ actions: JSONValue?) -> String {
        guard let items = actions?.arrayValue else { return "" }
        return items.map(summary(action:)).joined(separator: ", ")
    }

    static func summary(action: JSONValue) -> String {
        guard let (name, params) = action.objectValue?.first else { return action.text }
        guard let members = params.objectValue else { return "\(name) \(params.text)" }
        return ([name] + members.map { "\($0.0)=\(paramText($0.1))" }).joined(separator: " ")
    }

    /// A parameter as the user would type it: strings bare when they would
    /// not read back as other JSON, else JSON.
    static func paramText(_ v: JSONValue) -> String {
        if case .string(let s) = v, !s.isEmpty, !s.contains(" "), (try? JSONValue.parse(s)) == nil { return s }
        return v.text
    }
}
