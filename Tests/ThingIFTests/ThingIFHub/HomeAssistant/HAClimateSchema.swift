// SPDX-License-Identifier: Apache-2.0

import Foundation
import Testing
import ThingIF
import ThingIFHub
import ThingIFHubServer

/// Home Assistant's MQTT climate discovery schema, written from its
/// documentation: https://www.home-assistant.io/integrations/climate.mqtt/
/// (Configuration Variables: each key's type and default) and
/// https://www.home-assistant.io/integrations/mqtt/ (MQTT discovery: the
/// `device` block, `availability` and `availability_topic`, `qos`). Home
/// Assistant checks a discovery payload with its own voluptuous schema; the
/// homeassistant package from PyPI (hundreds of MB of dependencies) is too
/// heavy to install in CI for this one check, so its rules are copied here:
/// the keys a climate entity may have and, for each, the type and values it
/// takes. `problems` returns what violates them (empty: the payload is valid).
enum HAClimateSchema {
    enum Kind {
        case string, topic, stateTemplate, commandTemplate, number, positiveNumber, bool, qos, precision, unit
        case modes, strings, availability, availabilityMode, device, entityCategory
    }

    /// Home Assistant's HVAC modes (climate: "modes … Needs to be a subset
    /// of" off, heat, cool, heat_cool, auto, dry, fan_only).
    static let hvacModes: Set<String> = ["off", "heat", "cool", "heat_cool", "auto", "dry", "fan_only"]

    /// The device block's keys (MQTT discovery, "device").
    static let deviceKeys: Set<String> = [
        "configuration_url", "connections", "hw_version", "identifiers", "manufacturer", "model", "model_id", "name",
        "serial_number", "suggested_area", "sw_version", "via_device"
    ]

    static let keys: [String: Kind] = {
        var k: [String: Kind] = [
            "name": .string, "unique_id": .string, "object_id": .string, "icon": .string, "encoding": .string,
            "entity_picture": .string, "entity_category": .entityCategory, "enabled_by_default": .bool,
            "device": .device, "availability": .availability, "availability_topic": .topic,
            "availability_template": .stateTemplate, "availability_mode": .availabilityMode,
            "payload_available": .string, "payload_not_available": .string, "payload_on": .string,
            "payload_off": .string, "qos": .qos, "retain": .bool, "optimistic": .bool, "modes": .modes,
            "fan_modes": .strings, "preset_modes": .strings, "swing_modes": .strings, "min_temp": .number,
            "max_temp": .number, "temp_step": .positiveNumber, "precision": .precision, "initial": .number,
            "min_humidity": .number, "max_humidity": .number, "temperature_unit": .unit,
            "json_attributes_topic": .topic, "json_attributes_template": .stateTemplate,
            "value_template": .stateTemplate, "action_topic": .topic, "action_template": .stateTemplate,
            "current_temperature_topic": .topic, "current_temperature_template": .stateTemplate,
            "current_humidity_topic": .topic, "current_humidity_template": .stateTemplate,
            "preset_mode_value_template": .stateTemplate, "preset_mode_state_topic": .topic
        ]
        // The controls: a command topic and template, a state topic and template each.
        for control in [
            "mode", "power", "temperature", "fan_mode", "swing_mode", "preset_mode", "target_humidity",
            "temperature_high", "temperature_low"
        ] {
            k["\(control)_command_topic"] = .topic
            k["\(control)_command_template"] = .commandTemplate
            if control != "power" && control != "preset_mode" {
                k["\(control)_state_topic"] = .topic
                k["\(control)_state_template"] = .stateTemplate
            }
        }
        return k
    }()

    static func number(_ v: JSON) -> Double? {
        if let i = v.intValue { return Double(i) }
        return v.typeName == "a number" ? Double(v.dump()) : nil
    }

    /// A topic the hub names for one entity: a non-empty UTF-8 string of at
    /// most 65,535 bytes without NUL, and without the wildcards + and #
    /// (command topics are published to, so MQTT forbids wildcards there;
    /// Home Assistant would accept them in state topics, but an entity's
    /// topics are the hub's own, concrete ones).
    static func topicProblem(_ v: JSON) -> String? {
        guard let s = v.stringValue else { return "must be a topic string, not \(v.typeName)" }
        if s.isEmpty || s.utf8.count > 65_535 { return "must be 1 to 65,535 bytes" }
        if s.contains("+") || s.contains("#") || s.contains("\u{0}") { return "\(s) has a wildcard or NUL" }
        return nil
    }

    /// A Jinja template: a string with balanced {{ }}; a state template
    /// reads the payload (`value` or `value_json`).
    static func templateProblem(_ v: JSON, state: Bool) -> String? {
        guard let s = v.stringValue else { return "must be a template string, not \(v.typeName)" }
        let opens = s.components(separatedBy: "{{").count - 1
        let closes = s.components(separatedBy: "}}").count - 1
        if opens == 0 || opens != closes { return "\(s) is not a {{ … }} template" }
        if state && !s.contains("value") { return "\(s) does not read the payload (value / value_json)" }
        return nil
    }

    static func stringsProblem(_ v: JSON, allowed: Set<String>? = nil) -> String? {
        guard v.isArray, v.count > 0 else { return "must be a non-empty list, not \(v.typeName)" }
        let items = v.elements.map(\.stringValue)
        guard items.allSatisfy({ $0.map { !$0.isEmpty } == true }) else { return "must hold non-empty strings" }
        let strings = items.compactMap { $0 }
        if Set(strings).count != strings.count { return "has duplicates: \(strings)" }
        if let allowed, let bad = strings.first(where: { !allowed.contains($0) }) {
            return "\(bad) is not one of \(allowed.sorted())"
        }
        return nil
    }

    static func problem(_ kind: Kind, _ v: JSON) -> String? {
        switch kind {
        case .string: return v.isString ? nil : "must be a string, not \(v.typeName)"
        case .topic: return topicProblem(v)
        case .stateTemplate: return templateProblem(v, state: true)
        case .commandTemplate: return templateProblem(v, state: false)
        case .number: return number(v) == nil ? "must be a number, not \(v.typeName)" : nil
        case .positiveNumber: return (number(v) ?? 0) > 0 ? nil : "must be a number above 0"
        case .bool: return v.boolValue == nil ? "must be a boolean, not \(v.typeName)" : nil
        case .qos: return v.intValue.map { (0...2).contains($0) } == true ? nil : "must be 0, 1 or 2"
        case .precision: return [0.1, 0.5, 1.0].contains(number(v) ?? -1) ? nil : "must be 0.1, 0.5 or 1.0"
        case .unit: return ["C", "F"].contains(v.stringValue ?? "") ? nil : "must be C or F"
        case .modes: return stringsProblem(v, allowed: hvacModes)
        case .strings: return stringsProblem(v)
        case .availabilityMode:
            return ["all", "any", "latest"].contains(v.stringValue ?? "") ? nil : "all, any or latest"
        case .entityCategory:
            return ["config", "diagnostic"].contains(v.stringValue ?? "") ? nil : "config or diagnostic"
        case .availability:
            guard v.isArray, v.count > 0 else { return "must be a non-empty list of {topic, …}" }
            for a in v.elements {
                guard a.isObject, let t = a["topic"] else { return "an entry without a topic" }
                if let p = topicProblem(t) { return "topic \(p)" }
                for (key, value) in a.members where key != "topic" {
                    switch key {
                    case "payload_available", "payload_not_available":
                        if !value.isString { return "\(key) must be a string" }
                    case "value_template":
                        if let p = templateProblem(value, state: true) { return p }
                    default: return "unknown key \(key) in an entry"
                    }
                }
            }
            return nil
        case .device:
            guard v.isObject else { return "must be an object, not \(v.typeName)" }
            if let bad = v.members.first(where: { !deviceKeys.contains($0.key) }) { return "unknown key \(bad.key)" }
            // "At least one of identifiers or connections must be present."
            guard let ids = v["identifiers"] ?? v["connections"] else { return "needs identifiers or connections" }
            if ids.isString { return ids.stringValue!.isEmpty ? "empty identifiers" : nil }
            if let p = stringsProblem(ids) { return "identifiers \(p)" }
            for key in ["name", "manufacturer", "model", "sw_version", "hw_version"] where v[key] != nil {
                if v[key]?.isString != true { return "\(key) must be a string" }
            }
            return nil
        }
    }

    static func problems(_ doc: JSON) -> [String] {
        guard doc.isObject else { return ["the payload is \(doc.typeName), not an object"] }
        var out: [String] = []
        for (key, value) in doc.members {
            guard let kind = keys[key] else {
                out.append("unknown key \(key)")
                continue
            }
            if let p = problem(kind, value) { out.append("\(key): \(p)") }
        }
        if doc["availability"] != nil && doc["availability_topic"] != nil {
            out.append("availability and availability_topic exclude each other")
        }
        if doc["device"] != nil && doc["unique_id"] == nil {
            out.append("device needs unique_id (the device registry works only with it)")
        }
        if let lo = doc["min_temp"].flatMap(number), let hi = doc["max_temp"].flatMap(number), lo >= hi {
            out.append("min_temp \(lo) must be below max_temp \(hi)")
        }
        return out
    }

    /// Broken copies of a valid payload, each of which must be refused: the
    /// schema's own test (a check that cannot fail proves nothing).
    static func brokenCopies(of doc: JSON) -> [(String, JSON)] {
        func copy(_ change: (JSON) -> Void) -> JSON {
            let c = doc.deepCopy()!
            change(c)
            return c
        }
        func list(_ xs: [String]) -> JSON {
            let a = JSON.array()
            for x in xs { a.append(JSON.string(x)!) }
            return a
        }
        return [
            ("a mode Home Assistant lacks", copy { $0.set("modes", list(["off", "cooling"])) }),
            ("a duplicate mode", copy { $0.set("modes", list(["off", "off"])) }),
            ("a temperature as a string", copy { $0.set("min_temp", JSON.string("16")!) }),
            ("min_temp above max_temp", copy { $0.set("min_temp", .int(40)) }),
            ("a wildcard command topic", copy { $0.set("temperature_command_topic", JSON.string("thingif/+/set/t")!) }),
            ("a topic that is a number", copy { $0.set("mode_state_topic", .int(1)) }),
            ("a misspelt key", copy { $0.set("temprature_unit", JSON.string("C")!) }),
            ("a unit of kelvin", copy { $0.set("temperature_unit", JSON.string("K")!) }),
            ("qos 3", copy { $0.set("qos", .int(3)) }),
            ("a template without braces", copy { $0.set("temperature_state_template", JSON.string("value_json.t")!) }),
            (
                "a device without identifiers",
                copy {
                    let d = JSON.object()
                    d.set("name", string: "x")
                    $0.set("device", d)
                }
            ),
            (
                "availability as a list besides availability_topic",
                copy {
                    let a = JSON.array()
                    let entry = JSON.object()
                    entry.set("topic", string: "thingif/x/availability")
                    a.append(entry)
                    $0.set("availability", a)
                }
            ),
            ("an empty fan_modes", copy { $0.set("fan_modes", JSON.array()) })
        ]
    }
}
