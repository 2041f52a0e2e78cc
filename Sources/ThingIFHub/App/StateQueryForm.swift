// SPDX-License-Identifier: Apache-2.0

import ThingIF

// The fuzz target compiles ThingIFRules' files into its own module.
#if canImport(ThingIFRules)
    import ThingIFRules
#endif

/// Kii's state query body (POST …/states/query and
/// …/states/aliases/{alias}/query):
/// {"query":{"clause":<clause>,"grouped"?,"aggregations"?},"firmwareVersion"?,
/// "bestEffortLimit"?,"paginationKey"?}, checked. The clause is "all",
/// "withinTimeRange" ({"lowerLimit","upperLimit"}), "range" (on a field of
/// the state) or an "and" of those (Kii's SDKs and-in the time range:
/// iOS's AllClause gives {"type":"and","clauses":[{"type":"all"},
/// {"type":"withinTimeRange",…}]}, a range clause
/// {"type":"and","clauses":[{"type":"range",…},{"type":"withinTimeRange",…}]}).
/// Pure (no store, no hub), so the REST route and the state_query fuzz
/// target share it; every store reads `ranges` by `StateRange`'s one rule.
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
    /// The range clauses every sample must pass (and-ed).
    public var ranges: [StateRange] = []
    /// The firmware version the query names (Kii: whose trait definitions
    /// it is read against; nil: the thing's own).
    public var firmwareVersion: String? = nil

    /// The longest firmwareVersion accepted, in UTF-8 bytes.
    public static let maxFirmwareVersionBytes = 255
    /// How deep "and" clauses nest.
    public static let maxClauseDepth = 8

    /// Reads and checks a body; `now` (epoch ms) ends an "all" clause.
    public static func parse(_ body: JSON, now: Int64) -> Result<StateQueryForm, HubError> {
        guard body.isObject, let query = body["query"], query.isObject, let clause = query["clause"],
            clause.isObject
        else { return .failure(.invalid("\"query\" must be {\"clause\":{\"type\":…}}", field: "query")) }
        var form = StateQueryForm(from: 0, to: now + 1, grouped: false, limit: nil, paginationKey: nil)
        var read = Clause()
        if let e = read.add(clause, depth: 0) { return .failure(e) }
        if let range = read.time { (form.from, form.to) = range }
        form.ranges = read.ranges
        if let g = query["grouped"], !g.isNull {
            guard let b = g.boolValue else {
                return .failure(.invalid("\"grouped\" must be true or false", field: "grouped"))
            }
            form.grouped = b
        }
        if form.grouped && read.time == nil {
            return .failure(.invalid("a grouped query needs a withinTimeRange clause", field: "clause"))
        }
        if let v = body["bestEffortLimit"], !v.isNull {
            guard let n = v.intValue, n > 0 else {
                return .failure(.invalid("bestEffortLimit must be a positive integer", field: "bestEffortLimit"))
            }
            form.limit = n
        }
        do throws(HubError) {
            form.paginationKey = try FormFields.optionalString(body, "paginationKey")
            if let fw = try FormFields.optionalString(body, "firmwareVersion") {
                guard !fw.isEmpty, fw.utf8.count <= maxFirmwareVersionBytes else {
                    throw HubError.invalid(
                        "firmwareVersion must be 1 to \(maxFirmwareVersionBytes) bytes", field: "firmwareVersion")
                }
                form.firmwareVersion = fw
            }
            if let a = query["aggregations"], !a.isNull {
                form.aggregation = try StateAggregation.parse(a)
                guard form.grouped else {
                    throw HubError.invalid("aggregations need a grouped query", field: "aggregations")
                }
                guard form.limit == nil && form.paginationKey == nil else {
                    throw HubError.invalid(
                        "an aggregated query answers in one page: no bestEffortLimit or paginationKey",
                        field: form.limit != nil ? "bestEffortLimit" : "paginationKey")
                }
            }
        } catch {
            return .failure(error)
        }
        return .success(form)
    }

    /// What a clause says: its time range [from, to) (nil: all time) and
    /// its range clauses.
    struct Clause {
        var time: (from: Int64, to: Int64)?
        var ranges: [StateRange] = []

        /// Adds one clause; the refusal, or nil.
        mutating func add(_ clause: JSON, depth: Int) -> HubError? {
            guard clause.isObject, let type = clause["type"]?.stringValue else {
                return .invalid("each clause must be {\"type\":…}", field: "clause")
            }
            switch type {
            case "all": return nil
            case "withinTimeRange":
                if time != nil { return .invalid("an and clause takes one withinTimeRange", field: "clause") }
                // The upper limit is inclusive, so it must leave room for +1.
                // Equal limits are one millisecond (Kii's SDKs send
                // TimeRange(now, now) to aggregate "the interval of now").
                guard let lo = clause["lowerLimit"]?.int64Value, let hi = clause["upperLimit"]?.int64Value,
                    lo >= 0, lo <= hi, hi < Int64.max
                else {
                    return .invalid(
                        "withinTimeRange needs integer lowerLimit <= upperLimit (milliseconds)", field: "clause")
                }
                time = (lo, hi + 1)
                return nil
            case "range":
                switch StateRange.parse(clause) {
                case .failure(let e): return e
                case .success(let r):
                    guard ranges.count < StateRange.maxPerQuery else {
                        return .invalid(
                            "a query takes at most \(StateRange.maxPerQuery) range clauses", field: "clause")
                    }
                    ranges.append(r)
                    return nil
                }
            case "and":
                guard depth < StateQueryForm.maxClauseDepth else {
                    return .invalid("and clauses nest at most \(StateQueryForm.maxClauseDepth) deep", field: "clause")
                }
                guard let clauses = clause["clauses"], clauses.isArray, !clauses.elements.isEmpty else {
                    return .invalid("an and clause needs a non-empty \"clauses\"", field: "clause")
                }
                for c in clauses.elements {
                    if let e = add(c, depth: depth + 1) { return e }
                }
                return nil
            default:
                return .queryNotSupported(
                    "clause type \(type) is not supported: all, withinTimeRange, range or and")
            }
        }
    }
}

/// A range clause of a state query, on a field of the (alias's) state:
/// Kii's {"type":"range","field","lowerLimit"?,"lowerIncluded"?,
/// "upperLimit"?,"upperIncluded"?}. Read and matched by the server
/// triggers' rule (ThingIFRules' StateCondition): numbers only, each limit
/// included unless its flag says false, a field that is missing or no
/// number matches nothing; a clause no number can pass (no limit, lower
/// above upper, equal limits not both included) is refused, naming its
/// field. The SQL stores say the same in SQL (StateRangeSQL).
public struct StateRange: Equatable, Sendable {
    /// A top-level field of the (alias's) state.
    public var field: String
    public var lower: Double?
    public var lowerIncluded: Bool
    public var upper: Double?
    public var upperIncluded: Bool

    /// The most range clauses one query holds.
    public static let maxPerQuery = 16

    public init(field: String, lower: Double?, lowerIncluded: Bool, upper: Double?, upperIncluded: Bool) {
        self.field = field
        self.lower = lower
        self.lowerIncluded = lowerIncluded
        self.upper = upper
        self.upperIncluded = upperIncluded
    }

    /// Reads one {"type":"range",…} with the triggers' rule. A query's
    /// field is read in the path's alias, so a clause naming one is refused.
    static func parse(_ clause: JSON) -> Result<StateRange, HubError> {
        switch StateCondition.parse(clause) {
        // The rule names the clause's field once it has read one (a
        // query's ands hold up to 16 ranges: "clause" would not say which).
        case .failure(let e): return .failure(.invalid(e.message, field: e.field ?? "clause"))
        case .success(.range(let f, let upper, let ui, let lower, let li)):
            guard f.alias == nil else {
                return .failure(
                    .invalid(
                        "the range on \(f.name) takes no \"alias\": the query's path names it", field: f.name))
            }
            do { try StateAggregation.checkName(f.name, "field") } catch { return .failure(error) }
            return .success(StateRange(field: f.name, lower: lower, lowerIncluded: li, upper: upper, upperIncluded: ui))
        case .success:
            return .failure(.invalid("not a range clause", field: "clause"))
        }
    }

    var condition: StateCondition {
        .range(
            field: StateField(alias: nil, name: field), upper: upper, upperIncluded: upperIncluded, lower: lower,
            lowerIncluded: lowerIncluded)
    }

    /// Whether a stored state passes every range, its field read in
    /// `alias`'s object when given.
    public static func admit(_ ranges: [StateRange], state: String, alias: String?) -> Bool {
        guard !ranges.isEmpty else { return true }
        guard case .success(let s) = JSON.parse(state), s.isObject else { return false }
        let holder: JSON
        if let alias {
            guard let a = s[alias], a.isObject else { return false }
            holder = a
        } else {
            holder = s
        }
        return ranges.allSatisfy { $0.condition.matches(holder) }
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
            throw HubError.invalid("\"aggregations\" must be an array of one aggregation object", field: "aggregations")
        }
        let types = AggregationKind.allCases.map(\.rawValue).joined(separator: ", ")
        guard let kind = AggregationKind(rawValue: try FormFields.requiredString(a, "type")) else {
            throw HubError.invalid("an aggregation's \"type\" must be one of \(types)", field: "type")
        }
        let fieldTypes = FieldType.allCases.map(\.rawValue).joined(separator: ", ")
        guard let fieldType = FieldType(rawValue: try FormFields.requiredString(a, "fieldType")) else {
            throw HubError.invalid("an aggregation's \"fieldType\" must be one of \(fieldTypes)", field: "fieldType")
        }
        let field = try FormFields.requiredString(a, "field")
        let name = try FormFields.requiredString(a, "putAggregationInto")
        try checkName(field, "field")
        try checkName(name, "putAggregationInto")
        if kind != .count && fieldType != .integer && fieldType != .decimal {
            throw HubError.invalid(
                "\(kind.rawValue) needs an INTEGER or DECIMAL field, not \(fieldType.rawValue)", field: "fieldType")
        }
        return StateAggregation(kind: kind, field: field, fieldType: fieldType, name: name)
    }

    /// 1 to 255 bytes, without `"` or `\`, which SQLite's JSON paths
    /// cannot name (the SQL stores read the field by its path).
    public static func checkName(_ s: String, _ key: String) throws(HubError) {
        guard !s.isEmpty, s.utf8.count <= maxNameBytes, !s.contains("\""), !s.contains("\\") else {
            throw HubError.invalid("\"\(key)\" must be 1 to \(maxNameBytes) bytes without \" or \\", field: key)
        }
    }
}
