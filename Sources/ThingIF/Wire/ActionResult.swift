// SPDX-License-Identifier: Apache-2.0

/// One action's outcome, as Kii reports it:
/// {"turnPower":{"succeeded":true}} or
/// {"setFanSpeed":{"succeeded":false,"errorMessage":"…","data":{…}}}.
public struct ActionResult {
    public var name: String
    public var succeeded: Bool
    public var errorMessage: String?
    public var data: JSON?

    public init(name: String, succeeded: Bool, errorMessage: String? = nil, data: JSON? = nil) {
        self.name = name
        self.succeeded = succeeded
        self.errorMessage = errorMessage
        self.data = data
    }

    public static func failure(_ name: String, _ message: String) -> ActionResult {
        ActionResult(name: name, succeeded: false, errorMessage: message)
    }

    /// The failed results of a command the thing does not run (cancelled,
    /// expired, for an end node it does not carry): one per action, in
    /// order, each with `message` and `data` {"reason": reason} plus what
    /// `fill` adds.
    static func refusals(
        _ command: Command, message: String, reason: String, fill: (JSON) -> Void = { _ in }
    ) -> [ActionResult] {
        var out: [ActionResult] = []
        for g in command.groups {
            for e in g.entries {
                let data = JSON.object()
                data.set("reason", string: reason)
                fill(data)
                out.append(ActionResult(name: e.name, succeeded: false, errorMessage: message, data: data))
            }
        }
        return out
    }

    /// Appends {"name":{"succeeded":…,"errorMessage"?:…,"data"?:…}}.
    func encode(into out: inout [UInt8]) {
        out.append(0x7B)
        out += JSON.quoted(name)
        out += succeeded ? Array(#":{"succeeded":true"#.utf8) : Array(#":{"succeeded":false"#.utf8)
        if let errorMessage {
            out += Array(#","errorMessage":"#.utf8)
            out += JSON.quoted(errorMessage)
        }
        if let data {
            out += Array(#","data":"#.utf8)
            out += data.dumpBytes()
        }
        out += [0x7D, 0x7D]
    }

    static func decode(_ j: JSON) -> ActionResult? {
        guard j.isObject, j.count == 1 else { return nil }
        let (name, body) = j.members[0]
        guard body.isObject, let ok = body["succeeded"]?.boolValue else { return nil }
        let message = body["errorMessage"]?.stringValue
        let data = body["data"].flatMap { $0.isObject ? $0 : nil }
        return ActionResult(name: name, succeeded: ok, errorMessage: message, data: data)
    }
}

/// The body of PUT …/commands/{commandID}/action-results: flat for schema
/// commands, grouped by alias for trait commands, in the order of the actions.
public struct ActionResults {
    public struct Group {
        public var alias: String?
        public var results: [ActionResult]
        public init(alias: String?, results: [ActionResult]) {
            self.alias = alias
            self.results = results
        }
    }

    public var groups: [Group]
    public init(groups: [Group]) { self.groups = groups }

    public var all: [ActionResult] { groups.flatMap { $0.results } }

    /// The body as sent, built as bytes (one pass, no jansson values): the
    /// path every command's results take.
    public func bytes() -> [UInt8] {
        var out = Array(#"{"actionResults":["#.utf8)
        out.reserveCapacity(64 + 48 * groups.reduce(0) { $0 + $1.results.count })
        var first = true
        func comma() {
            if !first { out.append(0x2C) }
            first = false
        }
        for g in groups {
            if let alias = g.alias {
                comma()
                out.append(0x7B)
                out += JSON.quoted(alias)
                out += [0x3A, 0x5B]
                for (i, r) in g.results.enumerated() {
                    if i > 0 { out.append(0x2C) }
                    r.encode(into: &out)
                }
                out += [0x5D, 0x7D]
            } else {
                for r in g.results {
                    comma()
                    r.encode(into: &out)
                }
            }
        }
        out += [0x5D, 0x7D]
        return out
    }

    /// `bytes()` as a jansson value.
    public func encode() -> JSON {
        guard case .success(let j) = JSON.parse(bytes()) else { return JSON.object() }
        return j
    }

    public static func decode(_ j: JSON) -> ActionResults? {
        guard j.isObject, let list = j["actionResults"], list.isArray else { return nil }
        var groups: [Group] = []
        for e in list.elements {
            guard e.isObject, e.count == 1 else { return nil }
            let (key, value) = e.members[0]
            if value.isArray {
                var results: [ActionResult] = []
                for r in value.elements {
                    guard let ar = ActionResult.decode(r) else { return nil }
                    results.append(ar)
                }
                groups.append(Group(alias: key, results: results))
            } else {
                guard let ar = ActionResult.decode(e) else { return nil }
                if let last = groups.last, last.alias == nil {
                    groups[groups.count - 1].results.append(ar)
                } else {
                    groups.append(Group(alias: nil, results: [ar]))
                }
            }
        }
        return ActionResults(groups: groups)
    }

    /// Every action of `command` failed with `message`, in the command's
    /// layout (flat, or grouped by alias).
    public static func allFailed(_ command: Command, message: String) -> ActionResults {
        ActionResults(
            groups: command.groups.map { g in
                Group(
                    alias: g.alias,
                    results: g.entries.map { e in
                        switch e {
                        case .action(let name, _), .invalid(let name, _): return .failure(name, message)
                        }
                    })
            })
    }

    /// The body a thing sends for a command it had to drop before it could
    /// read its actions (too large, not JSON) but whose commandID it could
    /// read: no results and the reason. The framework marks every action of
    /// the command it sent as failed with that reason (allFailed), so no
    /// command is left without an outcome.
    public static func dropped(reason: String) -> JSON {
        let o = JSON.object()
        o.set("actionResults", JSON.array())
        o.set("errorMessage", string: reason)
        return o
    }
}
