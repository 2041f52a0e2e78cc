// SPDX-License-Identifier: Apache-2.0

import ThingIF

/// A gateway's own calls for its end nodes (docs/GATEWAYS.md §3.2, §3.3,
/// §4.1), over MQTT from one of its client IDs or over HTTP with its token:
/// onboarding one, the list, one end node, its removal and Kii's
/// …/connection. Who may ask is decided here (the gateway's own token);
/// what then happens is EndNodeRules', which the owner's calls share.
/// Given the things' store, the end-node rules, the removal, presence, the
/// end nodes' statuses, the event sink and the requests' authorization.
final class EndNodeRequests: @unchecked Sendable {
    let store: ThingStore
    let endNodeRules: EndNodeRules
    let removal: ThingRemoval
    let presence: Presence
    let endNodes: EndNodes
    let events: HubEvents
    let authorization: RequestAuthorization
    /// The longest page of the list a gateway syncs.
    let maxPage: Int

    init(
        store: ThingStore, endNodeRules: EndNodeRules, removal: ThingRemoval, presence: Presence, endNodes: EndNodes,
        events: HubEvents, authorization: RequestAuthorization, maxPage: Int
    ) {
        self.store = store
        self.endNodeRules = endNodeRules
        self.removal = removal
        self.presence = presence
        self.endNodes = endNodes
        self.events = events
        self.authorization = authorization
        self.maxPage = maxPage
    }

    /// Whether a request is Kii's end-node onboarding (by its media type).
    static func isEndNodeOnboarding(_ req: KiiRequest) -> Bool {
        req.method == "POST" && req.header("Content-Type").map(MediaType.isOnboardingEndNode) == true
    }

    static let mediaTypes =
        "Content-Type must be \(MediaType.onboardingEndNodeWithGatewayThingID) or \(MediaType.onboardingEndNodeWithGatewayVendorThingID)"

    /// POST things/{gw}/end-nodes on the gateway's own request lane: only
    /// gw's role may publish under its client ID, which has spent its
    /// budget already (`serve`). Its token is checked here as every
    /// request of the gateway's is (gw's own, from one of its client IDs),
    /// then the form; only the KDF goes to the costly pool.
    func onLane(_ req: KiiRequest, gatewayThingID gw: String, clientID: String) -> ThingRequests.Served {
        guard Self.isEndNodeOnboarding(req) else {
            return .now(.refusal(415, "UNSUPPORTED_MEDIA_TYPE", Self.mediaTypes))
        }
        switch authorization.authorized(req, thingID: gw, clientID: clientID, endNodes: false) {
        case .failure(let denied): return .now(denied)
        case .success(let gateway): return onboarding(req, by: gateway, clientID: clientID)
        }
    }

    /// Kii's OnboardingEndNodeWith… over HTTP (on the costly pool, the REST
    /// layer's `costlyWork`), or over MQTT when its head was too long for
    /// `accept` to see the media type (the bootstrap budget's pool): the
    /// token, then `endNodeOnboarding`, whose KDF runs here.
    func byGateway(_ req: KiiRequest, clientID: String?) -> KiiResponse {
        // The whole request's media type (`accept` scanned only the head).
        guard Self.isEndNodeOnboarding(req) else { return .refusal(415, "UNSUPPORTED_MEDIA_TYPE", Self.mediaTypes) }
        let gateway: ThingRecord
        switch authorization.authenticate(req, overHTTP: clientID == nil) {
        case .failure(let r): return r
        case .success(let t): gateway = t
        }
        if let clientID, !gateway.installations.values.contains(clientID) {
            return
                .refusal(403, "FORBIDDEN", "client \(clientID) is not an MQTT installation of \(gateway.thingID)")
        }
        switch onboarding(req, by: gateway, clientID: clientID) {
        case .now(let r): return r
        case .costly(let work): return work()
        // An onboarding answers now or as costly work, never later.
        case .later: return .storageFailed
        }
    }

    /// Kii's OnboardingEndNodeWith… by the gateway itself (§3.2), whose
    /// token `gateway` is (from one of its own client IDs over MQTT):
    /// naming itself as the gateway; `owner`, when named, one of its
    /// owners, else its owners own the end node. Everything cheap is
    /// checked now (the form), so that only a gateway's well-formed request
    /// reaches the costly work: the onboarding itself, with the password's
    /// KDF (EndNodeRules.onboard). The answer carries the end node's access
    /// token over HTTP only, where it is the caller's own answer; over MQTT
    /// it would cross p/{clientID}/resp, which the bootstrap identity may
    /// read for a client ID it knows, and libthingif does not keep it.
    func onboarding(_ req: KiiRequest, by gateway: ThingRecord, clientID: String?) -> ThingRequests.Served {
        guard case .success(let j) = JSON.parse(req.body) else {
            return .now(.refusal(400, "INVALID_INPUT_DATA", "the body must be a JSON object"))
        }
        let byVendorThingID = MediaType.names(
            req.header("Content-Type") ?? "", MediaType.onboardingEndNodeWithGatewayVendorThingID)
        let form: EndNodeOnboardingForm
        switch EndNodeOnboardingForm.parse(j, byGatewayVendorThingID: byVendorThingID) {
        case .failure(let e): return .now(.refusal(e))
        case .success(let f): form = f
        }
        let named: String
        let itself: Bool
        switch form.gateway {
        case .thingID(let id): (named, itself) = (id, id == gateway.thingID)
        case .vendorThingID(let v): (named, itself) = (v, v == gateway.vendorThingID)
        }
        guard itself else {
            return .now(
                .refusal(
                    403, "FORBIDDEN",
                    "the token is not gateway \(named)'s: a gateway onboards end nodes onto itself only"))
        }
        guard gateway.layoutPosition == .gateway else { return .now(.refusal(.notAGateway(gateway.thingID))) }
        // A gateway gives an end node to its own owners only: never to a stranger.
        if let owner = form.owner, !gateway.owners.contains(owner) {
            return .now(.refusal(403, "FORBIDDEN", "\(owner) is not an owner of \(gateway.thingID)"))
        }
        let owners = form.owner.map { [$0] } ?? gateway.owners
        return .costly { [self] in
            switch endNodeRules.onboard(onto: gateway, owners: owners, form: form) {
            case .failure(let e): return .refusal(e)
            case .success(let t):
                events.event("\(gateway.thingID) onboarded its end node \(form.vendorThingID) as \(t.thingID)")
                let o = JSON.object()
                o.set("endNodeThingID", string: t.thingID)
                if clientID == nil { o.set("accessToken", string: t.accessToken) }
                return .answer(200, o)
            }
        }
    }

    /// things/{gw}/end-nodes[?bestEffortLimit=N&paginationKey=K] (GET),
    /// …/end-nodes/{E} (GET, DELETE) and …/end-nodes/{E}/connection (PUT)
    /// by gw itself, answered as the owner's REST routes answer them.
    /// `rest` is what follows end-nodes (no level, {E}, or {E} and
    /// "connection"). Only gw's own token (never an end node's: it
    /// carries no end nodes), over MQTT from one of its client IDs.
    func call(
        _ req: KiiRequest, gatewayThingID gw: String, rest: [String], query: String?, clientID: String?
    ) -> KiiResponse {
        if case .failure(let denied) = authorization.authorized(req, thingID: gw, clientID: clientID, endNodes: false) {
            return denied
        }
        let rules = endNodeRules
        let r: Result<KiiResponse, HubError>
        switch rest.count {
        case 0:
            r = list(gw, query: query)
        case 1 where req.method == "DELETE":
            r = rules.endNode(gatewayThingID: gw, endNodeThingID: rest[0]).flatMap { removal.remove($0) }.map {
                events.event("\(gw) removed its end node \(rest[0])")
                return .answer(204)
            }
        case 1:
            r = rules.endNode(gatewayThingID: gw, endNodeThingID: rest[0]).map {
                .answer(200, EndNodeRules.json($0, full: true, online: presence.isOnline($0.thingID)))
            }
        default:
            r = rules.endNode(gatewayThingID: gw, endNodeThingID: rest[0]).flatMap {
                connection(req, $0, clientID: clientID)
            }
        }
        switch r {
        case .success(let answer): return answer
        case .failure(let e): return .refusal(e)
        }
    }

    /// A page of gw's end nodes: {"results":[…],"nextPaginationKey"?}.
    private func list(_ gw: String, query: String?) -> Result<KiiResponse, HubError> {
        let q = Self.queryParameters(query ?? "")
        var limit: Int?
        if let s = q["bestEffortLimit"] {
            guard let n = Int(s), n > 0 else {
                return .failure(.invalid("bestEffortLimit must be a positive integer, not \(s)"))
            }
            limit = n
        }
        return endNodeRules.page(
            gatewayThingID: gw, paginationKey: q["paginationKey"], limit: limit,
            maxPage: maxPage
        ).map { page in
            let results = JSON.array()
            for t in page.endNodes {
                results.append(EndNodeRules.json(t, full: false, online: presence.isOnline(t.thingID)))
            }
            let o = JSON.object()
            o.set("results", results)
            if let next = page.next { o.set("nextPaginationKey", string: next) }
            return .answer(200, o)
        }
    }

    /// Kii's PUT …/end-nodes/{E}/connection {"online":true|false}: the
    /// gateway's word on whether E is reachable, kept and published as E's
    /// status under the calling installation (over HTTP, every one of the
    /// gateway's) by EndNodes.reported.
    private func connection(_ req: KiiRequest, _ endNode: ThingRecord, clientID: String?) -> Result<
        KiiResponse, HubError
    > {
        let j = JSON.parse(req.body)
        guard case .success(let body) = j, body.isObject, let online = body["online"]?.boolValue else {
            // An object without a boolean "online" has that one field at fault.
            let object = (try? j.get())?.isObject ?? false
            return .failure(
                .invalid("the body must be {\"online\":true} or {\"online\":false}", field: object ? "online" : nil))
        }
        guard let gateway = endNode.gatewayThingID.flatMap({ store.thing(id: $0) }) else {
            return .failure(.endNodeNotFound(endNode.thingID))
        }
        endNodes.reported(gateway: gateway, endNode: endNode, up: online, clientID: clientID)
        return .success(.answer(204))
    }

    /// The parameters of a query string ("a=1&b=2"), percent-decoded; the
    /// first of a repeated name wins, a name without "=" is empty.
    static func queryParameters(_ query: String) -> [String: String] {
        var out: [String: String] = [:]
        for pair in query.split(separator: "&") {
            let kv = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            let name = percentDecoded(kv[0])
            if out[name] == nil { out[name] = kv.count > 1 ? percentDecoded(kv[1]) : "" }
        }
        return out
    }

    /// `s` with %XX decoded and "+" read as a space; a malformed escape is kept as it is.
    static func percentDecoded(_ s: Substring) -> String {
        var bytes: [UInt8] = []
        let u = Array(s.utf8)
        var i = 0
        while i < u.count {
            if u[i] == UInt8(ascii: "%"), i + 2 < u.count, let h = hex(u[i + 1]), let l = hex(u[i + 2]) {
                bytes.append(h << 4 | l)
                i += 3
            } else {
                bytes.append(u[i] == UInt8(ascii: "+") ? UInt8(ascii: " ") : u[i])
                i += 1
            }
        }
        return String(decoding: bytes, as: UTF8.self)
    }

    private static func hex(_ c: UInt8) -> UInt8? {
        switch c {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): return c - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): return c - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): return c - UInt8(ascii: "A") + 10
        default: return nil
        }
    }
}
