// SPDX-License-Identifier: Apache-2.0

import ThingIF

/// Who is online, as this hub knows it: each thing's last status and the
/// installation it came online with, which installations announce a status
/// (thingif's library; Kii's SDKs send none), the things whose silent
/// installations had a subscription at the last delivery attempt, and the
/// end nodes online behind their gateways' installations.
///
/// Asked by delivery (where a command goes, whether it waits), Home
/// Assistant (availability), the end nodes' lists, the metrics and the
/// dashboard. Written by the thing requests (statuses, through
/// `CommandDelivery.statusChanged`, which holds the thing's command gate),
/// the end nodes (their statuses), the installations and the removals
/// (forgetting), and the delivery rounds (`reachable`).
///
/// Threads: every method may be called from any thread; one lock, held
/// for no more than a dictionary's work, never while calling out.
public final class Presence: @unchecked Sendable {
    struct State {
        var online: [String: Bool] = [:]  // thingID -> last status seen
        var commandTopic: [String: String] = [:]  // thingID -> the installation whose "online" came last
        var statusTopics: Set<String> = []  // client IDs that sent a status (thingif's library)
        var reachable: [String: Bool] = [:]  // thingID -> a silent installation had a subscription at the last attempt
        var endNodeUp: [String: Set<String>] = [:]  // end node -> installations whose last status was "online"
        var gatewayOf: [String: String] = [:]  // end node in endNodeUp -> its gateway's thingID
    }

    private let state = Locked(State())

    init() {}

    // MARK: things

    /// A status message (`online` or `offline`) of one of the thing's
    /// installations. Returns how many things are online.
    func statusChanged(thingID: String, clientID: String, up: Bool) -> Int {
        state.withLock {
            $0.online[thingID] = up
            $0.statusTopics.insert(clientID)
            if up { $0.commandTopic[thingID] = clientID }
            return Self.onlineCount($0)
        }
    }

    private static func onlineCount(_ d: State) -> Int { d.online.values.filter { $0 }.count }

    /// Online: the thing announced `online` (thingif's library), or, for a
    /// thing whose installations send no status (Kii's SDKs), the broker
    /// had a subscription on one of them at the last delivery attempt; an
    /// end node, by its gateway's word (`endNodeOnline`).
    public func isOnline(_ thingID: String) -> Bool {
        state.withLock {
            ($0.online[thingID] ?? false) || ($0.reachable[thingID] ?? false) || Self.endNodeOnline($0, thingID)
        }
    }

    /// Online by its own status message only.
    func announcedOnline(_ thingID: String) -> Bool { state.withLock { $0.online[thingID] ?? false } }

    /// Every thing this hub has seen a status of.
    var thingsSeen: Set<String> { state.withLock { Set($0.online.keys) } }

    /// The topic the thing last announced itself online with, while it is online.
    func liveTopic(of thingID: String) -> String? {
        state.withLock { $0.online[thingID] == true ? $0.commandTopic[thingID] : nil }
    }

    /// Every thing online by its own status, with the installation its
    /// last `online` came through.
    func onlineThings() -> [(thingID: String, clientID: String)] {
        state.withLock { d in
            d.online.compactMap { id, up in up ? d.commandTopic[id].map { (id, $0) } : nil }
        }
    }

    /// The installation whose `online` came last, online or not since.
    func lastOnlineTopic(of thingID: String) -> String? { state.withLock { $0.commandTopic[thingID] } }

    /// The things whose last `online` came through `clientID`.
    func things(cameOnlineThrough clientID: String) -> [String] {
        state.withLock { d in d.commandTopic.filter { $0.value == clientID }.map(\.key) }
    }

    /// Whether `topic` is an installation that announces its status (thingif's library).
    func announcesStatus(_ topic: String) -> Bool { state.withLock { $0.statusTopics.contains(topic) } }

    /// Which of `topics` announce their status, in one look.
    func announcing(_ topics: some Sequence<String>) -> Set<String> {
        state.withLock { d in Set(topics.filter { d.statusTopics.contains($0) }) }
    }

    /// Whether the thing is online by its status, and which of its
    /// `installations` announce a status, in one look (a command's
    /// delivery: those wait for the thing's next `online`).
    func announced(_ thingID: String, installations: some Sequence<String>) -> (online: Bool, announcing: Set<String>) {
        state.withLock { d in
            (d.online[thingID] ?? false, Set(installations.filter { d.statusTopics.contains($0) }))
        }
    }

    /// A delivery attempt to the thing's silent installations reached a
    /// subscription (true) or none (false).
    func setReachable(_ thingID: String, _ reached: Bool) { state.withLock { $0.reachable[thingID] = reached } }

    // MARK: end nodes

    /// An end node's status under one of its gateway's installations
    /// (p/{clientID}/end-nodes/{endNode}/status, docs/GATEWAYS.md §5).
    func endNodeStatusChanged(endNode: String, gateway: String, clientID: String, up: Bool) {
        state.withLock { d in
            if up {
                d.endNodeUp[endNode, default: []].insert(clientID)
                d.gatewayOf[endNode] = gateway
            } else if d.endNodeUp[endNode]?.remove(clientID) != nil, d.endNodeUp[endNode]?.isEmpty == true {
                d.endNodeUp[endNode] = nil
                d.gatewayOf[endNode] = nil
            }
        }
    }

    /// Whether the last status this hub took for the end node through the
    /// installation `clientID` was "online" (the gateway's own status aside).
    func endNodeSaidUp(_ endNode: String, through clientID: String) -> Bool {
        state.withLock { $0.endNodeUp[endNode]?.contains(clientID) == true }
    }

    /// The end nodes whose last status through `clientID` was "online".
    func endNodes(saidUpThrough clientID: String) -> [String] {
        state.withLock { d in d.endNodeUp.filter { $0.value.contains(clientID) }.map(\.key) }
    }

    /// A removed end node: its presence goes.
    func forgetEndNode(_ endNode: String) {
        state.withLock { d in
            d.endNodeUp[endNode] = nil
            d.gatewayOf[endNode] = nil
        }
    }

    /// The installations through which the end node is online (see
    /// `endNodeOnline`), sorted: where its commands go.
    func endNodeLive(_ endNode: String) -> [String] { state.withLock { Self.endNodeLive($0, endNode) } }

    /// How many end nodes are online now (as `isOnline` counts them): the
    /// end_nodes_online gauge, read at each scrape, so that a gateway's
    /// Will, which takes all its end nodes offline at once, needs no count kept.
    public func endNodesOnline() -> Int {
        state.withLock { d in d.endNodeUp.keys.reduce(0) { $0 + (Self.endNodeOnline(d, $1) ? 1 : 0) } }
    }

    /// An end node is online through an installation whose last status for
    /// it was "online", while that installation is its gateway's live one
    /// by the gateway's own status; an installation that announces no
    /// status (Kii's gateway agent, which reports end nodes by
    /// …/connection only) counts by the end node's word alone. So a
    /// gateway's Will takes all its end nodes offline at once.
    private static func endNodeOnline(_ d: State, _ endNode: String) -> Bool {
        !endNodeLive(d, endNode).isEmpty
    }

    private static func endNodeLive(_ d: State, _ endNode: String) -> [String] {
        guard let ups = d.endNodeUp[endNode], let gateway = d.gatewayOf[endNode] else { return [] }
        return ups.filter { clientID in
            !d.statusTopics.contains(clientID) || (d.online[gateway] == true && d.commandTopic[gateway] == clientID)
        }.sorted()
    }

    // MARK: forgetting

    /// An installation removed: its status, and its end nodes' statuses
    /// (a retired installation of a gateway), no longer count. Their
    /// retained messages, met again at a hub's next start, are refused and
    /// cleared (EndNodes), since no thing has that topic any more.
    func forgetTopic(_ topic: String) {
        state.withLock { d in
            d.statusTopics.remove(topic)
            for (endNode, ups) in d.endNodeUp where ups.contains(topic) {
                d.endNodeUp[endNode]?.remove(topic)
                if d.endNodeUp[endNode]?.isEmpty == true {
                    d.endNodeUp[endNode] = nil
                    d.gatewayOf[endNode] = nil
                }
            }
        }
    }

    /// A deleted thing: everything known of its presence goes. Returns how
    /// many things are online.
    func forget(thingID: String, topics: [String]) -> Int {
        state.withLock { d -> Int in
            d.online[thingID] = nil
            d.commandTopic[thingID] = nil
            d.reachable[thingID] = nil
            d.statusTopics.subtract(topics)
            return Self.onlineCount(d)
        }
    }

    /// Things another hub deleted: their status goes. Returns how many
    /// things are online.
    func forgetStatuses(of thingIDs: [String]) -> Int {
        state.withLock { d -> Int in
            for tid in thingIDs {
                d.online[tid] = nil
                d.commandTopic[tid] = nil
            }
            return Self.onlineCount(d)
        }
    }
}
