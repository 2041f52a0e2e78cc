// SPDX-License-Identifier: Apache-2.0

import CThingIF
import CThingIFTestSupport
import Foundation
import Testing
import ThingIF
@testable import ThingIFHub
import ThingIFHubServer

@Suite("Home Assistant discovery", .serialized, .offPool)
struct HomeAssistantTests {
    /// Home Assistant discovery on, and a broker login for the test's own
    /// Home Assistant client (its username and password).
    static func homeAssistantOn(_ e: HubAPIEnv) async throws -> (user: String, password: String) {
        let user = "ha-" + Platform.randomHex(bytes: 4)
        let password = Platform.randomHex(bytes: 16)
        let problem = await offPool {
            e.hub.homeAssistant.provisionClient(username: user, password: password, prefix: "homeassistant")
        }
        try #require(problem == nil, "\(problem ?? "")")
        await offPool { e.hub.homeAssistant.enable(HomeAssistantOptions()) }
        return (user, password)
    }

    /// Home Assistant's MQTT client, with the login homeAssistantOn made; connected.
    static func homeAssistantClient(_ e: HubAPIEnv, user: String, password: String) async throws -> MqttProbe {
        let ha = try await offPool {
            Result {
                try MqttProbe(
                    port: e.env.broker.port, clientID: "ha-probe-\(Platform.randomHex(bytes: 4))", username: user,
                    password: password)
            }
        }.get()
        try #require(ha.isConnected, "connack \(String(describing: ha.connackCode))")
        return ha
    }

    /// Home Assistant's discovery takes a config only on a topic its
    /// TOPIC_MATCHER (homeassistant/components/mqtt/discovery.py) matches:
    /// node and object IDs of [a-zA-Z0-9_-] alone. A thing ID holds a '.'.
    static let discoveryTopic = try! NSRegularExpression(
        pattern: #"^homeassistant/\w+/(?:[a-zA-Z0-9_-]+/)?[a-zA-Z0-9_-]+/config$"#)

    @Test("Discovery topics match Home Assistant's pattern, whatever the thing ID holds")
    func discoveryTopicsMatch() {
        for tid in ["th.0123abcd", "th.a.b-c_d", "th.Ünï cödé/+#"] {
            let entity = HATraitEntity(component: .number, alias: "AirConditionerAlias", member: "setPresetTemperature")
            for topic in [
                HATopics.config(prefix: "homeassistant", thingID: tid),
                HATraitMapping.configTopic(prefix: "homeassistant", thingID: tid, entity)
            ] {
                let range = NSRange(topic.startIndex..., in: topic)
                #expect(Self.discoveryTopic.firstMatch(in: topic, range: range) != nil, "\(topic)")
            }
        }
        #expect(
            HATopics.config(prefix: "homeassistant", thingID: "th.01") == "homeassistant/climate/thingif_th_01/config")
    }

    @Test(
        "Home Assistant discovery for an end node: its own device, via_device its gateway's; availability follows its presence behind the gateway; its entity goes with its gateway"
    )
    func homeAssistantEndNode() async throws {
        try await withHubAPI { e in
            let (haUser, haPassword) = try await Self.homeAssistantOn(e)

            let (uid, token) = try await e.user()
            // A gateway onboarded by its owner, then by itself (its MQTT identity).
            let gateway = try await GatewayRequestsTests.gateway(e, "GW-HA-1", uid: uid, token: token)
            let gw = gateway.id, gwToken = gateway.token
            // An end node of the mapped type (an air conditioner on the gateway's bus).
            let n = try await e.call(
                "POST", "\(e.thingIF)/onboardings", token: token,
                json: [
                    "gatewayThingID": gw, "endNodeVendorThingID": "AC-HA-EN-1", "endNodePassword": "pw",
                    "owner": "user:\(uid)", "endNodeThingType": "AirConditioner"
                ], contentType: "application/vnd.kii.OnboardingEndNodeWithGatewayThingID+json")
            try #require(n.status == 200, "\(n.status) \(n.text)")
            let en = try #require(n.string("endNodeThingID"))
            let configTopic = "homeassistant/climate/thingif_\(en.replacingOccurrences(of: ".", with: "_"))/config"
            let availabilityTopic = "thingif/\(en)/availability"

            let ha = try await Self.homeAssistantClient(e, user: haUser, password: haPassword)
            defer { ha.stop() }
            for topic in ["homeassistant/#", "thingif/+/availability"] {
                let code = await offPool { ha.subscribe(topic) }
                #expect(code.map { $0 < 0x80 } == true, "\(topic): \(String(describing: code))")
            }
            func availability() -> String? {
                ha.messages(on: availabilityTopic).last.map { String(decoding: $0.payload, as: UTF8.self) }
            }
            func connection(_ online: Bool) async throws {
                try await EndNodeOwnerTests.connection(e, gateway: gw, token: gwToken, en, online: online)
            }

            // The gateway says the end node is reachable: its device appears, through the gateway's.
            try await connection(true)
            let config = try #require(await offPool { ha.waitForMessage(on: configTopic) }, "no config")
            // Retained: a subscriber that comes later gets it too.
            let late = try await offPool {
                Result { try TopicListener(port: e.env.broker.port, topics: [configTopic]) }
            }
            .get()
            defer { late.stop() }
            let kept = await offPool {
                poll(timeoutMs: 30_000) { late.payloads(on: configTopic).contains { !$0.isEmpty } }
            }
            #expect(kept, "the config is retained")
            let schemaDoc = try JSON.parse(config.payload).get()
            #expect(HAClimateSchema.problems(schemaDoc) == [], "the config against Home Assistant's climate schema")
            let doc = try #require(parseObject(String(decoding: config.payload, as: UTF8.self)))
            let device = try #require(doc["device"] as? [String: Any])
            #expect(device["identifiers"] as? [String] == ["thingif_\(en)"], "one device per end node")
            #expect(device["via_device"] as? String == "thingif_\(gw)", "\(device)")
            #expect(doc["availability_topic"] as? String == availabilityTopic)
            #expect(
                await offPool { poll(timeoutMs: 30_000) { availability() == "online" } }, "\(availability() ?? "-")")

            // Its presence goes: so does its availability.
            try await connection(false)
            #expect(
                await offPool { poll(timeoutMs: 30_000) { availability() == "offline" } }, "\(availability() ?? "-")")

            // A thingif gateway over MQTT: online, then its end node's status; its Will takes the end node's
            // availability with it.
            let link = try await offPool { Result { try GatewayRequestsTests.Link(e, gateway, will: true) } }.get()
            defer { link.stop() }
            #expect(link.probe.publish(Topics.status(clientID: gateway.topic), Array("online".utf8), retain: true))
            #expect(
                link.probe.publish(
                    Topics.endNodeStatus(clientID: gateway.topic, endNode: en), Array("online".utf8), retain: true))
            #expect(
                await offPool { poll(timeoutMs: 30_000) { availability() == "online" } }, "\(availability() ?? "-")")
            link.probe.client.disconnectWithWill()
            #expect(
                await offPool { poll(timeoutMs: 30_000) { availability() == "offline" } }, "\(availability() ?? "-")")

            // Deleting the gateway deletes its end node: its entity leaves Home Assistant.
            let deleted = try await e.call("DELETE", "\(e.api)/targets/thing:\(gw)", token: token)
            #expect(deleted.status == 204, "\(deleted.status) \(deleted.text)")
            let emptied = await offPool {
                poll(timeoutMs: 30_000) { ha.messages(on: configTopic).last?.payload.isEmpty == true }
            }
            #expect(emptied, "the end node's config is emptied with its gateway")
            #expect(await offPool { poll(timeoutMs: 30_000) { availability() == "" } }, "\(availability() ?? "-")")
        }
    }

    /// The keys the hub must send for its controls (the schema itself has
    /// no required key).
    static let required: Set<String> = [
        "unique_id", "availability_topic", "modes", "mode_command_topic", "mode_state_topic", "power_command_topic",
        "temperature_command_topic", "temperature_state_topic", "fan_mode_command_topic", "fan_modes",
        "current_temperature_topic", "current_humidity_topic"
    ]

    @Test(
        "Home Assistant discovery: retained config, re-publish on its birth, its commands run on the C appliance, state and availability follow, bad input refused"
    )
    func homeAssistant() async throws {
        try await withHubAPI { e in
            let events = HubLines()
            e.hub.onEvent = events.sink
            let (haUser, haPassword) = try await Self.homeAssistantOn(e)
            // Metrics are open when no token is set.
            #expect(try await e.get("/metrics", token: nil).status == 200)

            let (uid, token) = try await e.user()
            let (tid, thingToken) = try await e.onboard("AC-HA-1", owner: "user:\(uid)", token: token)
            let t = try await e.appliance(thingID: tid, token: thingToken) { t in
                #expect(ct_behave_upload_state(t.ct, "setPresetTemperature", 1) == 0)
            }
            let configTopic = "homeassistant/climate/thingif_\(tid.replacingOccurrences(of: ".", with: "_"))/config"
            let stateTopic = "thingif/\(tid)/state"
            let availabilityTopic = "thingif/\(tid)/availability"

            // Home Assistant, with its own broker identity.
            let ha = try await Self.homeAssistantClient(e, user: haUser, password: haPassword)
            defer { ha.stop() }
            // What it may read; a thing's topics it may not.
            for topic in ["homeassistant/#", "thingif/+/state", "thingif/+/availability"] {
                let code = await offPool { ha.subscribe(topic) }
                #expect(code.map { $0 < 0x80 } == true, "\(topic): \(String(describing: code))")
            }
            let refused = await offPool { ha.subscribe("p/#") }
            #expect(refused.map { $0 >= 0x80 } == true, "p/#: \(String(describing: refused))")

            // The retained config, checked against the climate schema.
            let config = try #require(await offPool { ha.waitForMessage(on: configTopic) }, "no config")
            #expect(config.retain, "the config is retained")
            let doc = try #require(parseObject(String(decoding: config.payload, as: UTF8.self)))
            let schemaDoc = try JSON.parse(config.payload).get()
            #expect(HAClimateSchema.problems(schemaDoc) == [], "the config against Home Assistant's climate schema")
            for (what, broken) in HAClimateSchema.brokenCopies(of: schemaDoc) {
                #expect(!HAClimateSchema.problems(broken).isEmpty, "the schema check accepts \(what)")
            }
            let keys = Set(doc.keys)
            #expect(
                HomeAssistantTests.required.subtracting(keys).isEmpty,
                "missing: \(HomeAssistantTests.required.subtracting(keys))")
            #expect(doc["unique_id"] as? String == "thingif_\(tid)")
            #expect(
                (doc["device"] as? [String: Any])?["identifiers"] as? [String] == ["thingif_\(tid)"],
                "the device block ties the entity to one device")
            #expect((doc["device"] as? [String: Any])?["via_device"] == nil, "a standalone thing is nobody's end node")
            #expect(doc["fan_modes"] as? [String] == (0...10).map(String.init))
            #expect(doc["availability_topic"] as? String == availabilityTopic)
            #expect(doc["temperature_state_topic"] as? String == stateTopic)
            #expect(doc["modes"] as? [String] == ["off", "cool"])
            #expect(doc["min_temp"] as? Int == 16 && doc["max_temp"] as? Int == 30)
            let temperatureTopic = try #require(doc["temperature_command_topic"] as? String)
            #expect(
                await offPool {
                    poll {
                        ha.messages(on: availabilityTopic).last.map { String(decoding: $0.payload, as: UTF8.self) }
                            == "online"
                    }
                })

            // Home Assistant's birth message: every config again.
            let seen = ha.messages(on: configTopic).count
            ha.publish("homeassistant/status", Array("online".utf8))
            #expect(await offPool { poll { ha.messages(on: configTopic).count > seen } }, "configs not published again")

            // A temperature command: a Thing-IF command by the hub, run to DONE.
            // The hub reports the command once it stored it: then it is listed.
            ha.publish(temperatureTopic, Array("22.0".utf8))
            let issued = await offPool { events.first(containing: "homeassistant: setPresetTemperature ") }
            let reported = try #require(issued?.components(separatedBy: " as ").last, "\(events.all)")
            let r = try await e.get("\(e.target(tid))/commands", token: token)
            let haCommand = (r.json["commands"] as? [[String: Any]])?.first {
                $0["issuer"] as? String == HATopics.issuer
            }
            let cid = try #require(haCommand?["commandID"] as? String, "no command issued by \(HATopics.issuer)")
            #expect(cid == reported, "\(issued ?? "")")
            let done = try await e.waitForFinished(tid, cid, token: token)
            #expect(done["commandState"] as? String == "DONE", "\(done)")
            #expect(done["issuer"] as? String == "hub:homeassistant")
            // Meant for now: it lives 60 s (CommandLifetimes.homeAssistantTimeToLive).
            let created = try #require((done["createdAt"] as? NSNumber)?.int64Value)
            let expires = try #require((done["expiresAt"] as? NSNumber)?.int64Value, "\(done)")
            #expect(expires - created >= 59_000 && expires - created <= 61_000, "\(expires - created) ms")
            let actions = done["actions"] as? [[String: Any]]
            #expect((actions?.first?["setPresetTemperature"] as? [String: Any])?["presetTemperature"] as? Int == 22)
            // The thing's state upload reaches the state topic.
            let stateSeen = await offPool {
                poll(timeoutMs: 30_000) {
                    ha.messages(on: stateTopic).contains {
                        parseObject(String(decoding: $0.payload, as: UTF8.self))?["presetTemperature"] as? Int == 22
                    }
                }
            }
            #expect(
                stateSeen, "state: \(ha.messages(on: stateTopic).map { String(decoding: $0.payload, as: UTF8.self) })")

            // Bad input: a log line each, no command, no crash.
            ha.publish(temperatureTopic, Array("warm".utf8))
            ha.publish(temperatureTopic, Array(repeating: UInt8(ascii: "9"), count: 4096))
            ha.publish("thingif/no-such-thing/set/temperature", Array("22".utf8))
            ha.publish("thingif/\(tid)/set/fan_mode", Array("99".utf8))
            let logged = await offPool {
                events.wait(count: 4) { $0.hasPrefix("homeassistant: command refused") }
            }
            #expect(logged, "\(events.all.filter { $0.hasPrefix("homeassistant") })")
            let lines = events.all.filter { $0.hasPrefix("homeassistant: command refused") }
            #expect(lines.contains { $0.contains("temperature must be a number") })
            #expect(lines.contains { $0.contains("4096 bytes") })
            #expect(lines.contains { $0.contains("unknown thing") })
            let listed = try await e.get("\(e.target(tid))/commands", token: token)
            #expect((listed.json["commands"] as? [Any])?.count == 1, "only the one good command")
            let m = try await e.metrics(token: nil)
            #expect(m.value("thingif_hub_homeassistant_commands_total", ["outcome": "issued"]) == 1)
            #expect(m.value("thingif_hub_homeassistant_commands_total", ["outcome": "refused"]) == 4)
            #expect(e.hub.presence.isOnline(tid), "the hub still serves the thing")

            // The appliance stops: availability flips to offline.
            await offPool { _ = t.destroy() }
            let offline = await offPool {
                poll(timeoutMs: 30_000) {
                    ha.messages(on: availabilityTopic).last.map { String(decoding: $0.payload, as: UTF8.self) }
                        == "offline"
                }
            }
            #expect(
                offline,
                "availability: \(ha.messages(on: availabilityTopic).map { String(decoding: $0.payload, as: UTF8.self) })"
            )
        }
    }

    @Test(
        "thingif-hub --ha-mappings-file: a second thing type's config follows the file; `thingif thing delete` removes the thing and empties it",
        .enabled(if: CLIEndToEnd.available, "needs thingif-hub (with --http-port) and thingif next to the test bundle"),
        .timeLimit(.minutes(3)))
    func mappingsFileAndCLIDelete() throws {
        let cli = try #require(CLIEndToEnd.cli), hubExe = try #require(CLIEndToEnd.hub)
        let scene = try ProcessScene(prefix: "thingif-ha-mappings")
        defer { scene.end() }
        let broker = scene.broker, root = scene.root
        // A heater: the appliance's actions, another thing type, its own
        // range, no fan, the room temperature from another state field.
        let file = root + "/ha-mappings.json"
        try Data(
            #"""
            {"mappings":[{"thingType":"Heater","component":"climate","name":"Heater",
              "schema":"AirConditioner-Demo","schemaVersion":1,
              "power":{"action":"turnPower","param":"power","state":"power"},
              "targetTemperature":{"action":"setPresetTemperature","param":"presetTemperature",
                                   "state":"presetTemperature","min":5,"max":28,"step":1},
              "currentTemperature":{"state":"roomTemperature"}}]}
            """#.utf8
        ).write(to: URL(fileURLWithPath: file))
        let hubLog = root + "/hub.log"
        let (hubPID, url) = try startHubProcess(
            hubExe, broker: broker, logPath: hubLog, storeArgs: ["--memory", "--ha-mappings-file", file])
        scene.children.append(hubPID)
        let env = ["THINGIF_HUB_URL": url, "THINGIF_CONFIG": root + "/cli/cli.json"]
        func thingif(_ args: String...) throws -> (status: Int32, output: String) {
            try runProgram(cli, args, environment: env)
        }
        var r = try thingif("user", "create")
        #expect(r.status == 0, "\(r.output)")
        r = try thingif("onboard", "HT-0001", "demo-pass", "--thing-type", "Heater", "--json")
        #expect(r.status == 0, "\(r.output)")
        let onboarded = try JSON.parse(r.output).get()
        let thingID = try #require(onboarded["thingID"]?.stringValue)
        let thingToken = try #require(onboarded["accessToken"]?.stringValue)

        let configTopic = "homeassistant/climate/thingif_\(thingID.replacingOccurrences(of: ".", with: "_"))/config"
        let listener = try TopicListener(port: broker.port, topics: [configTopic])
        defer { listener.stop() }
        let heater = try ApplianceProcess(
            args: [
                "--port", "\(broker.port)", "--storage", root + "/heater", "--thing-id", thingID, "--token", thingToken
            ],
            logPath: root + "/heater.log")
        try heater.start()
        defer { heater.stop() }

        // The thing came online: its config, from the file's mapping.
        #expect(
            poll(timeoutMs: 30_000) { listener.payloads(on: configTopic).contains { !$0.isEmpty } },
            "no config; hub:\n\(readText(hubLog))\nheater:\n\(heater.log)")
        let text = try #require(listener.payloads(on: configTopic).first { !$0.isEmpty })
        let doc = try JSON.parse(text).get()
        #expect(HAClimateSchema.problems(doc) == [])
        #expect(doc["name"]?.stringValue == "Heater")
        #expect(doc["min_temp"]?.intValue == 5 && doc["max_temp"]?.intValue == 28)
        #expect(doc["device"]?["model"]?.stringValue == "AirConditioner-Demo")
        #expect(doc["current_temperature_template"]?.stringValue == "{{ value_json.roomTemperature }}")
        #expect(doc["fan_modes"] == nil && doc["fan_mode_command_topic"] == nil, "the heater has no fan")
        #expect(doc["current_humidity_topic"] == nil)

        // thingif thing delete: the config is emptied, the thing is gone.
        r = try thingif("thing", "delete", thingID)
        #expect(r.status == 0 && r.output.contains("thing \(thingID) deleted"), "\(r.output)")
        #expect(
            poll(timeoutMs: 30_000) { listener.payloads(on: configTopic).last == "" },
            "\(listener.payloads(on: configTopic))")
        r = try thingif("state", "get", thingID)
        #expect(r.status == 1 && r.output.contains("HTTP 404"), "\(r.output)")
        r = try thingif("thing", "delete", thingID)
        #expect(r.status == 1 && r.output.contains("TARGET_NOT_FOUND"), "\(r.output)")
        r = try thingif("thing", "delete")
        #expect(r.status == 2, "a usage error: \(r.output)")
    }

    @Test(
        "Home Assistant settings: the example mappings file is the built-in mapping; bad prefixes and files are refused"
    )
    func homeAssistantSettings() throws {
        let root = URL(fileURLWithPath: BrokerSecrets.repoRoot)
        let example = try Data(contentsOf: root.appendingPathComponent("examples/ha-mappings.json"))
        let parsed = try HAClimateMapping.parse(Array(example)).get()
        #expect(parsed == [.airConditionerDemo])
        #expect((try? HAClimateMapping.parse(Array(#"{"mappings":[{"thingType":"X"}]}"#.utf8)).get()) == nil)
        #expect((try? HAClimateMapping.parse(Array("not json".utf8)).get()) == nil)
        func load(_ args: [String]) throws -> HubConfig {
            guard case .run(let c) = try HubConfig.load(arguments: args, environment: [:], readFile: { _ in nil })
            else { throw HarnessError("help") }
            return c
        }
        let defaults = try load([])
        #expect(defaults.haDiscovery && defaults.haDiscoveryPrefix == "homeassistant" && defaults.metricsToken == nil)
        let set = try load(["--ha-discovery=false", "--ha-discovery-prefix", "ha/discovery", "--metrics-token", "t"])
        #expect(!set.haDiscovery && set.haDiscoveryPrefix == "ha/discovery" && set.metricsToken == "t")
        for bad in ["ha/#", "+", "", "a//b", "$SYS"] {
            #expect(throws: HubConfig.ConfigError.self) { try load(["--ha-discovery-prefix", bad]) }
        }
        #expect(throws: HubConfig.ConfigError.self) { try load(["--ha-username", "ha"]) }
    }
}
