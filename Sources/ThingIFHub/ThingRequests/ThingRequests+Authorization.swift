// SPDX-License-Identifier: Apache-2.0

import ThingIF

/// Who a thing's request acts for: the thing whose token it carries and,
/// over MQTT, one of that thing's own client IDs.
extension ThingRequests {
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
            return .failure(error(401, "UNAUTHORIZED", "an Authorization: Bearer token is required"))
        }
        // A failure of the store is a 500, which the thing sends again; a
        // 401 it would drop for good.
        let found = lookup?(token) ?? store.thingRead(accessToken: token)
        if case .failed = found { return .failure(storageFailed) }
        guard case .found(var t) = found else {
            return .failure(
                overHTTP
                    ? error(
                        403, "WRONG_TOKEN", "the access token is not valid: unknown, expired, revoked or not a thing's")
                    : error(401, "INVALID_ACCESS_TOKEN", "the access token is not valid"))
        }
        // A looked-up record has no raw token; the caller's is the one it knows.
        t.accessToken = token
        return .success(t)
    }

    /// The request's token must be the thing's and, over MQTT, the request
    /// must come from one of the thing's own MQTT installations (client IDs);
    /// over HTTP (`clientID` nil) the token is the whole credential.
    func authorize(_ req: KiiRequest, thingID: String, clientID: String?) -> KiiResponse? {
        if case .failure(let r) = authorized(req, thingID: thingID, clientID: clientID) { return r }
        return nil
    }

    /// As `authorize`, with the thing's record (read once for the request).
    func authorized(_ req: KiiRequest, thingID: String, clientID: String?, lookup: ThingLookup? = nil) -> Auth {
        switch authenticate(req, overHTTP: clientID == nil, lookup: lookup) {
        case .failure(let r): return .failure(r)
        case .success(let t):
            guard t.thingID == thingID else {
                return .failure(error(403, "FORBIDDEN", "the token does not belong to \(thingID)"))
            }
            if let clientID, !t.installations.values.contains(clientID) {
                return .failure(
                    error(403, "FORBIDDEN", "client \(clientID) is not an MQTT installation of \(thingID)"))
            }
            return .success(t)
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
    /// may act for it (its token, one of its client IDs), else the answer
    /// that refuses it.
    func forTarget(
        _ req: KiiRequest, _ target: String, clientID: String?, lookup: ThingLookup? = nil,
        _ body: (ThingRecord) -> KiiResponse
    ) -> KiiResponse {
        switch authorizedTarget(req, target, clientID: clientID, lookup: lookup) {
        case .refused(let answer): return answer
        case .thing(let t): return body(t)
        }
    }

    /// The thing of a "thing:{thingID}" target when the request may act for
    /// it (its token, one of its client IDs), else the answer that refuses it.
    func authorizedTarget(_ req: KiiRequest, _ target: String, clientID: String?, lookup: ThingLookup? = nil)
        -> Target
    {
        guard let tid = thingID(fromTarget: target) else {
            return .refused(error(404, "TARGET_NOT_FOUND", "no target \(target)"))
        }
        switch authorized(req, thingID: tid, clientID: clientID, lookup: lookup) {
        case .failure(let denied): return .refused(denied)
        case .success(let t): return .thing(t)
        }
    }

}
