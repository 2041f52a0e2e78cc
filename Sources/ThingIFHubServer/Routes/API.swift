// SPDX-License-Identifier: Apache-2.0

// The REST API's handlers: what every route checks first (docs/openapi.yaml).

import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdCore
import Logging
import NIOCore
import ThingIF
import ThingIFHub

/// The handlers. Each checks, in order: the app, the bearer token, the
/// caller and, on a route of one thing, the thing it owns (OwnerMiddleware,
/// before the handler: APIContext), then the body (media type, size, JSON),
/// then calls the app API, which checks the fields; nothing is stored
/// before every check passed.
struct API: Sendable {
    let hub: FrameworkSide
    let security: HubServer.Security
    let tickets: EventTickets

    static let installationHeader = HTTPField.Name("X-Thingif-Installation-ID")!
    /// Kii Cloud's header naming the app, where its path does not.
    static let appIDHeader = HTTPField.Name("X-Kii-AppID")!

    // MARK: checks

    func checkApp(_ context: APIContext) throws {
        guard context.parameters.get("appID") == hub.options.appID else { throw HubError.appNotFound }
    }

    /// The user whose token the request carries: 401 for none, an unknown
    /// token or a thing's token.
    func user(_ request: Request, _ context: APIContext) throws -> UserRecord {
        guard let u = hub.app.user(token: try token(request, context)) else { throw HubError.invalidToken }
        try spend("user:" + u.userID)
        return u
    }

    /// The operator's routes (the enrollment import, firmware images): the
    /// app, then `Authorization: Bearer <adminToken>`, compared in constant
    /// time; 403 WRONG_TOKEN for none or any other token (a user's, a
    /// thing's), 404 when the hub has no adminToken (the routes are off).
    /// One rule for every operator route.
    func requireAdmin(_ request: Request, _ context: APIContext, route: String, off: String) throws {
        try checkApp(context)
        guard let admin = security.adminToken else {
            throw HubError.notFound("NOT_FOUND", "\(off) is off: the hub has no adminToken")
        }
        let given = request.headers[.authorization].flatMap(BearerToken.parse)
        guard let given, LibCrypto.equal(Array(given.utf8), Array(admin.utf8)) else {
            throw HubError(403, "WRONG_TOKEN", "\(route) needs Authorization: Bearer <adminToken>")
        }
    }

    /// The request's bearer token, after the app: 401 for none.
    private func token(_ request: Request, _ context: APIContext) throws -> String {
        try checkApp(context)
        guard let value = request.headers[.authorization], let token = BearerToken.parse(value) else {
            throw HubError.unauthorized()
        }
        return token
    }

    /// The caller and the thing `path` names, which it must own, with
    /// Kii's checks, answers and budgets in their order (the caller's 401
    /// and budget, the thing's 404, the thing's budget), from one read of
    /// both (`AppAPI.user(token:owning:)`: one statement on an SQL store).
    /// OwnerMiddleware calls it once per request: handlers take its answer
    /// from the request context.
    func owner(_ request: Request, _ context: APIContext, _ path: OwnedPath) throws -> OwnedThing {
        let token = try token(request, context)
        let tid: String
        do {
            tid = try pathThingID(context, path)
        } catch {
            // A path that names no thing: the caller is checked first, as always.
            _ = try user(request, context)
            throw error
        }
        guard let read = hub.app.user(token: token, owning: tid) else { throw HubError.invalidToken }
        try spend("user:" + read.user.userID)
        let owned: OwnedThing
        switch read.thing {
        case .success(let o): owned = o
        case .failure(let e):
            if case .thingID(kiiNotFound: true) = path, e.code == HubError.thingNotFound(tid).code {
                throw HubError.thingIDNotFound(tid)
            }
            throw e
        }
        try spend("thing:" + tid)
        return owned
    }

    /// The thingID the path names.
    private func pathThingID(_ context: APIContext, _ path: OwnedPath) throws -> String {
        switch path {
        case .target: return try targetThingID(context)
        case .thingID: return try param(context, "thingID")
        }
    }

    /// The raw bearer token of the request (after `user` accepted it).
    func bearer(_ request: Request) -> String {
        request.headers[.authorization].flatMap(BearerToken.parse) ?? ""
    }

    /// Takes one request of `key`'s budget: 429 with Retry-After when spent.
    func spend(_ key: String) throws {
        guard let limiter = security.rateLimiter else { return }
        let now = Platform.epochMs()
        guard limiter.allow(key, now: now) else {
            throw RateLimited(retryAfterSeconds: limiter.retryAfterSeconds(key, now: now))
        }
    }

    func object(_ request: Request) async throws -> JSON {
        try await Body.object(request, limit: security.limits.maxBody)
    }

    func param(_ context: APIContext, _ name: String) throws -> String {
        guard let raw = context.parameters.get(name), let v = raw.percentDecoded(), !v.isEmpty else {
            throw HubError.invalid("bad \(name) in the path")
        }
        return v
    }

    /// The thingID of the path's `thing:{thingID}` target: 404 for another kind.
    func targetThingID(_ context: APIContext) throws -> String {
        let target = try param(context, "target")
        guard target.hasPrefix("thing:"), target.count > 6 else {
            throw HubError.notFound("TARGET_NOT_FOUND", "the target must be thing:{thingID}, not \(target)")
        }
        return String(target.dropFirst(6))
    }

    /// Spends the budgets of a call made before any identity: the source
    /// address's (X-Forwarded-For only from a trusted proxy) and the app's.
    func spendAnonymous(_ request: Request) throws {
        if let limiter = security.addressLimiter {
            let key = ClientAddress.key(
                peer: request.headers[HTTPConnectionLimits.peerHeader],
                forwardedFor: request.headers[HTTPConnectionLimits.forwardedFor], trusted: security.trustedProxies)
            let now = Platform.epochMs()
            guard limiter.allow(key, now: now) else {
                hub.metrics.refused("address_budget")
                throw RateLimited(retryAfterSeconds: limiter.retryAfterSeconds(key, now: now))
            }
        }
        if let limiter = security.appLimiter {
            let now = Platform.epochMs()
            guard limiter.allow("app", now: now) else {
                hub.metrics.refused("app_budget")
                throw RateLimited(retryAfterSeconds: limiter.retryAfterSeconds("app", now: now))
            }
        }
    }

    /// Runs costly work (a password hash, a broker credential hand-out) on
    /// the hub's CostlyWork pool; a full queue answers 503 with Retry-After
    /// at once. The handler's thread is never held meanwhile.
    func costly<T: Sendable>(_ body: @escaping @Sendable () -> T) async throws -> T {
        do {
            return try await hub.costly.run(body)
        } catch let busy as CostlyWork.Busy {
            hub.metrics.refused("costly_busy")
            throw busy
        }
    }

    func value<T>(_ r: Result<T, HubError>) throws -> T {
        switch r {
        case .success(let v): return v
        case .failure(let e): throw e
        }
    }

    func int64Query(_ request: Request, _ name: String) throws -> Int64? {
        guard let s = request.uri.queryParameters.get(name) else { return nil }
        guard let v = Int64(s) else { throw HubError.invalid("\(name) must be an integer, not \(s)") }
        return v
    }

}
