// SPDX-License-Identifier: Apache-2.0

import Testing
@testable import ThingIF
@testable import ThingIFHub

/// The one table of what a message on the hub's subscriptions is (its
/// topic, `Inbound`) and what a thing's request asks (its path,
/// `RequestRoute`), which accept, the lanes, the body limit, the metrics
/// and the router all read.
@Suite("Request routes")
struct RequestRouteTests {
    static func kind(_ topic: String) -> Inbound.Kind { Inbound.classify(topic) }

    @Test("Each topic the hub subscribes to is classified by its first level and its levels")
    func topics() {
        guard case .request(let r, .states(let target)) = Self.kind("p/c1/thing-if/apps/app/targets/thing:th.1/states")
        else {
            Issue.record("a state upload is a request")
            return
        }
        #expect(r.clientID == "c1" && r.appID == "app" && r.api == .thingIF && target == "thing:th.1")
        guard case .request(_, .installation) = Self.kind("p/c1/api/apps/app/installations") else {
            Issue.record("an installation is a request")
            return
        }
        guard case .status(let c) = Self.kind("p/c1/status"), c == "c1" else {
            Issue.record("p/c1/status is a status")
            return
        }
        guard case .endNodeStatus(let gw, let e) = Self.kind("p/gw/end-nodes/th.e1/status"), gw == "gw", e == "th.e1"
        else {
            Issue.record("an end node's status")
            return
        }
        guard case .claim(let name, let id) = Self.kind("c/claim.app.b1/dev-1/onboardings"), name == "claim.app.b1",
            id == "dev-1"
        else {
            Issue.record("a claim onboarding")
            return
        }
    }

    @Test("Hostile and foreign topics are no request: empty levels, wildcards, combining marks, other prefixes")
    func hostileTopics() {
        for topic in [
            "", "p", "p/", "p//status", "px/c1/status", "homeassistant/status", "thingif/th.1/set/mode",
            "p/a/\u{351}b/status", "p/c1/thing-if/apps/app/", "p/c1/nope/apps/app/onboardings",
            "p/c1/thing-if/app/x/onboardings", "c/claim.app.b1/dev-1/resp", "c//dev-1/onboardings",
            "p/c1/end-nodes/e1/commands", "p/c1/end-nodes/e1/events"
        ] {
            guard case .other = Self.kind(topic) else {
                Issue.record("\(topic) should be nothing the hub serves")
                continue
            }
        }
        // Every message on the end-node status subscription is the hub's to take or to clear.
        for topic in ["p/gw/end-nodes/+/status", "p/gw/end-nodes//status", "p//end-nodes/e1/status"] {
            guard case .badEndNodeStatus = Self.kind(topic) else {
                Issue.record("\(topic) should be cleared")
                continue
            }
        }
    }

    @Test("A path is read once into its request kind: bootstrap, shared commit, body limit and metrics follow it")
    func paths() {
        let rows: [(Topics.API, String, RequestRoute)] = [
            (.thingIF, "onboardings", .onboarding),
            (.kii, "installations", .installation),
            (.kii, "installations/i1/mqtt-endpoint", .mqttEndpoint(installationID: "i1")),
            (.thingIF, "targets/thing:t/commands/c1", .commandReport(target: "thing:t", commandID: "c1")),
            (
                .thingIF, "targets/thing:t/commands/c1/action-results",
                .actionResults(target: "thing:t", commandID: "c1")
            ),
            (.thingIF, "targets/thing:t/states", .states(target: "thing:t")),
            (.thingIF, "targets/thing:t/automation-report", .automationReport(target: "thing:t")),
            (.thingIF, "things/gw/end-nodes", .endNodes(gatewayThingID: "gw", rest: [], query: nil)),
            (
                .thingIF, "things/gw/end-nodes?bestEffortLimit=2",
                .endNodes(gatewayThingID: "gw", rest: [], query: "bestEffortLimit=2")
            ),
            (.thingIF, "things/gw/end-nodes/e1", .endNodes(gatewayThingID: "gw", rest: ["e1"], query: nil)),
            (
                .thingIF, "things/gw/end-nodes/e1/connection",
                .endNodes(gatewayThingID: "gw", rest: ["e1", "connection"], query: nil)
            ),
            (.thingIF, "things/t/firmware-version", .thingField(thingID: "t", field: .firmwareVersion)),
            (.thingIF, "things/t/thing-type", .thingField(thingID: "t", field: .thingType)),
            // An update job's (UpdatePath reads the suffix).
            (.thingIF, "things/t/updates/u-1", .update(thingID: "t", jobID: "u-1", .report)),
            (.thingIF, "things/t/updates/u-1/hashes/0", .update(thingID: "t", jobID: "u-1", .hashes(page: 0))),
            (.thingIF, "things/t/updates/u-1/blocks/1023", .update(thingID: "t", jobID: "u-1", .block(n: 1023))),
            (.thingIF, "things/t/updates/u-1/blocks/01", .unknown(bootstrap: false)),
            (.thingIF, "things/t/updates/../blocks/1", .unknown(bootstrap: false)),
            (.thingIF, "things/t/updates/u-1/blocks/1/x", .unknown(bootstrap: false)),
            (.kii, "things/t/updates/u-1", .unknown(bootstrap: false)),
            // Not the thing API's: the query is the list's only; fields are two.
            (.thingIF, "things/gw/end-nodes?x/e1", .unknown(bootstrap: false)),
            (.thingIF, "things/t/nickname", .unknown(bootstrap: false)),
            (.kii, "onboardings", .unknown(bootstrap: false)),
            (.thingIF, "installations", .unknown(bootstrap: false)),
            (.thingIF, "targets/thing:t/states/x", .unknown(bootstrap: false)),
            // Still the bootstrap identity's: never on a request lane.
            (.kii, "installations/a/b/mqtt-endpoint", .unknown(bootstrap: true))
        ]
        for (api, path, expected) in rows {
            #expect(RequestRoute(api: api, path: path) == expected, "\(api) \(path)")
        }
        #expect(RequestRoute.onboarding.isBootstrap && RequestRoute.installation.isBootstrap)
        #expect(RequestRoute.mqttEndpoint(installationID: "i").isBootstrap)
        #expect(!RequestRoute.states(target: "thing:t").isBootstrap)
        #expect(RequestRoute.states(target: "thing:t").sharedCommitTarget == "thing:t")
        #expect(RequestRoute.actionResults(target: "thing:t", commandID: "c").sharedCommitTarget == "thing:t")
        #expect(RequestRoute.commandReport(target: "thing:t", commandID: "c").sharedCommitTarget == nil)
        #expect(RequestRoute.states(target: "thing:t").isStateUpload && !RequestRoute.onboarding.isStateUpload)
        #expect(RequestRoute.thingField(thingID: "t", field: .firmwareVersion).metricKind == "firmware-version")
        #expect(RequestRoute.thingField(thingID: "t", field: .thingType).metricKind == "other")
        #expect(RequestRoute.endNodes(gatewayThingID: "g", rest: [], query: nil).metricKind == "end-nodes")
        #expect(RequestRoute.update(thingID: "t", jobID: "j", .block(n: 0)).isUpdateRead)
        #expect(RequestRoute.update(thingID: "t", jobID: "j", .hashes(page: 0)).isUpdateRead)
        #expect(!RequestRoute.update(thingID: "t", jobID: "j", .report).isUpdateRead)
        #expect(RequestRoute.update(thingID: "t", jobID: "j", .block(n: 0)).metricKind == "update-block")
    }

    @Test("A request on the wrong method is 404 NOT_FOUND, whatever its kind")
    func methods() throws {
        let hub = try #require(
            FrameworkSide(
                FrameworkSide.Options(appID: Env.appID, appKey: Env.appKey, brokerPort: 1),
                store: MemoryStore(secrets: .fastForTests)))
        for (method, path) in [
            ("GET", "onboardings"), ("DELETE", "targets/thing:t/states"), ("POST", "things/t/firmware-version"),
            ("POST", "targets/thing:t/commands/c1/action-results"), ("PUT", "things/gw/end-nodes/e1"),
            ("DELETE", "things/gw/end-nodes"), ("POST", "things/t/updates/u-1"),
            ("PUT", "things/t/updates/u-1/blocks/0"), ("DELETE", "things/t/updates/u-1/hashes/0")
        ] as [(String, String)] {
            let r = hub.thingRequests.route(
                KiiRequest(method: method, headers: [], body: []), api: .thingIF, path: path, clientID: "c1")
            #expect(r.status == 404 && r.bodyText.contains("NOT_FOUND"), "\(method) \(path): \(r.status)")
        }
    }
}
