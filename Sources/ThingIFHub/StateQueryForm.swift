// SPDX-License-Identifier: Apache-2.0

import ThingIF

/// Kii's state query body (POST …/states/query and
/// …/states/aliases/{alias}/query):
/// {"query":{"clause":{"type":"all"|"withinTimeRange","lowerLimit","upperLimit"},
/// "grouped"?},"bestEffortLimit"?,"paginationKey"?}, checked. Pure (no store,
/// no hub), so the REST route and the state_query fuzz target share it.
public struct StateQueryForm: Equatable, Sendable {
    /// Samples from `from` (inclusive) to `to` (exclusive), epoch ms.
    public var from: Int64
    public var to: Int64
    public var grouped: Bool
    /// bestEffortLimit: at most so many samples (nil: the hub's page).
    public var limit: Int?
    public var paginationKey: String?

    /// Reads and checks a body; `now` (epoch ms) ends an "all" clause.
    public static func parse(_ body: JSON, now: Int64) -> Result<StateQueryForm, HubError> {
        guard body.isObject, let query = body["query"], query.isObject, let clause = query["clause"],
            clause.isObject, let type = clause["type"]?.stringValue
        else { return .failure(.invalid("\"query\" must be {\"clause\":{\"type\":…}}")) }
        // Kii's aggregations (COUNT, MEAN, MAX, …) are not computed: refused
        // rather than answered with plain results the client would misread.
        if let a = query["aggregations"], !a.isNull {
            return .failure(.queryNotSupported("aggregations are not supported by this hub"))
        }
        var form = StateQueryForm(from: 0, to: now + 1, grouped: false, limit: nil, paginationKey: nil)
        switch type {
        case "all": break
        case "withinTimeRange":
            // The upper limit is inclusive, so it must leave room for +1.
            guard let lo = clause["lowerLimit"]?.int64Value, let hi = clause["upperLimit"]?.int64Value, lo >= 0,
                lo < hi, hi < Int64.max
            else {
                return .failure(.invalid("withinTimeRange needs integer lowerLimit < upperLimit (milliseconds)"))
            }
            form.from = lo
            form.to = hi + 1
        default:
            return .failure(.queryNotSupported("clause type \(type) is not supported: all or withinTimeRange"))
        }
        if let g = query["grouped"], !g.isNull {
            guard let b = g.boolValue else { return .failure(.invalid("\"grouped\" must be true or false")) }
            form.grouped = b
        }
        if form.grouped && type != "withinTimeRange" {
            return .failure(.invalid("a grouped query needs a withinTimeRange clause"))
        }
        if let v = body["bestEffortLimit"], !v.isNull {
            guard let n = v.intValue, n > 0 else {
                return .failure(.invalid("bestEffortLimit must be a positive integer"))
            }
            form.limit = n
        }
        do {
            form.paginationKey = try FormFields.optionalString(body, "paginationKey")
        } catch {
            return .failure(error)
        }
        return .success(form)
    }
}
