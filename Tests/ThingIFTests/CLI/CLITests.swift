// SPDX-License-Identifier: Apache-2.0

import Foundation
import ArgumentParser
import Testing
@testable import thingif_cli
#if canImport(Glibc)
    import Glibc
#endif

/// The `thingif` CLI's parts that need no hub: the ACTION key=value words,
/// JSON, the tables, the saved credentials and the option resolution.
@Suite("thingif CLI", .offPool)
struct CLITests {
    // MARK: action words

    @Test("The seeds' three actions from words: booleans and numbers as JSON, order kept")
    func seedActions() throws {
        let words = "turnPower power=true setPresetTemperature presetTemperature=25 setFanSpeed fanSpeed=5"
        let v = try Actions.parse(words: words.split(separator: " ").map(String.init))
        #expect(
            v.text
                == #"[{"turnPower":{"power":true}},{"setPresetTemperature":{"presetTemperature":25}},{"setFanSpeed":{"fanSpeed":5}}]"#
        )
        #expect(
            Actions.summary(v)
                == "turnPower power=true, setPresetTemperature presetTemperature=25, setFanSpeed fanSpeed=5")
    }

    @Test("Values: JSON when valid (numbers, null, quoted strings, nested objects and arrays), else the text")
    func valueTypes() throws {
        let v = try Actions.parse(words: [
            "configure", "name=living room", "quoted=\"25\"", "n=null", "f=-2.5e1", "nested={\"a\":[1,{\"b\":false}]}",
            "list=[1,2]", "empty=", "word=tru", "padded= 7 ", "eq=a=b", "unicode=温度", "reset"
        ])
        #expect(
            v.text
                == #"[{"configure":{"name":"living room","quoted":"25","n":null,"f":-2.5e1,"nested":{"a":[1,{"b":false}]},"list":[1,2],"empty":"","word":"tru","padded":7,"eq":"a=b","unicode":"温度"}},{"reset":{}}]"#
        )
        #expect(Actions.value("01") == .string("01"))
        #expect(Actions.value("1.") == .string("1."))
        #expect(Actions.value("{\"a\":}") == .string("{\"a\":}"))
        #expect(Actions.value("false") == .bool(false))
    }

    @Test("Word errors: parameter before an action, empty name, a key twice, nothing at all, option-like names")
    func wordErrors() {
        #expect(throws: ActionParseError.self) { try Actions.parse(words: ["power=true"]) }
        #expect(throws: ActionParseError.self) { try Actions.parse(words: ["turnPower", "=true"]) }
        #expect(throws: ActionParseError.self) { try Actions.parse(words: ["turnPower", "power=true", "power=false"]) }
        #expect(throws: ActionParseError.self) { try Actions.parse(words: []) }
        #expect(throws: ActionParseError.self) { try Actions.parse(words: ["turnPower", ""]) }
        #expect(throws: ActionParseError.self) { try Actions.parse(words: ["{\"turnPower\":{}}"]) }
        // The same key in two actions is fine.
        #expect(throws: Never.self) { try Actions.parse(words: ["a", "x=1", "b", "x=2"]) }
        do {
            _ = try Actions.parse(words: ["power=true"])
        } catch let e as ActionParseError {
            #expect(e.message.contains("before any action"))
        } catch {
            Issue.record("unexpected \(error)")
        }
    }

    @Test("--raw: a non-empty array of one-member objects, kept as given")
    func rawActions() throws {
        let raw = #"[ {"turnPower": {"power": true}}, {"setFanSpeed":{"fanSpeed":5}} ]"#
        #expect(try Actions.parse(raw: raw).text == #"[{"turnPower":{"power":true}},{"setFanSpeed":{"fanSpeed":5}}]"#)
        for bad in ["", "[", "[]", "{}", #"{"turnPower":{}}"#, #"[{"a":{},"b":{}}]"#, "[1]", #"[{}]"#] {
            #expect(throws: ActionParseError.self, "\(bad)") { try Actions.parse(raw: bad) }
        }
    }

    // MARK: JSON

    @Test("JSON text: escapes, unicode, surrogate pairs and member order survive a round trip")
    func jsonRoundTrip() throws {
        let text = #"{"z":1,"a":"q\"uo\\te\n\t\u0001","u":"\u00e9\ud83d\ude00","arr":[true,false,null,-0.5E+3],"o":{}}"#
        let v = try JSONValue.parse(text)
        #expect(v["u"] == .string("é😀"))
        #expect(v["a"] == .string("q\"uo\\te\n\t\u{1}"))
        #expect(v.objectValue?.map(\.0) == ["z", "a", "u", "arr", "o"])
        #expect(try JSONValue.parse(v.text) == v)
        #expect(try JSONValue.parse(v.pretty) == v)
        #expect(v.text == #"{"z":1,"a":"q\"uo\\te\n\t\u0001","u":"é😀","arr":[true,false,null,-0.5E+3],"o":{}}"#)
        for bad in ["", "01", "[1,]", #"{"a"}"#, "tru", #""\x""#, "1 2", "[", #"{"a":1,}"#, "-", "\"a\nb\"", "nul"] {
            #expect(throws: JSONValue.ParseError.self, "\(bad)") { try JSONValue.parse(bad) }
        }
    }

    // MARK: tables

    static let finished = try! JSONValue.parse(
        """
        {"commandID":"c-1","schema":"AirConditioner-Demo","schemaVersion":1,"target":"thing:th.1","issuer":"user:u-1",
         "actions":[{"turnPower":{"power":true}},{"setPresetTemperature":{"presetTemperature":99}},{"setFanSpeed":{"fanSpeed":5}}],
         "actionResults":[{"turnPower":{"succeeded":true}},
                          {"setPresetTemperature":{"succeeded":false,"errorMessage":"presetTemperature must be 16..30","data":{"max":30}}},
                          {"setFanSpeed":{"succeeded":true}}],
         "commandState":"INCOMPLETE","title":"Cool down","description":"Before I get home","metadata":{"origin":"demo"},
         "createdAt":1714557600123,"modifiedAt":1714557601000}
        """)

    @Test("A command in full: fields, then one aligned row per action with ✓/✗ and the error message")
    func commandTable() throws {
        let out = Format.command(CLITests.finished)
        let lines = out.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        #expect(lines.contains("commandID    c-1"))
        #expect(lines.contains("state        INCOMPLETE"))
        #expect(lines.contains("schema       AirConditioner-Demo (version 1)"))
        #expect(lines.contains(#"metadata     {"origin":"demo"}"#))
        #expect(lines.contains("created      2024-05-01 10:00:00Z"))
        let table = lines.drop { !$0.contains("ACTION") }
        #expect(
            Array(table) == [
                "  #  ACTION                PARAMETERS            RESULT",
                "  1  turnPower             power=true            ✓",
                #"  2  setPresetTemperature  presetTemperature=99  ✗ presetTemperature must be 16..30  data={"max":30}"#,
                "  3  setFanSpeed           fanSpeed=5            ✓"
            ])
    }

    @Test("A command without results yet shows … per action; the list shows ✓/✗ and the first failure")
    func listTable() throws {
        let pending = try JSONValue.parse(
            """
            {"commandID":"c-22","commandState":"SENDING","actions":[{"turnPower":{"power":false}}],"createdAt":1714557660000}
            """)
        #expect(Format.command(pending).hasSuffix("  1  turnPower  power=false  …"))
        let list = Format.commandList([CLITests.finished, pending])
        let lines = list.split(separator: "\n").map(String.init)
        let actions = "turnPower power=true, setPresetTemperature presetTemperature=99, setFanSpeed fanSpeed=5"
        func pad(_ s: String) -> String { s + String(repeating: " ", count: actions.count - s.count + 2) }
        #expect(
            lines == [
                "COMMAND ID  STATE       CREATED               " + pad("ACTIONS") + "RESULTS",
                "c-1         INCOMPLETE  2024-05-01 10:00:00Z  " + pad(actions)
                    + "✓✗✓  setPresetTemperature: presetTemperature must be 16..30",
                "c-22        SENDING     2024-05-01 10:01:00Z  " + pad("turnPower power=false") + "-"
            ])
        let state = try JSONValue.parse(#"{"power":true,"presetTemperature":25,"fanSpeed":5,"mode":"cool"}"#)
        #expect(
            Format.state(state)
                == "power              true\npresetTemperature  25\nfanSpeed           5\nmode               cool")
    }

    @Test("--expires-in spans: a whole number with s, m, h or d; anything else is refused before the hub")
    func timeSpans() {
        #expect(TimeSpan.seconds("90") == 90)
        #expect(TimeSpan.seconds("90s") == 90)
        #expect(TimeSpan.seconds("10m") == 600)
        #expect(TimeSpan.seconds("2h") == 7200)
        #expect(TimeSpan.seconds("1d") == 86_400)
        for bad in ["", "m", "-5m", "1.5h", "10 m", "10M", "1w", "٣m", "99999999999999999999d"] {
            #expect(TimeSpan.seconds(bad) == nil, "\(bad)")
        }
        #expect(throws: (any Error).self) {
            try CommandGroup.Send.parse(["th.1", "turnPower", "power=true", "--expires-in", "soon"])
        }
        let ok = try? CommandGroup.Send.parse(["th.1", "turnPower", "power=true", "--expires-in", "10m"])
        #expect(ok?.expiresIn == "10m")
    }

    @Test("A command the hub ended shows when it expires and why it ended")
    func endedCommand() throws {
        let c = try JSONValue.parse(
            """
            {"commandID":"c-9","commandState":"EXPIRED","endReason":"undelivered","expiresAt":1714557660000,
             "actions":[{"turnPower":{"power":true}}],"createdAt":1714557600000,"modifiedAt":1714557660000}
            """)
        let out = Format.command(c)
        #expect(field(out, "state") == "EXPIRED")
        #expect(field(out, "expires") == "2024-05-01 10:01:00Z")
        #expect(field(out, "ended") == "undelivered")
    }

    // MARK: saved credentials

    @Test("Saved credentials: written 0600 in a 0700 folder, read back, replaced atomically")
    func configFile() throws {
        let dir = try makeTempDirectory(prefix: "thingif-cli-config")
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let path = dir + "/nested/thingif/cli.json"
        #expect(try SavedConfig.load(from: path) == nil)
        var config = SavedConfig(hub: "http://127.0.0.1:8080", appID: "demoApp", userID: "u-1", token: "secret-token")
        try config.save(to: path)
        var st = stat()
        #expect(stat(path, &st) == 0)
        #expect(st.st_mode & 0o777 == 0o600)
        #expect(stat(dir + "/nested/thingif", &st) == 0)
        #expect(st.st_mode & 0o777 == 0o700)
        #expect(try SavedConfig.load(from: path) == config)

        // An old file readable by others is replaced by a 0600 one.
        chmod(path, 0o644)
        config.installationID = "inst-1"
        config.loginName = "alice"
        try config.save(to: path)
        #expect(stat(path, &st) == 0)
        #expect(st.st_mode & 0o777 == 0o600)
        #expect(try SavedConfig.load(from: path) == config)
        #expect(try FileManager.default.contentsOfDirectory(atPath: dir + "/nested/thingif") == ["cli.json"])

        try "not json".write(toFile: path, atomically: true, encoding: .utf8)
        #expect(throws: SavedConfig.Error.self) { try SavedConfig.load(from: path) }

        #expect(SavedConfig.path(environment: ["THINGIF_CONFIG": "/x/y.json", "HOME": "/h"]) == "/x/y.json")
        #expect(SavedConfig.path(environment: ["HOME": "/h"]) == "/h/.config/thingif/cli.json")
    }

    @Test(
        "Options: flag, then environment, then the saved file, then the default; the saved token only for its hub and app"
    )
    func contextResolution() throws {
        let dir = try makeTempDirectory(prefix: "thingif-cli-ctx")
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let path = dir + "/cli.json"
        var env = ["THINGIF_CONFIG": path]

        var ctx = try Context(GlobalOptions.parse([]), environment: env)
        #expect(ctx.hub == "http://127.0.0.1:8080")
        #expect(ctx.appID == "demoApp")
        #expect(ctx.token == nil && ctx.userID == nil)

        try SavedConfig(
            hub: "http://127.0.0.1:9000/", appID: "app1", userID: "u-1", token: "t-1", installationID: "i-1"
        ).save(to: path)
        ctx = try Context(GlobalOptions.parse([]), environment: env)
        #expect(ctx.hub == "http://127.0.0.1:9000/" && ctx.appID == "app1")
        #expect(ctx.token == "t-1" && ctx.userID == "u-1" && ctx.usesSavedUser)

        ctx = try Context(GlobalOptions.parse(["--hub", "http://127.0.0.1:9000"]), environment: env)
        #expect(ctx.token == "t-1")  // the same hub, without the slash

        env["THINGIF_HUB_URL"] = "http://127.0.0.1:9100"
        ctx = try Context(GlobalOptions.parse([]), environment: env)
        #expect(ctx.hub == "http://127.0.0.1:9100")
        #expect(ctx.token == nil && ctx.userID == nil && !ctx.usesSavedUser)

        ctx = try Context(GlobalOptions.parse(["--hub", "http://127.0.0.1:9000", "--token", "other"]), environment: env)
        #expect(ctx.token == "other" && ctx.userID == nil && !ctx.usesSavedUser)

        env["THINGIF_TOKEN"] = "t-env"
        env["THINGIF_USER_ID"] = "u-env"
        env["THINGIF_APP_ID"] = "app2"
        ctx = try Context(GlobalOptions.parse(["--json"]), environment: env)
        #expect(ctx.token == "t-env" && ctx.userID == "u-env" && ctx.appID == "app2" && ctx.json)
        ctx = try Context(GlobalOptions.parse(["--app-id", "app3", "--user-id", "u-flag"]), environment: env)
        #expect(ctx.appID == "app3" && ctx.userID == "u-flag")
    }

    @Test("Server-Sent Events: fields across chunks, CRLF, comments and multi-line data")
    func eventStreamParser() {
        var p = EventStream.Parser()
        #expect(p.feed(Data(": keep-alive\n\nevent: comm".utf8)).isEmpty)
        #expect(p.feed(Data("and\r\ndata: {\"commandID\":\"c-1\",".utf8)).isEmpty)
        let events = p.feed(Data("\r\ndata:\"x\"}\r\n\r\ndata: plain\n\n".utf8))
        #expect(
            events == [
                EventStream.Event(name: "command", data: "{\"commandID\":\"c-1\",\n\"x\"}"),
                EventStream.Event(name: "message", data: "plain")
            ])
    }

    @Test("things import: CSV rows with an optional header, comments and blank lines; a short line is a usage error")
    func enrollmentCSV() throws {
        let rows = try ThingsGroup.Import.rows(
            "vendorThingID,thingPassword,thingType\n# fleet 1\nAC-1, pw-1 ,AirConditioner\n\nAC-2,pw-2\nAC-3,pw-3,,1.0\n"
        )
        #expect(rows == [["AC-1", "pw-1", "AirConditioner"], ["AC-2", "pw-2"], ["AC-3", "pw-3", "", "1.0"]])
        #expect(throws: ValidationError.self) { try ThingsGroup.Import.rows("AC-1\n") }
        #expect(throws: ValidationError.self) { try ThingsGroup.Import.rows("AC-1,\n") }
    }
}

// MARK: - end to end: the thingif binary against a thingif-hub process

/// A program next to the test bundle (SwiftPM puts every product there).
func siblingExecutable(_ name: String) -> String? {
    guard let exe = try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe") else { return nil }
    var dir = (exe as NSString).deletingLastPathComponent
    for _ in 0..<4 {
        if access(dir + "/" + name, X_OK) == 0 { return dir + "/" + name }
        dir = (dir as NSString).deletingLastPathComponent
    }
    return nil
}

/// Runs a program to its end (bounded) with its own environment; gives its
/// exit status and its stdout + stderr. Same signal set-up as spawnChild.
func runProgram(_ exe: String, _ args: [String], environment: [String: String], timeoutMs: Int = 60_000) throws
    -> (status: Int32, output: String)
{
    let out = try makeTempDirectory(prefix: "thingif-run") + "/out"
    defer { try? FileManager.default.removeItem(atPath: (out as NSString).deletingLastPathComponent) }
    let pid = try spawnChild(exe, args, environment: environment, logPath: out)
    var status: Int32 = 0
    var reaped = false
    for _ in 0..<max(1, timeoutMs / 10) {
        if waitpid(pid, &status, WNOHANG) == pid { reaped = true; break }
        usleep(10_000)
    }
    if !reaped {
        endChild(pid, signal: SIGKILL)
        throw HarnessError("\(exe) \(args.joined(separator: " ")) still ran after \(timeoutMs) ms: \(readText(out))")
    }
    let code: Int32 = (status & 0x7f) == 0 ? (status >> 8) & 0xff : 128 + (status & 0x7f)
    return (code, readText(out))
}

/// The value of a `name  value` row of the CLI's output.
func field(_ output: String, _ name: String) -> String? {
    for line in output.split(separator: "\n") {
        let words = line.split(separator: " ", maxSplits: 1)
        if words.count == 2, words[0] == name { return words[1].trimmingCharacters(in: .whitespaces) }
    }
    return nil
}

enum CLIEndToEnd {
    static let cli = siblingExecutable("thingif")
    static let hub = siblingExecutable("thingif-hub")
    /// The hub serves the REST API (it takes --http-port) and both programs are built.
    static let available: Bool = {
        guard let hub, cli != nil, let help = try? runProgram(hub, ["--help"], environment: [:], timeoutMs: 10_000)
        else {
            return false
        }
        return help.status == 0 && help.output.contains("--http-port")
    }()
}

@Suite("thingif CLI end to end", .serialized, .offPool)
struct CLIEndToEndTests {
    /// A broker, `thingif-hub --memory` and the C appliance onboarded by the
    /// CLI; every step through the `thingif` binary.
    @Test(
        "user create, onboard, command send --wait (words, --json, --raw), list, get, state get, watch; errors exit 1 or 2",
        .enabled(if: CLIEndToEnd.available, "needs thingif-hub (with --http-port) and thingif next to the test bundle"),
        .timeLimit(.minutes(3)))
    func wholeFlow() throws {
        let cli = try #require(CLIEndToEnd.cli), hubExe = try #require(CLIEndToEnd.hub)
        let scene = try ProcessScene(prefix: "thingif-cli-e2e")
        defer { scene.end() }
        let broker = scene.broker, root = scene.root

        let hubLog = root + "/hub.log"
        let (hubPID, url) = try startHubProcess(hubExe, broker: broker, logPath: hubLog)
        scene.children.append(hubPID)
        let config = root + "/cli/cli.json"
        let env = ["THINGIF_HUB_URL": url, "THINGIF_CONFIG": config]
        func thingif(_ args: String...) throws -> (status: Int32, output: String) {
            try runProgram(cli, args, environment: env)
        }

        // A user; its token is saved 0600.
        var r = try thingif("user", "create")
        #expect(r.status == 0, "\(r.output)")
        #expect(r.output.contains("userID") && r.output.contains("saved to \(config)"))
        var st = stat()
        #expect(stat(config, &st) == 0 && st.st_mode & 0o777 == 0o600)
        let saved = try #require(try SavedConfig.load(from: config))
        #expect(saved.hub == url && saved.appID == "demoApp")

        // Onboard the thing for that user, hand its ID and token to the appliance.
        r = try thingif(
            "onboard", "AC-0001", "demo-pass", "--thing-type", "AirConditioner", "--interval", "1_MINUTE", "--json")
        #expect(r.status == 0, "\(r.output)")
        let onboarded = try JSONValue.parse(r.output)
        let thingID = try #require(onboarded["thingID"]?.stringValue)
        let thingToken = try #require(onboarded["accessToken"]?.stringValue)

        let watchLog = root + "/watch.log"
        scene.children.append(
            try spawnChild(cli, ["watch", thingID, "--timeout", "120"], environment: env, logPath: watchLog))
        #expect(poll(timeoutMs: 30_000) { readText(watchLog).contains("watching \(thingID)") }, "\(readText(watchLog))")

        let aircon = try ApplianceProcess(
            args: [
                "--port", "\(broker.port)", "--storage", root + "/aircon",
                "--thing-id", thingID, "--token", thingToken
            ],
            logPath: root + "/aircon.log")
        try aircon.start()
        defer { aircon.stop() }

        // 1. Three actions from words, with the table.
        r = try thingif(
            "command", "send", thingID, "turnPower", "power=true", "setPresetTemperature", "presetTemperature=25",
            "setFanSpeed", "fanSpeed=5", "--title", "Cool down", "--metadata", #"{"origin":"test"}"#, "--wait", "30")
        #expect(r.status == 0, "\(r.output)\naircon:\n\(aircon.log)")
        #expect(field(r.output, "state") == "DONE", "\(r.output)")
        #expect(field(r.output, "title") == "Cool down")
        #expect(r.output.split(separator: "\n").filter { $0.contains("  ✓") }.count == 3, "\(r.output)")

        // 2. Refused by the appliance, as JSON.
        r = try thingif(
            "command", "send", thingID, "setPresetTemperature", "presetTemperature=99", "--wait", "30", "--json")
        #expect(r.status == 0, "\(r.output)")
        let refused = try JSONValue.parse(r.output)
        #expect(refused["commandState"] == .string("INCOMPLETE"))
        let result = Format.results(refused["actionResults"]).first
        #expect(result?.name == "setPresetTemperature" && result?.succeeded == false)
        let errorMessage = result?.errorMessage ?? ""
        #expect(!errorMessage.isEmpty)
        let refusedID = try #require(refused["commandID"]?.stringValue)

        // 3. Raw JSON.
        r = try thingif("command", "send", thingID, "--raw", #"[{"turnPower":{"power":false}}]"#, "--wait", "30")
        #expect(r.status == 0 && field(r.output, "state") == "DONE", "\(r.output)")

        // Read back: all pages, a limit, one command, the state.
        r = try thingif("command", "list", thingID, "--json")
        let all = try JSONValue.parse(r.output)["commands"]?.arrayValue ?? []
        #expect(all.count == 3)
        #expect(all.map { $0["commandState"]?.stringValue ?? "" } == ["DONE", "INCOMPLETE", "DONE"])
        r = try thingif("command", "list", thingID, "--limit", "2", "--json")
        let two = try JSONValue.parse(r.output)
        #expect(two["commands"]?.arrayValue?.count == 2 && two["nextPaginationKey"] != nil, "\(r.output)")
        r = try thingif("command", "list", thingID)
        #expect(r.status == 0 && r.output.split(separator: "\n").count == 4, "\(r.output)")
        #expect(r.output.contains("✗  setPresetTemperature: "))
        r = try thingif("command", "get", thingID, refusedID)
        #expect(r.status == 0 && field(r.output, "state") == "INCOMPLETE" && r.output.contains("✗ "), "\(r.output)")
        #expect(
            poll(timeoutMs: 30_000) {
                guard let s = try? thingif("state", "get", thingID, "--json"), s.status == 0,
                    let v = try? JSONValue.parse(s.output)
                else { return false }
                return v["power"] == .bool(false) && v["presetTemperature"] == .number("25")
                    && v["fanSpeed"] == .number("5")
            })

        // watch printed the three finished commands as they came.
        #expect(
            poll(timeoutMs: 30_000) {
                readText(watchLog).split(separator: "\n").filter { $0.hasPrefix("commandID") }.count == 3
            }, "\(readText(watchLog))")

        // 4. An expiry, as timeToLive; the hub shows expiresAt.
        let before = Int64(Date().timeIntervalSince1970 * 1000)
        r = try thingif(
            "command", "send", thingID, "turnPower", "power=true", "--expires-in", "10m", "--wait", "30", "--json")
        #expect(r.status == 0, "\(r.output)")
        let expiring = try JSONValue.parse(r.output)
        let expiresAt = try #require(expiring["expiresAt"]?.intValue, "\(r.output)")
        #expect(expiresAt >= before + 600_000 && expiresAt <= before + 660_000)
        // Cancel: too late for a finished command (exit 1, the hub's 409) …
        r = try thingif("command", "cancel", thingID, try #require(expiring["commandID"]?.stringValue))
        #expect(
            r.status == 1 && r.output.contains("HTTP 409") && r.output.contains("COMMAND_NOT_CANCELLABLE"),
            "\(r.output)")
        // … and in time for one to a thing that is not running.
        r = try thingif("onboard", "AC-0003", "pw-3", "--thing-type", "AirConditioner", "--json")
        let idle = try #require(try JSONValue.parse(r.output)["thingID"]?.stringValue, "\(r.output)")
        r = try thingif("command", "send", idle, "turnPower", "power=true", "--json")
        let pendingID = try #require(try JSONValue.parse(r.output)["commandID"]?.stringValue, "\(r.output)")
        r = try thingif("command", "cancel", idle, pendingID)
        #expect(
            r.status == 0 && field(r.output, "state") == "CANCELLED" && field(r.output, "ended") == "cancelled",
            "\(r.output)")

        // Errors: the hub's refusal exits 1 with its errorCode; usage errors exit 2.
        r = try thingif("command", "get", thingID, "no-such-command")
        #expect(r.status == 1 && r.output.contains("HTTP 404"), "\(r.output)")
        r = try runProgram(cli, ["command", "list", thingID, "--token", "not-a-token"], environment: env)
        #expect(r.status == 1 && r.output.contains("HTTP 403") && r.output.contains("WRONG_TOKEN"), "\(r.output)")
        r = try thingif("command", "send", thingID, "power=true")
        #expect(r.status == 2 && r.output.contains("before any action"), "\(r.output)")
        r = try thingif("onboard", "AC-0002", "pw", "--interval", "2_DAYS")
        #expect(r.status == 2, "\(r.output)")
        r = try runProgram(
            cli, ["state", "get", thingID],
            environment: [
                "THINGIF_HUB_URL": "http://127.0.0.1:1", "THINGIF_TOKEN": "x",
                "THINGIF_CONFIG": root + "/none.json"
            ])
        #expect(r.status == 1 && r.output.contains("cannot reach the hub"), "\(r.output)")
    }
}

extension CLIEndToEndTests {
    /// A gateway onboarded with --layout gateway, its end nodes onboarded,
    /// listed with their presence, read and removed, every step through the
    /// `thingif` binary; the gateway's own `…/connection` (its token, as
    /// Kii's agent sends it) makes one end node online.
    @Test(
        "end-node onboard, list, get, remove; onboard --layout gateway; unknown gateway or end node, a standalone thing, bad usage",
        .enabled(if: CLIEndToEnd.available, "needs thingif-hub (with --http-port) and thingif next to the test bundle"),
        .timeLimit(.minutes(3)))
    func endNodes() throws {
        let cli = try #require(CLIEndToEnd.cli), hubExe = try #require(CLIEndToEnd.hub)
        let scene = try ProcessScene(prefix: "thingif-cli-end-nodes")
        defer { scene.end() }
        let root = scene.root
        let (hubPID, url) = try startHubProcess(hubExe, broker: scene.broker, logPath: root + "/hub.log")
        scene.children.append(hubPID)
        let env = ["THINGIF_HUB_URL": url, "THINGIF_CONFIG": root + "/cli/cli.json"]
        func thingif(_ args: String...) throws -> (status: Int32, output: String) {
            try runProgram(cli, args, environment: env)
        }
        func lines(_ s: String) -> [String] { s.split(separator: "\n").map(String.init) }

        var r = try thingif("user", "create")
        try #require(r.status == 0, "\(r.output)")

        // The gateway, onboarded by its owner with its layout.
        r = try thingif(
            "onboard", "GW-CLI-1", "gw-pass", "--thing-type", "LampGateway", "--layout", "gateway", "--json")
        try #require(r.status == 0, "\(r.output)")
        let gateway = try JSONValue.parse(r.output)
        let gw = try #require(gateway["thingID"]?.stringValue)
        let gwToken = try #require(gateway["accessToken"]?.stringValue)
        // The layout is kept: the same vendorThingID as a standalone thing is refused.
        r = try thingif("onboard", "GW-CLI-1", "gw-pass", "--layout", "standalone")
        #expect(r.status == 1 && r.output.contains("LAYOUT_POSITION_MISMATCH"), "\(r.output)")
        r = try thingif("onboard", "AC-CLI-1", "ac-pass", "--json")
        let standalone = try #require(try JSONValue.parse(r.output)["thingID"]?.stringValue, "\(r.output)")

        // No end nodes yet.
        r = try thingif("end-node", "list", gw)
        #expect(r.status == 0 && r.output.contains("no end nodes on \(gw)"), "\(r.output)")

        // Two end nodes: as JSON and as the table.
        r = try thingif(
            "end-node", "onboard", gw, "--vendor-thing-id", "LAMP-CLI-1", "--password", "lamp-pass", "--thing-type",
            "Lamp", "--firmware-version", "1.2", "--json")
        try #require(r.status == 0, "\(r.output)")
        let lamp1 = try #require(try JSONValue.parse(r.output)["endNodeThingID"]?.stringValue, "\(r.output)")
        r = try thingif("end-node", "onboard", gw, "--vendor-thing-id", "LAMP-CLI-2", "--password", "lamp-pass")
        #expect(r.status == 0, "\(r.output)")
        let lamp2 = try #require(field(r.output, "thingID"), "\(r.output)")
        #expect(field(r.output, "accessToken")?.isEmpty == false)
        // Again with the same password: the same end node.
        r = try thingif("end-node", "onboard", gw, "--vendor-thing-id", "LAMP-CLI-2", "--password", "lamp-pass")
        #expect(r.status == 0 && field(r.output, "thingID") == lamp2, "\(r.output)")
        // Another password: the hub's 403.
        r = try thingif("end-node", "onboard", gw, "--vendor-thing-id", "LAMP-CLI-2", "--password", "other")
        #expect(r.status == 1 && r.output.contains("HTTP 403") && r.output.contains("WRONG_PASSWORD"), "\(r.output)")

        r = try thingif("end-node", "list", gw)
        #expect(r.status == 0, "\(r.output)")
        let rows = lines(r.output)
        #expect(rows.count == 3 && rows.first?.hasPrefix("THING ID") == true, "\(r.output)")
        #expect(
            rows.contains {
                $0.hasPrefix(lamp1) && $0.contains("LAMP-CLI-1") && $0.contains("Lamp") && $0.hasSuffix("offline")
            })
        #expect(rows.contains { $0.hasPrefix(lamp2) && $0.hasSuffix("offline") }, "\(r.output)")

        // The gateway says LAMP-CLI-1 is reachable (Kii's …/connection with the gateway's token).
        let asGateway = try HubClient(hub: url, appID: "demoApp", token: gwToken)
        try asGateway.call(
            "PUT", EndNodeGroup.path(asGateway, gw, lamp1) + "/connection", body: .object([("online", .bool(true))]))
        r = try thingif("end-node", "list", gw, "--json")
        let listed = try JSONValue.parse(r.output)["results"]?.arrayValue ?? []
        #expect(listed.map { $0["thingID"]?.stringValue ?? "" } == [lamp1, lamp2], "\(r.output)")
        #expect(listed.map { $0["online"]?.boolValue ?? false } == [true, false], "\(r.output)")
        r = try thingif("end-node", "list", gw)
        #expect(lines(r.output).contains { $0.hasPrefix(lamp1) && $0.hasSuffix("online") }, "\(r.output)")
        r = try thingif("end-node", "list", gw, "--limit", "1", "--json")
        let first = try JSONValue.parse(r.output)
        #expect(first["results"]?.arrayValue?.count == 1 && first["nextPaginationKey"] != nil, "\(r.output)")

        r = try thingif("end-node", "get", gw, lamp1)
        #expect(r.status == 0, "\(r.output)")
        #expect(field(r.output, "thingID") == lamp1 && field(r.output, "vendorThingID") == "LAMP-CLI-1")
        #expect(field(r.output, "thingType") == "Lamp" && field(r.output, "firmwareVersion") == "1.2")
        #expect(field(r.output, "status") == "online" && field(r.output, "gateway") == gw, "\(r.output)")
        r = try thingif("end-node", "get", gw, lamp2, "--json")
        let read = try JSONValue.parse(r.output)
        #expect(read["online"] == .bool(false) && read["gatewayThingID"] == .string(gw), "\(r.output)")

        // Removed: gone from the list, and a second removal or a read is the hub's 404.
        r = try thingif("end-node", "remove", gw, lamp2)
        #expect(r.status == 0 && r.output.contains("end node \(lamp2) of \(gw) removed"), "\(r.output)")
        r = try thingif("end-node", "list", gw, "--json")
        #expect(
            (try JSONValue.parse(r.output)["results"]?.arrayValue ?? []).map { $0["thingID"]?.stringValue } == [lamp1],
            "\(r.output)")
        for args in [["remove", gw, lamp2], ["get", gw, lamp2]] {
            r = try runProgram(cli, ["end-node"] + args, environment: env)
            #expect(r.status == 1 && r.output.contains("HTTP 404 END_NODE_NOT_FOUND"), "\(args): \(r.output)")
        }

        // An unknown gateway (or another user's): 404 THING_NOT_FOUND for every call.
        for args in [
            ["list", "th.no-such-gateway"], ["get", "th.no-such-gateway", lamp1],
            ["remove", "th.no-such-gateway", lamp1],
            ["onboard", "th.no-such-gateway", "--vendor-thing-id", "LAMP-X", "--password", "p"]
        ] {
            r = try runProgram(cli, ["end-node"] + args, environment: env)
            #expect(r.status == 1 && r.output.contains("HTTP 404 THING_NOT_FOUND"), "\(args): \(r.output)")
        }
        // An end node asked of the wrong thing, and a standalone thing used as a gateway.
        r = try thingif("end-node", "get", standalone, lamp1)
        #expect(r.status == 1 && r.output.contains("HTTP 404 END_NODE_NOT_FOUND"), "\(r.output)")
        r = try thingif("end-node", "get", gw, "th.unknown-end-node")
        #expect(r.status == 1 && r.output.contains("HTTP 404 END_NODE_NOT_FOUND"), "\(r.output)")
        r = try thingif("end-node", "onboard", standalone, "--vendor-thing-id", "LAMP-Y", "--password", "p")
        #expect(r.status == 1 && r.output.contains("HTTP 409 NOT_A_GATEWAY"), "\(r.output)")
        r = try thingif("end-node", "list", standalone)
        #expect(r.status == 0 && r.output.contains("no end nodes on \(standalone)"), "\(r.output)")
        r = try thingif("end-node", "onboard", gw, "--vendor-thing-id", "AC-CLI-1", "--password", "ac-pass")
        #expect(r.status == 1 && r.output.contains("HTTP 409"), "a standalone thing's vendorThingID: \(r.output)")

        // Usage errors exit 2 before the hub is asked.
        for args in [
            ["end-node", "list"], ["end-node", "get", gw], ["end-node", "remove", gw],
            ["end-node", "onboard", gw, "--password", "p"], ["end-node", "onboard", gw, "--vendor-thing-id", "L"],
            ["end-node", "onboard", "--vendor-thing-id", "L", "--password", "p"],
            ["end-node", "onboard", gw, "--vendor-thing-id", "", "--password", "p"],
            ["end-node", "list", gw, "--limit", "0"], ["end-node", "frobnicate"],
            ["onboard", "GW-CLI-2", "pw", "--layout", "endnode"], ["onboard", "GW-CLI-2", "pw", "--layout", "hub"]
        ] {
            r = try runProgram(cli, args, environment: env)
            #expect(r.status == 2, "\(args): \(r.output)")
        }
        #expect(try thingif("onboard", "GW-CLI-2", "pw", "--layout", "endnode").output.contains("end-node onboard"))
    }
}

/// Starts `thingif-hub --memory` (or with `storeArgs`, e.g. `--db URL`) on
/// a free HTTP port as a child process and returns its PID and the HTTP URL
/// it logged (bounded: 15 s). The caller ends the child.
func startHubProcess(
    _ exe: String, broker: Broker, logPath: String, storeArgs: [String] = ["--memory"]
) throws -> (pid: pid_t, url: String) {
    // As a deployment runs it: over TLS, as the broker's admin client, with
    // the password in the environment; fast password hashes for the tests.
    let pid = try spawnChild(
        exe,
        [
            "--broker-port", "\(broker.tlsPort)", "--broker-cafile", broker.caFile,
            "--broker-username", broker.adminUsername, "--advertised-port", "\(broker.port)",
            "--advertised-tls-port", "\(broker.tlsPort)",
            "--http-port", "0", "--insecure-fast-password-hash", "--password-iterations", "1000"
        ] + storeArgs,
        environment: ["THINGIF_HUB_BROKER_PASSWORD": broker.adminPassword], logPath: logPath)
    var url: String?
    _ = poll(timeoutMs: 30_000) {
        let log = readText(logPath)
        guard log.contains("serving app"), let r = log.range(of: "HTTP API on http://") else { return false }
        url = "http://" + log[r.upperBound...].prefix { $0.isNumber || $0 == "." || $0 == ":" }
        return true
    }
    guard let url else {
        endChild(pid)
        throw HarnessError("the hub did not start: \(readText(logPath))")
    }
    return (pid, url)
}
