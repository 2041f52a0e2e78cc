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
/// body (media type, size, JSON), then calls the app API, which checks
/// ownership and the fields; nothing is stored before every check passed.
struct API: Sendable {
    let hub: FrameworkSide
    let security: HubServer.Security
    let tickets: EventTickets

    static let installationHeader = HTTPField.Name("X-Thingif-Installation-ID")!
    /// Kii Cloud's header naming the app, where its path does not.
    static let appIDHeader = HTTPField.Name("X-Kii-AppID")!

    // MARK: checks

    func checkApp(_ context: BasicRequestContext) throws {
        guard context.parameters.get("appID") == hub.options.appID else { throw HubError.appNotFound }
    }

    /// The user whose token the request carries: 401 for none, an unknown
    /// token or a thing's token.
    func user(_ request: Request, _ context: BasicRequestContext) throws -> UserRecord {
        guard let u = hub.app.user(token: try token(request, context)) else { throw HubError.invalidToken }
        try spend("user:" + u.userID)
        return u
    }

    /// The request's bearer token, after the app: 401 for none.
    private func token(_ request: Request, _ context: BasicRequestContext) throws -> String {
        try checkApp(context)
        guard let value = request.headers[.authorization], let token = BearerToken.parse(value) else {
            throw HubError.unauthorized()
        }
        return token
    }

    /// `user`, then `ownedThing` (the path's target), with the same checks,
    /// answers and budgets in the same order, from one read of both
    /// (`AppAPI.user(token:owning:)`: one statement on an SQL store, not
    /// one per check on every call on a thing).
    func owner(_ request: Request, _ context: BasicRequestContext) throws -> (user: UserRecord, thing: ThingRecord) {
        let token = try token(request, context)
        guard let tid = try? targetThingID(context) else {
            // A target that is no thing's: the caller is checked first, as always.
            let u = try user(request, context)
            return (u, try ownedThing(context, u))
        }
        guard let read = hub.app.user(token: token, owning: tid) else { throw HubError.invalidToken }
        try spend("user:" + read.user.userID)
        let thing = try value(read.thing)
        try spend("thing:" + tid)
        return (read.user, thing)
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

    func param(_ context: BasicRequestContext, _ name: String) throws -> String {
        guard let raw = context.parameters.get(name), let v = raw.percentDecoded(), !v.isEmpty else {
            throw HubError.invalid("bad \(name) in the path")
        }
        return v
    }

    /// The prologue of a route on one thing's resources: the caller, then
    /// the thing it targets (`thingID`'s checks and budgets).
    func caller(_ request: Request, _ context: BasicRequestContext) throws -> (user: UserRecord, thingID: String) {
        let (user, thing) = try owner(request, context)
        return (user, thing.thingID)
    }

    /// As `caller`, then the path parameter `name` (a command's, a
    /// trigger's, an action set's …) in that order.
    func caller(_ request: Request, _ context: BasicRequestContext, _ name: String) throws -> (
        user: UserRecord, thingID: String, id: String
    ) {
        let (user, tid) = try caller(request, context)
        return (user, tid, try param(context, name))
    }

    /// The thingID of a `thing:{thingID}` target that `user` may act on.
    /// The thing's budget is spent only after that check: a refused call
    /// (404 for a thing the caller does not own) spends the caller's budget
    /// (`user`), never its target's.
    func thingID(_ context: BasicRequestContext, _ user: UserRecord) throws -> String {
        try ownedThing(context, user).thingID
    }

    /// As `thingID`, with the thing's record.
    func ownedThing(_ context: BasicRequestContext, _ user: UserRecord) throws -> ThingRecord {
        try spendOwned(user, try targetThingID(context))
    }

    /// The thingID of the path's `thing:{thingID}` target: 404 for another kind.
    func targetThingID(_ context: BasicRequestContext) throws -> String {
        let target = try param(context, "target")
        guard target.hasPrefix("thing:"), target.count > 6 else {
            throw HubError.notFound("TARGET_NOT_FOUND", "the target must be thing:{thingID}, not \(target)")
        }
        return String(target.dropFirst(6))
    }

    /// Checks that `user` owns (or is in a group that owns) thing `id`,
    /// then spends the thing's budget; returns the thing.
    /// As `spendOwned`, for a path that names the thing by thingID
    /// (`…/things/{thingID}/…`): Kii's 404 THING_NOT_FOUND there.
    @discardableResult
    func spendOwnedByID(_ user: UserRecord, _ id: String) throws -> ThingRecord {
        do {
            return try spendOwned(user, id)
        } catch let e as HubError where e.code == HubError.thingNotFound(id).code {
            throw HubError.thingIDNotFound(id)
        }
    }

    func spendOwned(_ user: UserRecord, _ id: String) throws -> ThingRecord {
        let t = try value(hub.app.ownedThing(user: user, thingID: id))
        try spend("thing:" + id)
        return t
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
