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
        "testQueryGroupedHitoryStates: without a dataGroupingInterval, 70 s of states come in one-minute groups",
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
}
