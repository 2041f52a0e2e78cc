// SPDX-License-Identifier: Apache-2.0

import Foundation
import Testing
import ThingIF
@testable import ThingIFHub

/// Kii's app SDK (thing-if-iOSSDK ThingIFSDKLargeTests, run against Kii's
/// own servers, so their assertions are Kii's answers) against the hub on
/// every store: the SDK's exact query bodies, the thing onboarded as its
/// OnboardedTestsBase does (no dataGroupingInterval), the uploads at the
/// times its sleeps put them. Issue 60.
@Suite("Kii state queries", .offPool)
struct KiiStateQueryTests {
    /// The aggregation suite's stores (PostgreSQL where installed), media type and alias.
    static let stores = StateAggregationTests.stores
    static let queryType = StateAggregationTests.queryType
    static let alias = StateAggregationTests.alias

    /// A hub on a fresh store, a pseudo user and a thing onboarded as
    /// OnboardedTestsBase.setUp does it: OnboardWithVendorThingIDOptions
    /// (thingType, firmwareVersion v1, STANDALONE), no dataGroupingInterval.
    struct Kii {
        let e: HubAPIEnv
        let thingID: String
        let token: String

        var states: String { "\(e.target(thingID))/states" }

        /// An upload of `state` under the alias at `at`, as the SDK's
        /// updateTargetState(ALIAS1, state:) sends it (MultipleTraitState).
        func upload(_ state: [String: Any], at: Int64) throws {
            let text = String(
                decoding: try JSONSerialization.data(withJSONObject: [KiiStateQueryTests.alias: state]), as: UTF8.self)
            try #require(e.hub.store.applyState(thingID: thingID, method: "PUT", upload: text, at: at) != nil)
        }

        func query(_ body: String, alias: Bool = true) async throws -> HTTPReply {
            let path = alias ? "\(states)/aliases/\(KiiStateQueryTests.alias)/query" : "\(states)/query"
            return try await e.call(
                "POST", path, token: token, body: Data(body.utf8), contentType: KiiStateQueryTests.queryType)
        }
    }

    func withKii(_ factory: StoreFactory, _ body: (Kii) async throws -> Void) async throws {
        let (store, cleanup) = try factory.make(.fastForTests, StateRetention())
        defer { cleanup() }
        try await withHubAPI(store: store) { e in
            let (uid, token) = try await e.user()
            let onboard =
                #"{"vendorThingID":"vid-\#(randomHexString(4))","thingPassword":"password","owner":"user:\#(uid)","thingType":"MyAirConditioner","firmwareVersion":"v1","layoutPosition":"STANDALONE"}"#
            let r = try await e.call(
                "POST", "\(e.thingIF)/onboardings", token: token, body: Data(onboard.utf8),
                contentType: "application/vnd.kii.OnboardingWithVendorThingIDByOwner+json")
            try #require(r.status == 200, "\(r.status) \(r.text)")
            try await body(Kii(e: e, thingID: try #require(r.string("thingID")), token: token))
        }
    }

    /// The states of every group, in order, without `_created`.
    static func groupedStates(_ r: HTTPReply) throws -> (groups: Int, states: [NSDictionary]) {
        try #require(r.status == 200, "\(r.status) \(r.text)")
        let groups = try #require(r.json["groupedResults"] as? [[String: Any]], "\(r.text)")
        let states = groups.flatMap { ($0["objects"] as? [[String: Any]]) ?? [] }.map { o -> NSDictionary in
            var s = o
            s["_created"] = nil
            return s as NSDictionary
        }
        return (groups.count, states)
    }

    static let airState1: [[String: Any]] = (23...26).map { ["power": true, "currentTemperature": $0] }
    static let airState2: [[String: Any]] = (17...20).map { ["power": true, "currentTemperature": $0] }

    @Test(
        "testQueryGroupedHitoryStates: without a dataGroupingInterval, 70 s of states come in one-minute groups; a range clause keeps the warm ones",
        arguments: stores)
    func groupedQuery(_ factory: StoreFactory) async throws {
        try await withKii(factory) { k in
            // Four states a second apart, sleep(60) + sleep(2), four more.
            let start = (Platform.epochMs() / 60_000 - 10) * 60_000 + 5_000
            for (i, s) in Self.airState1.enumerated() { try k.upload(s, at: start + Int64(i) * 1_000) }
            for (i, s) in Self.airState2.enumerated() { try k.upload(s, at: start + 66_000 + Int64(i) * 1_000) }
            let end = start + 70_000
            // GroupedHistoryStatesQuery(ALIAS1, timeRange: TimeRange(start, to: end)).makeJsonObject().
            let time = #"{"type":"withinTimeRange","lowerLimit":\#(start),"upperLimit":\#(end)}"#
            let all = try Self.groupedStates(try await k.query(#"{"query":{"clause":\#(time),"grouped":true}}"#))
            #expect(all.groups >= 2, "Kii: XCTAssertGreaterThanOrEqual(states!.count, 2)")
            #expect(all.states == (Self.airState1 + Self.airState2).map { $0 as NSDictionary })
            // The same with clause: RangeClauseInQuery.greaterThanOrEqualTo("currentTemperature", limit: 23),
            // and-ed with the time range (AndClauseInQuery(clause, timeRangeClause)).
            let range = #"{"type":"range","field":"currentTemperature","lowerLimit":23,"lowerIncluded":true}"#
            let warm = try Self.groupedStates(
                try await k.query(
                    #"{"query":{"clause":{"type":"and","clauses":[\#(range),\#(time)]},"grouped":true}}"#))
            #expect(warm.groups >= 1)
            #expect(warm.states == Self.airState1.map { $0 as NSDictionary }, "\(warm.states)")
            // aggregate(query, aggregation:) with the same clause: only the warm samples count.
            let count = try await k.query(
                #"{"query":{"clause":{"type":"and","clauses":[\#(range),\#(time)]},"grouped":true,"aggregations":[{"type":"COUNT","putAggregationInto":"n","field":"currentTemperature","fieldType":"INTEGER"}]}}"#
            )
            try #require(count.status == 200, "\(count.status) \(count.text)")
            let counted = (count.json["groupedResults"] as? [[String: Any]] ?? []).map {
                (($0["aggregations"] as? [[String: Any]])?.first?["value"] as? Int) ?? -1
            }
            #expect(counted == [4], "one group with the four warm states: \(count.text)")
        }
    }

    @Test(
        "ThingIFAPIAggregateTests: COUNT, MAX, MIN, SUM and MEAN of TimeRange(now, now) on a thing without a dataGroupingInterval answer the minute holding now",
        arguments: stores)
    func aggregationsOfNow(_ factory: StoreFactory) async throws {
        try await withKii(factory) { k in
            let minute = (Platform.epochMs() / 60_000 - 10) * 60_000
            // testSuccessCount/Max/Min: 23 then 26, a second apart; now a second later.
            try k.upload(["power": true, "currentTemperature": 23], at: minute + 10_000)
            try k.upload(["power": true, "currentTemperature": 26], at: minute + 11_000)
            let now = minute + 12_000
            let expected: [(String, Int)] = [("COUNT", 2), ("MAX", 26), ("MIN", 23), ("SUM", 49), ("MEAN", 25)]
            for (type, value) in expected {
                if type == "MEAN" {
                    // testSuccessMean: 22 and 28 (a thing of their own in Kii's test: the next minute here).
                    try k.upload(["power": true, "currentTemperature": 22], at: minute + 70_000)
                    try k.upload(["power": true, "currentTemperature": 28], at: minute + 71_000)
                }
                let at = type == "MEAN" ? minute + 72_000 : now
                let r = try await k.query(StateAggregationTests.iOSBody(type, "currentTemperature", "INTEGER", at: at))
                try #require(r.status == 200, "\(type): \(r.status) \(r.text)")
                let groups = try #require(r.json["groupedResults"] as? [[String: Any]], "\(r.text)")
                try #require(groups.count == 1, "\(type): Kii XCTAssertEqual(1, results?.count): \(r.text)")
                let range = try #require(groups[0]["range"] as? [String: Any])
                let from = try #require(range["from"] as? Int64), to = try #require(range["to"] as? Int64)
                #expect(from <= at && at <= to, "timeRange.from >= result.timeRange.from, to <= result's to")
                let a = (groups[0]["aggregations"] as? [[String: Any]])?.first
                #expect(a?["value"] as? Int == value, "\(type): \(r.text)")
            }
        }
    }

    @Test(
        "testSuccessQueryThingUpdateStates: an ungrouped range clause, firmwareVersion beside it, bestEffortLimit; an older firmwareVersion reads its own history",
        arguments: stores)
    func ungroupedQuery(_ factory: StoreFactory) async throws {
        try await withKii(factory) { k in
            let base = Platform.epochMs() - 60_000
            let states: [[String: Any]] = (23...26).map { ["power": true, "currentTemperature": $0] }
            for (i, s) in states.enumerated() { try k.upload(s, at: base + Int64(i) * 1_000) }
            func results(_ r: HTTPReply) throws -> [NSDictionary] {
                try #require(r.status == 200, "\(r.status) \(r.text)")
                return try #require(r.json["results"] as? [[String: Any]], "\(r.text)").map {
                    var s = $0
                    s["_created"] = nil
                    return s as NSDictionary
                }
            }
            // query2: RangeClauseInQuery.greaterThan("currentTemperature", limit: 30), firmwareVersion "v1".
            let none = try await k.query(
                #"{"query":{"clause":{"type":"range","field":"currentTemperature","lowerLimit":30,"lowerIncluded":false}},"firmwareVersion":"v1"}"#
            )
            #expect(try results(none).isEmpty && none.json["nextPaginationKey"] == nil, "\(none.text)")
            // The limits both ways (the SDK's lessThan, range): 24 < t <= 26, 24 excluded.
            let some = try await k.query(
                #"{"query":{"clause":{"type":"range","field":"currentTemperature","upperLimit":26,"upperIncluded":true,"lowerLimit":24,"lowerIncluded":false}}}"#
            )
            #expect(try results(some) == Array(states[2...]).map { $0 as NSDictionary }, "\(some.text)")
            let below = try await k.query(
                #"{"query":{"clause":{"type":"range","field":"currentTemperature","upperLimit":24.5,"upperIncluded":false}}}"#
            )
            #expect(try results(below) == Array(states[..<2]).map { $0 as NSDictionary }, "\(below.text)")
            // query3: AllClause, firmwareVersion "v1", bestEffortLimit 3: three, and a key for the rest.
            let page = try await k.query(
                #"{"query":{"clause":{"type":"all"}},"firmwareVersion":"v1","bestEffortLimit":3}"#)
            #expect(try results(page) == Array(states[..<3]).map { $0 as NSDictionary })
            // Kii's key, which the SDK's test asserts and then sends itself (query4).
            #expect(page.string("nextPaginationKey") == "100/3", "\(page.text)")
            let rest = try await k.query(#"{"query":{"clause":{"type":"all"}},"paginationKey":"100/3"}"#)
            #expect(try results(rest) == [states[3] as NSDictionary])
            #expect(rest.json["nextPaginationKey"] == nil, "\(rest.text)")
            // A cursor key the hub gave before (a sample's ID) still reads on from it.
            let cursor = try #require(
                k.e.hub.store.stateHistoryPage(thingID: k.thingID, from: 0, to: .max, after: 0, limit: 1).next)
            let fromCursor = try await k.query(
                #"{"query":{"clause":{"type":"all"}},"bestEffortLimit":2,"paginationKey":"\#(cursor)"}"#)
            #expect(try results(fromCursor) == Array(states[1...2]).map { $0 as NSDictionary })
            let nextCursor = try #require(fromCursor.string("nextPaginationKey"))
            #expect(!nextCursor.contains("/"), "a cursor key goes on as one: \(nextCursor)")
            for bad in ["100/", "/3", "1/2/3", "100/x", "-1", "100/-1", "", "100/99999999999999999999"] {
                let r = try await k.query(#"{"query":{"clause":{"type":"all"}},"paginationKey":"\#(bad)"}"#)
                #expect(r.status == 400 && r.errorCode == "INVALID_INPUT_DATA", "\(bad): \(r.status) \(r.text)")
            }
            // A range clause pages too: two of the three at or above 24, then the last.
            let ranged =
                #"{"query":{"clause":{"type":"range","field":"currentTemperature","lowerLimit":24,"lowerIncluded":true}},"bestEffortLimit":2}"#
            let r1 = try await k.query(ranged)
            #expect(try results(r1) == Array(states[1...2]).map { $0 as NSDictionary })
            let k1 = try #require(r1.string("nextPaginationKey"))
            #expect(k1 == "100/2", "the offset counts the samples the clause passed")
            let r2 = try await k.query(
                #"{"query":{"clause":{"type":"range","field":"currentTemperature","lowerLimit":24,"lowerIncluded":true}},"paginationKey":"\#(k1)"}"#
            )
            #expect(try results(r2) == [states[3] as NSDictionary])

            // query5: the thing moves to v3 (update(firmwareVersion: "v3")), whose state no
            // longer holds ALIAS1; a query naming v1 still reads the four states, one
            // naming none reads v3's aliases (404, as testFailedQueryWithNotDefinedAlias404Error).
            let fw = try await k.e.call(
                "PUT", "\(k.e.thingIF)/things/\(k.thingID)/firmware-version", token: k.token,
                body: Data(#"{"firmwareVersion":"v3"}"#.utf8),
                contentType: "application/vnd.kii.ThingFirmwareVersionUpdateRequest+json")
            #expect(fw.status == 204, "\(fw.status) \(fw.text)")
            #expect(
                k.e.hub.store.applyState(
                    thingID: k.thingID, method: "PUT", upload: #"{"HumidityAlias":{"currentHumidity":40}}"#,
                    at: base + 10_000) != nil)
            let old = try await k.query(#"{"query":{"clause":{"type":"all"}},"firmwareVersion":"v1"}"#)
            #expect(try results(old) == states.map { $0 as NSDictionary }, "\(old.text)")
            let current = try await k.query(#"{"query":{"clause":{"type":"all"}}}"#)
            #expect(current.status == 404 && current.errorCode == "TRAIT_ALIAS_NOT_FOUND", "\(current.text)")
            let named = try await k.query(#"{"query":{"clause":{"type":"all"}},"firmwareVersion":"v3"}"#)
            #expect(named.status == 404 && named.errorCode == "TRAIT_ALIAS_NOT_FOUND", "\(named.text)")

            // Without an alias the range reads the top level (the same rule, no alias).
            let top = try await k.query(
                #"{"query":{"clause":{"type":"range","field":"currentHumidity","lowerLimit":40}}}"#, alias: false)
            #expect(top.status == 200 && (top.json["results"] as? [Any])?.isEmpty == true, "\(top.text)")
        }
    }

    @Test(
        "A grouped query or aggregation over more than 60 grouping intervals is a 400 naming the clause; 60 are answered; before any upload no range is refused",
        arguments: stores)
    func intervalLimit(_ factory: StoreFactory) async throws {
        try await withKii(factory) { k in
            // testSuccessEmptyResults: TimeRange(1 s, now) of a thing with no state: no results, no error.
            let now = Platform.epochMs()
            let empty = try await k.query(
                #"{"query":{"clause":{"type":"and","clauses":[{"type":"all"},{"type":"withinTimeRange","lowerLimit":1000,"upperLimit":\#(now)}]},"grouped":true,"aggregations":[{"type":"COUNT","putAggregationInto":"count","field":"power","fieldType":"BOOLEAN"}]}}"#
            )
            #expect(empty.status == 200 && (empty.json["groupedResults"] as? [Any])?.isEmpty == true, "\(empty.text)")
            let b = (now / 60_000 - 100) * 60_000
            try k.upload(["power": true, "currentTemperature": 23], at: b + 1_000)
            // 60 whole minutes: answered.
            let sixty = #"{"type":"withinTimeRange","lowerLimit":\#(b),"upperLimit":\#(b + 60 * 60_000 - 1)}"#
            let ok = try await k.query(#"{"query":{"clause":\#(sixty),"grouped":true}}"#)
            #expect(ok.status == 200 && (ok.json["groupedResults"] as? [Any])?.count == 1, "\(ok.text)")
            // 61: Kii's SDKs document a 400 ("over 60 data grouping intervals").
            let over = #"{"type":"withinTimeRange","lowerLimit":\#(b),"upperLimit":\#(b + 60 * 60_000)}"#
            for body in [
                #"{"query":{"clause":\#(over),"grouped":true}}"#,
                #"{"query":{"clause":\#(over),"grouped":true,"aggregations":[{"type":"COUNT","putAggregationInto":"n","field":"power","fieldType":"BOOLEAN"}]}}"#
            ] {
                let r = try await k.query(body)
                #expect(r.status == 400 && r.errorCode == "INVALID_INPUT_DATA", "\(r.status) \(r.text)")
                #expect((r.json["invalidFields"] as? [String: Any])?["clause"] is String, "\(r.text)")
            }
            // Ungrouped queries have no such limit.
            let flat = try await k.query(#"{"query":{"clause":\#(over)}}"#)
            #expect(flat.status == 200 && (flat.json["results"] as? [Any])?.count == 1, "\(flat.text)")
        }
    }

    @Test(
        "Bad range clauses (one no number can pass among them) and firmwareVersions are refused with 400, the clause's field named in the message and invalidFields",
        arguments: stores)
    func refused(_ factory: StoreFactory) async throws {
        try await withKii(factory) { k in
            try k.upload(["power": true, "currentTemperature": 23], at: Platform.epochMs() - 1_000)
            let cases: [(String, String, String?)] = [
                (#"{"type":"range","field":"currentTemperature"}"#, "INVALID_INPUT_DATA", "currentTemperature"),
                (
                    #"{"type":"range","field":"currentTemperature","lowerLimit":"20"}"#, "INVALID_INPUT_DATA",
                    "currentTemperature"
                ),
                (#"{"type":"range","field":"t","upperLimit":null,"lowerLimit":null}"#, "INVALID_INPUT_DATA", "t"),
                // Ranges no number can pass: an answer of nothing would say "no such state", wrongly.
                (
                    #"{"type":"range","field":"currentTemperature","lowerLimit":30,"upperLimit":20}"#,
                    "INVALID_INPUT_DATA", "currentTemperature"
                ),
                (
                    #"{"type":"range","field":"currentTemperature","lowerLimit":23,"upperLimit":23,"upperIncluded":false}"#,
                    "INVALID_INPUT_DATA", "currentTemperature"
                ),
                (
                    #"{"type":"range","field":"t","lowerLimit":23.5,"lowerIncluded":false,"upperLimit":23.5}"#,
                    "INVALID_INPUT_DATA", "t"
                ),
                (
                    #"{"type":"and","clauses":[{"type":"range","field":"h","lowerLimit":1},{"type":"range","field":"t","lowerLimit":2,"upperLimit":1}]}"#,
                    "INVALID_INPUT_DATA", "t"
                ),
                (#"{"type":"range","field":"","lowerLimit":20}"#, "INVALID_INPUT_DATA", "clause"),
                (#"{"type":"range","lowerLimit":20}"#, "INVALID_INPUT_DATA", "clause"),
                (#"{"type":"range","field":"a\"b","lowerLimit":20}"#, "INVALID_INPUT_DATA", "field"),
                (#"{"type":"range","field":"t","lowerLimit":20,"lowerIncluded":"yes"}"#, "INVALID_INPUT_DATA", "t"),
                (#"{"type":"range","field":"t","lowerLimit":20,"alias":"X"}"#, "INVALID_INPUT_DATA", "t"),
                (#"{"type":"and","clauses":[{"type":"range","field":"t"}]}"#, "INVALID_INPUT_DATA", "t"),
                (#"{"type":"or","clauses":[{"type":"all"}]}"#, "QUERY_NOT_SUPPORTED", nil),
                (#"{"type":"and","clauses":[{"type":"eq","field":"t","value":1}]}"#, "QUERY_NOT_SUPPORTED", nil)
            ]
            for (clause, code, field) in cases {
                for alias in [true, false] {
                    let r = try await k.query(#"{"query":{"clause":\#(clause)}}"#, alias: alias)
                    #expect(r.status == 400 && r.errorCode == code, "\(clause): \(r.status) \(r.text)")
                    let fields = r.json["invalidFields"] as? [String: String]
                    #expect(fields.map { Array($0.keys) } == field.map { [$0] }, "\(clause): \(r.text)")
                    if let field, field != "clause", let message = r.string("message") {
                        #expect(message.contains(field) && fields?[field] == message, "\(clause): \(r.text)")
                    }
                }
            }
            // Equal limits both included are one number: answered, not refused.
            let one = try await k.query(
                #"{"query":{"clause":{"type":"range","field":"currentTemperature","lowerLimit":23,"upperLimit":23}}}"#)
            #expect(one.status == 200 && (one.json["results"] as? [Any])?.count == 1, "\(one.text)")
            for fw in ["1", #""""#, "[]"] {
                let r = try await k.query(#"{"query":{"clause":{"type":"all"}},"firmwareVersion":\#(fw)}"#)
                #expect(r.status == 400 && r.errorCode == "INVALID_INPUT_DATA", "\(fw): \(r.text)")
                #expect((r.json["invalidFields"] as? [String: Any])?["firmwareVersion"] is String, "\(r.text)")
            }
        }
    }

    @Test(
        "Kii answers 201 to a thing's first state upload and 204 after, to the owner's upload and the thing's over HTTP"
    )
    func firstUpload201() async throws {
        try await withKii(.memory) { k in
            // ThingIFAPI+LargeTestUtils.swift (updateTargetStates): PUT …/states, MultipleTraitState+json.
            func put(_ token: String, _ thing: String) async throws -> Int {
                try await k.e.call(
                    "PUT", "\(k.e.target(thing))/states", token: token,
                    body: Data(#"{"AirConditionerAlias":{"power":true,"currentTemperature":23}}"#.utf8),
                    contentType: "application/vnd.kii.MultipleTraitState+json"
                ).status
            }
            #expect(try await put(k.token, k.thingID) == 201)
            #expect(try await put(k.token, k.thingID) == 204)
            let uid = try #require(k.e.hub.store.user(accessToken: k.token)?.userID)
            let (other, thingToken) = try await k.e.onboard("AC-201", owner: "user:\(uid)", token: k.token)
            #expect(try await put(thingToken, other) == 201)
            #expect(try await put(thingToken, other) == 204)
            #expect(try await put(k.token, other) == 204)
        }
    }
}
