// SPDX-License-Identifier: Apache-2.0

import ThingIF

/// A message on the hub's subscriptions, classified once, on libmosquitto's
/// thread (`ThingRequests.accept`), by its topic: the kind travels with the
/// message to the costly pool, the end-node triage or a request lane, and
/// nothing reads the topic again. Each topic is parsed by at most one of
/// the core's parsers (`Topics`), picked by its first level and its count
/// of '/' bytes, which no allocation needs.
struct Inbound: Sendable {
    enum Kind: Sendable {
        /// p/{clientID}/{api}/apps/{appID}/{path}: a thing's request.
        case request(Topics.ParsedRequest, RequestRoute)
        /// c/{CN}/{clientID}/onboardings: a claim onboarding.
        case claim(name: String, clientID: String)
        /// p/{clientID}/status: a thing's availability.
        case status(clientID: String)
        /// p/{clientID}/end-nodes/{endNode}/status, both safe levels.
        case endNodeStatus(clientID: String, endNode: String)
        /// p/{any}/end-nodes/{any}/status whose levels no gateway or end
        /// node can have: the hub clears it (docs/GATEWAYS.md §7).
        case badEndNodeStatus
        /// Anything else: Home Assistant's topics, or nothing the hub serves.
        case other
    }

    let message: MqttClient.Message
    let kind: Kind

    init(_ message: MqttClient.Message) {
        self.message = message
        kind = Self.classify(message.topic)
    }

    /// What the message's partition is of (HubPartitions), nil for a
    /// message every hub takes (statuses, Home Assistant's birth): the
    /// client ID a thing's request or a claim came from, the thing of a
    /// Home Assistant command. Read off the topic alone.
    var partitionKey: String? {
        switch kind {
        case .request(let t, _): return t.clientID
        case .claim(_, let clientID): return clientID
        case .other: return HATopics.commandThing(message.topic)
        case .status, .endNodeStatus, .badEndNodeStatus: return nil
        }
    }

    static func classify(_ topic: String) -> Kind {
        let u = topic.utf8
        guard let first = u.first, u.dropFirst().first == UInt8(ascii: "/") else { return .other }
        var slashes = 0
        for b in u where b == UInt8(ascii: "/") { slashes += 1 }
        switch (first, slashes) {
        case (UInt8(ascii: "c"), 3):
            return Topics.parseClaimRequest(topic).map { .claim(name: $0.name, clientID: $0.clientID) } ?? .other
        case (UInt8(ascii: "p"), 2):
            return Topics.parseStatus(topic).map { .status(clientID: $0) } ?? .other
        case (UInt8(ascii: "p"), 4):
            guard Topics.isEndNodeStatusTopic(topic) else { return .other }
            return Topics.parseEndNodeStatus(topic).map { .endNodeStatus(clientID: $0.clientID, endNode: $0.endNode) }
                ?? .badEndNodeStatus
        case (UInt8(ascii: "p"), 5...):
            guard let r = Topics.parseRequest(topic) else { return .other }
            return .request(r, RequestRoute(api: r.api, path: r.path))
        default:
            return .other
        }
    }
}
