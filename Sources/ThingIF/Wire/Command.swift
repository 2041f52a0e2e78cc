// SPDX-License-Identifier: Apache-2.0

/// A Thing-IF command as it travels to the thing, in either of its shapes:
///  - schema (v0): {"commandID","schema","schemaVersion","issuer",
///    "actions":[{"turnPower":{"power":true}}, ...], "title"?, "description"?, "metadata"?}
///  - trait (v1):  {"commandID","issuer","actions":[{"Alias":[{"turnPower":true}, ...]}]}
public struct Command {
    public enum Shape: Sendable { case schema, trait }

    public enum Entry {
        /// A well-formed action: its name and its value (borrowed from the
        /// parsed document, which the Command keeps alive).
        case action(name: String, params: JSON)
        /// An element that is not an action; `name` is the first key when it
        /// has one, else "". It still takes a result slot, so results keep
        /// the order of the actions.
        case invalid(name: String, reason: String)

        public var name: String {
            switch self {
            case .action(let name, _), .invalid(let name, _): return name
            }
        }
    }

    public struct Group {
        /// The trait alias; nil for schema commands.
        public var alias: String?
        public var entries: [Entry]
        public init(alias: String?, entries: [Entry]) {
            self.alias = alias
            self.entries = entries
        }
    }

    public var id: String
    public var shape: Shape
    public var schema: String?
    public var schemaVersion: Int
    public var issuer: String?
    public var title: String?
    public var description: String?
    public var metadata: JSON?
    public var firedByTriggerID: String?
    /// When the command expires (epoch ms), set by the hub (docs/PROTOCOL.md
    /// §9.1); nil for none. The thing refuses a command that arrives past it
    /// (CommandExpiry).
    public var expiresAt: Int64?
    public var groups: [Group]

    public init(
        id: String, shape: Shape, schema: String? = nil, schemaVersion: Int = 0, issuer: String? = nil,
        title: String? = nil, description: String? = nil, metadata: JSON? = nil,
        firedByTriggerID: String? = nil, groups: [Group]
    ) {
        self.id = id
        self.shape = shape
        self.schema = schema
        self.schemaVersion = schemaVersion
        self.issuer = issuer
        self.title = title
        self.description = description
        self.metadata = metadata
        self.firedByTriggerID = firedByTriggerID
        self.groups = groups
    }

    public var actionCount: Int { groups.reduce(0) { $0 + $1.entries.count } }

    /// Why a payload is not a command at all. No commandID could be read, so
    /// nothing can be reported to the framework; the thing logs it.
    public struct DecodeError: Error, CustomStringConvertible {
        public let message: String
        /// The commandID read from a payload that could not be decoded as a
        /// whole (over the size limit, or not JSON): the thing reports such a
        /// command as dropped (ActionResults.dropped) instead of leaving it
        /// without an outcome. nil when no commandID could be read.
        public var commandID: String?
        public var description: String { message }

        public init(message: String, commandID: String? = nil) {
            self.message = message
            self.commandID = commandID
        }
    }

    /// How far into a payload that cannot be parsed the commandID is looked for.
    static let recoveryWindow = 1024

    /// The commandID of a payload that is not parsed (too large, or not
    /// JSON), read from its first bytes: `"commandID"`, optional white space,
    /// `:`, a string of printable ASCII without escapes, '/', '+' or '#'.
    /// nil when there is none that a topic level could carry.
    static func recoverID(_ bytes: [UInt8]) -> String? {
        let key: [UInt8] = [0x22, 0x63, 0x6f, 0x6d, 0x6d, 0x61, 0x6e, 0x64, 0x49, 0x44, 0x22]  // "commandID"
        let end = min(bytes.count, recoveryWindow)
        func isSpace(_ b: UInt8) -> Bool { b == 0x20 || b == 0x09 || b == 0x0a || b == 0x0d }
        var i = 0
        while i + key.count <= end {
            var match = i == 0 || bytes[i - 1] != 0x5c  // not an escaped quote inside a string
            var k = 0
            while match && k < key.count {
                if bytes[i + k] != key[k] { match = false }
                k += 1
            }
            if !match {
                i += 1
                continue
            }
            var j = i + key.count
            while j < end && isSpace(bytes[j]) { j += 1 }
            guard j < end, bytes[j] == 0x3a else { return nil }
            j += 1
            while j < end && isSpace(bytes[j]) { j += 1 }
            guard j < end, bytes[j] == 0x22 else { return nil }
            j += 1
            let start = j
            while j < end, bytes[j] != 0x22 {
                let b = bytes[j]
                guard b > 0x20, b < 0x7f, b != 0x5c, b != 0x2f, b != 0x2b, b != 0x23 else { return nil }
                j += 1
            }
            guard j < end, j > start, j - start <= maxCommandIDLength else { return nil }
            return String(decoding: bytes[start..<j], as: UTF8.self)
        }
        return nil
    }

    public static let maxCommandIDLength = 256

    /// Decodes a payload. A payload whose commandID can be read always gives
    /// a Command: faults in the rest become `.invalid` entries, which turn
    /// into failed action results.
    public static func decode(_ bytes: [UInt8], maxSize: Int) -> Result<Command, DecodeError> {
        if bytes.count > maxSize {
            return .failure(
                DecodeError(
                    message: str("dropped a command of \(bytes.count) bytes: over the limit of \(maxSize) bytes"),
                    commandID: recoverID(bytes)))
        }
        let doc: JSON
        switch JSON.parse(bytes) {
        case .success(let d): doc = d
        case .failure(let e):
            return .failure(
                DecodeError(
                    message: str("dropped a command that is not valid JSON: \(e.description)"),
                    commandID: recoverID(bytes)))
        }
        return decode(doc)
    }

    public static func decode(_ doc: JSON) -> Result<Command, DecodeError> {
        guard doc.isObject else {
            return .failure(DecodeError(message: str("dropped a command that is \(doc.typeName), not a JSON object")))
        }
        guard let idValue = doc["commandID"] else {
            return .failure(DecodeError(message: "dropped a command without \"commandID\""))
        }
        guard let id = idValue.stringValue else {
            return .failure(
                DecodeError(message: str("dropped a command whose \"commandID\" is \(idValue.typeName), not a string")))
        }
        guard Topics.isSafeLevel(id), id.utf8.count <= maxCommandIDLength else {
            return .failure(
                DecodeError(
                    message:
                        str(
                            "dropped a command whose \"commandID\" is empty, longer than \(maxCommandIDLength) bytes, or holds '/', '+', '#' or NUL"
                        )
                ))
        }

        var cmd = Command(id: id, shape: .schema, groups: [])
        func fail(_ reason: String) -> Result<Command, DecodeError> {
            cmd.groups = [Group(alias: nil, entries: [.invalid(name: "", reason: str("command \(id): \(reason)"))])]
            return .success(cmd)
        }
        func optionalString(_ key: String) -> (String?, String?) {
            guard let v = doc[key], !v.isNull else { return (nil, nil) }
            guard let s = v.stringValue else { return (nil, str("\"\(key)\" must be a string, not \(v.typeName)")) }
            return (s, nil)
        }

        var problems: [String] = []
        let schemaPresent = doc["schema"] != nil
        // Setters, not key paths: Embedded Swift has no key paths.
        let slots: [(String, (inout Command, String?) -> Void)] = [
            ("schema", { $0.schema = $1 }), ("issuer", { $0.issuer = $1 }), ("title", { $0.title = $1 }),
            ("description", { $0.description = $1 }), ("firedByTriggerID", { $0.firedByTriggerID = $1 })
        ]
        for (key, slot) in slots {
            let (value, problem) = optionalString(key)
            slot(&cmd, value)
            if let problem { problems.append(problem) }
        }
        if let v = doc["schemaVersion"], !v.isNull {
            if let n = v.intValue, n >= 0, n <= Int(Int32.max) {
                cmd.schemaVersion = n
            } else {
                problems.append(str("\"schemaVersion\" must be a non-negative integer, not \(v.typeName)"))
            }
        }
        if let v = doc["expiresAt"], !v.isNull {
            if let n = v.int64Value, n >= 0 {
                cmd.expiresAt = n
            } else {
                problems.append(str("\"expiresAt\" must be a non-negative integer (epoch ms), not \(v.typeName)"))
            }
        }
        if let m = doc["metadata"], !m.isNull {
            if m.isObject {
                cmd.metadata = m
            } else {
                problems.append(str("\"metadata\" must be an object, not \(m.typeName)"))
            }
        }
        if let first = problems.first { return fail(first) }

        guard let actions = doc["actions"] else { return fail("\"actions\" is missing") }
        guard actions.isArray else { return fail(str("\"actions\" must be an array, not \(actions.typeName)")) }
        let elements = actions.elements
        guard !elements.isEmpty else { return fail("\"actions\" is empty") }

        let looksTrait =
            !schemaPresent
            && elements.allSatisfy { e in
                e.isObject && e.count == 1 && (e.members.first?.value.isArray ?? false)
            }
        var index = 0
        if looksTrait {
            cmd.shape = .trait
            for e in elements {
                let (alias, list) = e.members[0]
                var entries: [Entry] = []
                for a in list.elements {
                    entries.append(entry(a, index: index, commandID: id))
                    index += 1
                }
                if entries.isEmpty {
                    entries.append(
                        .invalid(
                            name: "", reason: str("command \(id): action \(index): alias \"\(alias)\" has no actions")))
                    index += 1
                }
                cmd.groups.append(Group(alias: alias, entries: entries))
            }
        } else {
            cmd.shape = .schema
            var entries: [Entry] = []
            for a in elements {
                entries.append(entry(a, index: index, commandID: id))
                index += 1
            }
            cmd.groups = [Group(alias: nil, entries: entries)]
        }
        return .success(cmd)
    }

    private static func entry(_ e: JSON, index: Int, commandID: String) -> Entry {
        let at = str("command \(commandID): action \(index)")
        guard e.isObject else {
            return .invalid(name: "", reason: str("\(at): must be an object with one key, not \(e.typeName)"))
        }
        let members = e.members
        guard members.count == 1 else {
            return .invalid(
                name: members.first?.key ?? "",
                reason: str("\(at): an action object must have exactly one key, it has \(members.count)"))
        }
        let (name, value) = members[0]
        guard !name.isEmpty else { return .invalid(name: "", reason: str("\(at): the action name is empty")) }
        return .action(name: name, params: value)
    }

    /// The wire form (used by the framework side to send a command).
    public func encode() -> JSON {
        let o = JSON.object()
        o.set("commandID", string: id)
        if let schema { o.set("schema", string: schema) }
        if shape == .schema { o.set("schemaVersion", .int(schemaVersion)) }
        if let issuer { o.set("issuer", string: issuer) }
        if let title { o.set("title", string: title) }
        if let description { o.set("description", string: description) }
        if let metadata { o.set("metadata", metadata) }
        if let firedByTriggerID { o.set("firedByTriggerID", string: firedByTriggerID) }
        if let expiresAt { o.set("expiresAt", .int64(expiresAt)) }
        let actions = JSON.array()
        func actionJSON(_ e: Entry) -> JSON {
            let a = JSON.object()
            if case .action(let name, let params) = e { a.set(name, params) }
            return a
        }
        for g in groups {
            if shape == .trait, let alias = g.alias {
                let list = JSON.array()
                for e in g.entries { list.append(actionJSON(e)) }
                let wrapper = JSON.object()
                wrapper.set(alias, list)
                actions.append(wrapper)
            } else {
                for e in g.entries { actions.append(actionJSON(e)) }
            }
        }
        o.set("actions", actions)
        return o
    }
}
