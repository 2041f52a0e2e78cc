// SPDX-License-Identifier: Apache-2.0

import Foundation
import Testing
import ThingIF
@testable import ThingIFHub

/// Kii's grouped state queries with an aggregation, on every store: the
/// requests as Kii's SDKs send them, the answers as they parse them, and
/// what the store computes (one SQL statement on SQLite and PostgreSQL,
/// Swift on MemoryStore).
@Suite("State aggregations", .offPool)
struct StateAggregationTests {
    /// MemoryStore (the hub tests' usual store), SQLite, and PostgreSQL where installed (always in CI).
    static let stores: [StoreFactory] = [.memory, .sqlite] + (PostgresServer.enabled ? [.postgres] : [])
    static let queryType = "application/vnd.kii.TraitStateQueryRequest+json"
    static let alias = "AirConditionerAlias"

    /// A hub on a fresh store of `factory`, a user and its air conditioner
    /// (grouping interval 1_MINUTE), and the start of a minute well past.
    struct Aircon {
        let e: HubAPIEnv
        let thingID: String
        let token: String
        let base: Int64

        var query: String { "\(e.target(thingID))/states/aliases/\(StateAggregationTests.alias)/query" }

        /// An upload of the thing at `at`: its whole state, nested by trait alias.
        func upload(_ temperature: Any?, at: Int64, power: Bool = true) throws {
            var ac: [String: Any] = ["power": power]
            if let temperature { ac["currentTemperature"] = temperature }
            let state: [String: Any] = [StateAggregationTests.alias: ac, "HumidityAlias": ["currentHumidity": 60]]
            let text = String(decoding: try JSONSerialization.data(withJSONObject: state), as: UTF8.self)
            try #require(e.hub.store.applyState(thingID: thingID, method: "PUT", upload: text, at: at) != nil)
        }

        func post(_ body: String) async throws -> HTTPReply {
            try await e.call("POST", query, token: token, body: Data(body.utf8), contentType: queryType)
        }
    }

    func withAircon(_ factory: StoreFactory, _ body: (Aircon) async throws -> Void) async throws {
        let (store, cleanup) = try factory.make(.fastForTests, StateRetention())
        defer { cleanup() }
        try await withHubAPI(store: store) { e in
            let (uid, token) = try await e.user()
            let (tid, _) = try await e.onboard("AC-AGG-1", owner: "user:\(uid)", token: token, interval: "1_MINUTE")
            let base = (Platform.epochMs() / 60_000 - 10) * 60_000
            try await body(Aircon(e: e, thingID: tid, token: token, base: base))
        }
    }

    /// iOS GroupedHistoryStatesQuery.makeJsonObject with AllClause (Kii's live
    /// tests): the caller's clause and-ed with the time range.
    static func iOSBody(_ type: String, _ field: String, _ fieldType: String, at t: Int64) -> String {
        #"{"query":{"clause":{"type":"and","clauses":[{"type":"all"},{"type":"withinTimeRange","lowerLimit":\#(t),"upperLimit":\#(t)}]},"grouped":true,"aggregations":[{"type":"\#(type)","putAggregationInto":"\#(type.lowercased())","field":"\#(field)","fieldType":"\#(fieldType)"}]}}"#
    }

    /// The one aggregation of each groupedResults element: (range, aggregations).
    static func groups(_ r: HTTPReply) throws -> [(range: [String: Any], aggregations: [[String: Any]])] {
        try #require(r.status == 200, "\(r.status) \(r.text)")
        let list = try #require(r.json["groupedResults"] as? [[String: Any]], "\(r.text)")
        return try list.map {
            (
                try #require($0["range"] as? [String: Any]),
                try #require($0["aggregations"] as? [[String: Any]], "\(r.text)")
            )
        }
    }

    @Test(
        "Kii's live aggregate tests replayed: 23 then 26 give COUNT 2, MAX 26 and MIN 23 with their samples, SUM 49; 22 and 28 MEAN 25",
        arguments: stores)
    func kiiLiveTests(_ factory: StoreFactory) async throws {
        try await withAircon(factory) { ac in
            let b = ac.base
            // iOS ThingIFSDKLargeTests/ThingIFAPIAggregateTests.swift: two states a second
            // apart, then one aggregation of TimeRange(now, now): the interval holding now.
            try ac.upload(23, at: b + 10_000)
            try ac.upload(26, at: b + 11_000)
            let now = b + 12_000
            func one(_ type: String) async throws -> [String: Any] {
                let r = try await ac.post(Self.iOSBody(type, "currentTemperature", "INTEGER", at: now))
                let g = try Self.groups(r)
                try #require(g.count == 1, "\(type): \(r.text)")
                let from = try #require(g[0].range["from"] as? Int64), to = try #require(g[0].range["to"] as? Int64)
                #expect(from <= now && now <= to, "the interval encloses the instant asked")
                #expect(from == b && to == b + 60_000, "\(g[0].range)")
                try #require(g[0].aggregations.count == 1, "\(r.text)")
                let a = g[0].aggregations[0]
                #expect(a["name"] as? String == type.lowercased(), "name is putAggregationInto: \(a)")
                return a
            }
            let count = try await one("COUNT")
            #expect(count["value"] as? Int == 2 && count["object"] == nil, "\(count)")
            let max = try await one("MAX")
            #expect(max["value"] as? Int == 26, "\(max)")
            let maxObject = try #require(max["object"] as? [String: Any], "\(max)")
            #expect(
                NSDictionary(dictionary: maxObject)
                    == NSDictionary(dictionary: ["power": true, "currentTemperature": 26, "_created": b + 11_000]),
                "the second sample, the alias's state only: \(maxObject)")
            let min = try await one("MIN")
            #expect(min["value"] as? Int == 23, "\(min)")
            let minObject = try #require(min["object"] as? [String: Any], "\(min)")
            #expect(
                NSDictionary(dictionary: minObject)
                    == NSDictionary(dictionary: ["power": true, "currentTemperature": 23, "_created": b + 10_000]))
            let sum = try await one("SUM")
            #expect(sum["value"] as? Int == 49 && sum["object"] == nil, "\(sum)")

            // testSuccessMean: 22 and 28, in the next minute (a thing of their own in Kii's test).
            try ac.upload(22, at: b + 70_000)
            try ac.upload(28, at: b + 71_000)
            let r = try await ac.post(Self.iOSBody("MEAN", "currentTemperature", "INTEGER", at: b + 72_000))
            let mean = try Self.groups(r)
            #expect(mean.count == 1 && mean.first?.aggregations.first?["value"] as? Int == 25, "\(r.text)")
            #expect(mean.first?.aggregations.first?["object"] == nil)
            #expect(
                r.text.contains(#""value":25"#) && !r.text.contains("25.0"), "a whole mean is written as an integer")
        }
    }

    @Test(
        "Samples in two grouping intervals give two groupedResults, on the grouped query's intervals; an interval without samples is not listed",
        arguments: stores)
    func twoIntervals(_ factory: StoreFactory) async throws {
        try await withAircon(factory) { ac in
            let b = ac.base
            try ac.upload(23, at: b + 10_000)
            try ac.upload(26, at: b + 11_000)
            try ac.upload(22, at: b + 70_000)
            try ac.upload(28, at: b + 71_000)
            // Minute 2 has none; minute 3 one without the field.
            try ac.upload(nil, at: b + 190_000, power: false)
            // KiiPlatform/thing-if-JSSDK test/small/QueryOps/AggregateQueryTest.ts: no caller
            // clause (the time range alone), firmwareVersion beside the query.
            let range = #""clause":{"type":"withinTimeRange","lowerLimit":\#(b),"upperLimit":\#(b + 239_999)}"#
            let r = try await ac.post(
                #"{"query":{"grouped":true,\#(range),"aggregations":[{"type":"MAX","field":"currentTemperature","fieldType":"INTEGER","putAggregationInto":"max"}]},"firmwareVersion":"v1"}"#
            )
            let g = try Self.groups(r)
            #expect(g.map { $0.range["from"] as? Int64 } == [b, b + 60_000, b + 180_000], "\(r.text)")
            #expect(g.map { $0.range["to"] as? Int64 } == [b + 60_000, b + 120_000, b + 240_000])
            #expect(g.map { $0.aggregations.first?["value"] as? Int } == [26, 28, nil])
            #expect(
                g.map { ($0.aggregations.first?["object"] as? [String: Any])?["_created"] as? Int64 } == [
                    b + 11_000, b + 71_000, nil
                ])
            #expect(g.last?.aggregations.isEmpty == true, "no number in the interval: \"aggregations\":[]")
            // COUNT: the interval without the field counts 0.
            let count = try Self.groups(
                try await ac.post(
                    #"{"query":{"grouped":true,\#(range),"aggregations":[{"type":"COUNT","field":"currentTemperature","fieldType":"INTEGER","putAggregationInto":"n"}]}}"#
                ))
            #expect(count.map { $0.aggregations.first?["value"] as? Int } == [2, 2, 0])
            // The grouped query without an aggregation: the same intervals.
            let plain = try await ac.post(#"{"query":{"grouped":true,\#(range)}}"#)
            try #require(plain.status == 200, "\(plain.text)")
            let objects = try #require(plain.json["groupedResults"] as? [[String: Any]])
            #expect(
                objects.map { ($0["range"] as? [String: Any])?["from"] as? Int64 }
                    == g.map { $0.range["from"] as? Int64 })
            // Kii's testSuccessEmptyResults (COUNT of a BOOLEAN): no samples in the range, no groups
            // (ten minutes here: the thing has samples, so Kii's 1970..now would pass the limit of
            // 60 intervals; KiiStateQueryTests asks it of a thing with none).
            let empty = try await ac.post(
                #"{"query":{"grouped":true,"clause":{"type":"withinTimeRange","lowerLimit":\#(b - 600_000),"upperLimit":\#(b - 1)},"aggregations":[{"type":"COUNT","putAggregationInto":"count","field":"power","fieldType":"BOOLEAN"}]}}"#
            )
            #expect(try Self.groups(empty).isEmpty, "\(empty.text)")
        }
    }

    @Test("Each malformed aggregation is refused with 400 and an error body, and changes nothing", arguments: stores)
    func refused(_ factory: StoreFactory) async throws {
        try await withAircon(factory) { ac in
            let b = ac.base
            try ac.upload(23, at: b + 10_000)
            let stateBefore = ac.e.hub.store.thing(id: ac.thingID)?.state
            let samplesBefore = ac.e.hub.store.stateHistory(thingID: ac.thingID, from: 0, to: .max).count
            let time = #""clause":{"type":"withinTimeRange","lowerLimit":\#(b),"upperLimit":\#(b + 59_999)}"#
            func grouped(_ aggregations: String, extra: String = "") -> String {
                #"{"query":{"grouped":true,\#(time),"aggregations":\#(aggregations)}\#(extra)}"#
            }
            func one(_ type: String, _ field: String = "currentTemperature", _ fieldType: String = "INTEGER") -> String
            {
                #"[{"type":\#(type),"putAggregationInto":"x","field":\#(field),"fieldType":\#(fieldType)}]"#
            }
            let max = one(#""MAX""#, #""currentTemperature""#, #""INTEGER""#)
            let cases: [(String, String, String)] = [
                (
                    "not an array",
                    grouped(#"{"type":"MAX","putAggregationInto":"max","field":"f","fieldType":"INTEGER"}"#),
                    "INVALID_INPUT_DATA"
                ),
                ("none", grouped("[]"), "INVALID_INPUT_DATA"),
                (
                    "two",
                    grouped(
                        #"[{"type":"MAX","putAggregationInto":"max","field":"f","fieldType":"INTEGER"},{"type":"MIN","putAggregationInto":"min","field":"f","fieldType":"INTEGER"}]"#
                    ), "INVALID_INPUT_DATA"
                ),
                ("not an object", grouped("[1]"), "INVALID_INPUT_DATA"),
                ("unknown type", grouped(one(#""MEDIAN""#, #""f""#, #""INTEGER""#)), "INVALID_INPUT_DATA"),
                ("lower-case type", grouped(one(#""max""#, #""f""#, #""INTEGER""#)), "INVALID_INPUT_DATA"),
                ("type not a string", grouped(one("5", #""f""#, #""INTEGER""#)), "INVALID_INPUT_DATA"),
                (
                    "no type", grouped(#"[{"putAggregationInto":"x","field":"f","fieldType":"INTEGER"}]"#),
                    "INVALID_INPUT_DATA"
                ),
                ("no name", grouped(#"[{"type":"MAX","field":"f","fieldType":"INTEGER"}]"#), "INVALID_INPUT_DATA"),
                (
                    "empty name",
                    grouped(#"[{"type":"MAX","putAggregationInto":"","field":"f","fieldType":"INTEGER"}]"#),
                    "INVALID_INPUT_DATA"
                ),
                (
                    "name not a string",
                    grouped(#"[{"type":"MAX","putAggregationInto":1,"field":"f","fieldType":"INTEGER"}]"#),
                    "INVALID_INPUT_DATA"
                ),
                (
                    "no field", grouped(#"[{"type":"MAX","putAggregationInto":"x","fieldType":"INTEGER"}]"#),
                    "INVALID_INPUT_DATA"
                ),
                ("field not a string", grouped(one(#""MAX""#, "[]", #""INTEGER""#)), "INVALID_INPUT_DATA"),
                ("empty field", grouped(one(#""MAX""#, #""""#, #""INTEGER""#)), "INVALID_INPUT_DATA"),
                ("field with a quote", grouped(one(#""MAX""#, #""a\"b""#, #""INTEGER""#)), "INVALID_INPUT_DATA"),
                ("field with a backslash", grouped(one(#""MAX""#, #""a\\b""#, #""INTEGER""#)), "INVALID_INPUT_DATA"),
                ("unknown fieldType", grouped(one(#""MAX""#, #""f""#, #""STRING""#)), "INVALID_INPUT_DATA"),
                (
                    "no fieldType", grouped(#"[{"type":"COUNT","putAggregationInto":"x","field":"f"}]"#),
                    "INVALID_INPUT_DATA"
                ),
                ("SUM of a BOOLEAN", grouped(one(#""SUM""#, #""power""#, #""BOOLEAN""#)), "INVALID_INPUT_DATA"),
                ("MEAN of an OBJECT", grouped(one(#""MEAN""#, #""f""#, #""OBJECT""#)), "INVALID_INPUT_DATA"),
                ("MAX of an ARRAY", grouped(one(#""MAX""#, #""f""#, #""ARRAY""#)), "INVALID_INPUT_DATA"),
                ("MIN of a BOOLEAN", grouped(one(#""MIN""#, #""power""#, #""BOOLEAN""#)), "INVALID_INPUT_DATA"),
                ("not grouped", #"{"query":{\#(time),"aggregations":\#(max)}}"#, "INVALID_INPUT_DATA"),
                (
                    "grouped false", #"{"query":{"grouped":false,\#(time),"aggregations":\#(max)}}"#,
                    "INVALID_INPUT_DATA"
                ),
                ("bestEffortLimit", grouped(max, extra: #","bestEffortLimit":5"#), "INVALID_INPUT_DATA"),
                ("paginationKey", grouped(max, extra: #","paginationKey":"1""#), "INVALID_INPUT_DATA"),
                (
                    "a field clause inside the and",
                    #"{"query":{"grouped":true,"clause":{"type":"and","clauses":[{"type":"eq","field":"power","value":true},{"type":"withinTimeRange","lowerLimit":\#(b),"upperLimit":\#(b + 1)}]},"aggregations":\#(max)}}"#,
                    "QUERY_NOT_SUPPORTED"
                ),
                (
                    "two time ranges in the and",
                    #"{"query":{"grouped":true,"clause":{"type":"and","clauses":[{"type":"withinTimeRange","lowerLimit":1,"upperLimit":2},{"type":"withinTimeRange","lowerLimit":\#(b),"upperLimit":\#(b + 1)}]},"aggregations":\#(max)}}"#,
                    "INVALID_INPUT_DATA"
                )
            ]
            for (what, body, code) in cases {
                let r = try await ac.post(body)
                #expect(r.status == 400 && r.errorCode == code && r.isErrorBody, "\(what): \(r.status) \(r.text)")
            }
            #expect(ac.e.hub.store.thing(id: ac.thingID)?.state == stateBefore)
            #expect(ac.e.hub.store.stateHistory(thingID: ac.thingID, from: 0, to: .max).count == samplesBefore)
            // COUNT takes any fieldType (Kii's live COUNT of a BOOLEAN).
            let count = try Self.groups(try await ac.post(grouped(one(#""COUNT""#, #""power""#, #""BOOLEAN""#))))
            #expect(count.first?.aggregations.first?["value"] as? Int == 1)
        }
    }

    @Test(
        "The store: numbers only (strings, booleans, null, objects passed over), decimals, ties to the earliest, a flat state, one bucket without an interval",
        arguments: StoreFactory.all)
    func storeRules(_ factory: StoreFactory) throws {
        let (store, cleanup) = try factory.make(.fastForTests, StateRetention())
        defer { cleanup() }
        let tid = try store.registerThing(
            vendorThingID: "AC-AGG-S", password: "pw", thingType: "AirConditioner", firmwareVersion: nil,
            dataGroupingInterval: "1_MINUTE", layoutPosition: nil
        ).get().thingID
        let b: Int64 = 1_800_000_000_000 - 1_800_000_000_000 % 60_000
        let values: [(Int64, String)] = [
            (b + 1_000, "22.5"), (b + 2_000, #""30""#), (b + 3_000, "true"), (b + 4_000, "null"),
            (b + 5_000, #"{"v":99}"#), (b + 6_000, "[99]"), (b + 7_000, "23"), (b + 8_000, "23"),
            (b + 9_000, "-1.25")
        ]
        for (at, v) in values {
            let upload = #"{"A":{"t":\#(v),"température":\#(v)},"t":\#(v)}"#
            try #require(store.applyState(thingID: tid, method: "PUT", upload: upload, at: at) != nil)
        }
        // The same time twice: upload order decides.
        try #require(store.applyState(thingID: tid, method: "PUT", upload: #"{"A":{"t":23.0}}"#, at: b + 8_000) != nil)
        try #require(store.applyState(thingID: tid, method: "PUT", upload: #"{"B":{"t":1}}"#, at: b + 30_000) != nil)
        // The next minute: one sample.
        try #require(store.applyState(thingID: tid, method: "PUT", upload: #"{"A":{"t":7}}"#, at: b + 61_000) != nil)

        func run(_ kind: AggregationKind, alias: String? = "A", field: String = "t", bucket: Int64? = 60_000)
            throws -> [AggregateBucket]
        {
            try #require(
                store.aggregateStates(
                    thingID: tid, alias: alias, field: field, kind: kind, from: b, to: b + 120_000, bucketMs: bucket),
                "\(factory) \(kind)")
        }
        func valuesOf(_ buckets: [AggregateBucket]) -> [AggregateValue?] { buckets.map(\.value) }

        // Numbers of minute 0: 22.5, 23, 23, -1.25, 23.0; non-null: 9 (the 10th, "B" only, has none).
        #expect(valuesOf(try run(.count)) == [.integer(9), .integer(1)])
        #expect(valuesOf(try run(.sum)) == [.decimal(90.25), .integer(7)])
        #expect(valuesOf(try run(.mean)) == [.decimal(18.05), .integer(7)])
        let max = try run(.max)
        #expect(valuesOf(max) == [.integer(23), .integer(7)])
        #expect(max.first?.sample?.at == b + 7_000, "ties: the earliest sample")
        let min = try run(.min)
        #expect(valuesOf(min) == [.decimal(-1.25), .integer(7)])
        #expect(min.first?.sample?.at == b + 9_000 && min.first?.sample?.state.contains("-1.25") == true)
        let counts = try run(.count)
        #expect(counts.map(\.from) == [b, b + 60_000] && counts.map(\.to) == [b + 60_000, b + 120_000])
        // A key beyond ASCII (stored escaped by the hub's JSON writer).
        #expect(valuesOf(try run(.max, field: "température")) == [.integer(23), nil])
        // The whole state's top-level field (the …/states/query route).
        #expect(valuesOf(try run(.sum, alias: nil)) == [.decimal(67.25), nil])
        // No interval: the range is one bucket.
        let whole = try run(.count, bucket: nil)
        #expect(whole.count == 1 && whole.first?.from == b && whole.first?.to == b + 120_000)
        #expect(whole.first?.value == .integer(10))
        // No samples: no buckets; an alias no sample has: COUNT 0, MAX no value.
        #expect(
            store.aggregateStates(
                thingID: tid, alias: "A", field: "t", kind: .count, from: 0, to: b, bucketMs: 60_000)?.isEmpty == true)
        #expect(valuesOf(try run(.max, alias: "Nope")) == [nil, nil])
        #expect(valuesOf(try run(.count, alias: "Nope")) == [.integer(0), .integer(0)])
    }

    @Test("The form reads the iOS SDK's and-clause and the JS SDK's time range, and keeps the aggregation")
    func form() throws {
        let ios = try JSON.parse(Self.iOSBody("MAX", "currentTemperature", "INTEGER", at: 5000)).get()
        let q = try StateQueryForm.parse(ios, now: 9000).get()
        #expect(q.from == 5000 && q.to == 5001 && q.grouped)
        #expect(
            q.aggregation
                == StateAggregation(kind: .max, field: "currentTemperature", fieldType: .integer, name: "max"))
        // An and of "all" only is all time.
        let all = try StateQueryForm.parse(
            try JSON.parse(#"{"query":{"clause":{"type":"and","clauses":[{"type":"all"}]}}}"#).get(), now: 9000
        ).get()
        #expect(all.from == 0 && all.to == 9001 && all.aggregation == nil)
    }
}
