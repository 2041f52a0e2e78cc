// SPDX-License-Identifier: Apache-2.0

import ThingIF
import ThingIFRules

/// Home Assistant entities derived from a thing's trait registry entry,
/// for a thing type that has no hand-written mapping (HAClimateMapping).
/// The rules (docs/decisions/trait-driven-controls.md), per alias:
/// - an action's parameter is its payloadSchema when that is a scalar, or
///   the one property of an object schema with exactly one; an action whose
///   schema is null or an object with no properties has none;
/// - an action with none is a `button`; a boolean parameter a `switch`; an
///   integer or number with both minimum and maximum a `number` (a slider);
///   a string with an enum a `select`; any other action is not exposed;
/// - an action **sets** a state of its alias, and the entity shows that
///   state, when the state's name is the parameter's or ends the action's
///   name (case aside: `turnPower` sets `power`) and their types agree;
/// - a state no action sets: boolean a `binary_sensor`, integer, number
///   or string a `sensor`; objects, arrays and null are not exposed;
/// - names outside `[A-Za-z0-9_-]` (1 to 64), and enum values longer than a
///   command payload, are not exposed; at most `maxEntities` per thing.
struct HATraitEntity: Equatable {
    enum Component: String, Equatable {
        case binarySensor = "binary_sensor", sensor, `switch`, number, select, button
    }

    var component: Component
    var alias: String
    /// The action's or the state's name.
    var member: String
    /// The state it shows, when any.
    var state: String?
    /// The action it sends, when any; `param`: its value's property, when
    /// its schema is an object of one.
    var action: String?
    var param: String?
    var kind: PayloadSchema.Kind?
    var minimum: Double?
    var maximum: Double?
    var options: [String] = []

    /// `<alias>_<member>`: the entity's object ID (unique within the thing).
    var objectID: String { "\(alias)_\(member)" }
    /// The last level of its command topic (`thingif/<thingID>/set/<alias>.<action>`);
    /// the climate mapping's levels have no '.'.
    var commandField: String? { action.map { "\(alias).\($0)" } }

    static func == (a: HATraitEntity, b: HATraitEntity) -> Bool {
        a.component == b.component && a.objectID == b.objectID && a.state == b.state && a.action == b.action
            && a.param == b.param && a.kind == b.kind && a.minimum == b.minimum && a.maximum == b.maximum
            && a.options == b.options
    }
}

enum HATraitMapping {
    static let maxEntities = 64

    /// A name Home Assistant's discovery topics and templates take as is.
    static func isSafe(_ s: String) -> Bool {
        (1...64).contains(s.utf8.count)
            && s.utf8.allSatisfy { c in
                (c >= 0x30 && c <= 0x39) || (c >= 0x41 && c <= 0x5a) || (c >= 0x61 && c <= 0x7a) || c == 0x2d
                    || c == 0x5f
            }
    }

    /// The entities of an entry, in the entry's order (actions, then the states no action sets).
    static func entities(_ entry: TraitEntry) -> [HATraitEntity] {
        var out: [HATraitEntity] = []
        for a in entry.aliases where isSafe(a.alias) {
            var shown: Set<String> = []
            for action in a.definition.actions where isSafe(action.name) {
                guard var e = entity(alias: a.alias, action) else { continue }
                if let s = setState(of: e, action.name, a.definition.states), !shown.contains(s) {
                    e.state = s
                    shown.insert(s)
                }
                out.append(e)
            }
            for s in a.definition.states where isSafe(s.name) && !shown.contains(s.name) {
                switch s.schema.kind {
                case .boolean:
                    out.append(HATraitEntity(component: .binarySensor, alias: a.alias, member: s.name, state: s.name))
                case .integer, .number, .string:
                    out.append(HATraitEntity(component: .sensor, alias: a.alias, member: s.name, state: s.name))
                default: continue
                }
            }
        }
        return Array(out.prefix(maxEntities))
    }

    /// The control an action makes (nil: not exposed).
    static func entity(alias: String, _ action: TraitMember) -> HATraitEntity? {
        let schema = action.schema
        var param: String?
        var p = schema
        if schema.kind == .null || (schema.kind == .object && schema.properties.isEmpty) {
            return HATraitEntity(
                component: .button, alias: alias, member: action.name, action: action.name, kind: schema.kind)
        }
        if schema.kind == .object {
            guard schema.properties.count == 1, isSafe(schema.properties[0].name) else { return nil }
            param = schema.properties[0].name
            p = schema.properties[0].schema
        }
        var e = HATraitEntity(
            component: .button, alias: alias, member: action.name, action: action.name, param: param, kind: p.kind)
        switch p.kind {
        case .boolean:
            e.component = .switch
        case .integer, .number:
            guard let lo = p.minimum, let hi = p.maximum, lo.isFinite, hi.isFinite, p.enumValues.isEmpty else {
                return nil
            }
            e.component = .number
            (e.minimum, e.maximum) = (lo, hi)
        case .string:
            let options = p.enumValues.compactMap(\.stringValue)
            guard !options.isEmpty, options.count == p.enumValues.count,
                options.allSatisfy({ !$0.isEmpty && $0.utf8.count <= HATopics.maxCommandPayload })
            else { return nil }
            e.component = .select
            e.options = options
        default:
            return nil
        }
        return e
    }

    /// The state an action sets: named as its parameter, or ending its name
    /// (case aside; the longest such name), of an agreeing type.
    static func setState(of e: HATraitEntity, _ action: String, _ states: [TraitMember]) -> String? {
        guard e.component != .button, let kind = e.kind else { return nil }
        func agrees(_ s: TraitMember) -> Bool {
            s.schema.kind == kind || (kind == .integer && s.schema.kind == .number)
                || (kind == .number && s.schema.kind == .integer)
        }
        let candidates = states.filter { isSafe($0.name) && agrees($0) }
        if let param = e.param, let s = candidates.first(where: { $0.name == param }) { return s.name }
        let lower = action.lowercased()
        return candidates.filter { lower.hasSuffix($0.name.lowercased()) }.max { $0.name.count < $1.name.count }?.name
    }

    // MARK: discovery

    /// `<prefix>/<component>/thingif_<thingID>/<alias>_<member>/config`
    /// (the node ID as HATopics.discoveryID makes it).
    static func configTopic(prefix: String, thingID: String, _ e: HATraitEntity) -> String {
        "\(prefix)/\(e.component.rawValue)/\(HATopics.discoveryID(thingID))/\(e.objectID)/config"
    }

    static func number(_ d: Double) -> JSON {
        if d == d.rounded(), abs(d) < 1e15 { return .int(Int(d)) }
        guard case .success(let a) = JSON.parse("[\(d)]"), let n = a.elements.first else { return .int(0) }
        return n
    }

    /// The entity's discovery config: Home Assistant's MQTT schema for its
    /// component, the thing's device (shared with its other entities).
    static func config(thingID: String, thingType: String, gatewayThingID: String?, _ e: HATraitEntity) -> JSON {
        let c = JSON.object()
        func s(_ k: String, _ v: String) { c.set(k, string: v) }
        s("name", "\(e.alias) \(e.member)")
        s("unique_id", "thingif_\(thingID)_\(e.objectID)")
        HomeAssistantBridge.device(
            c, thingID: thingID, name: "\(thingType) \(thingID)", model: thingType, gatewayThingID: gatewayThingID)
        if let state = e.state {
            s("state_topic", HATopics.state(thingID))
            // Both names are isSafe: no quote or bracket to escape.
            let v = "value_json['\(e.alias)']['\(state)']"
            switch e.component {
            case .binarySensor, .switch: s("value_template", "{{ 'ON' if \(v) else 'OFF' }}")
            default: s("value_template", "{{ \(v) }}")
            }
        }
        if let field = e.commandField { s("command_topic", HATopics.command(thingID, field)) }
        switch e.component {
        case .switch, .binarySensor:
            s("payload_on", "ON")
            s("payload_off", "OFF")
            if e.component == .switch && e.state == nil { c.set("optimistic", .bool(true)) }
        case .number:
            c.set("min", number(e.minimum ?? 0))
            c.set("max", number(e.maximum ?? 0))
            c.set("step", e.kind == .integer ? .int(1) : number(max((e.maximum! - e.minimum!) / 100, 0.001)))
            s("mode", "slider")
        case .select:
            let a = JSON.array()
            for o in e.options { a.append(JSON.string(o) ?? .null()) }
            c.set("options", a)
        case .button:
            s("payload_press", "PRESS")
        case .sensor:
            break
        }
        return c
    }

    // MARK: commands

    /// The action's value for Home Assistant's payload on the entity's
    /// command topic, or why it is refused.
    struct Refusal: Error {
        let why: String
        init(_ why: String) { self.why = why }
    }

    static func text(_ d: Double) -> String { d == d.rounded() && abs(d) < 1e15 ? String(Int(d)) : "\(d)" }

    static func value(_ e: HATraitEntity, payload text: String) -> Result<JSON, Refusal> {
        let v: JSON
        switch e.component {
        case .button:
            guard text == "PRESS" else { return .failure(Refusal("a button sends PRESS")) }
            return .success(e.kind == .object ? JSON.object() : JSON.null())
        case .switch:
            guard text == "ON" || text == "OFF" else { return .failure(Refusal("a switch sends ON or OFF")) }
            v = .bool(text == "ON")
        case .number:
            // Home Assistant sends a decimal such as "24.0".
            guard let d = Double(text), d.isFinite, d >= (e.minimum ?? d), d <= (e.maximum ?? d) else {
                return .failure(
                    Refusal("must be a number from \(Self.text(e.minimum ?? 0)) to \(Self.text(e.maximum ?? 0))"))
            }
            if e.kind == .integer {
                guard d == d.rounded() else { return .failure(Refusal("must be a whole number")) }
                v = .int(Int(d))
            } else {
                v = number(d)
            }
        case .select:
            guard e.options.contains(text), let s = JSON.string(text) else {
                return .failure(Refusal("must be one of " + e.options.joined(separator: ", ")))
            }
            v = s
        case .binarySensor, .sensor:
            return .failure(Refusal("a sensor takes no command"))
        }
        guard let param = e.param else { return .success(v) }
        let o = JSON.object()
        o.set(param, v)
        return .success(o)
    }
}
