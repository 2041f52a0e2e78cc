// SPDX-License-Identifier: Apache-2.0

// A gateway's end nodes, by an owner of the gateway: list, read, remove
// (docs/GATEWAYS.md §3.3); with the gateway's own token, the same calls
// and Kii's …/connection go to the thing-request router, as over MQTT.
// Onboarding one shares POST …/onboardings with the other forms (API+Things.swift).

import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdCore
import Logging
import NIOCore
import ThingIF
import ThingIFHub

extension API {
    var endNodeRoutes: RouteCollection<APIContext> {
        let r = RouteCollection(context: APIContext.self)
        let gw = "/thing-if/apps/{appID}/things/{thingID}/end-nodes"
        // The gateway's own calls (its token), or its owner's.
        let owned = r.owned(self, .thingID(kiiNotFound: true), thingTokens: true)
        owned.get(RouterPath(gw)) { try await listEndNodes($0, $1) }
        owned.get(RouterPath("\(gw)/{endNodeID}")) { try await endNode($0, $1) }
        owned.delete(RouterPath("\(gw)/{endNodeID}")) { try await endNode($0, $1) }
        r.put(RouterPath("\(gw)/{endNodeID}/connection")) { try await connection($0, $1) }
        return r
    }

    /// Kii's PUT …/end-nodes/{E}/connection {"online":…}: the gateway's
    /// own call (its token); an owner's token is 403 FORBIDDEN, as whether
    /// an end node is reachable is the gateway's knowledge, not the owner's.
    func connection(_ request: Request, _ context: APIContext) async throws -> Response {
        if isThingToken(request) { return try await thingRequest(request, context, .thingIF) }
        _ = try user(request, context)
        throw HubError.forbidden("only the gateway reports whether its end node is online: use the gateway's token")
    }

    /// Kii's GET …/things/{gw}/end-nodes?bestEffortLimit=N&paginationKey=K:
    /// {"results":[{"thingID","vendorThingID","thingType"?,"online"}],
    /// "nextPaginationKey"?}, at most bestEffortLimit a page (default and
    /// cap: maxHistoryPage).
    func listEndNodes(_ request: Request, _ context: APIContext) async throws -> Response {
        if context.thingCall { return try await thingRequest(request, context, .thingIF, withQuery: true) }
        let gateway = try context.owner()
        var limit: Int?
        if let s = request.uri.queryParameters.get("bestEffortLimit") {
            guard let n = Int(s), n > 0 else {
                throw HubError.invalid("bestEffortLimit must be a positive integer, not \(s)")
            }
            limit = n
        }
        let key = request.uri.queryParameters.get("paginationKey").map { String($0) }
        let (endNodes, next) = try value(
            hub.app.endNodes(
                of: gateway, paginationKey: key, limit: limit,
                maxPage: security.limits.maxHistoryPage))
        let results = JSON.array()
        for t in endNodes { results.append(hub.app.endNodeJSON(t, full: false)) }
        let o = JSON.object()
        o.set("results", results)
        if let next { o.set("nextPaginationKey", string: next) }
        return Reply.json(200, o)
    }

    /// GET …/things/{gw}/end-nodes/{E}: {"thingID","vendorThingID",
    /// "thingType"?,"firmwareVersion"?,"online","gatewayThingID","createdAt"};
    /// DELETE: the end node removed as a thing is deleted, 204.
    func endNode(_ request: Request, _ context: APIContext) async throws -> Response {
        if context.thingCall { return try await thingRequest(request, context, .thingIF) }
        let gateway = try context.owner()
        let e = try param(context, "endNodeID")
        if request.method == .delete {
            try value(hub.app.removeEndNode(of: gateway, endNodeThingID: e))
            return Reply.noContent()
        }
        let t = try value(hub.app.endNode(of: gateway, endNodeThingID: e))
        return Reply.json(200, hub.app.endNodeJSON(t, full: true))
    }
}
