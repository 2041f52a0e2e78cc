// SPDX-License-Identifier: Apache-2.0

import Foundation
import Testing
import ThingIF

/// `thingif trait …` through the binary: a definition the hub's parser
/// refuses is refused before any request (exit 2, the field named); against
/// `thingif-hub --memory --admin-token`, define, firmware, alias, list,
/// show and aliases, and a published version that does not change (exit 1).
@Suite("thingif trait", .serialized, .offPool)
struct CLITraitTests {
    static let definition =
        #"{"actions":[{"turnPower":{"payloadSchema":{"type":"boolean"}}}],"states":[{"power":{"payloadSchema":{"type":"boolean"}}}]}"#

    @Test(
        "A definition the parser refuses exits 2 naming the field, and no request is made",
        .enabled(if: CLIEndToEnd.cli != nil, "needs thingif next to the test bundle"))
    func refusedLocally() throws {
        let cli = try #require(CLIEndToEnd.cli)
        let dir = try makeTempDirectory(prefix: "thingif-trait")
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let file = dir + "/bad.json"
        try Data(#"{"actions":[{"turnPower":{"payloadSchema":{"type":"bool"}}}]}"#.utf8).write(
            to: URL(fileURLWithPath: file))
        // No hub listens on port 1: a request would exit 1 ("cannot reach").
        let env = ["THINGIF_HUB_URL": "http://127.0.0.1:1", "THINGIF_CONFIG": dir + "/cli.json"]
        let r = try runProgram(cli, ["trait", "define", "AC", file, "--admin-token", "op"], environment: env)
        #expect(r.status == 2, "\(r.output)")
        #expect(r.output.contains("actions[0].turnPower.payloadSchema.type"), "\(r.output)")
        let name = try runProgram(
            cli, ["trait", "alias", "A B", "v1", "X", "AC", "1", "--admin-token", "op"], environment: env)
        #expect(name.status == 2 && name.output.contains("thing type"), "\(name.output)")
    }

    /// `thingif-hub --memory --admin-token op` in a scene of its own, its
    /// URL, and `definition` in a file beside it.
    static func hub(_ prefix: String, definition: String) throws -> (scene: ProcessScene, url: String, file: String) {
        let hubExe = try #require(CLIEndToEnd.hub)
        let scene = try ProcessScene(prefix: prefix)
        do {
            let (hubPID, url) = try startHubProcess(
                hubExe, broker: scene.broker, logPath: scene.root + "/hub.log",
                storeArgs: ["--memory", "--admin-token", "op"])
            scene.children.append(hubPID)
            let file = scene.root + "/ac.json"
            try Data(definition.utf8).write(to: URL(fileURLWithPath: file))
            return (scene, url, file)
        } catch {
            scene.end()
            throw error
        }
    }

    @Test(
        "define, firmware, alias, list, show, aliases against a hub; a published version does not change",
        .enabled(if: CLIEndToEnd.available, "needs thingif-hub (with --http-port) and thingif next to the test bundle"),
        .timeLimit(.minutes(3)))
    func againstHub() throws {
        let cli = try #require(CLIEndToEnd.cli)
        let (scene, url, file) = try Self.hub("thingif-cli-trait", definition: Self.definition)
        defer { scene.end() }
        let other = scene.root + "/other.json"
        try Data(Self.definition.replacingOccurrences(of: "boolean", with: "integer").utf8).write(
            to: URL(fileURLWithPath: other))
        let env = ["THINGIF_HUB_URL": url, "THINGIF_CONFIG": scene.root + "/cli/cli.json"]
        func thingif(_ args: String...) throws -> (status: Int32, output: String) {
            try runProgram(cli, args, environment: env)
        }
        var r = try thingif("trait", "define", "AirConditioner", file, "--admin-token", "op")
        #expect(r.status == 0 && r.output.contains("AirConditioner version 1"), "\(r.output)")
        r = try thingif("trait", "define", "AirConditioner", file, "--version", "1", "--admin-token", "op")
        #expect(r.status == 0, "the same definition again: \(r.output)")
        r = try thingif("trait", "define", "AirConditioner", other, "--version", "1", "--admin-token", "op")
        #expect(r.status == 1 && r.output.contains("TRAIT_VERSION_ALREADY_EXISTS"), "\(r.output)")
        r = try thingif("trait", "define", "AirConditioner", file)
        #expect(r.status == 2 && r.output.contains("adminToken"), "no adminToken: \(r.output)")
        r = try thingif("trait", "firmware", "MyAirConditioner", "v1", "--admin-token", "op")
        #expect(r.status == 0, "\(r.output)")
        r = try thingif(
            "trait", "alias", "MyAirConditioner", "v1", "AirConditionerAlias", "AirConditioner", "1", "--admin-token",
            "op")
        #expect(r.status == 0, "\(r.output)")
        r = try thingif("trait", "alias", "MyAirConditioner", "v1", "X", "AirConditioner", "7", "--admin-token", "op")
        #expect(r.status == 1 && r.output.contains("TRAIT_VERSION_NOT_FOUND"), "\(r.output)")
        // Reads with a user's saved token.
        r = try thingif("user", "create")
        #expect(r.status == 0, "\(r.output)")
        r = try thingif("trait", "list")
        #expect(r.status == 0 && r.output.contains("AirConditioner") && r.output.hasSuffix("1\n"), "\(r.output)")
        r = try thingif("trait", "show", "AirConditioner", "1")
        #expect(r.status == 0 && r.output.contains("turnPower"), "\(r.output)")
        r = try thingif("trait", "aliases", "MyAirConditioner", "v1")
        #expect(
            r.status == 0 && r.output.contains("AirConditionerAlias") && r.output.contains("AirConditioner 1"),
            "\(r.output)")
    }
}
