// SPDX-License-Identifier: Apache-2.0

import CThingIF
import Testing
@testable import ThingIF

private func parse(_ text: String) throws -> JSON {
    switch JSON.parse(text) {
    case .success(let j): return j
    case .failure(let e): throw e
    }
}

private func decode(_ text: String, maxSize: Int = 65536) -> Result<Command, Command.DecodeError> {
    Command.decode(Array(text.utf8), maxSize: maxSize)
}

/// The wire codec alone, without a broker.
@Suite("Wire codec")
struct CodecTests {
    @Test("Command.decode: a schema (v0) command with every field")
    func decodeSchemaCommand() throws {
        let c = try decode(
            #"{"commandID":"c1","schema":"AirConditioner-Demo","schemaVersion":1,"issuer":"user:1","title":"T","description":"D","metadata":{"k":"v"},"actions":[{"turnPower":{"power":true}},{"setPresetTemperature":{"presetTemperature":25}}]}"#
        ).get()
        #expect(c.id == "c1")
        #expect(c.shape == .schema)
        #expect(c.schema == "AirConditioner-Demo")
        #expect(c.schemaVersion == 1)
        #expect(c.issuer == "user:1")
        #expect(c.title == "T")
        #expect(c.description == "D")
        #expect(c.metadata?["k"]?.stringValue == "v")
        #expect(c.groups.count == 1)
        #expect(c.groups[0].alias == nil)
        #expect(c.groups[0].entries.map(\.name) == ["turnPower", "setPresetTemperature"])
        guard case .action(_, let params) = c.groups[0].entries[0] else {
            Issue.record("the first entry is not an action")
            return
        }
        #expect(params["power"]?.boolValue == true)
        #expect(c.actionCount == 2)
    }

    @Test("Command.decode: a trait (v1) command groups actions by alias")
    func decodeTraitCommand() throws {
        let c = try decode(
            #"{"commandID":"c2","issuer":"user:1","actions":[{"AirConditionerAlias":[{"turnPower":true},{"setPresetTemperature":25}]},{"FanAlias":[{"setFanSpeed":3}]}]}"#
        ).get()
        #expect(c.shape == .trait)
        #expect(c.schema == nil)
        #expect(c.groups.map(\.alias) == ["AirConditionerAlias", "FanAlias"])
        #expect(c.groups[0].entries.map(\.name) == ["turnPower", "setPresetTemperature"])
        guard case .action(_, let v) = c.groups[1].entries[0] else {
            Issue.record("not an action")
            return
        }
        #expect(v.intValue == 3)
    }

    @Test("Command.decode: faults with a readable commandID become invalid entries")
    func decodeInvalidEntries() throws {
        let c = try decode(#"{"commandID":"c3","schema":"S","actions":[{},{"a":1,"b":2},5,{"":{}},{"ok":{}}]}"#).get()
        let entries = c.groups[0].entries
        #expect(entries.count == 5)
        var reasons: [String] = []
        for e in entries.prefix(4) {
            guard case .invalid(_, let reason) = e else {
                Issue.record("\(e.name) should be invalid")
                continue
            }
            reasons.append(reason)
        }
        #expect(reasons.count == 4)
        #expect(reasons[0].contains("it has 0"))
        #expect(reasons[1].contains("it has 2"))
        #expect(entries[1].name == "a")
        #expect(reasons[2].contains("not an integer"))
        #expect(reasons[3].contains("name is empty"))
        guard case .action(let name, _) = entries[4] else {
            Issue.record("the last entry should be an action")
            return
        }
        #expect(name == "ok")

        for (doc, words) in [
            (#"{"commandID":"c4","actions":{}}"#, "must be an array"),
            (#"{"commandID":"c5"}"#, "\"actions\" is missing"),
            (#"{"commandID":"c6","actions":[]}"#, "\"actions\" is empty"),
            (#"{"commandID":"c7","schemaVersion":-1,"actions":[{"a":{}}]}"#, "schemaVersion"),
            (#"{"commandID":"c8","metadata":[1],"actions":[{"a":{}}]}"#, "\"metadata\" must be an object"),
            (#"{"commandID":"c9","issuer":7,"actions":[{"a":{}}]}"#, "\"issuer\" must be a string")
        ] {
            let cmd = try decode(doc).get()
            #expect(cmd.actionCount == 1, "\(doc)")
            guard case .invalid(_, let reason) = cmd.groups[0].entries[0] else {
                Issue.record("\(doc) should give one invalid entry")
                continue
            }
            #expect(reason.contains(words), "\(doc): \(reason)")
        }
    }

    @Test("Command.decode: payloads without a usable commandID fail with a reason")
    func decodeFailures() {
        let cases: [(String, String)] = [
            (#"{"actions":[]}"#, "without \"commandID\""),
            (#"{"commandID":1,"actions":[]}"#, "not a string"),
            (#"{"commandID":"","actions":[]}"#, "empty"),
            (#"{"commandID":"a/b","actions":[]}"#, "'/'"),
            (#"{"commandID":"a#","actions":[]}"#, "'#'"),
            (#"[1]"#, "an array, not a JSON object"),
            (#"{"commandID":"x""#, "not valid JSON"),
            (#"{"commandID":"x","commandID":"y","actions":[]}"#, "not valid JSON"),
            (#"{"commandID":"\#(String(repeating: "z", count: 300))","actions":[]}"#, "longer than 256")
        ]
        for (doc, words) in cases {
            switch decode(doc) {
            case .success: Issue.record("\(doc) decoded")
            case .failure(let e): #expect(e.message.contains(words), "\(doc): \(e.message)")
            }
        }
        switch decode(#"{"commandID":"c","actions":[{"a":{}}]}"#, maxSize: 10) {
        case .success: Issue.record("an oversized payload decoded")
        case .failure(let e): #expect(e.message.contains("over the limit of 10 bytes"))
        }
        switch Command.decode([0x7B, 0xFF, 0x7D], maxSize: 100) {
        case .success: Issue.record("invalid UTF-8 decoded")
        case .failure(let e): #expect(e.message.contains("not valid JSON"))
        }
    }

    @Test("Command encode/decode round trip, both shapes")
    func commandRoundTrip() throws {
        for doc in [
            #"{"commandID":"r1","schema":"S","schemaVersion":2,"issuer":"user:1","title":"t","actions":[{"a":{"x":1}},{"b":{}}]}"#,
            #"{"commandID":"r2","issuer":"user:1","actions":[{"A":[{"a":true},{"b":25}]},{"B":[{"c":null}]}]}"#
        ] {
            let c = try decode(doc).get()
            let again = try Command.decode(c.encode()).get()
            #expect(again.id == c.id)
            #expect(again.shape == c.shape)
            #expect(again.schema == c.schema)
            #expect(again.schemaVersion == c.schemaVersion)
            #expect(again.groups.map(\.alias) == c.groups.map(\.alias))
            #expect(again.groups.flatMap(\.entries).map(\.name) == c.groups.flatMap(\.entries).map(\.name))
            #expect(again.encode().dump() == c.encode().dump())
        }
    }

    @Test("JSON.quoted writes a string exactly as jansson's dump does, plain ASCII")
    func quotedMatchesJansson() throws {
        let all = String(decoding: (1..<0x80).map { UInt8($0) }, as: UTF8.self)
        for s in ["", "plain", all, "naïve ✓ 日本", "emoji 😀 and 𝄞", "\u{7F}\u{80}\u{FFFF}\u{10FFFF}", "\"\\/"] {
            let ours = String(decoding: JSON.quoted(s), as: UTF8.self)
            #expect(ours == JSON.string(s)?.dump(), "\(s.unicodeScalars.map { $0.value })")
            #expect(ours.utf8.allSatisfy { $0 < 0x80 })
            #expect(try parse("[" + ours + "]").elements.first?.stringValue == s)
        }
    }

    @Test("ActionResults.bytes and the ledger's skeleton are the exact compact JSON, built without jansson")
    func resultsBytes() throws {
        let data = JSON.object()
        data.set("t", .int(21))
        let results = ActionResults(groups: [
            ActionResults.Group(alias: nil, results: [ActionResult(name: "turnPower", succeeded: true)]),
            ActionResults.Group(
                alias: "Fan\"Alias",
                results: [
                    ActionResult(name: "setFanSpeed", succeeded: false, errorMessage: "jammed ✓\n", data: data),
                    ActionResult(name: "x", succeeded: true)
                ])
        ])
        let text = String(decoding: results.bytes(), as: UTF8.self)
        #expect(
            text
                == #"{"actionResults":[{"turnPower":{"succeeded":true}},{"Fan\"Alias":[{"setFanSpeed":{"succeeded":false,"errorMessage":"jammed \u2713\n","data":{"t":21}}},{"x":{"succeeded":true}}]}]}"#
        )
        #expect(results.encode().dump() == text, "bytes() is what jansson would write")
        #expect(String(decoding: ActionResults(groups: []).bytes(), as: UTF8.self) == #"{"actionResults":[]}"#)

        let command = try decode(
            #"{"commandID":"c","issuer":"user:u","actions":[{"A":[{"turnPower":true},{"setFanSpeed":2}]},{"B":[{"x":null}]}]}"#
        ).get()
        let skeleton = String(decoding: CommandLedger.skeleton(of: command), as: UTF8.self)
        #expect(skeleton == #"[{"alias":"A","names":["turnPower","setFanSpeed"]},{"alias":"B","names":["x"]}]"#)
    }

    @Test("ActionResults encode flat and grouped, escape every string, and decode back")
    func actionResultsRoundTrip() throws {
        let data = JSON.object()
        data.set("note", string: "naïve \"quote\"\n")
        let flat = ActionResults(groups: [
            ActionResults.Group(
                alias: nil,
                results: [
                    ActionResult(name: "turnPower", succeeded: true),
                    ActionResult(name: "setFanSpeed", succeeded: false, errorMessage: "jammed \"hard\"\t✓", data: data)
                ])
        ])
        let text = flat.encode().dump()
        #expect(
            text.hasPrefix(
                #"{"actionResults":[{"turnPower":{"succeeded":true}},{"setFanSpeed":{"succeeded":false,"errorMessage":"jammed \"hard\"\t\u2713""#
            ))
        #expect(text.utf8.allSatisfy { $0 < 0x80 }, "the payload is plain ASCII")
        let back = try #require(ActionResults.decode(try parse(text)))
        #expect(back.groups.count == 1)
        #expect(back.all.map(\.name) == ["turnPower", "setFanSpeed"])
        #expect(back.all[1].errorMessage == "jammed \"hard\"\t✓")
        #expect(back.all[1].data?["note"]?.stringValue == "naïve \"quote\"\n")

        let grouped = ActionResults(groups: [
            ActionResults.Group(
                alias: "AirConditionerAlias",
                results: [
                    ActionResult(name: "turnPower", succeeded: true),
                    .failure("setPresetTemperature", "too hot")
                ]),
            ActionResults.Group(alias: "FanAlias", results: [ActionResult(name: "setFanSpeed", succeeded: true)])
        ])
        let gtext = grouped.encode().dump()
        #expect(
            gtext
                == #"{"actionResults":[{"AirConditionerAlias":[{"turnPower":{"succeeded":true}},{"setPresetTemperature":{"succeeded":false,"errorMessage":"too hot"}}]},{"FanAlias":[{"setFanSpeed":{"succeeded":true}}]}]}"#
        )
        let gback = try #require(ActionResults.decode(try parse(gtext)))
        #expect(gback.groups.map(\.alias) == ["AirConditionerAlias", "FanAlias"])
        #expect(gback.all.map(\.succeeded) == [true, false, true])

        for bad in [
            #"{}"#, #"{"actionResults":{}}"#, #"{"actionResults":[{"a":{}}]}"#,
            #"{"actionResults":[{"a":{"succeeded":1}}]}"#,
            #"{"actionResults":[{"a":{"succeeded":true},"b":{"succeeded":true}}]}"#
        ] {
            #expect(ActionResults.decode(try parse(bad)) == nil, "\(bad)")
        }
    }

    @Test("KiiRequest / KiiResponse framing: CRLF lines, headers, empty line, body")
    func kiiFraming() throws {
        let req = KiiRequest(
            method: "PUT",
            headers: [
                ("Authorization", "Bearer tok-1"), ("Content-Type", "application/json"),
                ("X-Kii-RequestID", "r-1")
            ], body: Array(#"{"power":true}"#.utf8))
        let bytes = req.encode()
        #expect(
            String(decoding: bytes, as: UTF8.self)
                == "PUT\r\nAuthorization: Bearer tok-1\r\nContent-Type: application/json\r\nX-Kii-RequestID: r-1\r\n\r\n{\"power\":true}"
        )
        let back = try #require(KiiRequest.decode(bytes))
        #expect(back == req)
        #expect(back.bearerToken == "tok-1")
        #expect(back.requestID == "r-1")
        #expect(back.header("content-type") == "application/json")

        // Bare LF is accepted; a body may hold CRLFs of its own.
        let lf = try #require(KiiRequest.decode(Array("POST\nContent-Type: text/plain\n\nline1\r\n\r\nline2".utf8)))
        #expect(lf.method == "POST")
        #expect(String(decoding: lf.body, as: UTF8.self) == "line1\r\n\r\nline2")
        // A bare method line: no headers, no body.
        let bare = try #require(KiiRequest.decode(Array("GET".utf8)))
        #expect(bare.headers.isEmpty && bare.body.isEmpty)

        for bad in ["", "FETCH\r\n\r\n", "PUT\r\nno colon here\r\n\r\n", "PUT\r\n: empty name\r\n\r\n", "\r\n\r\nbody"]
        {
            #expect(KiiRequest.decode(Array(bad.utf8)) == nil, "\(bad.debugDescription)")
        }
        #expect(KiiRequest.decode([0x50, 0x55, 0x54, 0x0D, 0x0A, 0xFF, 0x3A, 0x20, 0x0D, 0x0A, 0x0D, 0x0A]) == nil)
        #expect(KiiRequest(method: "GET", headers: [("Authorization", "Basic abc")]).bearerToken == nil)
        // At most 64 lines before the body; header names match ASCII-case-insensitively only.
        let many = { (n: Int) in Array(("PUT\r\n" + String(repeating: "A: b\r\n", count: n) + "\r\nbody").utf8) }
        #expect(KiiRequest.decode(many(63))?.headers.count == 63)
        #expect(KiiRequest.decode(many(64)) == nil)
        let spaced = try #require(KiiRequest.decode(Array("GET \t\r\n\tX-Kii-RequestID :\t r-2 \r\n\r\n".utf8)))
        #expect(spaced.method == "GET" && spaced.requestID == "r-2" && spaced.header("x-kii-requestid") == "r-2")
        #expect(KiiRequest(method: "GET", headers: [("É", "1")]).header("é") == nil)

        let resp = KiiResponse(status: 204, headers: [("X-Kii-RequestID", "r-1")])
        let rbytes = resp.encode()
        #expect(String(decoding: rbytes, as: UTF8.self) == "204\r\nX-Kii-RequestID: r-1\r\n\r\n")
        let rback = try #require(KiiResponse.decode(rbytes))
        #expect(rback.status == 204)
        #expect(rback.isSuccess)
        #expect(rback.requestID == "r-1")
        #expect(rback.body.isEmpty)
        let err = try #require(
            KiiResponse.decode(
                Array("403\r\nContent-Type: application/json\r\n\r\n{\"errorCode\":\"WRONG_PASSWORD\"}".utf8)))
        #expect(!err.isSuccess)
        #expect(err.bodyText.contains("WRONG_PASSWORD"))
        for bad in ["abc\r\n\r\n", "99\r\n\r\n", "600\r\n\r\n", ""] {
            #expect(KiiResponse.decode(Array(bad.utf8)) == nil, "\(bad.debugDescription)")
        }
    }

    @Test("Topics: request, response and status topics; parseRequest accepts only the protocol's shape")
    func topics() {
        let t = Topics.request(clientID: "tABC", appID: "app1", path: "targets/thing:th.1/commands/c1/action-results")
        #expect(t == "p/tABC/thing-if/apps/app1/targets/thing:th.1/commands/c1/action-results")
        let parsed = Topics.parseRequest(t)
        #expect(
            parsed
                == Topics.ParsedRequest(
                    clientID: "tABC", api: .thingIF, appID: "app1",
                    path: "targets/thing:th.1/commands/c1/action-results"))
        let kii = Topics.parseRequest(
            Topics.request(clientID: "b1", api: .kii, appID: "app1", path: "installations/i1/mqtt-endpoint"))
        #expect(kii?.api == .kii)
        #expect(kii?.path == "installations/i1/mqtt-endpoint")
        #expect(Topics.parseRequest("p/c/thing-if/apps/app1/onboardings")?.path == "onboardings")

        for bad in [
            "", "p", "p/c/thing-if/apps/app1", "p/c/thing-if/apps/app1/", "q/c/thing-if/apps/app1/onboardings",
            "p//thing-if/apps/app1/onboardings", "p/c/other/apps/app1/onboardings", "p/c/thing-if/app/app1/onboardings",
            "p/c/thing-if/apps//onboardings", "p/c/resp", "p/c/status"
        ] {
            #expect(Topics.parseRequest(bad) == nil, "\(bad)")
        }
        #expect(Topics.response(clientID: "tABC") == "p/tABC/resp")
        #expect(Topics.status(clientID: "tABC") == "p/tABC/status")
        #expect(Topics.parseStatus("p/tABC/status") == "tABC")
        #expect(Topics.parseStatus("p/tABC/resp") == nil)
        #expect(Topics.parseStatus("p//status") == nil)
        #expect(Topics.parseStatus("p/tABC/status/x") == nil)
        #expect(Topics.parseStatus("p/tABC/thing-if/apps/app1/targets/thing:tABC/states") == nil)
        #expect(Topics.parseStatus("status") == nil)
        // Requests are shared among hubs; status messages reach every hub.
        let shared = Topics.hubSubscriptions(shared: true)
        #expect(shared.filter { $0.hasPrefix("$share/thingif-hub/p/+/") }.count == 2)
        #expect(shared.contains("p/+/status") && shared.contains("p/+/end-nodes/+/status"))
        // An end node's status: the gateway's client ID and the end node, single safe levels.
        #expect(Topics.endNodeStatus(clientID: "tG", endNode: "th.e1") == "p/tG/end-nodes/th.e1/status")
        #expect(Topics.parseEndNodeStatus("p/tG/end-nodes/th.e1/status")! == ("tG", "th.e1"))
        for bad in [
            "p/tG/end-nodes/th.e1/commands", "p/tG/end-nodes//status", "p//end-nodes/e/status", "p/tG/status",
            "p/tG/end-nodes/th.e1/status/x", "q/tG/end-nodes/e/status", "p/tG/endnodes/e/status",
            "p/tG/end-nodes/+/status", "p/tG/end-nodes/#/status", "p/tG/thing-if/apps/a/status"
        ] {
            #expect(Topics.parseEndNodeStatus(bad) == nil, "\(bad)")
        }
        // An end node's commands and membership events: one rule for the three leaves.
        #expect(Topics.endNodeCommands(clientID: "tG", endNode: "th.e1") == "p/tG/end-nodes/th.e1/commands")
        #expect(Topics.endNodeEvents(clientID: "tG", endNode: "th.e1") == "p/tG/end-nodes/th.e1/events")
        #expect(Topics.endNodeEvents(clientID: "tG", endNode: "+") == "p/tG/end-nodes/+/events")
        #expect(Topics.parseEndNodeCommands("p/tG/end-nodes/th.e1/commands")! == ("tG", "th.e1"))
        #expect(Topics.parseEndNodeEvents("p/tG/end-nodes/th.e1/events")! == ("tG", "th.e1"))
        for bad in [
            "p/tG/end-nodes/th.e1/commands", "p/tG/end-nodes/th.e1/status", "p/tG/end-nodes//events",
            "p//end-nodes/e/events", "p/tG/end-nodes/th.e1/events/x", "p/tG/end-nodes/+/events",
            "p/tG/end-nodes/#/events", "q/tG/end-nodes/e/events"
        ] {
            #expect(Topics.parseEndNodeEvents(bad) == nil, "\(bad)")
        }
        #expect(Topics.parseEndNodeCommands("p/tG/end-nodes/th.e1/events") == nil)
        // No hub subscription takes them: they are the hub's to write only.
        #expect(!Topics.hubSubscriptions(shared: true).contains { $0.hasSuffix("/events") })
        #expect(!Topics.hubSubscriptions(shared: false).contains { $0.hasPrefix("$share/") })
        #expect(Topics.isSafeLevel("cmd-1"))
        for bad in ["", "a/b", "a+b", "a#", "a\u{0}b", String(repeating: "x", count: 257)] {
            #expect(!Topics.isSafeLevel(bad), "\(bad.debugDescription)")
        }
    }

    @Test("Onboarding answer and stored identity decode what they encode; bad endpoints are refused")
    func onboardingMessages() throws {
        let ep = MQTTEndpoint(
            installationID: "i1", host: "127.0.0.1", portTCP: 1883, portSSL: 8883, username: "th.1",
            password: "tok", mqttTopic: "tTOPIC", ttl: 100)
        let answer = OnboardingResponse(thingID: "th.1", accessToken: "tok", mqttEndpoint: ep)
        let again = try #require(OnboardingResponse.decode(try parse(answer.encode().dump())))
        #expect(again.thingID == "th.1")
        #expect(again.mqttEndpoint == ep)
        let id = Identity(appID: "app1", vendorThingID: "AC-1", thingID: "th.1", accessToken: "tok", endpoint: ep)
        #expect(Identity.decode(try parse(id.encode().dump())) == id)

        #expect(MQTTEndpoint.decode(try parse(#"{"installationID":"i","mqttTopic":"a/b"}"#)) == nil)
        #expect(MQTTEndpoint.decode(try parse(#"{"installationID":"i","mqttTopic":"t","portTCP":70000}"#)) == nil)
        #expect(
            OnboardingResponse.decode(
                try parse(
                    #"{"thingID":"th/1","accessToken":"t","mqttEndpoint":{"installationID":"i","mqttTopic":"t"}}"#))
                == nil)

        let req = OnboardingRequest(
            vendorThingID: "AC-1", thingPassword: "pw", thingType: "AirConditioner",
            firmwareVersion: "1.0", thingProperties: try parse(#"{"m":"Acme"}"#))
        let rback = try #require(OnboardingRequest.decode(try parse(req.encode().dump())))
        #expect(rback.vendorThingID == "AC-1")
        #expect(rback.thingProperties?["m"]?.stringValue == "Acme")
        #expect(rback.layoutPosition == .standalone)
        #expect(
            OnboardingRequest.decode(try parse(#"{"vendorThingID":"v","thingPassword":"p","thingProperties":[1]}"#))
                == nil)
        #expect(OnboardingRequest.decode(try parse(#"{"vendorThingID":"","thingPassword":"p"}"#)) == nil)
    }

    @Test("HandlerRegistry lookup order, without a broker")
    func handlerRegistry() {
        let cb: thingif_action_cb = { _, _ in }
        func h(_ n: Int) -> HandlerRegistry.Handler {
            .init(callback: cb, userdata: UnsafeMutableRawPointer(bitPattern: n))
        }
        func tag(_ r: HandlerRegistry, schema: String?, version: Int, alias: String? = nil, _ action: String) -> Int? {
            r.lookup(schema: schema, version: version, alias: alias, action: action).map {
                Int(bitPattern: $0.userdata)
            }
        }
        var r = HandlerRegistry()
        #expect(tag(r, schema: "S", version: 1, "a") == nil)
        r.setCatchAll(h(4))
        r.setSchema(nil, version: 0, action: "a", h(3))
        r.setSchema("S", version: 0, action: "a", h(2))
        r.setSchema("S", version: 1, action: "a", h(1))
        r.setAlias("A", action: "a", h(5))
        #expect(tag(r, schema: "S", version: 1, "a") == 1)
        #expect(tag(r, schema: "S", version: 7, "a") == 2)
        #expect(tag(r, schema: "T", version: 1, "a") == 3)
        #expect(tag(r, schema: nil, version: 0, "a") == 3)
        #expect(tag(r, schema: "S", version: 1, "b") == 4)
        #expect(tag(r, schema: nil, version: 0, alias: "A", "a") == 5)
        #expect(tag(r, schema: nil, version: 0, alias: "B", "a") == 3)
        r.setSchema("S", version: 1, action: "a", nil)
        #expect(tag(r, schema: "S", version: 1, "a") == 2)
        r.setCatchAll(nil)
        #expect(tag(r, schema: "S", version: 1, "b") == nil)
    }

    @Test("A payload that cannot be decoded still gives its commandID when the first bytes hold a safe one")
    func recoverCommandID() {
        func id(_ text: String, maxSize: Int = 65536) -> String? {
            guard case .failure(let e) = Command.decode(Array(text.utf8), maxSize: maxSize) else { return "decoded" }
            return e.commandID
        }
        let big = #"{"commandID":"c-1","actions":[{"a":{"pad":"\#(String(repeating: "x", count: 300))"}}]}"#
        #expect(id(big, maxSize: 100) == "c-1")
        #expect(id(#"{"commandID" : "c-2", "actions":["#) == "c-2")
        #expect(id(#"{"actions":[1],"commandID":"c-3""#) == "c-3")
        for bad in [
            #"{"actions":["#,  // none
            #"{"commandID":"a/b","actions":["#,  // a topic separator
            #"{"commandID":"a+b","#, #"{"commandID":"a#","#,
            #"{"commandID":"a\"b","#,  // an escape
            #"{"commandID":"","actions":["#,  // empty
            #"{"commandID":7,"actions":["#,  // not a string
            #"{"commandID":"unterminated"#,
            #"{"title":"\"commandID\":\"x\"","actions":["#,  // inside another string
            #"{"commandID":"\#(String(repeating: "i", count: 257))","#
        ] {
            #expect(id(bad) == nil, "\(bad)")
        }
        // Only the first bytes are read.
        #expect(id("{" + String(repeating: " ", count: 1100) + #""commandID":"late","#) == nil)
        var latin1 = Array(#"{"commandID":"c-4","title":""#.utf8)
        latin1 += [0xC9, 0xFF]
        guard case .failure(let e) = Command.decode(latin1, maxSize: 65536) else { Issue.record("decoded"); return }
        #expect(e.commandID == "c-4")
    }

    @Test("Every action failed, in the command's layout; the dropped body has no results and the reason")
    func allFailedAndDropped() throws {
        let c = try decode(
            #"{"commandID":"c","actions":[{"AC":[{"turnPower":{"power":true}},{"setFanSpeed":{"fanSpeed":1}}]},{"Light":[{"on":{}}]}]}"#
        ).get()
        let failed = ActionResults.allFailed(c, message: "dropped").encode().dump()
        #expect(
            failed
                == #"{"actionResults":[{"AC":[{"turnPower":{"succeeded":false,"errorMessage":"dropped"}},{"setFanSpeed":{"succeeded":false,"errorMessage":"dropped"}}]},{"Light":[{"on":{"succeeded":false,"errorMessage":"dropped"}}]}]}"#
        )
        let body = ActionResults.dropped(reason: "too big")
        #expect(body.dump() == #"{"actionResults":[],"errorMessage":"too big"}"#)
        #expect(ActionResults.decode(body)?.all.isEmpty == true)
    }
}
