// SPDX-License-Identifier: Apache-2.0

import CThingIF
import ThingIF

// Kii's trait registry, the rules both the hub and the thingif CLI apply
// (docs/decisions/kii-trait-registry.md): a trait version's definition (its
// actions and states, each with a payloadSchema in a JSON Schema subset),
// the names the registry's paths take, and an entry's checks of a trait
// command's actions and a state upload. Every refusal names its field.

/// The bounds of a trait definition.
public enum TraitLimits {
    /// A definition's body, in bytes.
    public static let maxBytes = 64 * 1024
    /// Actions, and states, of one trait version.
    public static let maxMembers = 64
    /// How deep payloadSchemas nest (an object's properties, an array's items).
    public static let maxDepth = 8
    /// Values of one `enum`; properties of one object schema.
    public static let maxEnum = 64
    public static let maxProperties = 64
    /// A name: trait, alias, thing type, firmware version, action, state.
    public static let maxName = 100
    /// A trait version number.
    public static let maxVersion = Int(Int32.max)
}

/// The names of the registry's paths and of a definition's members.
public enum TraitNames {
    /// A trait, alias, thing type or firmware version: 1 to 100 of Kii's
    /// `[a-zA-Z0-9-_.]` (Kii's REST reference, Thing Collection).
    public static func isPathName(_ s: String) -> Bool {
        let b = Array(s.utf8)
        guard (1...TraitLimits.maxName).contains(b.count) else { return false }
        return b.allSatisfy { c in
            (c >= 0x30 && c <= 0x39) || (c >= 0x41 && c <= 0x5a) || (c >= 0x61 && c <= 0x7a) || c == 0x2d
                || c == 0x5f || c == 0x2e
        }
    }

    /// An action or a state: 1 to 100 bytes, no control characters.
    public static func isMemberName(_ s: String) -> Bool {
        let b = Array(s.utf8)
        return (1...TraitLimits.maxName).contains(b.count) && !b.contains { $0 < 0x20 || $0 == 0x7f }
    }

    /// A trait version as Kii's alias requests give it: a number or a
    /// string of digits (Kii's own scripts send both), 1 to 2^31-1.
    public static func version(_ j: JSON?) -> Int? {
        guard let j else { return nil }
        if let n = j.intValue { return (1...TraitLimits.maxVersion).contains(n) ? n : nil }
        if let s = j.stringValue { return version(s) }
        return nil
    }

    /// A trait version in a path.
    public static func version(_ s: String) -> Int? {
        guard !s.isEmpty, s.utf8.count <= 10, s.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }), let n = Int(s),
            (1...TraitLimits.maxVersion).contains(n)
        else { return nil }
        return n
    }
}

/// A payloadSchema: JSON Schema's `type`, `minimum`, `maximum`, `enum`,
/// `properties`, `required`, `additionalProperties: false` and `items`;
/// `title`, `description` and `$schema` are annotations. Any other keyword
/// is refused by name (a schema the hub would not enforce is not taken).
public struct PayloadSchema {
    public enum Kind: String, CaseIterable, Sendable {
        case boolean, integer, number, string, object, array, null
    }

    public let kind: Kind
    public let minimum: Double?
    public let maximum: Double?
    /// Scalars only.
    public let enumValues: [JSON]
    public let properties: [(name: String, schema: PayloadSchema)]
    public let required: [String]
    public let additionalProperties: Bool
    /// At most one: the schema of every element.
    public let items: [PayloadSchema]

    static let annotations: Set<String> = ["title", "description", "$schema"]

    /// Parses the schema at `path` (the refusals' field), `depth` deep.
    public static func parse(_ j: JSON, path: String, depth: Int = 0) -> Result<PayloadSchema, RuleError> {
        func refused(_ why: String, _ key: String? = nil) -> Result<PayloadSchema, RuleError> {
            let field = key.map { "\(path).\($0)" } ?? path
            return .failure(RuleError("\(field): \(why)", field: field))
        }
        guard depth < TraitLimits.maxDepth else {
            return refused("schemas are nested deeper than \(TraitLimits.maxDepth)")
        }
        guard j.isObject else { return refused("a payloadSchema must be an object, not \(j.typeName)") }
        for (key, _) in j.members {
            let known = [
                "type", "minimum", "maximum", "enum", "properties", "required", "additionalProperties", "items"
            ]
            guard known.contains(key) || annotations.contains(key) else {
                return refused(
                    "\"\(key)\" is not taken: a payloadSchema has type, minimum, maximum, enum, properties, required, additionalProperties and items",
                    key)
            }
        }
        guard let t = j["type"]?.stringValue, let kind = Kind(rawValue: t) else {
            return refused(
                "\"type\" is required: one of " + Kind.allCases.map(\.rawValue).joined(separator: ", "), "type")
        }
        for a in annotations where j[a] != nil && !(j[a]!.isString) {
            return refused("\"\(a)\" must be a string, not \(j[a]!.typeName)", a)
        }
        var bounds: [Double?] = []
        for key in ["minimum", "maximum"] {
            guard let v = j[key], !v.isNull else {
                bounds.append(nil)
                continue
            }
            guard kind == .integer || kind == .number else {
                return refused("only an integer or number has \(key)", key)
            }
            guard let d = StateCondition.number(v) else { return refused("must be a number, not \(v.typeName)", key) }
            bounds.append(d)
        }
        if let lo = bounds[0], let hi = bounds[1], lo > hi {
            return refused(
                "no value passes: minimum \(StateCondition.text(lo)) is above maximum \(StateCondition.text(hi))")
        }
        var values: [JSON] = []
        if let e = j["enum"] {
            guard e.isArray, (1...TraitLimits.maxEnum).contains(e.count) else {
                return refused("must be an array of 1 to \(TraitLimits.maxEnum) values", "enum")
            }
            for (i, v) in e.elements.enumerated() {
                guard !v.isObject, !v.isArray, let copy = v.deepCopy() else {
                    return refused("must be a string, number, boolean or null, not \(v.typeName)", "enum[\(i)]")
                }
                guard check(copy, kind: kind) else { return refused("is not \(Self.article(kind))", "enum[\(i)]") }
                values.append(copy)
            }
        }
        var properties: [(name: String, schema: PayloadSchema)] = []
        var required: [String] = []
        var additional = true
        if let p = j["properties"] {
            guard kind == .object else { return refused("only an object has properties", "properties") }
            guard p.isObject, p.count <= TraitLimits.maxProperties else {
                return refused("must be an object of at most \(TraitLimits.maxProperties) schemas", "properties")
            }
            for (name, s) in p.members {
                guard TraitNames.isMemberName(name) else {
                    return refused(
                        "a property name is 1 to \(TraitLimits.maxName) bytes, no control characters", "properties")
                }
                switch parse(s, path: "\(path).properties.\(name)", depth: depth + 1) {
                case .failure(let e): return .failure(e)
                case .success(let x): properties.append((name, x))
                }
            }
        }
        if let r = j["required"] {
            guard kind == .object else { return refused("only an object has required", "required") }
            guard r.isArray, r.count <= TraitLimits.maxProperties else {
                return refused("must be an array of property names", "required")
            }
            for (i, n) in r.elements.enumerated() {
                guard let name = n.stringValue, properties.contains(where: { $0.name == name }) else {
                    return refused("must name one of the schema's properties", "required[\(i)]")
                }
                if !required.contains(name) { required.append(name) }
            }
        }
        if let a = j["additionalProperties"] {
            guard kind == .object else {
                return refused("only an object has additionalProperties", "additionalProperties")
            }
            guard let b = a.boolValue else {
                return refused("must be a boolean (a schema is not taken), not \(a.typeName)", "additionalProperties")
            }
            additional = b
        }
        var items: [PayloadSchema] = []
        if let i = j["items"] {
            guard kind == .array else { return refused("only an array has items", "items") }
            switch parse(i, path: "\(path).items", depth: depth + 1) {
            case .failure(let e): return .failure(e)
            case .success(let x): items = [x]
            }
        }
        let schema = PayloadSchema(
            kind: kind, minimum: bounds[0], maximum: bounds[1], enumValues: values, properties: properties,
            required: required, additionalProperties: additional, items: items)
        // An enum value outside the bounds could never be sent.
        for (i, v) in values.enumerated() where schema.check(v, at: "enum[\(i)]") != nil {
            return refused("is outside minimum and maximum", "enum[\(i)]")
        }
        return .success(schema)
    }

    static func article(_ k: Kind) -> String {
        switch k {
        case .integer, .object, .array: return "an \(k.rawValue)"
        case .null: return "null"
        default: return "a \(k.rawValue)"
        }
    }

    /// Whether `v` is of `kind`: an integer is a JSON integer or a number
    /// with no fraction (JSON Schema's rule).
    static func check(_ v: JSON, kind: Kind) -> Bool {
        switch kind {
        case .boolean: return v.boolValue != nil
        case .integer:
            guard let d = StateCondition.number(v) else { return false }
            return d.isFinite && d == d.rounded()
        case .number: return StateCondition.number(v) != nil
        case .string: return v.isString
        case .object: return v.isObject
        case .array: return v.isArray
        case .null: return v.isNull
        }
    }

    static func equal(_ a: JSON, _ b: JSON) -> Bool {
        if let x = StateCondition.number(a), let y = StateCondition.number(b) { return x == y }
        return json_equal(a.raw, b.raw) == 1
    }

    /// Why `v` does not fit the schema (nil: it does); `path` names it.
    public func check(_ v: JSON, at path: String) -> String? {
        guard Self.check(v, kind: kind) else { return "\(path) must be \(Self.article(kind)), not \(v.typeName)" }
        if let d = StateCondition.number(v) {
            if let minimum, d < minimum {
                return "\(path) must be at least \(StateCondition.text(minimum)), not \(StateCondition.text(d))"
            }
            if let maximum, d > maximum {
                return "\(path) must be at most \(StateCondition.text(maximum)), not \(StateCondition.text(d))"
            }
        }
        if !enumValues.isEmpty && !enumValues.contains(where: { Self.equal(v, $0) }) {
            return "\(path) must be one of " + enumValues.map { $0.dump() }.joined(separator: ", ")
        }
        if kind == .object {
            for name in required where v[name] == nil { return "\(path).\(name) is required" }
            for (key, value) in v.members {
                if let p = properties.first(where: { $0.name == key }) {
                    if let why = p.schema.check(value, at: "\(path).\(key)") { return why }
                } else if !additionalProperties {
                    return "\(path).\(key) is not one of the schema's properties"
                }
            }
        }
        if kind == .array, let schema = items.first {
            for (i, e) in v.elements.enumerated() {
                if let why = schema.check(e, at: "\(path)[\(i)]") { return why }
            }
        }
        return nil
    }
}

/// An action or a state of a trait version.
public struct TraitMember {
    public let name: String
    public let description: String?
    public let schema: PayloadSchema
}

/// A trait version's definition, Kii's TraitCreationRequest:
/// {"dataGroupingInterval"?, "description"?, "actions":[{"<name>":{"description"?,
/// "payloadSchema"}}…], "states":[…the same…]}.
public struct TraitDefinition {
    public let dataGroupingInterval: String?
    public let description: String?
    public let actions: [TraitMember]
    public let states: [TraitMember]

    /// Kii's portal's intervals.
    public static let intervals = ["1_MINUTE", "15_MINUTES", "30_MINUTES", "1_HOUR", "12_HOURS"]

    /// The body as sent: at most TraitLimits.maxBytes of UTF-8 JSON (jansson
    /// refuses bad UTF-8 and duplicate keys).
    public static func parse(_ bytes: [UInt8]) -> Result<TraitDefinition, RuleError> {
        guard bytes.count <= TraitLimits.maxBytes else {
            return .failure(RuleError("a trait definition is larger than \(TraitLimits.maxBytes) bytes"))
        }
        switch JSON.parse(bytes) {
        case .failure(let e): return .failure(RuleError("a trait definition must be JSON: \(e.description)"))
        case .success(let j): return parse(j)
        }
    }

    public static func parse(_ j: JSON) -> Result<TraitDefinition, RuleError> {
        guard j.isObject else {
            return .failure(RuleError("a trait definition must be a JSON object, not \(j.typeName)"))
        }
        for (key, _) in j.members where !["dataGroupingInterval", "description", "actions", "states"].contains(key) {
            return .failure(
                RuleError(
                    "\"\(key)\" is not taken: a trait definition has dataGroupingInterval, description, actions and states",
                    field: key.isEmpty ? nil : key))  // found by fuzz/trait_definition: "" names no field
        }
        var interval: String?
        if let v = j["dataGroupingInterval"], !v.isNull {
            guard let s = v.stringValue, intervals.contains(s) else {
                return .failure(
                    RuleError(
                        "\"dataGroupingInterval\" must be one of " + intervals.joined(separator: ", "),
                        field: "dataGroupingInterval"))
            }
            interval = s
        }
        var description: String?
        if let v = j["description"], !v.isNull {
            guard let s = v.stringValue else {
                return .failure(RuleError("\"description\" must be a string, not \(v.typeName)", field: "description"))
            }
            description = s
        }
        let actions: [TraitMember], states: [TraitMember]
        switch members(j, "actions") {
        case .failure(let e): return .failure(e)
        case .success(let m): actions = m
        }
        switch members(j, "states") {
        case .failure(let e): return .failure(e)
        case .success(let m): states = m
        }
        guard !actions.isEmpty || !states.isEmpty else {
            return .failure(RuleError("a trait version defines at least one action or state", field: "actions"))
        }
        return .success(
            TraitDefinition(dataGroupingInterval: interval, description: description, actions: actions, states: states))
    }

    /// `key`'s list: [{"<name>":{"description"?,"payloadSchema"}}…], names unique.
    static func members(_ j: JSON, _ key: String) -> Result<[TraitMember], RuleError> {
        guard let list = j[key], !list.isNull else { return .success([]) }
        guard list.isArray, list.count <= TraitLimits.maxMembers else {
            return .failure(
                RuleError(
                    "\"\(key)\" must be an array of at most \(TraitLimits.maxMembers) one-key objects", field: key))
        }
        var out: [TraitMember] = []
        for (i, m) in list.elements.enumerated() {
            let at = "\(key)[\(i)]"
            guard m.isObject, m.count == 1, let (name, body) = m.members.first else {
                return .failure(RuleError("\(at) must be an object with one key, the name", field: at))
            }
            guard TraitNames.isMemberName(name) else {
                return .failure(
                    RuleError("\(at): a name is 1 to \(TraitLimits.maxName) bytes, no control characters", field: at))
            }
            let path = "\(at).\(name)"
            guard !out.contains(where: { $0.name == name }) else {
                return .failure(RuleError("\(path) is defined twice in \"\(key)\"", field: path))
            }
            guard body.isObject else {
                return .failure(
                    RuleError(
                        "\(path) must be an object {\"description\"?,\"payloadSchema\"}, not \(body.typeName)",
                        field: path))
            }
            for (k, _) in body.members where k != "description" && k != "payloadSchema" {
                return .failure(
                    RuleError(
                        "\(path).\(k) is not taken: a member has description and payloadSchema", field: "\(path).\(k)"))
            }
            var description: String?
            if let d = body["description"], !d.isNull {
                guard let s = d.stringValue else {
                    return .failure(RuleError("\(path).description must be a string", field: "\(path).description"))
                }
                description = s
            }
            guard let s = body["payloadSchema"] else {
                return .failure(RuleError("\(path).payloadSchema is required", field: "\(path).payloadSchema"))
            }
            switch PayloadSchema.parse(s, path: "\(path).payloadSchema") {
            case .failure(let e): return .failure(e)
            case .success(let schema): out.append(TraitMember(name: name, description: description, schema: schema))
            }
        }
        return .success(out)
    }

    public func action(_ name: String) -> TraitMember? { actions.first { $0.name == name } }
    public func state(_ name: String) -> TraitMember? { states.first { $0.name == name } }
}

/// One alias of an entry: the trait version it names and its definition.
public struct TraitAliasDefinition {
    public let alias: String
    public let trait: String
    public let version: Int
    public let definition: TraitDefinition

    public init(alias: String, trait: String, version: Int, definition: TraitDefinition) {
        self.alias = alias
        self.trait = trait
        self.version = version
        self.definition = definition
    }
}

/// The registry's entry for a thing type and firmware version: its aliases.
/// Where a thing has one, its commands and states must fit it.
public struct TraitEntry {
    public let thingType: String
    public let firmwareVersion: String
    public let aliases: [TraitAliasDefinition]

    public init(thingType: String, firmwareVersion: String, aliases: [TraitAliasDefinition]) {
        self.thingType = thingType
        self.firmwareVersion = firmwareVersion
        self.aliases = aliases
    }

    public func alias(_ name: String) -> TraitAliasDefinition? { aliases.first { $0.alias == name } }

    /// Why the action `name` with `params` under `alias` does not fit the
    /// entry (nil: it does); the field is the alias or the action.
    public func checkAction(alias: String, name: String, params: JSON) -> RuleError? {
        guard let a = self.alias(alias) else {
            return RuleError(
                "thing type \(thingType) firmware version \(firmwareVersion) defines no trait alias \(alias)",
                field: alias)
        }
        guard let action = a.definition.action(name) else {
            return RuleError(
                "trait \(a.trait) version \(a.version) (alias \(alias)) defines no action \(name)", field: name)
        }
        if let why = action.schema.check(params, at: "\(alias).\(name)") { return RuleError(why, field: name) }
        return nil
    }

    /// Why a state upload ({"<alias>":{"<state>":value…}…}) does not fit
    /// the entry (nil: it does); the field is the alias or the state.
    public func checkState(_ upload: JSON) -> RuleError? {
        for (alias, fields) in upload.members {
            guard let a = self.alias(alias) else {
                return RuleError(
                    "thing type \(thingType) firmware version \(firmwareVersion) defines no trait alias \(alias)",
                    field: alias)
            }
            guard fields.isObject else {
                return RuleError("the state of alias \(alias) must be an object, not \(fields.typeName)", field: alias)
            }
            for (name, value) in fields.members {
                guard let state = a.definition.state(name) else {
                    return RuleError(
                        "trait \(a.trait) version \(a.version) (alias \(alias)) defines no state \(name)", field: name)
                }
                if let why = state.schema.check(value, at: "\(alias).\(name)") { return RuleError(why, field: name) }
            }
        }
        return nil
    }
}

extension TraitDefinition {
    /// `j` with every object's keys in byte order, compact: the text a
    /// stored trait version is compared by (the same definition sent again
    /// in another key order is the same version).
    public static func canonical(_ j: JSON) -> String { sorted(j).dump() }

    static func sorted(_ j: JSON) -> JSON {
        if j.isObject {
            let o = JSON.object()
            for (k, v) in j.members.sorted(by: { Array($0.key.utf8).lexicographicallyPrecedes(Array($1.key.utf8)) }) {
                o.set(k, sorted(v))
            }
            return o
        }
        if j.isArray {
            let a = JSON.array()
            for e in j.elements { a.append(sorted(e)) }
            return a
        }
        return j
    }
}
