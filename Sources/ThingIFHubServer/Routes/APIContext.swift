// SPDX-License-Identifier: Apache-2.0

// The REST API's request context: the caller and the thing it owns,
// resolved once per request before the handler runs.

import HTTPTypes
import Hummingbird
import ThingIFHub

/// Hummingbird's request context with what this API resolves before a
/// handler runs, as Hummingbird's authentication examples carry their
/// identity: `OwnerMiddleware` sets `owned` on the routes of one thing.
/// Handlers read it (`owner()`) and pass it to the app API, whose calls on
/// one thing take an `OwnedThing` and check no ownership again.
struct APIContext: RequestContext {
    var coreContext: CoreRequestContextStorage
    /// The caller and the thing the path names, which it owns. Nil before
    /// `OwnerMiddleware`, and on a route that also serves the thing's own
    /// call when the request carries a thing's token (`thingCall`).
    var owned: OwnedThing?

    init(source: ApplicationRequestContextSource) {
        coreContext = .init(source: source)
    }

    /// The owned thing `OwnerMiddleware` resolved; a route without it is
    /// the hub's own error (every route of one thing has it: OwnerMiddleware).
    func owner() throws -> OwnedThing {
        guard let owned else {
            throw HubError(500, "INTERNAL_ERROR", "the route resolved no owner")
        }
        return owned
    }

    /// True on a route that serves the thing's own call as well, when the
    /// request carries a thing's token: the handler hands it to the thing
    /// requests' router.
    var thingCall: Bool { owned == nil }
}

/// How the path names the thing a route acts on.
enum OwnedPath: Sendable {
    /// `…/targets/thing:{thingID}/…`: 404 TARGET_NOT_FOUND for another kind
    /// of target, THING_NOT_FOUND for a thing the caller does not own.
    case target
    /// `…/things/{thingID}/…`, Kii's thing resources: the 404 names the
    /// thingID (`kiiNotFound`) or, as a target's, the thing.
    case thingID(kiiNotFound: Bool)
}

/// Resolves the caller and the owned thing of a route on one thing (Kii's
/// checks in their order: the app, the token, the caller's budget, the
/// path's thing, its owner, the thing's budget; API.owner), before the
/// handler reads a byte of the body, and puts them in the request context.
/// With `thingTokens`, a request carrying a thing's token passes on with
/// no owner (`APIContext.thingCall`): the route serves the thing's own call.
struct OwnerMiddleware: RouterMiddleware {
    typealias Context = APIContext
    let api: API
    let path: OwnedPath
    var thingTokens = false

    func handle(
        _ request: Request, context: APIContext,
        next: (Request, APIContext) async throws -> Response
    ) async throws -> Response {
        if thingTokens && api.isThingToken(request) { return try await next(request, context) }
        var context = context
        context.owned = try api.owner(request, context, path)
        return try await next(request, context)
    }
}

extension RouteCollection where Context == APIContext {
    /// The routes added to the group answer for one owned thing (OwnerMiddleware).
    func owned(_ api: API, _ path: OwnedPath, thingTokens: Bool = false) -> RouterGroup<APIContext> {
        group().add(middleware: OwnerMiddleware(api: api, path: path, thingTokens: thingTokens))
    }
}
