// SPDX-License-Identifier: Apache-2.0

import ThingIF

/// Gateways' end nodes: their onboarding onto a gateway, lists and counts.
/// One part of HubStore (its conventions hold: times in milliseconds since the
/// Unix epoch, JSON as compact text, every method safe to call from any
/// thread).
public protocol EndNodeStore: AnyObject, Sendable {
    /// Onboards an end node onto the gateway `gatewayThingID`, in one
    /// transaction that holds the gateway (onboardings onto one gateway, on
    /// this hub or another, take turns, so none passes the cap). The first
    /// time for `vendorThingID` it creates the thing: layout ENDNODE,
    /// gatewayThingID the gateway, the password stored as its KDF hash,
    /// unless the gateway has `maxEndNodes` end nodes already. Again, for
    /// this gateway's end node with the same password, it is the same thing
    /// (idempotent, not counted against the cap): a nil thingType matches
    /// and is set when given, firmwareVersion is updated when given. Either
    /// way `owners` ("user:…", "group:…") are added (ones it has stay), and
    /// a NEW access token is issued, in the record's accessToken.
    ///
    /// Refusals, in the order they are checked, write nothing: the gateway
    /// unknown (`.noGateway`) or not a GATEWAY (`.notAGateway`); the
    /// vendorThingID known with another password (`.wrongPassword`, checked
    /// before what the thing is, so its layout and gateway are told only to
    /// who knows its password), as a thing that is no end node
    /// (`.notAnEndNode`) or another gateway's end node (`.otherGateway`),
    /// with another thingType (`.wrongType`); the cap (`.tooManyEndNodes`).
    /// The caller checks who may onboard onto the gateway and that the
    /// owners are the right ones.
    func onboardEndNode(
        gatewayThingID: String, vendorThingID: String, password: String, thingType: String?,
        firmwareVersion: String?, owners: [String], maxEndNodes: Int
    ) -> EndNodeOnboarding
    /// The end nodes of the gateway `gatewayThingID`: at most `limit` (at
    /// least one), after the one `after` names (nil: from the first), in
    /// onboarding order (createdAt, then thingID on the same millisecond,
    /// so that pages neither skip nor repeat one, however the list changes
    /// between them). `next` names the last one returned when more follow,
    /// nil at the end. Whole records (lookups: accessToken empty). None for
    /// a thing that is no gateway, or an unknown one: the caller checks the
    /// gateway. nil when the store failed, not an empty page: a gateway
    /// syncing to the list would take that for all its end nodes removed.
    func endNodes(gatewayThingID: String, after: EndNodeCursor?, limit: Int)
        -> (endNodes: [ThingRecord], next: EndNodeCursor?)?
    /// How many end nodes the gateway `gatewayThingID` has (0 for a thing
    /// that is no gateway, or an unknown one); nil when the store failed.
    func endNodeCount(gatewayThingID: String) -> Int?
    /// How many end nodes the store holds, of every gateway (the
    /// end_nodes gauge); nil when the store failed.
    func endNodeTotal() -> Int?
}
