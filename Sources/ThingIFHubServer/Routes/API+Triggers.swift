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
    var triggerRoutes: RouteCollection<BasicRequestContext> {
        let r = RouteCollection(context: BasicRequestContext.self)
        let t = "/thing-if/apps/{appID}/targets/{target}/triggers"
        r.post(RouterPath(t)) { try await createTrigger($0, $1) }
        r.get(RouterPath(t)) { try await listTriggers($0, $1) }
        r.get(RouterPath("\(t)/{triggerID}")) { try await getTrigger($0, $1) }
        r.patch(RouterPath("\(t)/{triggerID}")) { try await patchTrigger($0, $1) }
        r.put(RouterPath("\(t)/{triggerID}/enable")) { try await enableTrigger($0, $1, true) }
        r.put(RouterPath("\(t)/{triggerID}/disable")) { try await enableTrigger($0, $1, false) }
        r.delete(RouterPath("\(t)/{triggerID}")) { try await deleteTrigger($0, $1) }
        return r
    }

    // MARK: server triggers

    func createTrigger(_ request: Request, _ context: BasicRequestContext) async throws -> Response {
        let (user, tid) = try caller(request, context)
        let body = try await object(request)
        let t = try value(hub.app.createTrigger(user: user, thingID: tid, body: body))
        return Reply.json(201, Reply.object([("triggerID", t.triggerID)]))
    }

    func listTriggers(_ request: Request, _ context: BasicRequestContext) async throws -> Response {
        let (user, tid) = try caller(request, context)
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
        let all = try value(hub.app.listTriggers(user: user, thingID: tid))
        let page = all.dropFirst(offset).prefix(limit)
        let list = JSON.array()
        for t in page { list.append(hub.app.triggerJSON(t)) }
        let o = JSON.object()
        o.set("triggers", list)
        if offset + page.count < all.count { o.set("nextPaginationKey", string: String(offset + page.count)) }
        return Reply.json(200, o)
    }

    func patchTrigger(_ request: Request, _ context: BasicRequestContext) async throws -> Response {
        let (user, tid, id) = try caller(request, context, "triggerID")
        let body = try await object(request)
        return Reply.json(
            200,
            hub.app.triggerJSON(try value(hub.app.patchTrigger(user: user, thingID: tid, triggerID: id, body: body))))
    }

    func getTrigger(_ request: Request, _ context: BasicRequestContext) async throws -> Response {
        let (user, tid, id) = try caller(request, context, "triggerID")
        return Reply.json(
            200, hub.app.triggerJSON(try value(hub.app.getTrigger(user: user, thingID: tid, triggerID: id))))
    }

    func enableTrigger(_ request: Request, _ context: BasicRequestContext, _ enabled: Bool) async throws -> Response {
        let (user, tid, id) = try caller(request, context, "triggerID")
        try value(hub.app.setTriggerEnabled(user: user, thingID: tid, triggerID: id, enabled: enabled))
        return Reply.noContent()
    }

    func deleteTrigger(_ request: Request, _ context: BasicRequestContext) async throws -> Response {
        let (user, tid, id) = try caller(request, context, "triggerID")
        try value(hub.app.deleteTrigger(user: user, thingID: tid, triggerID: id))
        return Reply.noContent()
    }

}
