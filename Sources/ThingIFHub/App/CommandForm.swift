// SPDX-License-Identifier: Apache-2.0

import ThingIF

/// The CommandForm of POST …/targets/{target}/commands (and of a trigger's
/// command): every field checked, and the command it gives, or the
/// HubError to answer. Pure (no store, no hub), so the REST route, the
/// triggers and the command_form fuzz target share it.
public enum CommandForm {
    /// A new command ID: "cmd-" and 16 hex digits.
    public static func newCommandID() -> String { "cmd-" + Platform.randomHex(bytes: 8) }

    /// Checks a CommandForm (schema, schemaVersion, actions, issuer, title,
    /// description, metadata) and builds the command with a new commandID.
    /// `issuerAllowed` says whether the issuer may issue it (else 403).
    static func command(_ form: JSON, issuerAllowed: (String) -> Bool) -> Result<Command, HubError> {
        guard form.isObject else { return .failure(.wrongCommand("the body must be a JSON object (a CommandForm)")) }
        func string(_ key: String, max: Int, required: Bool) -> Result<String?, HubError> {
            guard let v = form[key], !v.isNull else {
                return required ? .failure(.wrongCommand("\"\(key)\" is required")) : .success(nil)
            }
            guard let s = v.stringValue else {
                return .failure(.wrongCommand("\"\(key)\" must be a string, not \(v.typeName)"))
            }
            guard !required || !s.isEmpty else { return .failure(.wrongCommand("\"\(key)\" must not be empty")) }
            guard s.count <= max else { return .failure(.wrongCommand("\"\(key)\" is longer than \(max) characters")) }
            return .success(s)
        }
        // A trait command (Kii's CommandCreationRequest): no schema, the
        // actions grouped by trait alias, [{"Alias":[{"action":value}…]}…].
        let trait = (form["schema"] == nil || form["schema"]!.isNull) && Self.looksTrait(form["actions"])
        var fields: [String: String?] = [:]
        for (key, max, required) in [
            ("schema", 200, !trait), ("issuer", 200, true),
            ("title", AppLimits.maxTitle, false),
            ("description", AppLimits.maxDescription, false)
        ] {
            switch string(key, max: max, required: required) {
            case .failure(let e): return .failure(e)
            case .success(let v): fields[key] = v
            }
        }
        var version = 0
        if !trait {
            guard let v = form["schemaVersion"]?.intValue, v >= 0, v <= Int(Int32.max) else {
                return .failure(.wrongCommand("\"schemaVersion\" is required: a non-negative integer"))
            }
            version = v
        }
        let issuer = fields["issuer"]!!
        guard issuerAllowed(issuer) else {
            return .failure(.forbidden("issuer \(issuer) is not the caller nor one of its groups"))
        }
        var metadata: JSON?
        if let m = form["metadata"], !m.isNull {
            guard m.isObject else {
                return .failure(.wrongCommand("\"metadata\" must be an object, not \(m.typeName)"))
            }
            guard m.dump().utf8.count <= AppLimits.maxMetadataBytes else {
                return .failure(.wrongCommand("\"metadata\" is larger than \(AppLimits.maxMetadataBytes) bytes"))
            }
            metadata = m
        }
        guard let actions = form["actions"], actions.isArray else {
            return .failure(.wrongCommand("\"actions\" is required: an array of one-key objects"))
        }
        // (alias, its actions): one group without an alias for a schema command.
        var lists: [(alias: String?, actions: [JSON])] = []
        if trait {
            for g in actions.elements {
                let (alias, list) = g.members[0]
                guard !alias.isEmpty, alias.utf8.count <= 200 else {
                    return .failure(.wrongCommand("a trait alias must be 1 to 200 bytes"))
                }
                lists.append((alias, list.elements))
            }
        } else {
            lists = [(nil, actions.elements)]
        }
        let total = lists.reduce(0) { $0 + $1.actions.count }
        guard (1...AppLimits.maxActions).contains(total), lists.allSatisfy({ !$0.actions.isEmpty }) else {
            return .failure(
                .wrongCommand("\"actions\" must hold 1 to \(AppLimits.maxActions) actions (none of its aliases empty)"))
        }
        var groups: [Command.Group] = []
        var i = 0
        for (alias, list) in lists {
            var entries: [Command.Entry] = []
            for a in list {
                guard a.isObject, a.count == 1, let (name, params) = a.members.first, !name.isEmpty else {
                    return .failure(
                        .wrongCommand("action \(i) must be an object with exactly one key, the action name"))
                }
                guard a.dump().utf8.count <= AppLimits.maxActionBytes else {
                    return .failure(.wrongCommand("action \(i) is larger than \(AppLimits.maxActionBytes) bytes"))
                }
                entries.append(.action(name: name, params: params))
                i += 1
            }
            groups.append(Command.Group(alias: alias, entries: entries))
        }
        let command = Command(
            id: newCommandID(), shape: trait ? .trait : .schema, schema: trait ? nil : fields["schema"]!!,
            schemaVersion: version, issuer: issuer, title: fields["title"] ?? nil,
            description: fields["description"] ?? nil, metadata: metadata, groups: groups)
        return Self.deliverable(command)
    }

    /// Actions grouped by trait alias: every element an object with one key
    /// whose value is an array.
    static func looksTrait(_ actions: JSON?) -> Bool {
        guard let actions, actions.isArray, !actions.elements.isEmpty else { return false }
        return actions.elements.allSatisfy { e in
            e.isObject && e.count == 1 && (e.members.first?.value.isArray ?? false)
        }
    }

    /// The command, or 413 when its payload as the thing receives it is over
    /// the thing's limit (WireLimits.maxPayload): the thing would drop it and
    /// the command would never get a result. The margin covers what delivery
    /// may add (a trigger's firedByTriggerID).
    static func deliverable(_ command: Command) -> Result<Command, HubError> {
        let size = command.encode().dumpBytes().count
        guard size + 128 <= WireLimits.maxPayload else {
            return .failure(
                HubError(
                    413, "REQUEST_TOO_LARGE",
                    "the command would be \(size) bytes on the wire, over the thing's limit of \(WireLimits.maxPayload - 128) (WireLimits.maxPayload less room for what delivery adds)"
                ))
        }
        return .success(command)
    }
}
