// SPDX-License-Identifier: Apache-2.0

import ThingIF

/// A gateway's end nodes, by a user who owns the gateway (docs/GATEWAYS.md
/// §3.2, §3.3): onboarding one, listing, reading and removing them. The
/// gateway's own calls for its end nodes are the thing-request router's.
extension AppAPI {
    /// Onboards an end node onto a gateway `user` owns (directly or through
    /// a group), for the owner the form names, which must be the user or a
    /// group it belongs to. The answer's record carries the end node's new
    /// access token. Runs the password KDF (the store hashes or checks the
    /// end node's password): call it as costly work.
    ///
    /// Checked in this order, nothing stored before all passed: the owner
    /// named (400); the gateway exists and is the user's (404
    /// THING_NOT_FOUND, a stranger cannot tell the two apart); the owner
    /// is the user's (403); the vendorThingID's budget of wrong passwords
    /// (429); then the store's refusals (EndNodeOnboarding), each mapped to
    /// §3.2's table.
    public func onboardEndNode(user: UserRecord, form: EndNodeOnboardingForm) -> Result<ThingRecord, HubError> {
        guard let owner = form.owner else { return .failure(.invalid("\"owner\" is required: a string")) }
        let gateway: ThingRecord
        switch ownedGateway(user: user, form.gateway) {
        case .failure(let e): return .failure(e)
        case .success(let g): gateway = g
        }
        guard identities(of: user).contains(owner) else {
            return .failure(.forbidden("the caller is not \(owner) and not a member of it"))
        }
        // Checked before the store's KDF runs; the store checks it again in
        // its transaction, as a layout never changes but a thing may go.
        guard gateway.layoutPosition == .gateway else { return .failure(.notAGateway(gateway.thingID)) }
        let v = form.vendorThingID
        // Wrong passwords spend the vendorThingID's budget that onboarding
        // by the thing spends, so that guessing an end node's password
        // through its owner's onboarding is no faster than through a thing's.
        let guesses = hub.thingRequests.onboardingLimiter
        let guessKey = "onboard:" + v
        guard guesses.hasToken(guessKey, now: Platform.nowMs()) else {
            return .failure(
                HubError(429, "TOO_MANY_REQUESTS", "too many onboarding attempts for \(v); try again later"))
        }
        let max = Self.maxEndNodes(hub.options.limits)
        switch store.onboardEndNode(
            gatewayThingID: gateway.thingID, vendorThingID: v, password: form.password, thingType: form.thingType,
            firmwareVersion: form.firmwareVersion, owners: [owner], maxEndNodes: max)
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

    /// The gateway a form names, when `user` owns it; 404 THING_NOT_FOUND
    /// otherwise, by the name the form used.
    func ownedGateway(user: UserRecord, _ named: EndNodeOnboardingForm.Gateway) -> Result<ThingRecord, HubError> {
        switch named {
        case .thingID(let id):
            return ownedThing(user: user, thingID: id).mapError { _ in .thingIDNotFound(id) }
        case .vendorThingID(let v):
            let thing = store.thing(vendorThingID: v)
            return owned(thing, user: user, thingID: thing?.thingID ?? "").mapError { _ in .thingVendorIDNotFound(v) }
        }
    }

    /// One page of the end nodes of the gateway `gatewayThingID`, which
    /// `user` must own (404 THING_NOT_FOUND): at most `limit` (default and
    /// cap `maxPage`), in onboarding order, after the end node the
    /// `paginationKey` of the previous page names. `next` is the key of
    /// the following page, nil after the last. A thing that is no gateway
    /// carries none: an empty page, as the store answers.
    public func endNodes(
        user: UserRecord, gatewayThingID: String, paginationKey: String?, limit: Int?,
        maxPage: Int = HubLimits.defaultMaxHistoryPage
    ) -> Result<(endNodes: [ThingRecord], next: String?), HubError> {
        if case .failure = ownedThing(user: user, thingID: gatewayThingID) {
            return .failure(.thingIDNotFound(gatewayThingID))
        }
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

    /// The end node `endNodeThingID` of the gateway `gatewayThingID`, which
    /// `user` must own (404 THING_NOT_FOUND); 404 END_NODE_NOT_FOUND when
    /// it is not an end node of that gateway (unknown, removed, a thing of
    /// another layout, or another gateway's).
    public func endNode(user: UserRecord, gatewayThingID: String, endNodeThingID: String) -> Result<
        ThingRecord, HubError
    > {
        if case .failure = ownedThing(user: user, thingID: gatewayThingID) {
            return .failure(.thingIDNotFound(gatewayThingID))
        }
        guard let t = store.thing(id: endNodeThingID), t.layoutPosition == .endNode,
            t.gatewayThingID == gatewayThingID
        else {
            return .failure(.endNodeNotFound(endNodeThingID))
        }
        return .success(t)
    }

    /// Removes an end node of a gateway `user` owns, as a thing is deleted
    /// (ThingRemoval: the hub's deletion order); the refusals of `endNode`.
    public func removeEndNode(user: UserRecord, gatewayThingID: String, endNodeThingID: String) -> Result<
        Void, HubError
    > {
        endNode(user: user, gatewayThingID: gatewayThingID, endNodeThingID: endNodeThingID).flatMap {
            hub.removal.remove($0)
        }
    }

    /// An end node as the list (`full` false: thingID, vendorThingID,
    /// thingType?, online) or the read (`full`: also firmwareVersion?,
    /// gatewayThingID, createdAt) answers it. "online" is the end node's
    /// own status as the hub holds it for a thing; the end node's presence
    /// behind its gateway (the gateway online and the end node's last
    /// status) replaces it once the gateways' statuses are read.
    public func endNodeJSON(_ t: ThingRecord, full: Bool) -> JSON {
        let o = JSON.object()
        o.set("thingID", string: t.thingID)
        o.set("vendorThingID", string: t.vendorThingID ?? "")
        if let type = t.thingType { o.set("thingType", string: type) }
        if full, let firmware = t.firmwareVersion { o.set("firmwareVersion", string: firmware) }
        o.set("online", .bool(hub.delivery.isOnline(t.thingID)))
        if full {
            o.set("gatewayThingID", string: t.gatewayThingID ?? "")
            o.set("createdAt", .int64(t.createdAt))
        }
        return o
    }
}
