// SPDX-License-Identifier: Apache-2.0

// A thing's own calls over HTTP, routed as over MQTT (FrameworkSide).

import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdCore
import Logging
import NIOCore
import ThingIF
import ThingIFHub

extension API {
    /// The thing's own calls over HTTP as Kii's thing SDKs make them (the
    /// same router as over MQTT: ThingRequests.overHTTP):
    /// results, its own commands, state, the automation report. Onboarding
    /// by the thing shares POST …/onboardings with the owner's forms, and
    /// installations with the apps' (API+Things.swift, API+Installations.swift).
    var thingCallRoutes: RouteCollection<APIContext> {
        let r = RouteCollection(context: APIContext.self)
        let t = "/thing-if/apps/{appID}/targets/{target}"
        r.put(RouterPath("\(t)/automation-report")) { try await thingRequest($0, $1, .thingIF) }
        r.put(RouterPath("\(t)/commands/{commandID}")) { try await thingRequest($0, $1, .thingIF) }
        r.put(RouterPath("\(t)/commands/{commandID}/action-results")) { try await thingRequest($0, $1, .thingIF) }
        // The thing's upload, or its owner's.
        let states = r.owned(self, .target, thingTokens: true)
        states.put(RouterPath("\(t)/states")) { try await stateUpload($0, $1) }
        states.patch(RouterPath("\(t)/states")) { try await stateUpload($0, $1) }
        return r
    }

    // MARK: a thing's calls over HTTP

    /// A thing's request over HTTP: the body (bounded by the path's limit)
    /// goes to the router that serves the same requests over MQTT.
    /// `withQuery`: the router reads the query string too (a gateway's
    /// list of its end nodes). `costlyWork`: on the costly work's pool, for
    /// a call with a thing's token that runs a KDF (a gateway's end-node
    /// onboarding), which spends that token's budget and not the anonymous one.
    func thingRequest(
        _ request: Request, _ context: APIContext, _ kind: Topics.API, withQuery: Bool = false,
        costlyWork: Bool = false
    ) async throws -> Response {
        try checkApp(context)
        let prefix = "/\(kind.rawValue)/apps/\(hub.options.appID)/"
        guard let full = request.uri.path.percentDecoded(), full.hasPrefix(prefix) else {
            throw HubError.invalid("bad path \(request.uri.path)")
        }
        let query = withQuery ? request.uri.query.flatMap { $0.isEmpty ? nil : "?" + $0 } ?? "" : ""
        let path = String(full.dropFirst(prefix.count)) + query
        let route = RequestRoute(api: kind, path: path)
        let bootstrap = costlyWork || route.isBootstrap
        // Onboarding by the thing has no identity yet: the address's and
        // the app's budgets, spent before the body is read.
        if bootstrap && !costlyWork && kind == .thingIF { try spendAnonymous(request) }
        let body = try await Body.bytes(request, limit: hub.thingRequests.maxBody(route))
        var headers: [(name: String, value: String)] = []
        if let a = request.headers[.authorization] { headers.append(("Authorization", a)) }
        if let c = request.headers[.contentType] { headers.append(("Content-Type", c)) }
        let req = KiiRequest(method: request.method.rawValue, headers: headers, body: body)
        guard bootstrap else { return Reply.kii(hub.thingRequests.overHTTP(req, route: route, path: path)) }
        // Every bootstrap call hashes or hands out broker credentials: on the costly pool.
        return Reply.kii(try await costly { [hub] in hub.thingRequests.overHTTP(req, route: route, path: path) })
    }

    /// PUT or PATCH …/states: the thing's own upload with its token; with
    /// a user's, an owner's upload (AppAPI.uploadState).
    func stateUpload(_ request: Request, _ context: APIContext) async throws -> Response {
        if context.thingCall { return try await thingRequest(request, context, .thingIF) }
        let owned = try context.owner()
        let body = try await Body.bytes(request, limit: security.limits.maxStateBody)
        return Reply.kii(hub.app.uploadState(on: owned, method: request.method.rawValue, body: body))
    }

    /// True when the request carries a thing's token (not a user's).
    func isThingToken(_ request: Request) -> Bool {
        hub.app.isThingToken(bearer(request))
    }

}
