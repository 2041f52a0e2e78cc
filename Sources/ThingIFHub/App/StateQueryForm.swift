// SPDX-License-Identifier: Apache-2.0

import ThingIF

/// Kii's state query body (POST …/states/query and
/// …/states/aliases/{alias}/query):
/// {"query":{"clause":<clause>,"grouped"?,"aggregations"?},"firmwareVersion"?,
/// "bestEffortLimit"?,"paginationKey"?}, checked. The clause is "all",
/// "withinTimeRange" ({"lowerLimit","upperLimit"}) or an "and" of those
/// (Kii's SDKs and-in the time range: iOS's AllClause gives
/// {"type":"and","clauses":[{"type":"all"},{"type":"withinTimeRange",…}]}).
/// Pure (no store, no hub), so the REST route and the state_query fuzz
/// target share it.
public struct StateQueryForm: Equatable, Sendable {
    /// Samples from `from` (inclusive) to `to` (exclusive), epoch ms.
    public var from: Int64
    public var to: Int64
    public var grouped: Bool
    /// bestEffortLimit: at most so many samples (nil: the hub's page).
    public var limit: Int?
    public var paginationKey: String?
    /// The one aggregation of a grouped query (nil: the samples themselves).
    public var aggregation: StateAggregation? = nil

    /// Reads and checks a body; `now` (epoch ms) ends an "all" clause.
    public static func parse(_ body: JSON, now: Int64) -> Result<StateQueryForm, HubError> {
        guard body.isObject, let query = body["query"], query.isObject, let clause = query["clause"],
            clause.isObject
        else { return .failure(.invalid("\"query\" must be {\"clause\":{\"type\":…}}")) }
        var form = StateQueryForm(from: 0, to: now + 1, grouped: false, limit: nil, paginationKey: nil)
        let range: (from: Int64, to: Int64)?
        switch timeRange(clause) {
        case .failure(let e): return .failure(e)
        case .success(let r): range = r
        }
        if let range { (form.from, form.to) = range }
        if let g = query["grouped"], !g.isNull {
            guard let b = g.boolValue else { return .failure(.invalid("\"grouped\" must be true or false")) }
            form.grouped = b
        }
        if form.grouped && range == nil {
            return .failure(.invalid("a grouped query needs a withinTimeRange clause"))
        }
        if let v = body["bestEffortLimit"], !v.isNull {
            guard let n = v.intValue, n > 0 else {
                return .failure(.invalid("bestEffortLimit must be a positive integer"))
            }
            form.limit = n
        }
        do throws(HubError) {
            form.paginationKey = try FormFields.optionalString(body, "paginationKey")
            if let a = query["aggregations"], !a.isNull {
                form.aggregation = try StateAggregation.parse(a)
                guard form.grouped else { throw HubError.invalid("aggregations need a grouped query") }
                guard form.limit == nil && form.paginationKey == nil else {
                    throw HubError.invalid(
                        "an aggregated query answers in one page: no bestEffortLimit or paginationKey")
                }
            }
        } catch {
            return .failure(error)
        }
        return .success(form)
    }

    /// The clause's time range [from, to) (nil: all time), or why it is refused.
    static func timeRange(_ clause: JSON) -> Result<(from: Int64, to: Int64)?, HubError> {
        switch clause["type"]?.stringValue {
        case "all": return .success(nil)
        case "withinTimeRange":
            // The upper limit is inclusive, so it must leave room for +1.
            // Equal limits are one millisecond (Kii's SDKs send
            // TimeRange(now, now) to aggregate "the interval of now").
            guard let lo = clause["lowerLimit"]?.int64Value, let hi = clause["upperLimit"]?.int64Value, lo >= 0,
                lo <= hi, hi < Int64.max
            else {
                return .failure(.invalid("withinTimeRange needs integer lowerLimit <= upperLimit (milliseconds)"))
            }
            return .success((lo, hi + 1))
        case "and":
            // Only "all" and one withinTimeRange inside: the and the SDKs
            // build around a caller's clause that is "all".
            let clauses = clause["clauses"]?.elements ?? []
            guard !clauses.isEmpty else { return .failure(.invalid("an and clause needs a non-empty \"clauses\"")) }
            var range: (from: Int64, to: Int64)?
            for c in clauses {
                guard c.isObject, let type = c["type"]?.stringValue else {
                    return .failure(.invalid("each of \"clauses\" must be {\"type\":…}"))
                }
                guard type == "all" || type == "withinTimeRange" else {
                    return .failure(
                        .queryNotSupported("clause type \(type) is not supported inside and: all or withinTimeRange"))
                }
                switch timeRange(c) {
                case .failure(let e): return .failure(e)
                case .success(nil): break
                case .success(let r?):
                    if range != nil { return .failure(.invalid("an and clause takes one withinTimeRange")) }
                    range = r
                }
            }
            return .success(range)
        case let type?:
            return .failure(.queryNotSupported("clause type \(type) is not supported: all, withinTimeRange or and"))
        case nil:
            return .failure(.invalid("\"query\" must be {\"clause\":{\"type\":…}}"))
        }
    }
}

/// What a grouped query's aggregation computes per grouping interval.
public enum AggregationKind: String, CaseIterable, Sendable {
    /// Samples whose field holds a value other than null.
    case count = "COUNT"
    case sum = "SUM"
    /// The smallest number; the answer also gives the sample holding it.
    case min = "MIN"
    /// The largest number; the answer also gives the sample holding it.
    case max = "MAX"
    /// The arithmetic mean of the numbers.
    case mean = "MEAN"

    /// Whether the answer gives the sample that holds the value (Kii's `object`).
    public var picksSample: Bool { self == .min || self == .max }
}

/// One element of a grouped query's "aggregations" (Kii's SDKs send one):
/// {"type":"MAX","putAggregationInto":"max","field":"currentTemperature","fieldType":"INTEGER"}.
public struct StateAggregation: Equatable, Sendable {
    public enum FieldType: String, CaseIterable, Sendable {
        case integer = "INTEGER", decimal = "DECIMAL", boolean = "BOOLEAN", object = "OBJECT", array = "ARRAY"
    }

    public var kind: AggregationKind
    /// A top-level field of the (alias's) state.
    public var field: String
    public var fieldType: FieldType
    /// putAggregationInto: the answer's `name` of the value.
    public var name: String

    public init(kind: AggregationKind, field: String, fieldType: FieldType, name: String) {
        self.kind = kind
        self.field = field
        self.fieldType = fieldType
        self.name = name
    }

    /// The longest field and name accepted, in UTF-8 bytes.
    public static let maxNameBytes = 255

    /// Reads `query.aggregations`: an array of exactly one aggregation.
    static func parse(_ list: JSON) throws(HubError) -> StateAggregation {
        guard list.isArray, list.count == 1, let a = list.elements.first, a.isObject else {
            throw HubError.invalid("\"aggregations\" must be an array of one aggregation object")
        }
        let types = AggregationKind.allCases.map(\.rawValue).joined(separator: ", ")
        guard let kind = AggregationKind(rawValue: try FormFields.requiredString(a, "type")) else {
            throw HubError.invalid("an aggregation's \"type\" must be one of \(types)")
        }
        let fieldTypes = FieldType.allCases.map(\.rawValue).joined(separator: ", ")
        guard let fieldType = FieldType(rawValue: try FormFields.requiredString(a, "fieldType")) else {
            throw HubError.invalid("an aggregation's \"fieldType\" must be one of \(fieldTypes)")
        }
        let field = try FormFields.requiredString(a, "field")
        let name = try FormFields.requiredString(a, "putAggregationInto")
        try checkName(field, "field")
        try checkName(name, "putAggregationInto")
        if kind != .count && fieldType != .integer && fieldType != .decimal {
            throw HubError.invalid("\(kind.rawValue) needs an INTEGER or DECIMAL field, not \(fieldType.rawValue)")
        }
        return StateAggregation(kind: kind, field: field, fieldType: fieldType, name: name)
    }

    /// 1 to 255 bytes, without `"` or `\`, which SQLite's JSON paths
    /// cannot name (the SQL stores read the field by its path).
    public static func checkName(_ s: String, _ key: String) throws(HubError) {
        guard !s.isEmpty, s.utf8.count <= maxNameBytes, !s.contains("\""), !s.contains("\\") else {
            throw HubError.invalid("\"\(key)\" must be 1 to \(maxNameBytes) bytes without \" or \\")
        }
    }
}
