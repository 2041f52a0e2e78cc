// SPDX-License-Identifier: Apache-2.0

import ThingIF

/// What a thing's request asks, read once from its path (what follows
/// …/thing-if/apps/{appID}/ or …/api/apps/{appID}/, over MQTT and over
/// HTTP): the one table of the thing API's request kinds. Everything that
/// used to read the path again (the bootstrap triage, the lanes' shared
/// commit, the body limit, the metrics' label, the router) asks this.
/// Adding a request kind is a case here, a row in `init` and one in
/// `ThingRequests.route`. The method is the request's (in its payload),
/// checked by the route.
public enum RequestRoute: Equatable, Sendable {
    /// thing-if onboardings: by the thing, or a gateway's end node (Kii's media type).
    case onboarding
    /// api installations: a new MQTT installation.
    case installation
    /// api installations/{installationID}/mqtt-endpoint.
    case mqttEndpoint(installationID: String)
    /// targets/{target}/commands/{commandID}: a command the thing ran by itself.
    case commandReport(target: String, commandID: String)
    /// targets/{target}/commands/{commandID}/action-results.
    case actionResults(target: String, commandID: String)
    /// targets/{target}/states.
    case states(target: String)
    /// things/{gatewayThingID}/end-nodes[?query][/{endNode}[/connection]]:
    /// a gateway's calls for its end nodes; `rest` is what follows the
    /// gateway's thingID and "end-nodes" (only the list takes a query).
    case endNodes(gatewayThingID: String, rest: [String], query: String?)
    /// things/{thingID}/firmware-version or …/thing-type.
    case thingField(thingID: String, field: ThingField)
    /// targets/{target}/automation-report.
    case automationReport(target: String)
    /// things/{thingID}/updates/{jobID}[/hashes/{page}|/blocks/{n}]: the
    /// thing's update job (UpdatePath.parse: any other form is unknown).
    case update(thingID: String, jobID: String, UpdatePart)

    /// What an update request asks of its job (UpdatePath's cases, kept
    /// here as a Sendable value).
    public enum UpdatePart: Equatable, Sendable {
        case report
        case hashes(page: Int)
        case block(n: Int)
    }
    /// No request the thing API knows; `bootstrap` when it is under a
    /// bootstrap prefix all the same (installations/…/mqtt-endpoint).
    case unknown(bootstrap: Bool)

    public init(api: Topics.API, path: String) {
        // At '/' bytes, as Topics splits (not between Characters).
        let parts = path.utf8.split(separator: UInt8(ascii: "/"), omittingEmptySubsequences: false).map {
            String(decoding: $0, as: UTF8.self)
        }
        switch (api, parts.count) {
        case (.thingIF, 1) where parts[0] == "onboardings":
            self = .onboarding
        case (.kii, 1) where parts[0] == "installations":
            self = .installation
        case (.kii, 3) where parts[0] == "installations" && parts[2] == "mqtt-endpoint":
            self = .mqttEndpoint(installationID: parts[1])
        case (.thingIF, 4) where parts[0] == "targets" && parts[2] == "commands":
            self = .commandReport(target: parts[1], commandID: parts[3])
        case (.thingIF, 5) where parts[0] == "targets" && parts[2] == "commands" && parts[4] == "action-results":
            self = .actionResults(target: parts[1], commandID: parts[3])
        case (.thingIF, 3) where parts[0] == "targets" && parts[2] == "states":
            self = .states(target: parts[1])
        case (.thingIF, 3) where parts[0] == "targets" && parts[2] == "automation-report":
            self = .automationReport(target: parts[1])
        case (.thingIF, 3...5)
        where parts[0] == "things" && (parts[2] == "end-nodes" || parts[2].hasPrefix("end-nodes?")):
            let list = parts[2].split(separator: "?", maxSplits: 1).map(String.init)
            // Only the list takes a query string (the gateway's sync at connect).
            guard parts.count == 3 || list.count == 1 else {
                self = .unknown(bootstrap: false)
                return
            }
            self = .endNodes(
                gatewayThingID: parts[1], rest: Array(parts.dropFirst(3)), query: list.count > 1 ? list[1] : nil)
        case (.thingIF, 4...6) where parts[0] == "things" && parts[2] == "updates":
            // The core's reading of the suffix: a job ID that is a name, a
            // number without sign or leading zero, nothing more.
            guard let u = UpdatePath.parse(parts[2...].joined(separator: "/")) else {
                self = .unknown(bootstrap: false)
                return
            }
            switch u {
            case .report(let j): self = .update(thingID: parts[1], jobID: j, .report)
            case .hashes(let j, let p): self = .update(thingID: parts[1], jobID: j, .hashes(page: p))
            case .block(let j, let n): self = .update(thingID: parts[1], jobID: j, .block(n: n))
            }
        case (.thingIF, 3) where parts[0] == "things" && ThingField(rawValue: parts[2]) != nil:
            self = .thingField(thingID: parts[1], field: ThingField(rawValue: parts[2])!)
        default:
            self = .unknown(
                bootstrap: api == .kii && path.hasPrefix("installations/") && path.hasSuffix("/mqtt-endpoint"))
        }
    }

    /// Bootstrap work: onboarding, a new MQTT installation or its endpoint
    /// (each hashes a password or hands out broker credentials). It never
    /// runs on the request lanes, where commands are served.
    public var isBootstrap: Bool {
        switch self {
        case .onboarding, .installation, .mqttEndpoint: return true
        case .unknown(let bootstrap): return bootstrap
        default: return false
        }
    }

    /// The target ("thing:{thingID}") of a request that may share its
    /// lane's transaction (ThingRequests+Lanes), nil for any other: a
    /// thing's results or state upload, which touch nothing but the store
    /// before their commit (their other effects go through `afterCommit`).
    public var sharedCommitTarget: String? {
        switch self {
        case .states(let target), .actionResults(let target, _): return target
        default: return nil
        }
    }

    /// Whether the body is a state upload's, which has a limit of its own.
    public var isStateUpload: Bool {
        if case .states = self { return true }
        return false
    }

    /// A block or a hash page of an update job: read on UpdateServing's
    /// pool, never on the request lanes.
    public var isUpdateRead: Bool {
        switch self {
        case .update(_, _, .block), .update(_, _, .hashes): return true
        default: return false
        }
    }

    /// Its label in `/metrics` (thingif_hub_requests_total's kind).
    public var metricKind: String {
        switch self {
        case .onboarding: return "onboarding"
        case .installation: return "installation"
        case .mqttEndpoint: return "mqtt-endpoint"
        case .actionResults: return "action-results"
        case .commandReport: return "command-report"
        case .states: return "state"
        case .thingField(_, .firmwareVersion): return "firmware-version"
        case .automationReport: return "automation-report"
        case .update(_, _, .report): return "update-report"
        case .update(_, _, .block): return "update-block"
        case .update(_, _, .hashes): return "update-hashes"
        // A gateway's calls for its end nodes: the list, the read, the removal, …/connection.
        case .endNodes: return "end-nodes"
        case .thingField, .unknown: return "other"
        }
    }
}
