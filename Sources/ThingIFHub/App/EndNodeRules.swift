// SPDX-License-Identifier: Apache-2.0

import ThingIF

/// The rules of a gateway's end nodes that hold whoever asks
/// (docs/GATEWAYS.md §3.2, §3.3): onboarding one onto a gateway, a page of
/// the list, one end node, and their JSON. The caller has decided who may
/// ask: an owner of the gateway (AppAPI+EndNodes) or the gateway itself
/// (EndNodeRequests); both come here so that the two never differ.
struct EndNodeRules {
    let store: any EndNodeStore & ThingStore
    /// Wrong end-node passwords spend the vendorThingID's budget that
    /// onboarding by the thing spends (OnboardingRequests.guesses is this one), so
    /// that guessing an end node's password through any onboarding is no
    /// faster than through a thing's.
    let guesses: RateLimiter
    let limits: HubLimits

    /// Onboards the form's end node onto `gateway` for `owners`, the caller
    /// having checked that it may. The answer's record carries the end
    /// node's new access token. Runs the password KDF (the store hashes or
    /// checks the password): call it as costly work. Checked in this order,
    /// nothing stored before all passed: the layout (409 NOT_A_GATEWAY),
    /// the vendorThingID's budget of wrong passwords (429), then the
    /// store's refusals (EndNodeOnboarding), each mapped to §3.2's table.
    func onboard(onto gateway: ThingRecord, owners: [String], form: EndNodeOnboardingForm) -> Result<
        ThingRecord, HubError
    > {
        // Checked before the store's KDF runs; the store checks it again in
        // its transaction, as a layout never changes but a thing may go.
        guard gateway.layoutPosition == .gateway else { return .failure(.notAGateway(gateway.thingID)) }
        let v = form.vendorThingID
        let guessKey = "onboard:" + v
        guard guesses.hasToken(guessKey, now: Platform.nowMs()) else {
            return .failure(
                HubError(429, "TOO_MANY_REQUESTS", "too many onboarding attempts for \(v); try again later"))
        }
        let max = Self.maxEndNodes(limits)
        switch store.onboardEndNode(
            gatewayThingID: gateway.thingID, vendorThingID: v, password: form.password, thingType: form.thingType,
            firmwareVersion: form.firmwareVersion, owners: owners, maxEndNodes: max)
        {
        case .onboarded(let t, created: _): return .success(t)
        case .noGateway: return .failure(.thingIDNotFound(gateway.thingID))
        case .notAGateway: return .failure(.notAGateway(gateway.thingID))
        case .wrongPassword:
            _ = guesses.allow(guessKey, now: Platform.nowMs())
            return .failure(HubError(403, "WRONG_PASSWORD", "the password of \(v) does not match"))
        case .notAnEndNode: return .failure(.notAnEndNode(v))
        // Moving an end node between two gateways of one owner is not
        // served: the old gateway would have to be told, which needs the
        // membership events that the gateways' presence brings.
        case .otherGateway: return .failure(.endNodeOfAnotherGateway(v))
        case .wrongType:
            return .failure(HubError(409, "THING_TYPE_MISMATCH", "\(v) is registered with another thingType"))
        case .tooManyEndNodes: return .failure(.tooManyEndNodes(gateway.thingID, max: max))
        case .storage: return .failure(.storage)
        }
    }

    /// The setting within the range it may take (a hand-made Options may
    /// hold anything; the configuration checks the range itself).
    static func maxEndNodes(_ limits: HubLimits) -> Int {
        min(
            max(limits.maxEndNodesPerGateway, HubLimits.endNodesPerGatewayRange.lowerBound),
            HubLimits.endNodesPerGatewayRange.upperBound)
    }

    /// One page of the end nodes of `gatewayThingID`: at most `limit`
    /// (default and cap `maxPage`), in onboarding order, after the end node
    /// the `paginationKey` of the previous page names. `next` is the key of
    /// the following page, nil after the last. A thing that is no gateway
    /// carries none: an empty page, as the store answers.
    func page(gatewayThingID: String, paginationKey: String?, limit: Int?, maxPage: Int) -> Result<
        (endNodes: [ThingRecord], next: String?), HubError
    > {
        if let limit, limit < 1 { return .failure(.invalid("bestEffortLimit must be a positive integer")) }
        var after: EndNodeCursor?
        if let paginationKey {
            guard let cursor = Self.cursor(paginationKey) else {
                return .failure(.invalid("paginationKey is not one this hub gave"))
            }
            after = cursor
        }
        let size = min(limit ?? maxPage, max(1, maxPage))
        guard let page = store.endNodes(gatewayThingID: gatewayThingID, after: after, limit: size) else {
            return .failure(.storage)
        }
        return .success((page.endNodes, page.next.map(Self.paginationKey)))
    }

    /// The pagination key of the list after `cursor`: opaque to callers,
    /// "{createdAt}_{thingID}" here (a createdAt has no "_").
    static func paginationKey(_ cursor: EndNodeCursor) -> String { "\(cursor.createdAt)_\(cursor.thingID)" }

    /// The cursor a pagination key names; nil for a key this hub did not give.
    static func cursor(_ key: String) -> EndNodeCursor? {
        guard let sep = key.firstIndex(of: "_"), let at = Int64(key[..<sep]), at >= 0 else { return nil }
        let thingID = String(key[key.index(after: sep)...])
        guard !thingID.isEmpty, thingID.utf8.count <= OnboardingForm.maxField else { return nil }
        return EndNodeCursor(createdAt: at, thingID: thingID)
    }

    /// The end node `endNodeThingID` of `gatewayThingID`; 404
    /// END_NODE_NOT_FOUND when it is not one (unknown, removed, a thing of
    /// another layout, or another gateway's).
    func endNode(gatewayThingID: String, endNodeThingID: String) -> Result<ThingRecord, HubError> {
        guard let t = store.thing(id: endNodeThingID), t.layoutPosition == .endNode,
            t.gatewayThingID == gatewayThingID
        else {
            return .failure(.endNodeNotFound(endNodeThingID))
        }
        return .success(t)
    }

    /// An end node as the list (`full` false: thingID, vendorThingID,
    /// thingType?, online) or the read (`full`: also firmwareVersion?,
    /// gatewayThingID, createdAt) answers it. `online` is the end node's
    /// presence behind its gateway (CommandDelivery.isOnline).
    static func json(_ t: ThingRecord, full: Bool, online: Bool) -> JSON {
        let o = JSON.object()
        o.set("thingID", string: t.thingID)
        o.set("vendorThingID", string: t.vendorThingID ?? "")
        if let type = t.thingType { o.set("thingType", string: type) }
        if full, let firmware = t.firmwareVersion { o.set("firmwareVersion", string: firmware) }
        o.set("online", .bool(online))
        if full {
            o.set("gatewayThingID", string: t.gatewayThingID ?? "")
            o.set("createdAt", .int64(t.createdAt))
        }
        return o
    }
}
