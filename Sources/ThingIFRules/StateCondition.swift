// SPDX-License-Identifier: Apache-2.0

import CThingIF
import ThingIF

// The rules of Thing-IF's server triggers that both the hub and the thingif
// CLI apply: a STATES predicate's condition (its shape and the limits on its
// depth and clause count) and a SCHEDULE predicate's cron expression. The
// CLI checks what it sends with these, so it refuses exactly what the hub
// would refuse, before a request is made.

/// Why a condition or a schedule is refused: one sentence for a person,
/// and the state field of the range condition at fault when one is (the
/// hub names it in Kii's `invalidFields`).
public struct RuleError: Error, Sendable, Equatable {
    public let message: String
    public let field: String?
    public init(_ message: String, field: String? = nil) {
        self.message = message
        self.field = field
    }
    static func invalid(_ message: String, field: String? = nil) -> RuleError { RuleError(message, field: field) }
}

/// A field of the thing's state: a top-level key, or with a trait alias
/// (Kii's "alias" in a condition) a key of the state nested under it.
public struct StateField: Sendable {
    public var alias: String?
    public var name: String

    public init(alias: String?, name: String) {
        self.alias = alias
        self.name = name
    }

    public func value(in state: JSON) -> JSON? {
        guard let alias else { return state[name] }
        return state[alias]?[name]
    }
}

/// A condition on the thing's state.
public indirect enum StateCondition {
    case eq(field: StateField, value: JSON)
    case not(StateCondition)
    case range(field: StateField, upper: Double?, upperIncluded: Bool, lower: Double?, lowerIncluded: Bool)
    case and([StateCondition])
    case or([StateCondition])

    public static let maxDepth = 16
    public static let maxClauses = 64

    /// Parses {"type":"eq"|"not"|"range"|"and"|"or", …}.
    public static func parse(_ j: JSON, depth: Int = 0) -> Result<StateCondition, RuleError> {
        guard depth < maxDepth else { return .failure(.invalid("the condition is nested deeper than \(maxDepth)")) }
        guard j.isObject else { return .failure(.invalid("a condition must be an object, not \(j.typeName)")) }
        guard let type = j["type"]?.stringValue else {
            return .failure(.invalid("a condition needs \"type\": a string"))
        }
        func field() -> Result<StateField, RuleError> {
            guard let f = j["field"]?.stringValue, !f.isEmpty else {
                return .failure(.invalid("a \(type) condition needs \"field\": a non-empty string"))
            }
            if let a = j["alias"], !a.isNull {
                guard let alias = a.stringValue, !alias.isEmpty else {
                    return .failure(.invalid("\"alias\" must be a non-empty string (a trait alias)"))
                }
                return .success(StateField(alias: alias, name: f))
            }
            return .success(StateField(alias: nil, name: f))
        }
        func clauses() -> Result<[StateCondition], RuleError> {
            guard let list = j["clauses"], list.isArray, (1...maxClauses).contains(list.count) else {
                return .failure(
                    .invalid("an \(type) condition needs \"clauses\": an array of 1 to \(maxClauses) conditions"))
            }
            var out: [StateCondition] = []
            for c in list.elements {
                switch parse(c, depth: depth + 1) {
                case .failure(let e): return .failure(e)
                case .success(let x): out.append(x)
                }
            }
            return .success(out)
        }
        switch type {
        case "eq":
            guard let v = j["value"], !v.isObject, !v.isArray, let copy = v.deepCopy() else {
                return .failure(.invalid("an eq condition needs \"value\": a string, number, boolean or null"))
            }
            return field().map { .eq(field: $0, value: copy) }
        case "not":
            guard let c = j["clause"] else { return .failure(.invalid("a not condition needs \"clause\"")) }
            return parse(c, depth: depth + 1).map { .not($0) }
        case "range":
            // Every refusal of a range names its field, once that is read:
            // an and of ranges has several, and the field says which one.
            let f: StateField
            switch field() {
            case .failure(let e): return .failure(e)
            case .success(let x): f = x
            }
            let name = f.alias.map { "\($0).\(f.name)" } ?? f.name
            func refused(_ why: String) -> RuleError { .invalid("the range on \(name): \(why)", field: f.name) }
            func limit(_ key: String) -> Result<Double?, RuleError> {
                guard let v = j[key], !v.isNull else { return .success(nil) }
                guard let d = number(v) else {
                    return .failure(refused("\"\(key)\" must be a number, not \(v.typeName)"))
                }
                return .success(d)
            }
            func flag(_ key: String) -> Result<Bool, RuleError> {
                guard let v = j[key], !v.isNull else { return .success(true) }
                guard let b = v.boolValue else {
                    return .failure(refused("\"\(key)\" must be a boolean, not \(v.typeName)"))
                }
                return .success(b)
            }
            let upper: Double?, lower: Double?, ui: Bool, li: Bool
            do {
                upper = try limit("upperLimit").get()
                lower = try limit("lowerLimit").get()
                ui = try flag("upperIncluded").get()
                li = try flag("lowerIncluded").get()
            } catch {
                return .failure(error)  // typed: every get() above throws RuleError
            }
            guard upper != nil || lower != nil else {
                return .failure(refused("it needs upperLimit, lowerLimit or both"))
            }
            // A range no number can pass would match nothing, silently.
            if let lower, let upper {
                if lower > upper {
                    return .failure(
                        refused("no number matches it: lowerLimit \(text(lower)) is above upperLimit \(text(upper))"))
                }
                if lower == upper && !(li && ui) {
                    return .failure(
                        refused(
                            "no number matches it: lowerLimit and upperLimit are both \(text(lower)), not both included"
                        ))
                }
            }
            return .success(.range(field: f, upper: upper, upperIncluded: ui, lower: lower, lowerIncluded: li))
        case "and":
            return clauses().map { .and($0) }
        case "or":
            return clauses().map { .or($0) }
        default:
            return .failure(.invalid("unknown condition type \(type): eq, not, range, and or or"))
        }
    }

    /// A limit as a person wrote it: 20, not 20.0.
    static func text(_ d: Double) -> String {
        d == d.rounded() && abs(d) < 1e15 ? String(Int64(d)) : String(describing: d)
    }

    public static func number(_ v: JSON) -> Double? {
        v.type == JSON_INTEGER || v.type == JSON_REAL ? json_number_value(v.raw) : nil
    }

    /// Whether the state (an object) matches; a missing field matches no eq
    /// or range.
    public func matches(_ state: JSON) -> Bool {
        switch self {
        case .eq(let f, let value):
            guard let v = f.value(in: state) else { return false }
            if let a = Self.number(v), let b = Self.number(value) { return a == b }
            return json_equal(v.raw, value.raw) == 1
        case .not(let c):
            return !c.matches(state)
        case .range(let f, let upper, let ui, let lower, let li):
            guard let v = f.value(in: state), let x = Self.number(v) else { return false }
            if let upper, ui ? x > upper : x >= upper { return false }
            if let lower, li ? x < lower : x <= lower { return false }
            return true
        case .and(let cs):
            return cs.allSatisfy { $0.matches(state) }
        case .or(let cs):
            return cs.contains { $0.matches(state) }
        }
    }
}
