// SPDX-License-Identifier: Apache-2.0

// Kii's state query body of POST …/states/query, as the hub checks it
// before it reads the store (StateQueryForm.parse, the function the REST
// route calls). "now" is fixed, so a run is reproducible.
//
// Properties, beyond "no crash" (an overflow trap is one):
//  1. An accepted query reads a non-empty range from >= 0 to `to` > from,
//     and a query without a time range ("all", or an "and" of "all"s)
//     ends at now + 1.
//  2. A grouped query has a time range; bestEffortLimit, when set, is >= 1.
//  3. A refused query gives a 4xx with an errorCode and a message, and its
//     body is JSON.
//  4. jansson's memory returns to its baseline after each input.
//  5. An accepted aggregation is the one element of a grouped query
//     without paging, as sent; its field and name are 1 to 255 bytes
//     without `"` or `\`; only COUNT takes a field that is not a number.
//  6. An accepted query has one range per "range" clause of its and-tree,
//     each with a limit, some number it passes, and a field the stores can
//     path; its firmwareVersion is 1 to 255 bytes.
//  7. A refusal's invalidFields, when present, names one field, with a
//     reason, and only on a 400 INVALID_INPUT_DATA.
import CThingIF
@testable import ThingIF

private let now: Int64 = 1_767_225_600_000

func fuzzCheck(_ input: [UInt8]) {
    guard case .success(let body) = JSON.parse(input) else { return }
    switch StateQueryForm.parse(body, now: now) {
    case .failure(let e):
        if !(400..<500).contains(e.status) || e.code.isEmpty || e.message.isEmpty {
            fuzzFail("a refusal that is not a 4xx with a code and a message: \(e.status) \(e.code)", input)
        }
        guard case .success = JSON.parse(e.body.dumpBytes()) else { fuzzFail("the error body is not JSON", input) }
        if let fields = e.invalidFields {
            if fields.count != 1 || fields.values.contains(where: \.isEmpty) || e.code != "INVALID_INPUT_DATA" {
                fuzzFail("invalidFields \(fields) on \(e.status) \(e.code)", input)
            }
        }
    case .success(let q):
        if q.from < 0 || q.to <= q.from { fuzzFail("an accepted empty or negative range \(q.from)..<\(q.to)", input) }
        // The clauses of the and-tree, nested ands opened.
        func leaves(_ c: JSON?) -> [JSON] {
            guard let c else { return [] }
            guard c["type"]?.stringValue == "and" else { return [c] }
            return (c["clauses"]?.elements ?? []).flatMap(leaves)
        }
        let inner = leaves(body["query"]?["clause"])
        let timed = inner.contains { $0["type"]?.stringValue == "withinTimeRange" }
        if q.ranges.count != inner.filter({ $0["type"]?.stringValue == "range" }).count {
            fuzzFail("a range clause lost or made up", input)
        }
        for r in q.ranges {
            if r.lower == nil && r.upper == nil { fuzzFail("an accepted range without a limit", input) }
            if let lo = r.lower, let hi = r.upper, lo > hi || (lo == hi && !(r.lowerIncluded && r.upperIncluded)) {
                fuzzFail("an accepted range no number can pass", input)
            }
            if r.field.isEmpty || r.field.utf8.count > 255 || r.field.contains("\"") || r.field.contains("\\") {
                fuzzFail("an accepted range field the stores cannot path", input)
            }
        }
        if let fw = q.firmwareVersion, fw.isEmpty || fw.utf8.count > 255 {
            fuzzFail("an accepted firmwareVersion of \(fw.utf8.count) bytes", input)
        }
        if !timed && (q.from != 0 || q.to != now + 1) {
            fuzzFail("a query without a time range that is not 0..<now+1", input)
        }
        if q.grouped && !timed { fuzzFail("a grouped query without a time range", input) }
        if let l = q.limit, l < 1 { fuzzFail("an accepted bestEffortLimit below 1", input) }
        if let a = q.aggregation {
            let sent = body["query"]?["aggregations"]?.elements ?? []
            if !q.grouped || q.limit != nil || q.paginationKey != nil || sent.count != 1 {
                fuzzFail("an aggregation accepted outside a grouped query of one page", input)
            }
            if sent.first?["field"]?.stringValue != a.field || sent.first?["putAggregationInto"]?.stringValue != a.name
                || sent.first?["type"]?.stringValue != a.kind.rawValue
            {
                fuzzFail("an aggregation that is not the one sent", input)
            }
            for s in [a.field, a.name] where s.isEmpty || s.utf8.count > 255 || s.contains("\"") || s.contains("\\") {
                fuzzFail("an accepted field or name the stores cannot path", input)
            }
            if a.kind != .count && a.fieldType != .integer && a.fieldType != .decimal {
                fuzzFail("\(a.kind.rawValue) accepted on \(a.fieldType.rawValue)", input)
            }
        }
    }
}
