// SPDX-License-Identifier: Apache-2.0

import Foundation
import Testing
import ThingIF
import ThingIFRules

/// The trait registry's one parser (ThingIFRules' TraitDefinition, the
/// hub's and the CLI's) and an entry's checks of actions and states:
/// Kii's shapes accepted, every kind of bad input refused with a message
/// naming the field, never a crash.
@Suite("Trait definitions")
struct TraitDefinitionTests {
    /// Kii's air conditioner trait, as its portal's example and its large tests' app define it.
    static let airConditioner = #"""
        {"dataGroupingInterval":"1_MINUTE","actions":[
          {"turnPower":{"description":"on or off","payloadSchema":{"type":"boolean"}}},
          {"setPresetTemperature":{"payloadSchema":{"type":"integer","minimum":15,"maximum":30}}},
          {"setMode":{"payloadSchema":{"type":"string","enum":["cool","heat","auto"]}}},
          {"setColor":{"payloadSchema":{"type":"object","properties":{"r":{"type":"integer","minimum":0,"maximum":255},
            "g":{"type":"integer"}},"required":["r"],"additionalProperties":false}}},
          {"setSchedule":{"payloadSchema":{"type":"array","items":{"type":"number","minimum":0}}}}],
         "states":[{"power":{"payloadSchema":{"type":"boolean"}}},{"currentTemperature":{"payloadSchema":{"type":"number"}}}]}
        """#

    static func parse(_ text: String) -> Result<TraitDefinition, RuleError> { TraitDefinition.parse(Array(text.utf8)) }

    static func refusal(_ text: String) -> RuleError? {
        if case .failure(let e) = parse(text) { return e }
        return nil
    }

    /// Any JSON value (jansson parses only objects and arrays at the top).
    static func json(_ text: String) -> JSON { try! JSON.parse("[\(text)]").get().elements[0] }

    static var entry: TraitEntry {
        let d = try! parse(airConditioner).get()
        return TraitEntry(
            thingType: "MyAirConditioner", firmwareVersion: "v1",
            aliases: [
                TraitAliasDefinition(alias: "AirConditionerAlias", trait: "AirConditioner", version: 1, definition: d)
            ])
    }

    @Test("Kii's shape parses: actions and states with their schemas, the interval")
    func accepted() throws {
        let d = try Self.parse(Self.airConditioner).get()
        #expect(d.dataGroupingInterval == "1_MINUTE")
        #expect(d.actions.map(\.name) == ["turnPower", "setPresetTemperature", "setMode", "setColor", "setSchedule"])
        #expect(d.states.map(\.name) == ["power", "currentTemperature"])
        #expect(d.action("setPresetTemperature")?.schema.minimum == 15)
        // Kii's bootstrap script's trait: no actions, one string state.
        #expect(
            (try? Self.parse(
                #"{"dataGroupingInterval":"15_MINUTES","actions":[],"states":[{"string_field":{"description":"","payloadSchema":{"type":"string"}}}]}"#
            ).get()) != nil)
    }

    @Test(
        "Every kind of bad definition is refused, naming its field",
        arguments: [
            ("{", nil),  // malformed JSON
            ("[]", nil),  // not an object
            (#"{"actions":{"turnPower":{}}}"#, "actions"),  // wrong type
            (#"{"actions":[{"a":{"payloadSchema":{"type":"boolean"}},"b":{}}]}"#, "actions[0]"),
            (#"{"actions":[{"a":{"payloadSchema":{"type":"bool"}}}]}"#, "actions[0].a.payloadSchema.type"),
            (#"{"actions":[{"a":{}}]}"#, "actions[0].a.payloadSchema"),
            (
                #"{"actions":[{"a":{"payloadSchema":{"type":"integer","minimum":"1"}}}]}"#,
                "actions[0].a.payloadSchema.minimum"
            ),
            (
                #"{"actions":[{"a":{"payloadSchema":{"type":"integer","minimum":5,"maximum":1}}}]}"#,
                "actions[0].a.payloadSchema"
            ),
            (
                #"{"actions":[{"a":{"payloadSchema":{"type":"string","minimum":1}}}]}"#,
                "actions[0].a.payloadSchema.minimum"
            ),
            (
                #"{"actions":[{"a":{"payloadSchema":{"type":"integer","enum":[1,"x"]}}}]}"#,
                "actions[0].a.payloadSchema.enum[1]"
            ),
            (
                #"{"actions":[{"a":{"payloadSchema":{"type":"integer","maximum":3,"enum":[1,9]}}}]}"#,
                "actions[0].a.payloadSchema.enum[1]"
            ),
            (
                #"{"actions":[{"a":{"payloadSchema":{"$ref":"urn::kii:json-schema:geo:point"}}}]}"#,
                "actions[0].a.payloadSchema.$ref"
            ),
            (
                #"{"actions":[{"a":{"payloadSchema":{"type":"object","required":["x"]}}}]}"#,
                "actions[0].a.payloadSchema.required[0]"
            ),
            (
                #"{"actions":[{"a":{"payloadSchema":{"type":"boolean"}}},{"a":{"payloadSchema":{"type":"boolean"}}}]}"#,
                "actions[1].a"
            ),
            (#"{"actions":[],"states":[]}"#, "actions"),  // defines nothing
            (
                #"{"dataGroupingInterval":"2_MINUTES","states":[{"s":{"payloadSchema":{"type":"boolean"}}}]}"#,
                "dataGroupingInterval"
            ),
            (#"{"properties":[]}"#, "properties")
        ] as [(String, String?)])
    func refused(_ text: String, _ field: String?) {
        let e = Self.refusal(text)
        #expect(e != nil, "\(text) was accepted")
        #expect(e?.field == field, "\(text): \(e?.message ?? "")")
        #expect(e?.message.isEmpty == false)
    }

    @Test("Oversized, too deep, too many members and non-UTF-8 definitions are refused, never a crash")
    func bounds() {
        let big = #"{"description":""# + String(repeating: "x", count: TraitLimits.maxBytes) + #"","states":[]}"#
        #expect(Self.refusal(big)?.message.contains("larger than") == true)
        var deep = #"{"type":"boolean"}"#
        for _ in 0..<TraitLimits.maxDepth { deep = #"{"type":"array","items":\#(deep)}"# }
        let tooDeep = #"{"states":[{"s":{"payloadSchema":\#(deep)}}]}"#
        #expect(Self.refusal(tooDeep)?.message.contains("deeper than") == true, "\(tooDeep)")
        var ok = #"{"type":"boolean"}"#
        for _ in 0..<(TraitLimits.maxDepth - 1) { ok = #"{"type":"array","items":\#(ok)}"# }
        #expect(Self.refusal(#"{"states":[{"s":{"payloadSchema":\#(ok)}}]}"#) == nil)
        let many = (0...TraitLimits.maxMembers).map { #"{"s\#($0)":{"payloadSchema":{"type":"boolean"}}}"# }
        #expect(Self.refusal(#"{"states":[\#(many.joined(separator: ","))]}"#)?.field == "states")
        var bad = Array(#"{"states":[{"s"#.utf8)
        bad += [0xff, 0xfe]
        bad += Array(#"":{"payloadSchema":{"type":"boolean"}}}]}"#.utf8)
        guard case .failure(let e) = TraitDefinition.parse(bad) else {
            Issue.record("non-UTF-8 accepted")
            return
        }
        #expect(e.message.contains("JSON"))
    }

    @Test("An entry refuses an undefined alias or action and wrong parameters, naming the field")
    func actions() {
        let e = Self.entry
        let a = "AirConditionerAlias"
        #expect(e.checkAction(alias: a, name: "turnPower", params: Self.json("true")) == nil)
        #expect(e.checkAction(alias: a, name: "setPresetTemperature", params: Self.json("25.0")) == nil)
        #expect(
            e.checkAction(alias: "HumidityAlias", name: "turnPower", params: Self.json("true"))?.field
                == "HumidityAlias")
        #expect(e.checkAction(alias: a, name: "fly", params: Self.json("true"))?.field == "fly")
        let cases: [(String, String, String)] = [
            ("turnPower", "1", "must be a boolean"),
            ("setPresetTemperature", "31", "at most 30"),
            ("setPresetTemperature", "20.5", "must be an integer"),
            ("setMode", #""dry""#, "one of"),
            ("setColor", #"{"g":1}"#, "setColor.r is required"),
            ("setColor", #"{"r":1,"b":2}"#, "setColor.b is not one"),
            ("setColor", #"{"r":300}"#, "setColor.r must be at most 255"),
            ("setSchedule", "[1,-1]", "setSchedule[1] must be at least 0")
        ]
        for (name, params, why) in cases {
            let r = e.checkAction(alias: a, name: name, params: Self.json(params))
            #expect(
                r?.field == name && r?.message.contains(why) == true, "\(name) \(params): \(r?.message ?? "accepted")")
        }
    }

    @Test("An entry refuses a state of the wrong type, an undefined state or alias, naming the field")
    func states() {
        let e = Self.entry
        #expect(e.checkState(Self.json(#"{"AirConditionerAlias":{"power":true,"currentTemperature":23}}"#)) == nil)
        #expect(e.checkState(Self.json(#"{"AirConditionerAlias":{"power":"on"}}"#))?.field == "power")
        #expect(e.checkState(Self.json(#"{"AirConditionerAlias":{"humidity":1}}"#))?.field == "humidity")
        #expect(e.checkState(Self.json(#"{"HumidityAlias":{"currentHumidity":40}}"#))?.field == "HumidityAlias")
        #expect(e.checkState(Self.json(#"{"power":true}"#))?.field == "power")
    }

    @Test("Names of the registry's paths and versions follow Kii's pattern")
    func names() {
        #expect(TraitNames.isPathName("MyAirConditioner") && TraitNames.isPathName("v1.2-rc_3"))
        #expect(
            !TraitNames.isPathName("") && !TraitNames.isPathName("a b")
                && !TraitNames.isPathName(String(repeating: "a", count: 101)))
        #expect(TraitNames.version(Self.json("1")) == 1 && TraitNames.version(Self.json(#""12""#)) == 12)
        #expect(TraitNames.version(Self.json("0")) == nil && TraitNames.version(Self.json(#""1x""#)) == nil)
        #expect(TraitNames.version(Self.json("1.5")) == nil && TraitNames.version("99999999999") == nil)
    }

    @Test("The canonical text ignores key order")
    func canonical() {
        #expect(
            TraitDefinition.canonical(Self.json(#"{"b":1,"a":{"y":[1,{"d":1,"c":2}],"x":2}}"#))
                == #"{"a":{"x":2,"y":[1,{"c":2,"d":1}]},"b":1}"#)
    }
}
