// SPDX-License-Identifier: Apache-2.0

import CThingIF
import ThingIF

// Kii's grouped state queries with an aggregation (COUNT, SUM, MIN, MAX,
// MEAN of one top-level field of a thing's, or a trait alias's, state),
// computed by the store: one SQL statement per query on SQLite and
// PostgreSQL (the dialects' differences are in SQLStore.swift's
// SQLDialect), the same in Swift on MemoryStore. docs/DECISIONS.md, "State
// aggregations are computed by the store".

/// An aggregated number: an integer when the store's number is whole and
/// a double holds it exactly (so the mean of 22 and 28 is 25, as Kii's
/// SDKs read it), else a decimal.
public enum AggregateValue: Equatable, Sendable {
    case integer(Int64)
    case decimal(Double)

    /// nil for a value that is not finite (a sum past the largest double).
    public static func of(_ d: Double) -> AggregateValue? {
        guard d.isFinite else { return nil }
        if d == d.rounded(), abs(d) < 9_007_199_254_740_992 { return .integer(Int64(d)) }
        return .decimal(d)
    }

    /// A number as a store answers it ("49", "25.0000000000000000",
    /// "22.5", "1.0e+20"); nil for none or not a finite number.
    static func read(_ text: String?) -> AggregateValue? {
        guard let text else { return nil }
        if let i = Int64(text) { return .integer(i) }
        return Double(text).flatMap(of)
    }

    /// A JSON number's value; nil for anything else.
    public static func of(_ v: JSON) -> AggregateValue? {
        switch v.type {
        case JSON_INTEGER: return v.int64Value.map { .integer($0) }
        case JSON_REAL: return of(json_real_value(v.raw))
        default: return nil
        }
    }

    public var double: Double {
        switch self {
        case .integer(let i): return Double(i)
        case .decimal(let d): return d
        }
    }

    public var json: JSON {
        switch self {
        case .integer(let i): return .int64(i)
        case .decimal(let d): return json_real(d).map { JSON(owning: $0) } ?? .null()
        }
    }

    /// Numeric order (integers exactly).
    static func < (a: AggregateValue, b: AggregateValue) -> Bool {
        if case .integer(let x) = a, case .integer(let y) = b { return x < y }
        return a.double < b.double
    }
}

/// One grouping interval of an aggregated query: [from, to) and what the
/// aggregation gave over its samples.
public struct AggregateBucket: Sendable {
    public var from: Int64
    public var to: Int64
    /// nil when no sample of the interval holds a value to aggregate (for
    /// all but COUNT, a number); COUNT always has one, 0 included.
    public var value: AggregateValue?
    /// MIN and MAX: the sample holding the value, the earliest (by time,
    /// then by upload order) on ties.
    public var sample: StateSample?

    public init(from: Int64, to: Int64, value: AggregateValue?, sample: StateSample? = nil) {
        self.from = from
        self.to = to
        self.value = value
        self.sample = sample
    }
}

/// The rules every store follows, and the Swift computation MemoryStore uses.
public enum StateAggregates {
    /// The start of the bucket of a sample at `at`: grouping intervals
    /// count from the epoch (as the grouped query groups); without one,
    /// the query's whole range is one bucket.
    static func bucketStart(_ at: Int64, from: Int64, bucketMs: Int64?) -> Int64 {
        guard let bucketMs else { return from }
        return at - at % bucketMs
    }

    /// The field's value in a sample's state: `state[alias][field]`, or
    /// `state[field]` without an alias; nil when absent.
    static func field(_ state: String, alias: String?, field: String) -> JSON? {
        guard case .success(let s) = JSON.parse(state) else { return nil }
        let holder = alias.map { s[$0] } ?? s
        guard let holder, holder.isObject else { return nil }
        return holder[field]
    }

    /// The aggregation over samples (any order), in Swift: what the SQL
    /// stores compute, for MemoryStore. Buckets with samples only, oldest
    /// first.
    public static func compute(
        _ samples: [StateSample], alias: String?, field name: String, kind: AggregationKind,
        from: Int64, to: Int64, bucketMs: Int64?
    ) -> [AggregateBucket] {
        guard from < to, bucketMs.map({ $0 > 0 }) ?? true else { return [] }
        var groups: [Int64: [StateSample]] = [:]
        for s in samples where s.at >= from && s.at < to {
            groups[bucketStart(s.at, from: from, bucketMs: bucketMs), default: []].append(s)
        }
        return groups.keys.sorted().map { start in
            let ordered = groups[start]!.sorted { ($0.at, $0.cursor) < ($1.at, $1.cursor) }
            let values = ordered.map { (sample: $0, value: field($0.state, alias: alias, field: name)) }
            let numbers = values.compactMap { v in v.value.flatMap(AggregateValue.of).map { (v.sample, $0) } }
            var bucket = AggregateBucket(
                from: start, to: bucketMs.map { start + $0 } ?? to, value: nil)
            switch kind {
            case .count:
                bucket.value = .integer(Int64(values.filter { $0.value.map { !$0.isNull } ?? false }.count))
            case .sum:
                bucket.value = numbers.isEmpty ? nil : sum(numbers.map(\.1))
            case .mean:
                bucket.value =
                    numbers.isEmpty ? nil : .of(numbers.map(\.1.double).reduce(0, +) / Double(numbers.count))
            case .min, .max:
                var best: (StateSample, AggregateValue)?
                for n in numbers {
                    guard let b = best else {
                        best = n
                        continue
                    }
                    if kind == .min ? n.1 < b.1 : b.1 < n.1 { best = n }
                }
                bucket.value = best?.1
                bucket.sample = best?.0
            }
            return bucket
        }
    }

    /// Exact while the integers fit 64 bits, in doubles past that.
    static func sum(_ values: [AggregateValue]) -> AggregateValue? {
        var exact: Int64 = 0
        for v in values {
            guard case .integer(let i) = v else { return .of(values.map(\.double).reduce(0, +)) }
            let (s, overflow) = exact.addingReportingOverflow(i)
            if overflow { return .of(values.map(\.double).reduce(0, +)) }
            exact = s
        }
        return .integer(exact)
    }
}

extension MemoryStore {
    public func aggregateStates(
        thingID: String, alias: String?, field: String, kind: AggregationKind, from: Int64, to: Int64,
        bucketMs: Int64?, ranges: [StateRange]
    ) -> [AggregateBucket]? {
        StateAggregates.compute(
            stateHistory(thingID: thingID, from: from, to: to).filter {
                StateRange.admit(ranges, state: $0.state, alias: alias)
            }, alias: alias, field: field, kind: kind, from: from, to: to, bucketMs: bucketMs)
    }
}

// MARK: SQL

/// The aggregation statements, made once per dialect, alias or not, and kind.
enum StateAggregateSQL {
    /// The statement of a query. Binds: `binds(…)`. Rows: the bucket's
    /// start, the value as text (NULL: none), and for MIN and MAX the
    /// sample holding it (at, method, upload, state, id).
    static func statement(_ dialect: SQLDialect, aliased: Bool, _ kind: AggregationKind, filter: String = "")
        -> String
    {
        filter.isEmpty ? all["\(dialect) \(aliased) \(kind.rawValue)"]! : make(dialect, aliased: aliased, kind, filter)
    }

    private static let all: [String: String] = {
        var out: [String: String] = [:]
        for dialect in [SQLDialect.sqlite, .postgres] {
            for aliased in [false, true] {
                for kind in AggregationKind.allCases {
                    out["\(dialect) \(aliased) \(kind.rawValue)"] = make(dialect, aliased: aliased, kind)
                }
            }
        }
        return out
    }()

    /// One statement over the rows of `SQLDialect.stateFieldRows` (b, t,
    /// n and the sample), grouped by bucket (b). MIN and MAX rank each
    /// bucket's samples (numbers first, then by value, time and upload
    /// order) and keep the first, so the value and its sample come from
    /// the same row; a bucket whose first is no number has no value.
    private static func make(_ d: SQLDialect, aliased: Bool, _ kind: AggregationKind, _ filter: String = "")
        -> String
    {
        let rows = d.stateFieldRows(aliased: aliased, filter: filter)
        switch kind {
        case .count, .sum, .mean:
            let value: String
            switch kind {
            case .count: value = "COUNT(CASE WHEN t IS NOT NULL AND t <> 'null' THEN 1 END)"
            case .sum: value = d.sum("n")
            default: value = "AVG(n)"
            }
            return "SELECT b, " + value + " FROM (" + rows + ") s GROUP BY b ORDER BY b"
        case .min, .max:
            let order = kind == .min ? "n" : "n DESC"
            return """
                SELECT b, n, at, method, upload, state, id FROM (
                SELECT b, n, at, method, upload, state, id,
                ROW_NUMBER() OVER (PARTITION BY b ORDER BY n IS NULL, \(order), at, id) AS r
                FROM (\(rows)) s) w WHERE r = 1 ORDER BY b
                """
        }
    }

    /// The bound values, in the statement's order: the bucket's origin and
    /// width, the field's keys (`SQLDialect.stateFieldKeys`), the thing,
    /// the range.
    static func binds(
        _ d: SQLDialect, thingID: String, alias: String?, field: String, from: Int64, to: Int64, bucketMs: Int64?,
        filter: [SQLValue] = []
    ) -> [SQLValue] {
        // Without an interval the range is one bucket: at - (at - from) % (to - from) = from.
        let (origin, width) = bucketMs.map { (Int64(0), $0) } ?? (from, to - from)
        return [.int(origin), .int(width)] + d.stateFieldKeys(alias: alias, field: field)
            + [.text(thingID), .int(from), .int(to)] + filter
    }

    /// A JSON path to the field for SQLite (`$."alias"."field"`), each key
    /// escaped as the stored state (jansson's dump) writes it, so that
    /// SQLite matches it against the keys as they are stored. The keys hold
    /// no `"` or `\` (StateAggregation.checkName).
    static func path(alias: String?, field: String) -> String {
        func label(_ key: String) -> String {
            let quoted = JSON.quoted(key)
            return ".\"" + String(decoding: quoted[1..<(quoted.count - 1)], as: UTF8.self) + "\""
        }
        return "$" + (alias.map(label) ?? "") + label(field)
    }
}

extension SQLStore {
    public func aggregateStates(
        thingID: String, alias: String?, field: String, kind: AggregationKind, from: Int64, to: Int64,
        bucketMs: Int64?, ranges: [StateRange]
    ) -> [AggregateBucket]? {
        guard from < to, bucketMs.map({ $0 > 0 }) ?? true else { return [] }
        let filter = StateRangeSQL.condition(Self.dialect, alias: alias, ranges)
        let sql = StateAggregateSQL.statement(Self.dialect, aliased: alias != nil, kind, filter: filter.sql)
        let values = StateAggregateSQL.binds(
            Self.dialect, thingID: thingID, alias: alias, field: field, from: from, to: to, bucketMs: bucketMs,
            filter: filter.binds)
        return use(nil) { c in
            try c.rows(sql, values) { r -> AggregateBucket in
                let start = r.int(0)
                var bucket = AggregateBucket(
                    from: start, to: bucketMs.map { start + $0 } ?? to, value: AggregateValue.read(r.text(1)))
                if kind.picksSample, bucket.value != nil {
                    let sample = StateSample(
                        thingID: thingID, at: r.int(2), method: r.string(3), upload: r.string(4), state: r.string(5),
                        cursor: r.int(6))
                    // The value as the sample holds it (SQLite's text of a
                    // double has 15 digits; the JSON has them all).
                    bucket.value =
                        StateAggregates.field(sample.state, alias: alias, field: field).flatMap(AggregateValue.of)
                        ?? bucket.value
                    bucket.sample = sample
                }
                return bucket
            }
        }
    }
}
