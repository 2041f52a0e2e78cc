// SPDX-License-Identifier: Apache-2.0

import Testing
@testable import ThingIF
@testable import ThingIFHub

/// The pure forms of the app API that the REST routes and the fuzz targets
/// share (fuzz/onboarding_form.swift, fuzz/end_node_onboarding_form.swift,
/// fuzz/state_query.swift): what each accepts and refuses, without a hub.
@Suite("Request forms")
struct RequestFormTests {
    private func json(_ s: String) throws -> JSON {
        guard case .success(let j) = JSON.parse(Array(s.utf8)) else { throw ParseFailed() }
        return j
    }

    private struct ParseFailed: Error {}

    @Test("Onboarding by owner: both of Kii's forms, read and re-read the same")
    func onboardingAccepted() throws {
        let v = try json(
            #"{"vendorThingID":"AC-1","thingPassword":"pw","owner":"user:u1","thingType":"AC","dataGroupingInterval":"1_HOUR"}"#
        )
        let form = try OnboardingForm.parse(v, byThingID: false).get()
        #expect(
            form.thing == .vendorThingID("AC-1") && form.owner == "user:u1" && form.dataGroupingInterval == "1_HOUR")
        #expect(try OnboardingForm.parse(form.encode(), byThingID: false).get() == form)
        // A thingID and no vendorThingID is the second form, media type or not.
        let t = try json(#"{"thingID":"th.1","thingPassword":"pw","owner":"group:g1"}"#)
        #expect(try OnboardingForm.parse(t, byThingID: false).get().thing == .thingID("th.1"))
        #expect(try OnboardingForm.parse(t, byThingID: true).get().thing == .thingID("th.1"))
    }

    @Test("Onboarding by owner: each bad field gets a 400 that names it")
    func onboardingRefused() throws {
        let long = String(repeating: "x", count: 201)
        let cases: [(String, Bool, String)] = [
            (#"[1]"#, false, "JSON object"),
            (#"{"thingPassword":"pw","owner":"user:u"}"#, false, "vendorThingID"),
            (#"{"vendorThingID":"v","owner":"user:u"}"#, false, "thingPassword"),
            (#"{"vendorThingID":"v","thingPassword":"pw"}"#, false, "owner"),
            (#"{"vendorThingID":"v","thingPassword":"pw","owner":"u"}"#, false, "typed ID"),
            (#"{"vendorThingID":"","thingPassword":"pw","owner":"user:u"}"#, false, "1 to 200"),
            (#"{"vendorThingID":"\#(long)","thingPassword":"pw","owner":"user:u"}"#, false, "1 to 200"),
            (#"{"vendorThingID":"v","thingPassword":"\#(long)","owner":"user:u"}"#, false, "1 to 200"),
            (#"{"vendorThingID":"v","thingPassword":7,"owner":"user:u"}"#, false, "must be a string"),
            (#"{"vendorThingID":"v","thingPassword":"p","owner":"user:u","thingType":"\#(long)"}"#, false, "thingType"),
            (
                #"{"vendorThingID":"v","thingPassword":"p","owner":"user:u","dataGroupingInterval":"2_DAYS"}"#, false,
                "dataGroupingInterval"
            ),
            (#"{"vendorThingID":"v","thingPassword":"p","owner":"user:u"}"#, true, "thingID"),
            (#"{"thingID":"","thingPassword":"p","owner":"user:u"}"#, true, "1 to 200")
        ]
        for (body, byThingID, words) in cases {
            guard case .failure(let e) = OnboardingForm.parse(try json(body), byThingID: byThingID) else {
                Issue.record("accepted: \(body)")
                continue
            }
            #expect(e.status == 400 && e.code == "INVALID_INPUT_DATA", "\(body)")
            #expect(e.message.contains(words), "\(body): \(e.message)")
        }
    }

    @Test("End-node onboarding: both of Kii's forms, the owner's type in any case, properties as object or text")
    func endNodeOnboardingAccepted() throws {
        let android = try json(
            #"{"gatewayThingID":"th.gw","endNodeVendorThingID":"L-1","endNodePassword":"pw","owner":"USER:u.1","endNodeThingType":"Lamp","endNodeFirmwareVersion":"1.0","endNodeThingProperties":{"room":"hall"}}"#
        )
        let form = try EndNodeOnboardingForm.parse(android, byGatewayVendorThingID: false).get()
        #expect(form.gateway == .thingID("th.gw") && form.vendorThingID == "L-1" && form.password == "pw")
        #expect(form.owner == "user:u.1" && form.thingType == "Lamp" && form.firmwareVersion == "1.0")
        #expect(form.thingProperties == #"{"room":"hall"}"#)
        #expect(try EndNodeOnboardingForm.parse(form.encode(), byGatewayVendorThingID: false).get() == form)
        let kiiGo = try json(
            #"{"gatewayVendorThingID":"GW-1","endNodeVendorThingID":"L-2","endNodePassword":"pw","owner":"gRoUp:g.1","endNodeThingProperties":"{\"room\":\"hall\"}"}"#
        )
        let text = try EndNodeOnboardingForm.parse(kiiGo, byGatewayVendorThingID: true).get()
        #expect(text.gateway == .vendorThingID("GW-1") && text.owner == "group:g.1")
        #expect(text.thingProperties == #"{"room":"hall"}"# && text.thingType == nil)
        #expect(try EndNodeOnboardingForm.parse(text.encode(), byGatewayVendorThingID: true).get() == text)
        // No owner is read as none (the gateway's own onboarding may name none).
        let bare = try json(#"{"gatewayThingID":"th.gw","endNodeVendorThingID":"L-3","endNodePassword":"pw"}"#)
        #expect(try EndNodeOnboardingForm.parse(bare, byGatewayVendorThingID: false).get().owner == nil)
    }

    @Test("A missing or ill-typed string field is named in Kii's invalidFields, {field: why}")
    func invalidFields() throws {
        for (body, field) in [
            (#"{"vendorThingID":"v","owner":"user:u"}"#, "thingPassword"),
            (#"{"vendorThingID":"v","thingPassword":7,"owner":"user:u"}"#, "thingPassword"),
            (#"{"thingPassword":"pw","owner":"user:u"}"#, "vendorThingID")
        ] {
            guard case .failure(let e) = OnboardingForm.parse(try json(body), byThingID: false) else {
                Issue.record("accepted: \(body)")
                continue
            }
            // Kii's shape (thing-if-JSSDK test/small/PushOpsTest.ts): "invalidFields":{"<field>":"<why>"}.
            #expect(e.code == "INVALID_INPUT_DATA" && e.invalidFields == [field: e.message], "\(body): \(e)")
            #expect(e.body["invalidFields"]?[field]?.stringValue == e.message, "\(body)")
        }
        #expect(HubError.invalid("no field").body["invalidFields"] == nil, "none when no one field is at fault")
    }

    /// The refusal of `body`, which must be a 400 INVALID_INPUT_DATA whose
    /// invalidFields is {field: message} (nil: none, no one field at fault).
    private func expectNamed<T>(_ r: Result<T, HubError>, _ field: String?, _ body: String) {
        guard case .failure(let e) = r else {
            Issue.record("accepted: \(body)")
            return
        }
        #expect(e.status == 400 && e.code == "INVALID_INPUT_DATA", "\(body): \(e)")
        #expect(e.invalidFields == field.map { [$0: e.message] }, "\(body): \(e)")
        #expect(e.body["invalidFields"]?.count == (field == nil ? nil : 1), "\(body)")
    }

    @Test("Onboarding forms: every refusal of one field names it in invalidFields, the hub's message kept")
    func onboardingInvalidFields() throws {
        let long = String(repeating: "x", count: 201)
        let owner: [(String, Bool, String?)] = [
            (#"[1]"#, false, nil),
            (#"{"vendorThingID":"","thingPassword":"pw","owner":"user:u"}"#, false, "vendorThingID"),
            (#"{"vendorThingID":"v","thingPassword":"\#(long)","owner":"user:u"}"#, false, "thingPassword"),
            (#"{"vendorThingID":"v","thingPassword":"pw","owner":"u"}"#, false, "owner"),
            (#"{"vendorThingID":"v","thingPassword":"p","owner":"user:u","thingType":"\#(long)"}"#, false, "thingType"),
            (
                #"{"vendorThingID":"v","thingPassword":"p","owner":"user:u","firmwareVersion":"\#(long)"}"#, false,
                "firmwareVersion"
            ),
            (
                #"{"vendorThingID":"v","thingPassword":"p","owner":"user:u","dataGroupingInterval":"2_DAYS"}"#, false,
                "dataGroupingInterval"
            ),
            (
                #"{"vendorThingID":"v","thingPassword":"p","owner":"user:u","layoutPosition":"ENDNODE"}"#, false,
                "layoutPosition"
            ),
            (#"{"thingID":"","thingPassword":"p","owner":"user:u"}"#, true, "thingID")
        ]
        for (body, byThingID, field) in owner {
            expectNamed(OnboardingForm.parse(try json(body), byThingID: byThingID), field, body)
        }
        let base = #""endNodeVendorThingID":"v","endNodePassword":"p""#
        let endNode: [(String, Bool, String?)] = [
            (#"[1]"#, false, nil),
            (#"{\#(base)}"#, false, "gatewayThingID"),
            (#"{"gatewayThingID":"",\#(base)}"#, false, "gatewayThingID"),
            (#"{"gatewayVendorThingID":"\#(long)",\#(base)}"#, true, "gatewayVendorThingID"),
            (
                #"{"gatewayThingID":"g","endNodeVendorThingID":"\#(long)","endNodePassword":"p"}"#, false,
                "endNodeVendorThingID"
            ),
            (#"{"gatewayThingID":"g","endNodeVendorThingID":"v","endNodePassword":""}"#, false, "endNodePassword"),
            (#"{"gatewayThingID":"g",\#(base),"owner":"thing:x"}"#, false, "owner"),
            (#"{"gatewayThingID":"g",\#(base),"endNodeThingType":"\#(long)"}"#, false, "endNodeThingType"),
            (#"{"gatewayThingID":"g",\#(base),"endNodeFirmwareVersion":"\#(long)"}"#, false, "endNodeFirmwareVersion"),
            (#"{"gatewayThingID":"g",\#(base),"endNodeThingProperties":"[1]"}"#, false, "endNodeThingProperties")
        ]
        for (body, byVendor, field) in endNode {
            expectNamed(EndNodeOnboardingForm.parse(try json(body), byGatewayVendorThingID: byVendor), field, body)
        }
    }

    @Test("Trigger forms: every refusal of one field names it in invalidFields")
    func triggerInvalidFields() throws {
        let command = #"{"schema":"AC","schemaVersion":1,"issuer":"user:u1","actions":[{"turnPower":{"power":true}}]}"#
        let states = #""eventSource":"STATES","triggersWhen":"CONDITION_TRUE""#
        let eq = #"{"type":"eq","field":"power","value":true}"#
        let cases: [(String, String?)] = [
            (#"[]"#, nil),
            (#"{"command":\#(command)}"#, "predicate"),
            (#"{"predicate":{"eventSource":7},"command":\#(command)}"#, "eventSource"),
            (#"{"predicate":{"eventSource":"WEATHER"},"command":\#(command)}"#, "eventSource"),
            (#"{"predicate":{"eventSource":"STATES","condition":\#(eq)},"command":\#(command)}"#, "triggersWhen"),
            (#"{"predicate":{\#(states)},"command":\#(command)}"#, "condition"),
            (#"{"predicate":{\#(states),"condition":{"type":"eq","field":"p"}},"command":\#(command)}"#, "condition"),
            (#"{"predicate":{"eventSource":"SCHEDULE"},"command":\#(command)}"#, "schedule"),
            (#"{"predicate":{"eventSource":"SCHEDULE_ONCE","scheduleAt":"soon"},"command":\#(command)}"#, "scheduleAt"),
            (#"{"predicate":{"eventSource":"SCHEDULE_ONCE","scheduleAt":5},"command":\#(command)}"#, "scheduleAt"),
            (#"{"predicate":{\#(states),"condition":\#(eq)},"serverCode":{"endpoint":"f"}}"#, "serverCode"),
            (#"{"predicate":{\#(states),"condition":\#(eq)}}"#, "command"),
            (#"{"predicate":{\#(states),"condition":\#(eq)},"command":\#(command),"title":7}"#, "title"),
            (#"{"predicate":{\#(states),"condition":\#(eq)},"command":\#(command),"description":[]}"#, "description"),
            (#"{"predicate":{\#(states),"condition":\#(eq)},"command":\#(command),"metadata":1}"#, "metadata")
        ]
        for (body, field) in cases {
            let r = TriggerForm.definition(
                try json(body), now: 1000, issuerAllowed: { _ in true }, checkCommand: { _ in nil })
            expectNamed(r, field, body)
        }
    }

    @Test("End-node onboarding: each bad field gets a 400 that names it")
    func endNodeOnboardingRefused() throws {
        let long = String(repeating: "x", count: 201)
        let base = #""endNodeVendorThingID":"v","endNodePassword":"p""#
        let cases: [(String, Bool, String)] = [
            (#"[1]"#, false, "JSON object"),
            (#"{\#(base)}"#, false, "gatewayThingID"),
            (#"{"gatewayThingID":"th.gw",\#(base)}"#, true, "gatewayVendorThingID"),
            (#"{"gatewayThingID":"",\#(base)}"#, false, "gatewayThingID must be 1 to 200"),
            (#"{"gatewayThingID":"\#(long)",\#(base)}"#, false, "gatewayThingID must be 1 to 200"),
            (#"{"gatewayThingID":"g","endNodePassword":"p"}"#, false, "endNodeVendorThingID"),
            (#"{"gatewayThingID":"g","endNodeVendorThingID":"v"}"#, false, "endNodePassword"),
            (#"{"gatewayThingID":"g","endNodeVendorThingID":"\#(long)","endNodePassword":"p"}"#, false, "1 to 200"),
            (#"{"gatewayThingID":"g","endNodeVendorThingID":"v","endNodePassword":""}"#, false, "endNodePassword"),
            (#"{"gatewayThingID":"g",\#(base),"owner":"u.1"}"#, false, "typed ID"),
            (#"{"gatewayThingID":"g",\#(base),"owner":"thing:x"}"#, false, "typed ID"),
            (#"{"gatewayThingID":"g",\#(base),"owner":"user:"}"#, false, "typed ID"),
            (#"{"gatewayThingID":"g",\#(base),"owner":"uſer:u"}"#, false, "typed ID"),
            (#"{"gatewayThingID":"g",\#(base),"owner":7}"#, false, "owner"),
            (#"{"gatewayThingID":"g",\#(base),"endNodeThingType":"\#(long)"}"#, false, "endNodeThingType"),
            (#"{"gatewayThingID":"g",\#(base),"endNodeFirmwareVersion":1}"#, false, "endNodeFirmwareVersion"),
            (#"{"gatewayThingID":"g",\#(base),"endNodeThingProperties":[1]}"#, false, "endNodeThingProperties"),
            (#"{"gatewayThingID":"g",\#(base),"endNodeThingProperties":"[1]"}"#, false, "endNodeThingProperties"),
            (#"{"gatewayThingID":"g",\#(base),"endNodeThingProperties":"{"}"#, false, "endNodeThingProperties")
        ]
        for (body, byVendor, words) in cases {
            guard case .failure(let e) = EndNodeOnboardingForm.parse(try json(body), byGatewayVendorThingID: byVendor)
            else {
                Issue.record("accepted: \(body)")
                continue
            }
            #expect(e.status == 400 && e.code == "INVALID_INPUT_DATA", "\(body)")
            #expect(e.message.contains(words), "\(body): \(e.message)")
        }
    }

    @Test("State query: all ends now, a time range includes its upper limit, the options are read")
    func stateQueryAccepted() throws {
        let all = try StateQueryForm.parse(try json(#"{"query":{"clause":{"type":"all"}}}"#), now: 5000).get()
        #expect(all == StateQueryForm(from: 0, to: 5001, grouped: false, limit: nil, paginationKey: nil))
        let range = try StateQueryForm.parse(
            try json(
                #"{"query":{"grouped":true,"clause":{"type":"withinTimeRange","lowerLimit":10,"upperLimit":20}},"bestEffortLimit":3,"paginationKey":"7"}"#
            ), now: 5000
        ).get()
        #expect(range == StateQueryForm(from: 10, to: 21, grouped: true, limit: 3, paginationKey: "7"))
    }

    @Test("State query: range clauses, top-level or in nested ands, read by the triggers' rule; firmwareVersion kept")
    func stateQueryRanges() throws {
        let q = try StateQueryForm.parse(
            try json(
                #"{"query":{"grouped":true,"clause":{"type":"and","clauses":[{"type":"range","field":"t","lowerLimit":23,"lowerIncluded":false},{"type":"and","clauses":[{"type":"range","field":"h","upperLimit":40.5},{"type":"withinTimeRange","lowerLimit":10,"upperLimit":20}]}]}},"firmwareVersion":"v1"}"#
            ), now: 5000
        ).get()
        #expect(q.from == 10 && q.to == 21 && q.grouped && q.firmwareVersion == "v1")
        #expect(
            q.ranges == [
                StateRange(field: "t", lower: 23, lowerIncluded: false, upper: nil, upperIncluded: true),
                StateRange(field: "h", lower: nil, lowerIncluded: true, upper: 40.5, upperIncluded: true)
            ])
        // The rule: a limit included unless its flag is false; numbers only; of the alias's state.
        let state = #"{"A":{"t":23,"h":40.5},"t":24,"h":1}"#
        #expect(!StateRange.admit(q.ranges, state: state, alias: "A"), "t = 23 is not > 23")
        #expect(StateRange.admit(q.ranges, state: state, alias: nil))
        #expect(!StateRange.admit(q.ranges, state: #"{"t":"24","h":1}"#, alias: nil), "a string is no number")
        #expect(!StateRange.admit(q.ranges, state: #"{"h":1}"#, alias: nil), "a missing field matches nothing")
        let top = try StateQueryForm.parse(
            try json(#"{"query":{"clause":{"type":"range","field":"t","upperLimit":5}}}"#), now: 5000
        ).get()
        #expect(top.from == 0 && top.to == 5001 && top.ranges.count == 1 && !top.grouped)
        // Equal limits, both included: one number passes, so it is a range.
        let one = try StateQueryForm.parse(
            try json(#"{"query":{"clause":{"type":"range","field":"t","lowerLimit":5,"upperLimit":5}}}"#), now: 5000
        ).get()
        #expect(one.ranges == [StateRange(field: "t", lower: 5, lowerIncluded: true, upper: 5, upperIncluded: true)])
        #expect(StateRange.admit(one.ranges, state: #"{"t":5}"#, alias: nil))
    }

    @Test(
        "State query: a range clause no number can pass, or with no number limit, is a 400 that names the clause's field"
    )
    func stateQueryEmptyRanges() throws {
        let cases: [(String, String)] = [
            (#"{"type":"range","field":"temp","lowerLimit":30,"upperLimit":20}"#, "above upperLimit"),
            (#"{"type":"range","field":"temp","lowerLimit":20.5,"upperLimit":20.25}"#, "above upperLimit"),
            (#"{"type":"range","field":"temp","lowerLimit":20,"upperLimit":20,"upperIncluded":false}"#, "both 20"),
            (#"{"type":"range","field":"temp","lowerLimit":20,"lowerIncluded":false,"upperLimit":20}"#, "both 20"),
            (
                #"{"type":"range","field":"temp","lowerLimit":-1.5,"lowerIncluded":false,"upperLimit":-1.5,"upperIncluded":false}"#,
                "both -1.5"
            ),
            (#"{"type":"range","field":"temp"}"#, "upperLimit, lowerLimit or both"),
            (#"{"type":"range","field":"temp","lowerLimit":null}"#, "upperLimit, lowerLimit or both"),
            (#"{"type":"range","field":"temp","lowerLimit":"20"}"#, "\"lowerLimit\" must be a number"),
            (#"{"type":"range","field":"temp","upperLimit":true}"#, "\"upperLimit\" must be a number"),
            (#"{"type":"range","field":"temp","upperLimit":[1]}"#, "\"upperLimit\" must be a number"),
            (
                #"{"type":"and","clauses":[{"type":"range","field":"h","upperLimit":1},{"type":"and","clauses":[{"type":"range","field":"temp","lowerLimit":2,"upperLimit":1}]}]}"#,
                "above upperLimit"
            )
        ]
        for (clause, words) in cases {
            guard case .failure(let e) = StateQueryForm.parse(try json(#"{"query":{"clause":\#(clause)}}"#), now: 5000)
            else {
                Issue.record("accepted: \(clause)")
                continue
            }
            #expect(e.status == 400 && e.code == "INVALID_INPUT_DATA", "\(clause): \(e)")
            #expect(e.message.contains("range on temp") && e.message.contains(words), "\(clause): \(e.message)")
            // Kii's shape (thing-if-JSSDK test/small/PushOpsTest.ts): "invalidFields":{"<field>":"<why>"}.
            #expect(e.invalidFields == ["temp": e.message], "\(clause): \(e)")
            #expect(e.body["invalidFields"]?["temp"]?.stringValue == e.message, "\(clause)")
        }
    }

    @Test("Server triggers read ranges by the same rule: one no number can pass is refused, naming its field")
    func triggerEmptyRanges() throws {
        let command =
            #""command":{"schema":"AC","schemaVersion":1,"issuer":"user:u1","actions":[{"turnPower":{"power":true}}]}"#
        func definition(_ condition: String) -> Result<JSON, HubError> {
            let body =
                #"{"predicate":{"eventSource":"STATES","triggersWhen":"CONDITION_TRUE","condition":\#(condition)},\#(command)}"#
            guard let j = try? json(body) else { return .failure(.invalid("the test's JSON")) }
            return TriggerForm.definition(j, now: 0, issuerAllowed: { _ in true }, checkCommand: { _ in nil })
        }
        for condition in [
            #"{"type":"range","field":"temp","alias":"AC","lowerLimit":30,"upperLimit":20}"#,
            #"{"type":"not","clause":{"type":"range","field":"temp","lowerLimit":20,"upperLimit":20,"lowerIncluded":false}}"#,
            #"{"type":"or","clauses":[{"type":"eq","field":"p","value":1},{"type":"range","field":"temp","upperLimit":"9"}]}"#
        ] {
            guard case .failure(let e) = definition(condition) else {
                Issue.record("accepted: \(condition)")
                continue
            }
            #expect(e.code == "INVALID_INPUT_DATA" && e.message.contains("temp"), "\(condition): \(e)")
            #expect(e.invalidFields == ["temp": e.message], "\(condition): \(e)")
        }
        // A malformed condition that has no field names the predicate's condition.
        guard case .failure(let e) = definition(#"{"type":"like"}"#) else {
            Issue.record("accepted: like")
            return
        }
        #expect(e.invalidFields == ["condition": e.message], "\(e)")
        let both = #"{"type":"range","field":"temp","lowerLimit":20,"upperLimit":20}"#
        #expect((try? definition(both).get()) != nil, "equal limits, both included, are one number")
    }

    @Test("State query: each bad body gets a 4xx, the largest upper limit included")
    func stateQueryRefused() throws {
        let cases: [(String, String)] = [
            (#"{}"#, "INVALID_INPUT_DATA"),
            (#"{"query":{"clause":{"type":"eq","field":"a","value":1}}}"#, "QUERY_NOT_SUPPORTED"),
            (#"{"query":{"clause":{"type":"all"},"aggregations":[{}]}}"#, "INVALID_INPUT_DATA"),
            (#"{"query":{"clause":{"type":"and","clauses":[{"type":"eq"}]}}}"#, "QUERY_NOT_SUPPORTED"),
            (#"{"query":{"grouped":true,"clause":{"type":"all"}}}"#, "INVALID_INPUT_DATA"),
            (#"{"query":{"clause":{"type":"withinTimeRange","lowerLimit":6,"upperLimit":5}}}"#, "INVALID_INPUT_DATA"),
            (#"{"query":{"clause":{"type":"withinTimeRange","lowerLimit":-1,"upperLimit":5}}}"#, "INVALID_INPUT_DATA"),
            (
                #"{"query":{"clause":{"type":"withinTimeRange","lowerLimit":0,"upperLimit":9223372036854775807}}}"#,
                "INVALID_INPUT_DATA"
            ),
            (#"{"query":{"grouped":1,"clause":{"type":"all"}}}"#, "INVALID_INPUT_DATA"),
            (#"{"query":{"clause":{"type":"all"}},"bestEffortLimit":0}"#, "INVALID_INPUT_DATA"),
            (#"{"query":{"clause":{"type":"all"}},"paginationKey":[]}"#, "INVALID_INPUT_DATA")
        ]
        for (body, code) in cases {
            guard case .failure(let e) = StateQueryForm.parse(try json(body), now: 5000) else {
                Issue.record("accepted: \(body)")
                continue
            }
            #expect(e.status == 400 && e.code == code, "\(body): \(e.code)")
        }
    }
}
