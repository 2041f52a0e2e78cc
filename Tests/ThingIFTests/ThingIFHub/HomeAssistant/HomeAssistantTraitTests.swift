// SPDX-License-Identifier: Apache-2.0

import Foundation
import Testing
import ThingIF
@testable import ThingIFHub
import ThingIFHubServer
import ThingIFRules

/// Home Assistant discovery from a thing's trait registry entry, where its
/// type has no hand-written mapping (HATraitMapping): the rules on their
/// own, then against real mosquitto and the hub: the configs published, a
/// trait state on the state topic, Home Assistant's commands stored as
/// trait commands with the right values, bad payloads refused, and the
/// entities gone with the thing.
@Suite("Home Assistant discovery from traits", .serialized, .offPool)
struct HomeAssistantTraitTests {
    static let admin = "operator-ha"
    static let alias = "AirConditionerAlias"
    static let definition = #"""
        {"actions":[
          {"turnPower":{"payloadSchema":{"type":"boolean"}}},
          {"setPresetTemperature":{"payloadSchema":{"type":"integer","minimum":16,"maximum":30}}},
          {"setMode":{"payloadSchema":{"type":"object","properties":{"mode":{"type":"string","enum":["cool","dry","fan"]}}}}},
          {"reset":{"payloadSchema":{"type":"null"}}},
          {"setLabel":{"payloadSchema":{"type":"string"}}},
          {"set level":{"payloadSchema":{"type":"boolean"}}}],
         "states":[{"power":{"payloadSchema":{"type":"boolean"}}},
          {"presetTemperature":{"payloadSchema":{"type":"integer"}}},
          {"mode":{"payloadSchema":{"type":"string"}}},
          {"currentTemperature":{"payloadSchema":{"type":"number"}}},
          {"filterDirty":{"payloadSchema":{"type":"boolean"}}},
          {"schedule":{"payloadSchema":{"type":"object"}}}]}
        """#

    static func entry() throws -> TraitEntry {
        guard case .success(let d) = TraitDefinition.parse(Array(definition.utf8)) else {
            throw HarnessError("the test's definition does not parse")
        }
        return TraitEntry(
            thingType: "MyAirConditioner", firmwareVersion: "v1",
            aliases: [TraitAliasDefinition(alias: alias, trait: "AirConditioner", version: 1, definition: d)])
    }

    @Test(
        "The rules: switch, number, select and button by parameter; states set by actions shown by them; the rest sensors; odd ones left out"
    )
    func rules() throws {
        let list = HATraitMapping.entities(try Self.entry())
        let shape = list.map { "\($0.component.rawValue) \($0.member) \($0.state ?? "-")" }
        #expect(
            shape == [
                "switch turnPower power", "number setPresetTemperature presetTemperature", "select setMode mode",
                "button reset -", "sensor currentTemperature currentTemperature",
                "binary_sensor filterDirty filterDirty"
            ], "\(shape)")
        let number = try #require(list.first { $0.component == .number })
        #expect(number.minimum == 16 && number.maximum == 30 && number.kind == .integer)
        #expect(list.first { $0.component == .select }?.options == ["cool", "dry", "fan"])
        // Payloads to values.
        func value(_ member: String, _ payload: String) -> String {
            switch HATraitMapping.value(list.first { $0.member == member }!, payload: payload) {
            case .success(let v): return v.dump()
            case .failure(let r): return "refused: " + r.why
            }
        }
        #expect(value("setPresetTemperature", "22.0") == "22")
        #expect(value("setPresetTemperature", "40").hasPrefix("refused: must be a number from 16 to 30"))
        #expect(value("setPresetTemperature", "22.5").hasPrefix("refused"))
        #expect(value("setMode", "dry") == #"{"mode":"dry"}"#)
        #expect(value("setMode", "hot").hasPrefix("refused"))
        #expect(value("turnPower", "ON") == "true")
        #expect(value("reset", "PRESS") == "null")
        // Bounded: a huge entry gives at most maxEntities.
        let many = (0..<64).map { #"{"s\#($0)":{"payloadSchema":{"type":"boolean"}}}"# }.joined(separator: ",")
        guard case .success(let big) = TraitDefinition.parse(Array(#"{"states":[\#(many)]}"#.utf8)) else {
            Issue.record("the big definition does not parse")
            return
        }
        let aliases = (0..<3).map { TraitAliasDefinition(alias: "A\($0)", trait: "T", version: 1, definition: big) }
        let huge = TraitEntry(thingType: "T", firmwareVersion: "1", aliases: aliases)
        #expect(HATraitMapping.entities(huge).count == HATraitMapping.maxEntities)
    }

    @Test(
        "Against mosquitto and the hub: configs from the entry, the trait state, commands through the registry's check, bad payloads refused, entities gone with the thing",
        .timeLimit(.minutes(3)))
    func discovery() async throws {
        var security = HubServer.Security()
        security.adminToken = Self.admin
        try await withHubAPI(security: security) { e in
            let events = HubLines()
            e.hub.onEvent = events.sink
            let (haUser, haPassword) = try await HomeAssistantTests.homeAssistantOn(e)
            try await defineTraitEntry(
                e, admin: Self.admin, thingType: "MyAirConditioner", firmwareVersion: "v1", alias: Self.alias,
                trait: "AirConditioner", definition: Self.definition)
            let (uid, token) = try await e.user()
            let (tid, thingToken) = try await onboardTyped(
                e, "AC-HA-TRAIT", uid: uid, token: token, thingType: "MyAirConditioner", firmwareVersion: "v1")

            let ha = try await HomeAssistantTests.homeAssistantClient(e, user: haUser, password: haPassword)
            defer { ha.stop() }
            for topic in ["homeassistant/#", "thingif/+/state"] {
                let code = await offPool { ha.subscribe(topic) }
                #expect(code.map { $0 < 0x80 } == true, "\(topic): \(String(describing: code))")
            }
            // The thing comes online: its entities are published.
            let t = try await e.appliance(thingID: tid, token: thingToken)
            defer { _ = t.destroy() }
            let node = "thingif_" + tid.replacingOccurrences(of: ".", with: "_")
            func topic(_ component: String, _ member: String) -> String {
                "homeassistant/\(component)/\(node)/\(Self.alias)_\(member)/config"
            }
            func config(_ component: String, _ member: String) async throws -> [String: Any] {
                let m = try #require(
                    await offPool { ha.waitForMessage(on: topic(component, member)) }, "no \(component) \(member)")
                return try #require(parseObject(String(decoding: m.payload, as: UTF8.self)))
            }
            let number = try await config("number", "setPresetTemperature")
            #expect(number["min"] as? Int == 16 && number["max"] as? Int == 30 && number["step"] as? Int == 1)
            #expect(number["state_topic"] as? String == "thingif/\(tid)/state")
            #expect(
                number["value_template"] as? String == "{{ value_json['\(Self.alias)']['presetTemperature'] }}")
            #expect(number["unique_id"] as? String == "thingif_\(tid)_\(Self.alias)_setPresetTemperature")
            #expect((number["device"] as? [String: Any])?["identifiers"] as? [String] == ["thingif_\(tid)"])
            // Retained: a subscriber that comes later gets it too.
            let late = try await offPool {
                Result { try TopicListener(port: e.env.broker.port, topics: [topic("number", "setPresetTemperature")]) }
            }.get()
            defer { late.stop() }
            let kept = await offPool {
                poll(timeoutMs: 30_000) {
                    late.payloads(on: topic("number", "setPresetTemperature")).contains { !$0.isEmpty }
                }
            }
            #expect(kept, "the configs are retained")
            let select = try await config("select", "setMode")
            #expect(select["options"] as? [String] == ["cool", "dry", "fan"])
            let power = try await config("switch", "turnPower")
            #expect(
                power["value_template"] as? String == "{{ 'ON' if value_json['\(Self.alias)']['power'] else 'OFF' }}")
            let reset = try await config("button", "reset")
            #expect(reset["payload_press"] as? String == "PRESS")
            _ = try await config("sensor", "currentTemperature")
            _ = try await config("binary_sensor", "filterDirty")
            #expect(
                ha.messages().filter { $0.topic.hasSuffix("_setLabel/config") || $0.topic.contains("schedule") }.isEmpty
            )

            // The owner's trait state reaches the state topic as the entities read it.
            let up = try await e.call(
                "PUT", "\(e.target(tid))/states", token: token,
                json: [Self.alias: ["power": true, "presetTemperature": 20, "currentTemperature": 24.5]])
            #expect((200..<300).contains(up.status), "\(up.status) \(up.text)")
            let stateSeen = await offPool {
                poll(timeoutMs: 30_000) {
                    ha.messages(on: "thingif/\(tid)/state").contains {
                        ((parseObject(String(decoding: $0.payload, as: UTF8.self))?[Self.alias] as? [String: Any])?[
                            "presetTemperature"] as? Int) == 20
                    }
                }
            }
            #expect(stateSeen)

            // Home Assistant's commands: trait commands with the entity's values.
            let commands = [
                (number["command_topic"] as? String, "22.0", #"{"setPresetTemperature":22}"#),
                (select["command_topic"] as? String, "dry", #"{"setMode":{"mode":"dry"}}"#),
                (reset["command_topic"] as? String, "PRESS", #"{"reset":null}"#)
            ]
            for (i, (field, payload, _)) in commands.enumerated() {
                ha.publish(try #require(field), Array(payload.utf8))
                #expect(
                    await offPool { events.wait(count: i + 1) { $0.hasPrefix("homeassistant: \(Self.alias)/") } },
                    "\(events.all.filter { $0.hasPrefix("homeassistant") })")
            }
            let r = try await e.get("\(e.target(tid))/commands", token: token)
            let issued = ((r.json["commands"] as? [[String: Any]]) ?? []).filter {
                $0["issuer"] as? String == HATopics.issuer
            }
            let sent = issued.map { c -> String in
                let groups = c["actions"] as? [[String: Any]]
                let actions = groups?.first?[Self.alias] as? [Any]
                return actions.flatMap { try? JSONSerialization.data(withJSONObject: $0[0], options: [.sortedKeys]) }
                    .map { String(decoding: $0, as: UTF8.self) } ?? "-"
            }
            #expect(Set(sent) == Set(commands.map(\.2)), "\(sent)")
            #expect(issued.allSatisfy { $0["schema"] == nil }, "trait commands name no schema")

            // Bad payloads: refused with a log line each, nothing stored.
            ha.publish(try #require(number["command_topic"] as? String), Array("40".utf8))
            ha.publish(try #require(select["command_topic"] as? String), Array("hot".utf8))
            ha.publish("thingif/\(tid)/set/\(Self.alias).setLabel", Array("x".utf8))
            let refused = await offPool { events.wait(count: 3) { $0.hasPrefix("homeassistant: command refused") } }
            let lines = events.all.filter { $0.hasPrefix("homeassistant: command refused") }
            #expect(refused, "\(lines)")
            #expect(lines.contains { $0.contains("must be a number from 16 to 30") }, "\(lines)")
            #expect(lines.contains { $0.contains("no Home Assistant entity \(Self.alias).setLabel") }, "\(lines)")
            let after = try await e.get("\(e.target(tid))/commands", token: token)
            #expect(
                ((after.json["commands"] as? [[String: Any]]) ?? []).filter {
                    $0["issuer"] as? String == HATopics.issuer
                }
                .count == 3)

            // The thing deleted: every entity's config emptied.
            let deleted = try await e.call("DELETE", "\(e.api)/targets/thing:\(tid)", token: token)
            #expect(deleted.status == 204, "\(deleted.status) \(deleted.text)")
            for (component, member) in [
                ("number", "setPresetTemperature"), ("select", "setMode"), ("switch", "turnPower"),
                ("button", "reset"), ("sensor", "currentTemperature"), ("binary_sensor", "filterDirty")
            ] {
                let emptied = await offPool {
                    poll(timeoutMs: 30_000) { ha.messages(on: topic(component, member)).last?.payload.isEmpty == true }
                }
                #expect(emptied, "\(component) \(member) emptied")
            }
        }
    }
}
