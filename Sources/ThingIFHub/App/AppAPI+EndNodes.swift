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
    /// is the user's (403); then the rules whoever asks (EndNodeRules.onboard).
    public func onboardEndNode(user: UserRecord, form: EndNodeOnboardingForm) -> Result<ThingRecord, HubError> {
        guard let owner = form.owner else {
            return .failure(.invalid("\"owner\" is required: a string", field: "owner"))
        }
        let gateway: ThingRecord
        switch ownedGateway(user: user, form.gateway) {
        case .failure(let e): return .failure(e)
        case .success(let g): gateway = g.thing
        }
        guard identities(of: user).contains(owner) else {
            return .failure(.forbidden("the caller is not \(owner) and not a member of it"))
        }
        return endNodeRules.onboard(onto: gateway, owners: [owner], form: form).map { t in
            // The gateway learns of it (GATEWAYS.md §4.2); onboarding the same
            // end node again tells it again, which it takes as the same.
            endNodes.announce(
                .added(thingID: t.thingID, vendorThingID: form.vendorThingID, thingType: t.thingType), to: gateway)
            return t
        }
    }

    /// The end-node rules with this hub's store, password budget and limits.

    /// The gateway a form names, when `user` owns it; 404 THING_NOT_FOUND
    /// otherwise, by the name the form used. (The one ownership check an
    /// app call makes itself: the body names the thing, not the path.)
    func ownedGateway(user: UserRecord, _ named: EndNodeOnboardingForm.Gateway) -> Result<OwnedThing, HubError> {
        switch named {
        case .thingID(let id):
            return ownedThing(user: user, thingID: id).mapError { _ in .thingIDNotFound(id) }
        case .vendorThingID(let v):
            let thing = store.thing(vendorThingID: v)
            return owned(thing, user: user, thingID: thing?.thingID ?? "").mapError { _ in .thingVendorIDNotFound(v) }
        }
    }

    /// One page of the end nodes of the owned gateway: at most `limit` (default and
    /// cap `maxPage`), in onboarding order, after the end node the
    /// `paginationKey` of the previous page names. `next` is the key of
    /// the following page, nil after the last. A thing that is no gateway
    /// carries none: an empty page, as the store answers.
    public func endNodes(
        of gateway: OwnedThing, paginationKey: String?, limit: Int?,
        maxPage: Int = HubLimits.defaultMaxHistoryPage
    ) -> Result<(endNodes: [ThingRecord], next: String?), HubError> {
        endNodeRules.page(
            gatewayThingID: gateway.thingID, paginationKey: paginationKey, limit: limit, maxPage: maxPage)
    }

    /// The end node `endNodeThingID` of the owned gateway; 404
    /// END_NODE_NOT_FOUND when it is not an end node of that gateway
    /// (unknown, removed, a thing of another layout, or another gateway's).
    public func endNode(of gateway: OwnedThing, endNodeThingID: String) -> Result<ThingRecord, HubError> {
        endNodeRules.endNode(gatewayThingID: gateway.thingID, endNodeThingID: endNodeThingID)
    }

    /// Removes an end node of an owned gateway, as a thing is deleted
    /// (ThingRemoval: the hub's deletion order); the refusals of `endNode`.
    public func removeEndNode(of gateway: OwnedThing, endNodeThingID: String) -> Result<Void, HubError> {
        endNode(of: gateway, endNodeThingID: endNodeThingID).flatMap {
            removal.remove($0)
        }
    }

    /// An end node as the list (`full` false) or the read (`full`) answers
    /// it (EndNodeRules.json).
    public func endNodeJSON(_ t: ThingRecord, full: Bool) -> JSON {
        EndNodeRules.json(t, full: full, online: presence.isOnline(t.thingID))
    }
}
