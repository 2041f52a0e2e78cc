// SPDX-License-Identifier: Apache-2.0

// Server triggers.

import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdCore
import Logging
import NIOCore
import ThingIF
import ThingIFHub

extension API {
    /// Server triggers of a thing.
    var triggerRoutes: RouteCollection<APIContext> {
        let routes = RouteCollection(context: APIContext.self)
        let r = routes.owned(self, .target)
        let t = "/thing-if/apps/{appID}/targets/{target}/triggers"
        r.post(RouterPath(t)) { try await createTrigger($0, $1) }
        r.get(RouterPath(t)) { try await listTriggers($0, $1) }
        r.get(RouterPath("\(t)/{triggerID}")) { try await getTrigger($0, $1) }
        r.patch(RouterPath("\(t)/{triggerID}")) { try await patchTrigger($0, $1) }
        r.put(RouterPath("\(t)/{triggerID}/enable")) { try await enableTrigger($0, $1, true) }
        r.put(RouterPath("\(t)/{triggerID}/disable")) { try await enableTrigger($0, $1, false) }
        r.delete(RouterPath("\(t)/{triggerID}")) { try await deleteTrigger($0, $1) }
        return routes
    }

    // MARK: server triggers

    func createTrigger(_ request: Request, _ context: APIContext) async throws -> Response {
        let owned = try context.owner()
        let body = try await object(request)
        let t = try value(hub.app.createTrigger(on: owned, body: body))
        return Reply.json(201, Reply.object([("triggerID", t.triggerID)]))
    }

    func listTriggers(_ request: Request, _ context: APIContext) async throws -> Response {
        let owned = try context.owner()
        // Kii's paging: bestEffortLimit (at most 100 here) and the opaque
        // paginationKey of the previous page (an offset).
        var limit = 100
        if let s = request.uri.queryParameters.get("bestEffortLimit") {
            guard let n = Int(s), n > 0 else {
                throw HubError.invalid("bestEffortLimit must be a positive integer, not \(s)")
            }
            limit = min(n, 100)
        }
        var offset = 0
        if let s = request.uri.queryParameters.get("paginationKey") {
            guard let n = Int(s), n >= 0 else { throw HubError.invalid("paginationKey \(s) is not one this hub gave") }
            offset = n
        }
        let all = hub.app.listTriggers(on: owned)
        let page = all.dropFirst(offset).prefix(limit)
        let list = JSON.array()
        for t in page { list.append(hub.app.triggerJSON(t)) }
        let o = JSON.object()
        o.set("triggers", list)
        if offset + page.count < all.count { o.set("nextPaginationKey", string: String(offset + page.count)) }
        return Reply.json(200, o)
    }

    func patchTrigger(_ request: Request, _ context: APIContext) async throws -> Response {
        let (owned, id) = (try context.owner(), try param(context, "triggerID"))
        let body = try await object(request)
        return Reply.json(
            200,
            hub.app.triggerJSON(try value(hub.app.patchTrigger(on: owned, triggerID: id, body: body))))
    }

    func getTrigger(_ request: Request, _ context: APIContext) async throws -> Response {
        let (owned, id) = (try context.owner(), try param(context, "triggerID"))
        return Reply.json(
            200, hub.app.triggerJSON(try value(hub.app.getTrigger(on: owned, triggerID: id))))
    }

    func enableTrigger(_ request: Request, _ context: APIContext, _ enabled: Bool) async throws -> Response {
        let (owned, id) = (try context.owner(), try param(context, "triggerID"))
        try value(hub.app.setTriggerEnabled(on: owned, triggerID: id, enabled: enabled))
        return Reply.noContent()
    }

    func deleteTrigger(_ request: Request, _ context: APIContext) async throws -> Response {
        let (owned, id) = (try context.owner(), try param(context, "triggerID"))
        try value(hub.app.deleteTrigger(on: owned, triggerID: id))
        return Reply.noContent()
    }

}
