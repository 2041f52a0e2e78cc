// SPDX-License-Identifier: Apache-2.0

// A thing's state: latest, fields, history, queries.

import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdCore
import Logging
import NIOCore
import ThingIF
import ThingIFHub

extension API {
    /// An owner's reads of a thing's state, history and queries; a thing's
    /// firmware version and type (the thing's calls and the owner's).
    var stateRoutes: RouteCollection<APIContext> {
        let routes = RouteCollection(context: APIContext.self)
        let r = routes.owned(self, .target)
        let s = "/thing-if/apps/{appID}/targets/{target}/states"
        r.get(RouterPath(s)) { try await latestState($0, $1) }
        r.get(RouterPath("\(s)/aliases/{alias}")) { try await latestState($0, $1) }
        r.get(RouterPath("\(s)/history")) { try await stateHistory($0, $1) }
        r.post(RouterPath("\(s)/query")) { try await queryStates($0, $1) }
        r.post(RouterPath("\(s)/aliases/{alias}/query")) { try await queryStates($0, $1) }
        // One rule for the thing's token and a user's (ThingRequests.thingField).
        let things = routes.owned(self, .thingID(kiiNotFound: true), thingTokens: true)
        for field in [ThingField.firmwareVersion, .thingType] {
            let path = RouterPath("/thing-if/apps/{appID}/things/{thingID}/\(field.rawValue)")
            things.get(path) { try await thingField($0, $1, field) }
            things.put(path) { try await thingField($0, $1, field) }
        }
        return routes
    }

    // MARK: state

    /// GET …/states, and …/states/aliases/{alias} (Kii's getTargetState
    /// for one trait alias: that alias's object of the current state).
    /// Before the thing's first upload the whole state is Kii's empty `{}`
    /// and an alias's is 404 STATE_NOT_FOUND; an alias the state does not
    /// hold is 404 TRAIT_ALIAS_NOT_FOUND (the aliases a thing has are those
    /// of its reported state: docs/PROTOCOL.md §12).
    func latestState(_ request: Request, _ context: APIContext) async throws -> Response {
        // The thing as the owner check read it: its state comes with it.
        let owned = try context.owner()
        let state = owned.thing.state
        guard context.parameters.get("alias") != nil else { return Reply.json(200, text: state ?? "{}") }
        let alias = try param(context, "alias")
        // Where the trait registry has the thing's entry, its aliases are the
        // entry's: one it lacks is 404 before any upload, one it defines
        // without a state yet STATE_NOT_FOUND (docs/decisions/kii-trait-registry.md).
        if let defined = try value(hub.app.traitAliasDefined(alias, on: owned)) {
            guard defined else { throw HubError.traitAliasNotFound }
            guard let state, case .success(let s) = JSON.parse(state), let a = s[alias], a.isObject else {
                throw HubError.stateNotFound
            }
            return Reply.json(200, a)
        }
        guard let state else { throw HubError.stateNotFound }
        return Reply.json(200, try Self.aliasState(state, alias))
    }

    /// The object of `alias` in a thing's current state: 404
    /// TRAIT_ALIAS_NOT_FOUND when the state holds no such object.
    static func aliasState(_ state: String, _ alias: String) throws -> JSON {
        guard case .success(let s) = JSON.parse(state), let a = s[alias], a.isObject else {
            throw HubError.traitAliasNotFound
        }
        return a
    }

    /// GET or PUT …/things/{thingID}/firmware-version or …/thing-type: with
    /// the thing's token, the thing's own call (the same router as over MQTT);
    /// with a user's, the owner's.
    func thingField(_ request: Request, _ context: APIContext, _ field: ThingField) async throws
        -> Response
    {
        if context.thingCall { return try await thingRequest(request, context, .thingIF) }
        let owned = try context.owner()
        if request.method == .get {
            return Reply.json(200, try value(hub.app.thingField(field, of: owned)))
        }
        let body = try await Body.bytes(request, limit: security.limits.maxBody)
        try value(hub.app.setThingField(field, of: owned, body: body))
        return Reply.noContent()
    }

    func stateHistory(_ request: Request, _ context: APIContext) async throws -> Response {
        let owned = try context.owner()
        let from = try int64Query(request, "from") ?? 0
        let to = try int64Query(request, "to") ?? (Platform.epochMs() + 1)
        var limit: Int?
        if let s = request.uri.queryParameters.get("bestEffortLimit") {
            guard let n = Int(s), n > 0 else {
                throw HubError.invalid("bestEffortLimit must be a positive integer, not \(s)")
            }
            limit = n
        }
        let key: String? = request.uri.queryParameters.get("paginationKey").map { String($0) }
        let (groups, next) = try value(
            hub.app.stateHistory(
                on: owned, from: from, to: to, paginationKey: key,
                limit: limit, maxPage: security.limits.maxHistoryPage))
        let o = JSON.object()
        o.set("groupedResults", Self.groupedJSON(groups, alias: nil))
        if let next { o.set("nextPaginationKey", string: next) }
        return Reply.json(200, o)
    }

    /// History groups as Kii answers them: [{"range":{"from","to"},"objects":[{…state,"_created"}]}].
    /// With an alias, each object is the state of that trait alias, and samples without it are left out.
    static func groupedJSON(_ groups: [StateGroup], alias: String?) -> JSON {
        let results = JSON.array()
        for g in groups {
            let range = JSON.object()
            range.set("from", .int(Int(g.from)))
            range.set("to", .int(Int(g.to)))
            let group = JSON.object()
            group.set("range", range)
            group.set("objects", objectsJSON(g.samples, alias: alias))
            results.append(group)
        }
        return results
    }

    static func objectsJSON(_ samples: [StateSample], alias: String?) -> JSON {
        let objects = JSON.array()
        for s in samples {
            guard case .success(let p) = JSON.parse(s.state), p.isObject else { continue }
            let o: JSON
            if let alias {
                guard let a = p[alias], a.isObject, let copy = a.deepCopy() else { continue }
                o = copy
            } else {
                o = p
            }
            o.set("_created", .int(Int(s.at)))
            objects.append(o)
        }
        return objects
    }

    /// Kii's state query: POST …/states/query, and …/states/aliases/{alias}/query for a
    /// trait alias. {"query":{"clause":<all, withinTimeRange, range or an and of them>,"grouped"?,
    /// "aggregations"?},"bestEffortLimit"?,"paginationKey"?} (StateQueryForm): {"results":[…]}
    /// or, grouped, {"groupedResults":[…]} over whole grouping intervals; objects carry
    /// "_created". With an aggregation each group is {"range","aggregations":[…]}.
    func queryStates(_ request: Request, _ context: APIContext) async throws -> Response {
        let owned = try context.owner()
        let thing = owned.thing
        let alias = context.parameters.get("alias").map { String($0) }
        let q = try value(StateQueryForm.parse(try await object(request), now: Platform.epochMs()))
        // An alias the thing's state does not hold: Kii's 404. Before the
        // first upload, Kii answers 409 STATE_HISTORY_NOT_AVAILABLE, which
        // its SDKs read as no results: the query runs and finds none.
        let o = JSON.object()
        // Where the trait registry has an entry for the thing type and the
        // query's firmwareVersion (else the thing's), an alias it lacks is
        // Kii's 404, before any upload too (iOS ThingIFAPIQueryUngroupedTests.
        // testFailedQueryWithNotDefinedAlias404Error); nil: no entry.
        let defined = try alias.flatMap {
            try value(hub.app.traitAliasDefined($0, on: owned, firmwareVersion: q.firmwareVersion))
        }
        if defined == false { throw HubError.traitAliasNotFound }
        guard let state = thing.state else {
            // Nothing uploaded yet: no results, before any check of the
            // range (Kii's live testSuccessEmptyResults asks 1970..now
            // of such a thing and gets none, not the interval limit's 400).
            o.set(q.grouped ? "groupedResults" : "results", JSON.array())
            return Reply.json(200, o)
        }
        // The aliases the current state holds are the current firmware's
        // (docs/PROTOCOL.md §12); a query naming another firmwareVersion
        // reads that version's history without them (Kii reads it against
        // that version's trait definitions: iOS ThingIFAPIQueryUngroupedTests,
        // query5, firmwareVersion v1 after the thing moved to v3).
        if let alias, defined == nil, q.firmwareVersion == nil || q.firmwareVersion == thing.firmwareVersion {
            _ = try Self.aliasState(state, alias)
        }
        if let a = q.aggregation {
            let buckets = try value(
                hub.app.aggregateStates(
                    on: owned, alias: alias, aggregation: a, from: q.from, to: q.to, ranges: q.ranges))
            o.set("groupedResults", Self.aggregatedJSON(buckets, a, alias: alias))
            return Reply.json(200, o)
        }
        let (groups, next) = try value(
            q.grouped
                ? hub.app.groupedStateHistory(
                    on: owned, from: q.from, to: q.to, paginationKey: q.paginationKey, limit: q.limit,
                    maxPage: security.limits.maxHistoryPage, alias: alias, ranges: q.ranges)
                : hub.app.stateHistory(
                    on: owned, from: q.from, to: q.to, paginationKey: q.paginationKey, limit: q.limit,
                    maxPage: security.limits.maxHistoryPage, alias: alias, ranges: q.ranges))
        if q.grouped {
            o.set("groupedResults", Self.groupedJSON(groups, alias: alias))
        } else {
            o.set("results", Self.objectsJSON(groups.flatMap { $0.samples }, alias: alias))
        }
        if let next { o.set("nextPaginationKey", string: next) }
        return Reply.json(200, o)
    }

    /// Aggregated groups as Kii answers them: [{"range":{"from","to"},"aggregations":
    /// [{"value","name"(putAggregationInto),"object"?}]}]; "object" (MIN and MAX) is the
    /// sample holding the value, as the query's objects are; an interval without a value
    /// has "aggregations":[].
    static func aggregatedJSON(_ buckets: [AggregateBucket], _ a: StateAggregation, alias: String?) -> JSON {
        let results = JSON.array()
        for b in buckets {
            let range = JSON.object()
            range.set("from", .int64(b.from))
            range.set("to", .int64(b.to))
            let list = JSON.array()
            if let v = b.value {
                let item = JSON.object()
                item.set("value", v.json)
                item.set("name", string: a.name)
                if let s = b.sample, let object = objectsJSON([s], alias: alias).elements.first {
                    item.set("object", object)
                }
                list.append(item)
            }
            let group = JSON.object()
            group.set("range", range)
            group.set("aggregations", list)
            results.append(group)
        }
        return results
    }

}
