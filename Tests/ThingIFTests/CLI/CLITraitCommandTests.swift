// SPDX-License-Identifier: Apache-2.0

import Foundation
import Testing
import ThingIF
import ThingIFRules
@testable import thingif_cli

/// `thingif command send` for a trait command: ALIAS/ACTION words, the
/// check against the thing's registry entry by the hub's own rule, and the
/// completion's candidates; against `thingif-hub` through the binary: a
/// refused action exits 2 and nothing reaches the hub, a fitting one is
/// stored as sent, a thing without an entry is unchanged, and
/// `thingif ---completion` lists the entry's actions.
@Suite("thingif command send with the trait registry", .serialized, .offPool)
struct CLITraitCommandTests {
    static let definition = #"""
        {"actions":[{"turnPower":{"payloadSchema":{"type":"boolean"}}},
          {"setPresetTemperature":{"payloadSchema":{"type":"integer","minimum":16,"maximum":30}}},
          {"setMode":{"payloadSchema":{"type":"object","properties":{"mode":{"type":"string","enum":["cool","dry"]},"fan":{"type":"integer"}},"required":["mode"],"additionalProperties":false}}},
          {"reset":{"payloadSchema":{"type":"null"}}}],
         "states":[{"power":{"payloadSchema":{"type":"boolean"}}}]}
        """#

    static func entry() throws -> TraitEntry {
        guard case .success(let d) = TraitDefinition.parse(Array(definition.utf8)) else {
            throw HarnessError("the test's definition does not parse")
        }
        return TraitEntry(
            thingType: "MyAirConditioner", firmwareVersion: "v1",
            aliases: [
                TraitAliasDefinition(alias: "AirConditionerAlias", trait: "AirConditioner", version: 1, definition: d)
            ])
    }

    static func words(_ s: String) -> [String] { s.split(separator: " ").map(String.init) }

    @Test("ALIAS/ACTION words: =VALUE, key=value objects, none; schema words stay schema; mixing is refused")
    func parseWords() throws {
        #expect(try TraitActions.parse(words: Self.words("turnPower power=true")) == nil)
        let a = try #require(
            try TraitActions.parse(words: Self.words("A/turnPower=true A/setMode mode=cool fan=2 B/reset")))
        #expect(
            a == [
                TraitAction(alias: "A", name: "turnPower", value: .bool(true)),
                TraitAction(
                    alias: "A", name: "setMode", value: .object([("mode", .string("cool")), ("fan", .number("2"))])),
                TraitAction(alias: "B", name: "reset", value: nil)
            ])
        for bad in ["A/turnPower=true power=false", "turnPower A/x=1", "A/x=1 turnPower", "/x=1", "A/=1", "A B/x"] {
            #expect(throws: ActionParseError.self, "\(bad)") { try TraitActions.parse(words: Self.words(bad)) }
        }
        let raw = try Actions.parse(raw: #"[{"A":[{"turnPower":true}]},{"B":[{"reset":null}]}]"#)
        #expect(
            try TraitActions.parse(raw: raw)
                == [
                    TraitAction(alias: "A", name: "turnPower", value: .bool(true)),
                    TraitAction(alias: "B", name: "reset", value: .null)
                ])
        #expect(try TraitActions.parse(raw: try Actions.parse(raw: #"[{"turnPower":{"power":true}}]"#)) == nil)
    }

    @Test("The entry's rule: fitting actions grouped by alias; each refusal names the alias, action and field")
    func checked() throws {
        let entry = try Self.entry()
        let ok = try TraitActions.command(
            try #require(
                try TraitActions.parse(
                    words: Self.words(
                        "AirConditionerAlias/turnPower=true AirConditionerAlias/setPresetTemperature=25 AirConditionerAlias/reset"
                    ))), entry: entry)
        #expect(
            ok.text
                == #"[{"AirConditionerAlias":[{"turnPower":true},{"setPresetTemperature":25},{"reset":null}]}]"#,
            "\(ok.text)")
        for (line, named) in [
            (
                "AirConditionerAlias/setPresetTemperature=40",
                "AirConditionerAlias.setPresetTemperature must be at most 30"
            ),
            ("AirConditionerAlias/turnPower=yes", "AirConditionerAlias.turnPower must be a boolean"),
            ("AirConditionerAlias/setMode mode=hot", #"AirConditionerAlias.setMode.mode must be one of "cool", "dry""#),
            ("AirConditionerAlias/setMode fan=1", "AirConditionerAlias.setMode.mode is required"),
            ("AirConditionerAlias/fly", "defines no action fly"),
            ("OtherAlias/turnPower=true", "defines no trait alias OtherAlias")
        ] {
            let actions = try #require(try TraitActions.parse(words: Self.words(line)))
            do {
                _ = try TraitActions.command(actions, entry: entry)
                Issue.record("\(line) was not refused")
            } catch let e as ActionParseError {
                #expect(e.message.contains(named) && e.message.contains("nothing was sent"), "\(e.message)")
            }
        }
        // Without an entry nothing is checked.
        let free = try TraitActions.command(
            try #require(try TraitActions.parse(words: Self.words("X/anything=99"))), entry: nil)
        #expect(free.text == #"[{"X":[{"anything":99}]}]"#)
    }

    @Test("The completion's candidates: the entry's ALIAS/ACTION names by prefix; the thing's ID from the line")
    func candidates() throws {
        let entry = try Self.entry()
        #expect(
            ActionCompletion.candidates(entry, prefix: "")
                == [
                    "AirConditionerAlias/turnPower", "AirConditionerAlias/setPresetTemperature",
                    "AirConditionerAlias/setMode", "AirConditionerAlias/reset"
                ])
        #expect(ActionCompletion.candidates(entry, prefix: "AirConditionerAlias/set").count == 2)
        let line = ["thingif", "command", "send", "--hub", "http://h:1", "th.1", "AirConditionerAlias/t"]
        let scanned = try #require(ActionCompletion.scan(line, completing: 6))
        #expect(scanned.0 == "th.1" && scanned.1 == ["--hub", "http://h:1"])
        #expect(ActionCompletion.scan(["thingif", "command", "send", ""], completing: 3) == nil)
    }
}

/// Through the binaries: `thingif-hub --memory --admin-token` and `thingif`.
@Suite("thingif command send against the registry, end to end", .serialized, .offPool)
struct CLITraitCommandEndToEndTests {
    @Test(
        "A refused action exits 2 and sends nothing; a fitting one is stored as sent; no entry: unchanged; ---completion lists the actions",
        .enabled(if: CLIEndToEnd.available, "needs thingif-hub (with --http-port) and thingif next to the test bundle"),
        .timeLimit(.minutes(3)))
    func againstHub() throws {
        let cli = try #require(CLIEndToEnd.cli)
        let (scene, url, file) = try CLITraitTests.hub(
            "thingif-cli-trait-send", definition: CLITraitCommandTests.definition)
        defer { scene.end() }
        let env = ["THINGIF_HUB_URL": url, "THINGIF_CONFIG": scene.root + "/cli/cli.json"]
        func thingif(_ args: [String]) throws -> (status: Int32, output: String) {
            try runProgram(cli, args, environment: env)
        }
        func thingif(_ args: String...) throws -> (status: Int32, output: String) { try thingif(args) }
        for args in [
            ["trait", "define", "AirConditioner", file], ["trait", "firmware", "MyAirConditioner", "v1"],
            ["trait", "alias", "MyAirConditioner", "v1", "AirConditionerAlias", "AirConditioner", "1"]
        ] {
            let r = try thingif(args + ["--admin-token", "op"])
            try #require(r.status == 0, "\(args): \(r.output)")
        }
        try #require(try thingif("user", "create").status == 0)
        func onboard(_ vendor: String, _ extra: [String]) throws -> String {
            let r = try thingif(["onboard", vendor, "pw", "--json"] + extra)
            try #require(r.status == 0, "\(r.output)")
            return try #require(try JSONValue.parse(r.output)["thingID"]?.stringValue)
        }
        let thing = try onboard("AC-TRAIT-1", ["--thing-type", "MyAirConditioner", "--firmware-version", "v1"])
        let plain = try onboard("AC-TRAIT-2", ["--thing-type", "MyAirConditioner", "--firmware-version", "v9"])
        func commands(_ id: String) throws -> [JSONValue] {
            let r = try thingif("command", "list", id, "--json")
            try #require(r.status == 0, "\(r.output)")
            return try JSONValue.parse(r.output)["commands"]?.arrayValue ?? []
        }

        // Refused by the entry, before any request that sends: exit 2, named.
        var r = try thingif("command", "send", thing, "AirConditionerAlias/setPresetTemperature=40")
        #expect(r.status == 2, "\(r.output)")
        #expect(r.output.contains("AirConditionerAlias.setPresetTemperature must be at most 30"), "\(r.output)")
        r = try thingif("command", "send", thing, "--raw", #"[{"AirConditionerAlias":[{"fly":1}]}]"#)
        #expect(r.status == 2 && r.output.contains("defines no action fly"), "\(r.output)")
        #expect(try commands(thing).isEmpty, "nothing reached the hub")

        // Fitting: stored as sent, a trait command (no schema).
        r = try thingif(
            "command", "send", thing, "AirConditionerAlias/setPresetTemperature=25", "AirConditionerAlias/setMode",
            "mode=dry", "--json")
        #expect(r.status == 0, "\(r.output)")
        let stored = try commands(thing)
        #expect(stored.count == 1)
        #expect(
            stored.first?["actions"]?.text
                == #"[{"AirConditionerAlias":[{"setPresetTemperature":25},{"setMode":{"mode":"dry"}}]}]"#,
            "\(stored.first?.text ?? "-")")
        #expect(stored.first?["schema"] == nil)

        // No entry for v9: not checked here (and the hub has none to check by either).
        r = try thingif("command", "send", plain, "AirConditionerAlias/setPresetTemperature=40")
        #expect(r.status == 0, "\(r.output)")
        #expect(try commands(plain).count == 1)

        // The shell's completion entry point (the generated scripts' call).
        func complete(_ id: String, _ word: String) throws -> [String] {
            let line = ["thingif", "command", "send", id, word]
            let r = try thingif(
                ["---completion", "command", "send", "--", "positional@1", "4", "\(word.count)"] + line)
            #expect(r.status == 0, "\(r.output)")
            return r.output.split(separator: "\n").map(String.init)
        }
        #expect(
            try complete(thing, "AirConditionerAlias/set")
                == ["AirConditionerAlias/setPresetTemperature", "AirConditionerAlias/setMode"])
        #expect(try complete(thing, "").count == 4)
        #expect(try complete(plain, "").isEmpty, "no entry: no candidates")
    }
}
