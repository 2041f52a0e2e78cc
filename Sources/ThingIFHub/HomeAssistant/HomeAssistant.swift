// SPDX-License-Identifier: Apache-2.0

import ThingIF

/// How one thing type shows up in Home Assistant: a `climate` entity
/// (https://www.home-assistant.io/integrations/climate.mqtt/) whose controls
/// become Thing-IF schema actions. Read from JSON (docs: README "Home
/// Assistant"; examples/ha-mappings.json):
///
///     {"thingType":"AirConditioner","component":"climate","name":"Air conditioner",
///      "schema":"AirConditioner-Demo","schemaVersion":1,
///      "power":{"action":"turnPower","param":"power","state":"power"},
///      "targetTemperature":{"action":"setPresetTemperature","param":"presetTemperature",
///                           "state":"presetTemperature","min":16,"max":30,"step":1},
///      "fanMode":{"action":"setFanSpeed","param":"fanSpeed","state":"fanSpeed","modes":[0,1,2,3]},
///      "currentTemperature":{"state":"currentTemperature"},
///      "currentHumidity":{"state":"currentHumidity"}}
public struct HAClimateMapping: Sendable, Equatable {
    public struct Control: Sendable, Equatable {
        public var action: String
        public var param: String
        public var state: String
    }

    public var thingType: String
    public var name: String
    public var schema: String
    public var schemaVersion: Int
    public var power: Control
    public var temperature: Control
    public var minTemp: Int
    public var maxTemp: Int
    public var tempStep: Int
    public var fan: Control?
    public var fanModes: [Int]
    public var currentTemperatureState: String?
    public var currentHumidityState: String?

    /// The seeds' AirConditioner-Demo (examples-c/aircon.c): thingType
    /// AirConditioner, schema AirConditioner-Demo version 1.
    public static let airConditionerDemo = HAClimateMapping(
        thingType: "AirConditioner", name: "Air conditioner", schema: "AirConditioner-Demo", schemaVersion: 1,
        power: Control(action: "turnPower", param: "power", state: "power"),
        temperature: Control(action: "setPresetTemperature", param: "presetTemperature", state: "presetTemperature"),
        minTemp: 16, maxTemp: 30, tempStep: 1,
        fan: Control(action: "setFanSpeed", param: "fanSpeed", state: "fanSpeed"), fanModes: Array(0...10),
        currentTemperatureState: "currentTemperature", currentHumidityState: "currentHumidity")

    /// Parses {"mappings":[…]} or a single mapping object; a problem names the field.
    public static func parse(_ bytes: [UInt8]) -> Result<[HAClimateMapping], HubError> {
        guard case .success(let j) = JSON.parse(bytes) else { return .failure(bad("the file is not JSON")) }
        let items = j["mappings"]?.elements ?? (j.isObject ? [j] : [])
        guard !items.isEmpty else { return .failure(bad("no mappings")) }
        var out: [HAClimateMapping] = []
        for (i, m) in items.enumerated() {
            switch decode(m) {
            case .success(let x): out.append(x)
            case .failure(let why): return .failure(bad("mapping \(i): \(why.message)"))
            }
        }
        return .success(out)
    }

    static func bad(_ s: String) -> HubError { HubError(400, "INVALID_MAPPING", s) }

    static func decode(_ m: JSON) -> Result<HAClimateMapping, HubError> {
        func str(_ o: JSON?, _ k: String) -> String? {
            guard let s = o?[k]?.stringValue, !s.isEmpty, s.utf8.count <= 128 else { return nil }
            return s
        }
        func control(_ k: String) -> Control? {
            guard let o = m[k], let a = str(o, "action"), let p = str(o, "param"), let s = str(o, "state") else {
                return nil
            }
            return Control(action: a, param: p, state: s)
        }
        guard m.isObject else { return .failure(bad("not an object")) }
        guard let type = str(m, "thingType"), Topics.isSafeLevel(type) else { return .failure(bad("thingType")) }
        if let c = m["component"], c.stringValue != "climate" { return .failure(bad("component must be climate")) }
        guard let schema = str(m, "schema") else { return .failure(bad("schema")) }
        guard let power = control("power") else { return .failure(bad("power {action,param,state}")) }
        guard let temp = control("targetTemperature") else {
            return .failure(bad("targetTemperature {action,param,state}"))
        }
        let t = m["targetTemperature"]
        let minT = t?["min"]?.intValue ?? 7
        let maxT = t?["max"]?.intValue ?? 35
        let step = t?["step"]?.intValue ?? 1
        guard minT < maxT, step >= 1 else { return .failure(bad("targetTemperature min < max, step >= 1")) }
        let fan = m["fanMode"] == nil ? nil : control("fanMode")
        if m["fanMode"] != nil && fan == nil { return .failure(bad("fanMode {action,param,state,modes}")) }
        let modes = m["fanMode"]?["modes"]?.elements.compactMap(\.intValue) ?? []
        if fan != nil && modes.isEmpty { return .failure(bad("fanMode.modes: whole numbers")) }
        return .success(
            HAClimateMapping(
                thingType: type, name: str(m, "name") ?? type, schema: schema,
                schemaVersion: m["schemaVersion"]?.intValue ?? 1, power: power, temperature: temp,
                minTemp: minT, maxTemp: maxT, tempStep: step, fan: fan, fanModes: modes,
                currentTemperatureState: str(m["currentTemperature"], "state"),
                currentHumidityState: str(m["currentHumidity"], "state")))
    }
}

/// Home Assistant's MQTT discovery for the hub's things (docs: README
/// "Home Assistant"). Topics:
/// - `<prefix>/climate/<thingID>/config` (retained): the entity's config;
/// - `thingif/<thingID>/state` (retained): the thing's merged state JSON;
/// - `thingif/<thingID>/availability` (retained): online / offline;
/// - `thingif/<thingID>/set/{mode,power,temperature,fan_mode}`: Home
///   Assistant's commands, issued as Thing-IF commands by "hub:homeassistant";
/// - `<prefix>/status`: Home Assistant's birth message; "online" makes the
///   hub publish every config again.
public struct HomeAssistantOptions: Sendable {
    public var prefix: String
    public var mappings: [HAClimateMapping]
    public init(prefix: String = "homeassistant", mappings: [HAClimateMapping] = [.airConditionerDemo]) {
        self.prefix = prefix
        self.mappings = mappings
    }

    /// A discovery prefix: one or more topic levels, no wildcards.
    public static func isValidPrefix(_ p: String) -> Bool {
        !p.isEmpty && p.utf8.count <= 64 && !p.hasPrefix("$")
            && p.split(separator: "/", omittingEmptySubsequences: false).allSatisfy {
                !$0.isEmpty && Topics.isSafeLevel(String($0))
            }
    }
}

public enum HATopics {
    public static let issuer = "hub:homeassistant"
    /// The largest command payload taken from Home Assistant, in bytes.
    public static let maxCommandPayload = 64
    public static func config(prefix: String, thingID: String) -> String { "\(prefix)/climate/\(thingID)/config" }
    public static func state(_ thingID: String) -> String { "thingif/\(thingID)/state" }
    public static func availability(_ thingID: String) -> String { "thingif/\(thingID)/availability" }
    public static func command(_ thingID: String, _ field: String) -> String { "thingif/\(thingID)/set/\(field)" }
    public static let commandFilter = "thingif/+/set/+"
    /// What every topic of this bridge's (state, availability, commands) starts with.
    static let thingPrefix = "thingif/"
    public static func status(prefix: String) -> String { "\(prefix)/status" }
}

final class HomeAssistantBridge: @unchecked Sendable {
    let options: HomeAssistantOptions
    unowned let hub: FrameworkSide
    /// Things whose config this process published.
    private let known = Locked(Set<String>())
    /// When Home Assistant's birth message last made the hub publish every
    /// config (ms): at most one such round a second.
    private let lastRound = Locked<Int64>(0)

    /// Home Assistant's status topic, made once: every MQTT message the hub
    /// gets is compared with it.
    private let statusTopic: String

    init(hub: FrameworkSide, options: HomeAssistantOptions) {
        self.hub = hub
        self.options = options
        statusTopic = HATopics.status(prefix: options.prefix)
    }

    var subscriptions: [String] {
        let commands =
            hub.options.sharedSubscription ? "$share/thingif-hub/" + HATopics.commandFilter : HATopics.commandFilter
        return [commands, statusTopic]
    }

    func subscribe() {
        for t in subscriptions { _ = hub.client.subscribe(t, qos: 1) }
    }

    func mapping(_ thingType: String?) -> HAClimateMapping? {
        guard let thingType else { return nil }
        return options.mappings.first { $0.thingType == thingType }
    }

    private func log(_ s: String) { hub.onEvent?("homeassistant: " + s) }

    // MARK: publishing

    /// The discovery config of a thing; field names are Home Assistant's
    /// MQTT climate schema's.
    func config(thingID: String, _ m: HAClimateMapping) -> JSON {
        let c = JSON.object()
        func s(_ k: String, _ v: String) { c.set(k, string: v) }
        func list(_ xs: [String]) -> JSON {
            let a = JSON.array()
            for x in xs { a.append(JSON.string(x) ?? JSON.null()) }
            return a
        }
        let state = HATopics.state(thingID)
        s("name", m.name)
        s("unique_id", "thingif_\(thingID)")
        s("object_id", "thingif_\(thingID)")
        let device = JSON.object()
        device.set("identifiers", list(["thingif_\(thingID)"]))
        device.set("name", string: "\(m.name) \(thingID)")
        device.set("manufacturer", string: "thingif")
        device.set("model", string: m.schema)
        c.set("device", device)
        s("availability_topic", HATopics.availability(thingID))
        s("payload_available", "online")
        s("payload_not_available", "offline")
        c.set("qos", .int(1))
        // Power: mode off / cool, and the power switch.
        c.set("modes", list(["off", "cool"]))
        s("mode_command_topic", HATopics.command(thingID, "mode"))
        s("mode_state_topic", state)
        s("mode_state_template", "{{ 'cool' if value_json.\(m.power.state) else 'off' }}")
        s("power_command_topic", HATopics.command(thingID, "power"))
        s("payload_on", "ON")
        s("payload_off", "OFF")
        // Target temperature.
        s("temperature_command_topic", HATopics.command(thingID, "temperature"))
        s("temperature_state_topic", state)
        s("temperature_state_template", "{{ value_json.\(m.temperature.state) }}")
        c.set("min_temp", .int(m.minTemp))
        c.set("max_temp", .int(m.maxTemp))
        c.set("temp_step", .int(m.tempStep))
        s("temperature_unit", "C")
        if let fan = m.fan {
            c.set("fan_modes", list(m.fanModes.map(String.init)))
            s("fan_mode_command_topic", HATopics.command(thingID, "fan_mode"))
            s("fan_mode_state_topic", state)
            s("fan_mode_state_template", "{{ value_json.\(fan.state) }}")
        }
        if let t = m.currentTemperatureState {
            s("current_temperature_topic", state)
            s("current_temperature_template", "{{ value_json.\(t) }}")
        }
        if let h = m.currentHumidityState {
            s("current_humidity_topic", state)
            s("current_humidity_template", "{{ value_json.\(h) }}")
        }
        return c
    }

    /// Publishes the config, availability and state of one thing (when its
    /// type has a mapping).
    @discardableResult
    func publish(thingID: String) -> Bool {
        guard let t = hub.store.thing(id: thingID), let m = mapping(t.thingType) else { return false }
        known.withLock { _ = $0.insert(thingID) }
        _ = hub.publishRetained(
            topic: HATopics.config(prefix: options.prefix, thingID: thingID),
            payload: config(thingID: thingID, m).dumpBytes())
        _ = hub.publishRetained(
            topic: HATopics.availability(thingID),
            payload: Array((hub.delivery.isOnline(thingID) ? "online" : "offline").utf8))
        if let s = t.state { _ = hub.publishRetained(topic: HATopics.state(thingID), payload: Array(s.utf8)) }
        return true
    }

    /// Every thing the hub has seen a status of (statuses are retained, so
    /// every thing that ever came online) or published before.
    func publishAll() -> Int {
        let ids = known.withLock { $0 }.union(hub.delivery.thingsSeen)
        return ids.sorted().filter { publish(thingID: $0) }.count
    }

    func availabilityChanged(thingID: String, online: Bool) {
        guard let t = hub.store.thing(id: thingID), mapping(t.thingType) != nil else { return }
        if !known.withLock({ $0.contains(thingID) }) {
            publish(thingID: thingID)
            return
        }
        _ = hub.publishRetained(
            topic: HATopics.availability(thingID), payload: Array((online ? "online" : "offline").utf8))
    }

    /// A deleted thing: an empty retained message on its config topic makes
    /// Home Assistant remove the entity (MQTT discovery: "publish an empty
    /// payload to the config topic"); its state and availability topics are
    /// cleared too, so that nothing of it stays on the broker.
    func removed(thingID: String) {
        known.withLock { _ = $0.remove(thingID) }
        for topic in [
            HATopics.config(prefix: options.prefix, thingID: thingID), HATopics.state(thingID),
            HATopics.availability(thingID)
        ] {
            _ = hub.publishRetained(topic: topic, payload: [])
        }
    }

    /// A state upload of `thing` (the record its request was authorised
    /// with: no second read on every upload).
    func stateChanged(thing t: ThingRecord, merged: String) {
        guard mapping(t.thingType) != nil else { return }
        _ = hub.publishRetained(topic: HATopics.state(t.thingID), payload: Array(merged.utf8))
    }

    // MARK: receiving

    /// True when the message was Home Assistant's (handled or refused).
    func handle(_ m: MqttClient.Message) -> Bool {
        if m.topic == statusTopic {
            if m.payload == Array("online".utf8) {
                let now = Platform.nowMs()
                let due = lastRound.withLock { last -> Bool in
                    guard now - last >= 1000 else { return false }
                    last = now
                    return true
                }
                guard due else {
                    log("Home Assistant is online again within a second: configs not published again")
                    return true
                }
                let n = publishAll()
                log("Home Assistant is online: published \(n) config(s) again")
            }
            return true
        }
        // A thing's own request (most of what the hub gets) is not split into levels.
        guard m.topic.utf8.starts(with: HATopics.thingPrefix.utf8) else { return false }
        let parts = m.topic.split(separator: "/", omittingEmptySubsequences: false).map(String.init)
        guard parts.count == 4, parts[0] == "thingif", parts[2] == "set" else { return false }
        let refused = { (why: String) -> Bool in
            self.log("command refused on \(String(m.topic.prefix(200))): \(why)")
            self.hub.metrics.homeAssistantCommand(ok: false)
            return true
        }
        let tid = parts[1]
        guard m.payload.count <= HATopics.maxCommandPayload else {
            return refused("a payload of \(m.payload.count) bytes (at most \(HATopics.maxCommandPayload))")
        }
        guard Topics.isSafeLevel(tid), let thing = hub.store.thing(id: tid) else { return refused("unknown thing") }
        guard let map = mapping(thing.thingType) else {
            return refused("no Home Assistant mapping for thingType \(thing.thingType ?? "(none)")")
        }
        let text = String(decoding: m.payload, as: UTF8.self).trimmingSpaces()
        let control: HAClimateMapping.Control
        let value: JSON
        switch parts[3] {
        case "mode":
            guard text == "off" || text == "cool" else { return refused("mode must be off or cool") }
            control = map.power
            value = .bool(text != "off")
        case "power":
            guard text == "ON" || text == "OFF" else { return refused("power must be ON or OFF") }
            control = map.power
            value = .bool(text == "ON")
        case "temperature":
            // Home Assistant sends a decimal such as "24.0".
            guard let d = Double(text), d.isFinite, d >= Double(map.minTemp), d <= Double(map.maxTemp) else {
                return refused("temperature must be a number from \(map.minTemp) to \(map.maxTemp)")
            }
            control = map.temperature
            value = .int(Int(d.rounded()))
        case "fan_mode":
            guard let fan = map.fan, let n = Int(text), map.fanModes.contains(n) else {
                return refused("fan_mode must be one of \(map.fanModes)")
            }
            control = fan
            value = .int(n)
        default:
            return refused("no command \(parts[3])")
        }
        let params = JSON.object()
        params.set(control.param, value)
        let command = Command(
            id: FrameworkSide.newCommandID(), shape: .schema, schema: map.schema, schemaVersion: map.schemaVersion,
            issuer: HATopics.issuer,
            groups: [Command.Group(alias: nil, entries: [.action(name: control.action, params: params)])])
        // A switch flipped in Home Assistant is meant for now, not for when
        // an offline thing comes back (CommandLifetimes.homeAssistantTimeToLive).
        let expiresAt = Platform.epochMs() + CommandLifetimes.homeAssistantTimeToLive * 1000
        guard
            let record = hub.delivery.stored(
                command, to: tid, issuer: HATopics.issuer, installationID: nil, expiresAt: expiresAt)
        else {
            return refused("the hub could not store the command")
        }
        hub.metrics.homeAssistantCommand(ok: true)
        log("\(control.action) \(params.dump()) for \(tid) as \(record.commandID)")
        return true
    }
}

extension FrameworkSide {
    /// Turns Home Assistant's MQTT discovery on: subscribes to its status
    /// and command topics and publishes the configs of the things it knows.
    /// Call after `start()`; once.
    public func enableHomeAssistant(_ options: HomeAssistantOptions) {
        let bridge = HomeAssistantBridge(hub: self, options: options)
        homeAssistantBridge.withLock { $0 = bridge }
        bridge.subscribe()
        let n = bridge.publishAll()
        onEvent?("homeassistant: discovery under \(options.prefix)/, \(n) config(s) published")
    }

    var homeAssistant: HomeAssistantBridge? { homeAssistantBridge.withLock { $0 } }

    /// Makes (or sets the password of) Home Assistant's broker client: it may
    /// read `<prefix>/#` and the things' state and availability topics, and
    /// publish only Home Assistant's command topics and its status. nil when
    /// it worked, else the problem.
    public func provisionHomeAssistantClient(username: String, password: String, prefix: String) -> String? {
        guard let admin else {
            return options.brokerAdmin == .none
                ? "the hub administers nothing in the broker (--broker-admin none): make Home Assistant's client there"
                : "the hub has no broker identity"
        }
        return admin.homeAssistantClient(username: username, password: password, prefix: prefix)
    }
}
