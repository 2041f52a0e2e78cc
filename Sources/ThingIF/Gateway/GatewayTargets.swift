// SPDX-License-Identifier: Apache-2.0

/// Whom a message on a command topic is addressed to, by its topic alone.
enum Addressee {
    /// The thing's own command topic (p/{mqttTopic}).
    case own
    /// An end node's command topic p/{G}/end-nodes/{E}/commands: E.
    case endNode(String)
}

/// The target resolver in front of the command pipeline (docs/GATEWAYS.md
/// §2, §4, §5): whom a command is for, the end nodes a gateway carries
/// (the registry), the list read after each connect and the hub's
/// membership events. The pipeline asks it once per message (`addressee`;
/// on an end node's events topic, `eventsEndNode` and `takeMembership`),
/// and once per command for its target (`target(for:)`);
/// what it learns the pipeline tells the firmware and the broker.
///
/// A value in the pipeline's state, behind the pipeline's one lock: no lock
/// or allocation of its own, and a thing on its own pays a topic compare and
/// the reuse of `ownTarget` per command, as before. In a build without
/// gateways (Gateways.built false) it is never a gateway: no end-node topic
/// is addressed, the registry is never read, and the code behind is dropped.
struct GatewayTargets {
    /// The handle is a gateway (thingif_set_layout_position): end-node
    /// topics are its commands.
    var isGateway = false
    /// The end nodes it carries (persisted).
    var registry: EndNodeRegistry
    /// The thing's own target, shared by its commands (see `own`).
    private var ownTarget: CommandTarget?
    /// The end nodes' thingIDs the list read since the last connect has
    /// named so far, or that the hub's events and answers named
    /// meanwhile; nil while no read runs.
    var syncSeen: Set<ByteKey>?
    /// The end nodes forgotten while the read runs: a page answered
    /// before their removal must not bring them back.
    var syncForgotten: Set<ByteKey> = []
    /// Commands for end nodes the registry does not hold, received while
    /// the read runs (a new handle does not know them yet, and the hub
    /// may deliver on the retained status of the one before): taken by
    /// the first pass after the read, refused only then. At most the
    /// inbox bound; beyond, refused at once.
    private(set) var awaitingList: [TransportMessage] = []

    init(storage: Storage) {
        registry = EndNodeRegistry(storage: storage)
    }

    /// The gateway's layout, where this build has gateways.
    var gateway: Bool { Gateways.built && isGateway }

    // MARK: whom a message is for

    /// Whom a message on `topic` is for; nil when `topic` is not a command
    /// topic of this thing (a reply, the configuration, anything else).
    static func addressee(of topic: String, identity: Identity, gateway: Bool) -> Addressee? {
        let own = identity.endpoint.mqttTopic
        if topic.equals(own) { return .own }
        guard Gateways.built, gateway, let (clientID, endNode) = Topics.parseEndNodeCommands(topic),
            clientID.equals(own)
        else { return nil }
        return .endNode(endNode)
    }

    /// The end node a message on `topic` is a membership event about: the E
    /// of p/{own}/end-nodes/{E}/events (Topics.endNodeEvents); nil for any
    /// other topic, and always on a thing on its own. What a message is
    /// follows from its topic, never from its payload (GATEWAYS.md §4.2).
    static func eventsEndNode(of topic: String, identity: Identity, gateway: Bool) -> String? {
        guard Gateways.built, gateway, let (clientID, endNode) = Topics.parseEndNodeEvents(topic),
            clientID.equals(identity.endpoint.mqttTopic)
        else { return nil }
        return endNode
    }

    /// The target of the thing's own commands: made once per thingID, so
    /// that a command for the thing itself allocates none.
    mutating func own(_ thingID: String) -> CommandTarget {
        if let t = ownTarget, t.thingID.equals(thingID) { return t }
        let t = CommandTarget.own(thingID)
        ownTarget = t
        return t
    }

    /// The target of a command for `to`. An end node the registry does not
    /// hold (or is removing) gets a target with a refusal: its commands are
    /// answered, never run (GATEWAYS.md §7).
    mutating func target(for to: Addressee, identity: Identity) -> CommandTarget {
        guard Gateways.built, case .endNode(let endNode) = to else { return own(identity.thingID) }
        guard let e = registry.entry(thingID: endNode) else {
            return CommandTarget(thingID: endNode, endNode: endNode, vendorThingID: nil, refusal: .notRegistered)
        }
        return CommandTarget(
            thingID: endNode, endNode: endNode, vendorThingID: e.vendorThingID, refusal: e.removing ? .removed : nil)
    }

    /// A command for an end node the registry does not hold, while the list
    /// read runs: kept for the first pass after it (true), unless `bound`
    /// are waiting already.
    mutating func holdForList(_ m: TransportMessage, target: CommandTarget, bound: Int) -> Bool {
        guard target.refusal == .notRegistered, syncSeen != nil, awaitingList.count < bound else { return false }
        awaitingList.append(m)
        return true
    }

    /// The commands that waited for the list read, once it is over (none
    /// while it runs, and none on a thing on its own).
    mutating func takeAwaiting() -> [TransportMessage] {
        guard Gateways.built, syncSeen == nil, !awaitingList.isEmpty else { return [] }
        defer { awaitingList.removeAll() }
        return awaitingList
    }
}
