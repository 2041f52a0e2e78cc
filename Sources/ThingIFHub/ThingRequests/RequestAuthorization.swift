// SPDX-License-Identifier: Apache-2.0

import ThingIF

/// Who a thing's request acts for: the thing whose token it carries and,
/// over MQTT, one of that thing's own client IDs. One rule for every
/// handler of the thing requests, given the things' store alone.
struct RequestAuthorization: Sendable {
    let store: ThingStore

    enum Auth {
        case success(ThingRecord)
        case failure(KiiResponse)
    }

    /// Reads the thing a token belongs to.
    typealias ThingLookup = (_ token: String) -> StoreRead<ThingRecord>

    /// The thing whose token the request carries, or a 401. A token that
    /// is no thing's is 401 INVALID_ACCESS_TOKEN over MQTT and, over HTTP,
    /// Kii's 403 WRONG_TOKEN, as the app API answers (docs/DECISIONS.md).
    /// `lookup` reads the thing of a token, `store.thingRead(accessToken:)`
    /// unless a route reads more with it in one go (action results).
    func authenticate(_ req: KiiRequest, overHTTP: Bool, lookup: ThingLookup? = nil) -> Auth {
        guard let token = req.bearerToken else {
            return .failure(.refusal(401, "UNAUTHORIZED", "an Authorization: Bearer token is required"))
        }
        // A failure of the store is a 500, which the thing sends again; a
        // 401 it would drop for good.
        let found = lookup?(token) ?? store.thingRead(accessToken: token)
        if case .failed = found { return .failure(.storageFailed) }
        guard case .found(var t) = found else {
            return .failure(
                overHTTP
                    ? KiiResponse.refusal(
                        403, "WRONG_TOKEN", "the access token is not valid: unknown, expired, revoked or not a thing's")
                    : .refusal(401, "INVALID_ACCESS_TOKEN", "the access token is not valid"))
        }
        // A looked-up record has no raw token; the caller's is the one it knows.
        t.accessToken = token
        return .success(t)
    }

    /// The request's token must be the thing's (or its gateway's, for an end
    /// node: `authorized`) and, over MQTT, the request must come from one of
    /// the token's thing's own MQTT installations (client IDs); over HTTP
    /// (`clientID` nil) the token is the whole credential.
    func authorize(_ req: KiiRequest, thingID: String, clientID: String?) -> KiiResponse? {
        if case .failure(let r) = authorized(req, thingID: thingID, clientID: clientID) { return r }
        return nil
    }

    /// As `authorize`, with the record of `thingID` (read once for the
    /// request). The one rule of docs/GATEWAYS.md §6.1: a token T acts for
    /// X when X is T, or X is an end node whose gateway is T now; and over
    /// MQTT only from one of T's client IDs. Anything else is 403 FORBIDDEN
    /// with the same words whether X exists or not (another gateway's end
    /// node, a guessed thingID, a standalone thing, a removed end node), so
    /// that the answer tells nothing of other things. An end node's own
    /// token over MQTT fails the client-ID check: it has no installation.
    /// `endNodes` false: the route is the thing's own only (the automation
    /// report: an end node has no configuration to report on).
    func authorized(
        _ req: KiiRequest, thingID: String, clientID: String?, lookup: ThingLookup? = nil, endNodes: Bool = true
    ) -> Auth {
        switch authenticate(req, overHTTP: clientID == nil, lookup: lookup) {
        case .failure(let r): return .failure(r)
        case .success(let t):
            var target = t
            if t.thingID != thingID {
                switch endNodes ? endNode(thingID, of: t) : .notFound {
                case .failed: return .failure(.storageFailed)
                case .notFound: return .failure(Self.notTheToken(thingID))
                case .found(let e): target = e
                }
            }
            if let denied = Self.notAnInstallation(clientID, of: t) { return .failure(denied) }
            return .success(target)
        }
    }

    /// Whom a request acts for, by `authorized`'s rule, for a route that
    /// needs its thingID only (action results): `knownEndNode` true when
    /// the token's read said, in the same round trip, that `thingID` is an
    /// end node of the token's gateway now (`FastPaths.thing(accessToken:
    /// command:)`), so an end node's results cost no read more than a
    /// thing's. Otherwise the end node is read as `authorized` reads it.
    func actsFor(
        _ req: KiiRequest, thingID: String, clientID: String?, lookup: @escaping ThingLookup,
        knownEndNode: () -> Bool
    ) -> Result<String, Refusal> {
        switch authenticate(req, overHTTP: clientID == nil, lookup: lookup) {
        case .failure(let r): return .failure(Refusal(r))
        case .success(let t):
            if t.thingID != thingID && !(t.layoutPosition == .gateway && knownEndNode()) {
                switch endNode(thingID, of: t) {
                case .failed: return .failure(Refusal(.storageFailed))
                case .notFound: return .failure(Refusal(Self.notTheToken(thingID)))
                case .found: break
                }
            }
            if let denied = Self.notAnInstallation(clientID, of: t) { return .failure(Refusal(denied)) }
            return .success(thingID)
        }
    }

    /// A refusal's answer, as a Result's failure.
    struct Refusal: Error {
        let answer: KiiResponse
        init(_ answer: KiiResponse) { self.answer = answer }
    }

    /// The same words whether the thing exists or not.
    static func notTheToken(_ thingID: String) -> KiiResponse {
        .refusal(403, "FORBIDDEN", "the token does not belong to \(thingID)")
    }

    /// Over MQTT (`clientID`), the request must come from one of `t`'s installations.
    static func notAnInstallation(_ clientID: String?, of t: ThingRecord) -> KiiResponse? {
        guard let clientID, !t.installations.values.contains(clientID) else { return nil }
        return .refusal(403, "FORBIDDEN", "client \(clientID) is not an MQTT installation of \(t.thingID)")
    }

    /// The end node `thingID` when `gateway` is its gateway now;
    /// `.notFound` for anything else, `.failed` when the store could not
    /// say (a 500 the gateway sends again, not a 403 it would drop). The
    /// record is read at each request, so a removal takes effect at the
    /// gateway's next request.
    func endNode(_ thingID: String, of gateway: ThingRecord) -> StoreRead<ThingRecord> {
        guard gateway.layoutPosition == .gateway else { return .notFound }
        switch store.thingRead(id: thingID) {
        case .failed: return .failed
        case .found(let e) where e.layoutPosition == .endNode && e.gatewayThingID == gateway.thingID: return .found(e)
        default: return .notFound
        }
    }

    func thingID(fromTarget target: String) -> String? {
        target.hasPrefix("thing:") ? String(target.dropFirst(6)) : nil
    }

    enum Target {
        case thing(ThingRecord)
        case refused(KiiResponse)
    }

    /// `body` for the thing of a "thing:{thingID}" target when the request
    /// may act for it (`authorized`), else the answer
    /// that refuses it.
    func forTarget(
        _ req: KiiRequest, _ target: String, clientID: String?, lookup: ThingLookup? = nil, endNodes: Bool = true,
        _ body: (ThingRecord) -> KiiResponse
    ) -> KiiResponse {
        switch authorizedTarget(req, target, clientID: clientID, lookup: lookup, endNodes: endNodes) {
        case .refused(let answer): return answer
        case .thing(let t): return body(t)
        }
    }

    /// The thing of a "thing:{thingID}" target when the request may act for
    /// it (`authorized`), else the answer that refuses it.
    func authorizedTarget(
        _ req: KiiRequest, _ target: String, clientID: String?, lookup: ThingLookup? = nil, endNodes: Bool = true
    ) -> Target {
        guard let tid = thingID(fromTarget: target) else {
            return .refused(.refusal(404, "TARGET_NOT_FOUND", "no target \(target)"))
        }
        switch authorized(req, thingID: tid, clientID: clientID, lookup: lookup, endNodes: endNodes) {
        case .failure(let denied): return .refused(denied)
        case .success(let t): return .thing(t)
        }
    }

}
