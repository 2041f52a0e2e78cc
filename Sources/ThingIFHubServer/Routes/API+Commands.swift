// SPDX-License-Identifier: Apache-2.0

// Commands: post, list, read, cancel.

import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdCore
import Logging
import NIOCore
import ThingIF
import ThingIFHub

extension API {
    /// An owner's POST/GET …/commands, GET …/commands/{id}, POST …/cancel.
    var commandRoutes: RouteCollection<APIContext> {
        let routes = RouteCollection(context: APIContext.self)
        let r = routes.owned(self, .target)
        let c = "/thing-if/apps/{appID}/targets/{target}/commands"
        r.post(RouterPath(c)) { try await postCommand($0, $1) }
        r.get(RouterPath(c)) { try await listCommands($0, $1) }
        r.get(RouterPath("\(c)/{commandID}")) { try await getCommand($0, $1) }
        r.post(RouterPath("\(c)/{commandID}/cancel")) { try await cancelCommand($0, $1) }
        return routes
    }

    // MARK: commands

    func postCommand(_ request: Request, _ context: APIContext) async throws -> Response {
        let owned = try context.owner()
        let body = try await object(request)
        let installation = request.headers[API.installationHeader].map { $0.trimmingSpaces() }
        let c = try value(hub.app.postCommand(on: owned, form: body, installationID: installation))
        return Reply.json(201, Reply.object([("commandID", c.commandID)]))
    }

    func getCommand(_ request: Request, _ context: APIContext) async throws -> Response {
        let c = try value(hub.app.getCommand(on: try context.owner(), commandID: try param(context, "commandID")))
        return Reply.json(200, hub.app.commandJSON(c))
    }

    /// POST …/commands/{commandID}/cancel (CommandLifecycle): 200 with the
    /// CANCELLED command; 409 COMMAND_NOT_CANCELLABLE with its commandState
    /// when results came first or the hub ended it; 404 as for a read.
    ///
    /// A DELIVERED command's cancel goes to the thing, and the answer waits
    /// for the thing's (its refusal, or its results) up to
    /// `cancelWaitMs`; then 202 with the command as it is and
    /// `"cancelPending":true`: the thing refuses it if the cancel reaches it
    /// before it runs (the state then becomes CANCELLED), else it runs.
    func cancelCommand(_ request: Request, _ context: APIContext) async throws -> Response {
        let cid = try param(context, "commandID")
        switch hub.app.startCancel(on: try context.owner(), commandID: cid) {
        case .answered(let r):
            return Reply.json(200, hub.app.commandJSON(try value(r)))
        case .waiting:
            if let r = await hub.app.cancelAnswer(commandID: cid, waitingMs: hub.options.cancelWaitMs) {
                return Reply.json(200, hub.app.commandJSON(try value(r)))
            }
            let o = hub.app.commandJSON(try value(hub.app.pendingCancel(commandID: cid)))
            o.set("cancelPending", .bool(true))
            return Reply.json(202, o)
        }
    }

    func listCommands(_ request: Request, _ context: APIContext) async throws -> Response {
        let owned = try context.owner()
        var limit: Int?
        if let s = request.uri.queryParameters.get("bestEffortLimit") {
            guard let n = Int(s) else { throw HubError.invalid("bestEffortLimit must be a positive integer, not \(s)") }
            limit = n
        }
        let key: String? = request.uri.queryParameters.get("paginationKey").map { String($0) }
        let page = try value(hub.app.listCommands(on: owned, paginationKey: key, bestEffortLimit: limit))
        let list = JSON.array()
        for c in page.commands { list.append(hub.app.commandJSON(c)) }
        let o = JSON.object()
        o.set("commands", list)
        if let next = page.next { o.set("nextPaginationKey", string: next) }
        return Reply.json(200, o)
    }

}
