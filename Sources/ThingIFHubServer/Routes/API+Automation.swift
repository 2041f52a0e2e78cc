// SPDX-License-Identifier: Apache-2.0

// A thing's own automation: action sets and timer triggers.

import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdCore
import Logging
import NIOCore
import ThingIF
import ThingIFHub

extension API {
    /// A thing's action sets, timer triggers and automation status.
    var automationRoutes: RouteCollection<APIContext> {
        let routes = RouteCollection(context: APIContext.self)
        let r = routes.owned(self, .target)
        let t = "/thing-if/apps/{appID}/targets/{target}"
        r.put(RouterPath("\(t)/action-sets/{name}")) { try await putActionSet($0, $1) }
        r.get(RouterPath("\(t)/action-sets")) { try await listActionSets($0, $1) }
        r.delete(RouterPath("\(t)/action-sets/{name}")) { try await deleteActionSet($0, $1) }
        r.put(RouterPath("\(t)/timer-triggers/{name}")) { try await putTimerTrigger($0, $1) }
        r.get(RouterPath("\(t)/timer-triggers")) { try await listTimerTriggers($0, $1) }
        r.put(RouterPath("\(t)/timer-triggers/{name}/enable")) { try await enableTimerTrigger($0, $1, true) }
        r.put(RouterPath("\(t)/timer-triggers/{name}/disable")) { try await enableTimerTrigger($0, $1, false) }
        r.delete(RouterPath("\(t)/timer-triggers/{name}")) { try await deleteTimerTrigger($0, $1) }
        r.get(RouterPath("\(t)/automation")) { try await automationStatus($0, $1) }
        return routes
    }

    // MARK: thing automation

    private static func list(_ key: String, _ items: [JSON]) -> JSON {
        let a = JSON.array()
        for i in items { a.append(i) }
        let o = JSON.object()
        o.set(key, a)
        return o
    }

    func putActionSet(_ request: Request, _ context: APIContext) async throws -> Response {
        let (owned, name) = (try context.owner(), try param(context, "name"))
        let body = try await object(request)
        try value(hub.app.automation.putActionSet(on: owned, name: name, body: body))
        return Reply.noContent()
    }

    func listActionSets(_ request: Request, _ context: APIContext) async throws -> Response {
        let owned = try context.owner()
        return Reply.json(
            200, Self.list("actionSets", try value(hub.app.automation.listActionSets(on: owned))))
    }

    func deleteActionSet(_ request: Request, _ context: APIContext) async throws -> Response {
        let (owned, name) = (try context.owner(), try param(context, "name"))
        try value(hub.app.automation.deleteActionSet(on: owned, name: name))
        return Reply.noContent()
    }

    func putTimerTrigger(_ request: Request, _ context: APIContext) async throws -> Response {
        let (owned, name) = (try context.owner(), try param(context, "name"))
        let body = try await object(request)
        try value(hub.app.automation.putTimerTrigger(on: owned, name: name, body: body))
        return Reply.noContent()
    }

    func automationStatus(_ request: Request, _ context: APIContext) async throws -> Response {
        let owned = try context.owner()
        return Reply.json(200, try value(hub.app.automation.status(on: owned)))
    }

    func listTimerTriggers(_ request: Request, _ context: APIContext) async throws -> Response {
        let owned = try context.owner()
        return Reply.json(
            200, Self.list("timerTriggers", try value(hub.app.automation.listTimerTriggers(on: owned))))
    }

    func enableTimerTrigger(_ request: Request, _ context: APIContext, _ enabled: Bool) async throws
        -> Response
    {
        let (owned, name) = (try context.owner(), try param(context, "name"))
        try value(hub.app.automation.setTimerTriggerEnabled(on: owned, name: name, enabled: enabled))
        return Reply.noContent()
    }

    func deleteTimerTrigger(_ request: Request, _ context: APIContext) async throws -> Response {
        let (owned, name) = (try context.owner(), try param(context, "name"))
        try value(hub.app.automation.deleteTimerTrigger(on: owned, name: name))
        return Reply.noContent()
    }
}
