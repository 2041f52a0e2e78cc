// SPDX-License-Identifier: Apache-2.0

import Testing
@testable import ThingIF
@testable import ThingIFHub

/// The pure forms of the app API that the REST routes and the fuzz targets
/// share (fuzz/onboarding_form.swift, fuzz/state_query.swift): what each
/// accepts and refuses, without a hub.
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
