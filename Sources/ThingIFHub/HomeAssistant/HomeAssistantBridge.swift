// SPDX-License-Identifier: Apache-2.0

import ThingIF

/// Home Assistant's discovery once enabled (HomeAssistant.enable): it
/// publishes the things' configs, states and availability, and issues the
/// commands Home Assistant sends as Thing-IF commands. A thing type with a
/// hand-written mapping is a climate entity; one without, whose type and
/// firmware version have a trait registry entry, gets the entities its
/// traits map to (HATraitMapping), and their commands pass the registry's
/// check as every other command does.
final class HomeAssistantBridge: @unchecked Sendable {
    let options: HomeAssistantOptions
    let store: ThingStore
    let client: MqttClient
    let delivery: CommandDelivery
    let presence: Presence
    let metrics: HubMetrics
    let events: HubEvents
    let traits: TraitRegistry
    /// Whether the hub's subscriptions go through the shared group (not in
    /// the partitioned mode): the command topics do too. In the partitioned
    /// mode every hub receives every command and the holder of the thing's
    /// partition takes it (ThingRequests.accept, Inbound.partitionKey).
    let partitions: HubPartitions
    /// Things whose config this process published.
    private let known = Locked(Set<String>())
    /// When Home Assistant's birth message last made the hub publish every
    /// config (ms): at most one such round a second.
    private let lastRound = Locked<Int64>(0)
    /// The trait entities of things without a hand-written mapping, with
    /// the thing type and firmware version they were read for (none: no
    /// entry then; read again when the thing is published).
    private let traitEntities = Locked<[String: (key: String, entities: [HATraitEntity])]>([:])

    /// Home Assistant's status topic, made once: every MQTT message the hub
    /// gets is compared with it.
    private let statusTopic: String

    init(
        options: HomeAssistantOptions, store: ThingStore, client: MqttClient, delivery: CommandDelivery,
        presence: Presence,
        metrics: HubMetrics, events: HubEvents, traits: TraitRegistry, partitions: HubPartitions
    ) {
        self.options = options
        self.store = store
        self.client = client
        self.delivery = delivery
        self.presence = presence
        self.metrics = metrics
        self.events = events
        self.traits = traits
        self.partitions = partitions
        statusTopic = HATopics.status(prefix: options.prefix)
    }

    var subscriptions: [String] {
        let commands =
            partitions.partitioned ? HATopics.commandFilter : "$share/thingif-hub/" + HATopics.commandFilter
        return [commands, statusTopic]
    }

    func subscribe() {
        for t in subscriptions { _ = client.subscribe(t, qos: 1) }
    }

    func mapping(_ thingType: String?) -> HAClimateMapping? {
        guard let thingType else { return nil }
        return options.mappings.first { $0.thingType == thingType }
    }

    private func log(_ s: String) { events.event("homeassistant: " + s) }

    /// A thing's entities from its trait registry entry: none where its
    /// type has a hand-written mapping or its type and firmware version no
    /// entry. `fresh`: read the entry again (else the last reading of it).
    func entities(_ t: ThingRecord, fresh: Bool = false) -> [HATraitEntity] {
        guard mapping(t.thingType) == nil, let tt = t.thingType, let fw = t.firmwareVersion else { return [] }
        let key = tt + "\n" + fw
        if !fresh, let cached = traitEntities.withLock({ $0[t.thingID] }), cached.key == key {
            return cached.entities
        }
        guard case .success(let entry?) = traits.entry(for: t) else {
            traitEntities.withLock { $0[t.thingID] = (key, []) }
            return []
        }
        let list = HATraitMapping.entities(entry)
        traitEntities.withLock { $0[t.thingID] = (key, list) }
        return list
    }

    // MARK: publishing

    /// The discovery config of a thing; field names are Home Assistant's
    /// MQTT climate schema's. An end node's device names its gateway's
    /// (`via_device`, the identifier the gateway's own device has), so
    /// Home Assistant shows it as connected through the gateway.
    func config(thingID: String, _ m: HAClimateMapping, gatewayThingID: String? = nil) -> JSON {
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
        Self.device(c, thingID: thingID, name: "\(m.name) \(thingID)", model: m.schema, gatewayThingID: gatewayThingID)
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

    /// What every entity of a thing's config has: its device (one per
    /// thing, `via_device` its gateway's), its availability topic, QoS 1.
    static func device(_ c: JSON, thingID: String, name: String, model: String, gatewayThingID: String?) {
        let device = JSON.object()
        let ids = JSON.array()
        ids.append(JSON.string("thingif_\(thingID)") ?? JSON.null())
        device.set("identifiers", ids)
        device.set("name", string: name)
        device.set("manufacturer", string: "thingif")
        device.set("model", string: model)
        if let gatewayThingID { device.set("via_device", string: "thingif_\(gatewayThingID)") }
        c.set("device", device)
        c.set("availability_topic", string: HATopics.availability(thingID))
        c.set("payload_available", string: "online")
        c.set("payload_not_available", string: "offline")
        c.set("qos", .int(1))
    }

    /// Publishes the config, availability and state of one thing (when its
    /// type has a mapping).
    @discardableResult
    func publish(thingID: String) -> Bool {
        guard let t = store.thing(id: thingID) else { return false }
        let gateway = t.layoutPosition == .endNode ? t.gatewayThingID : nil
        if let m = mapping(t.thingType) {
            _ = client.publishRetained(
                topic: HATopics.config(prefix: options.prefix, thingID: thingID),
                payload: config(thingID: thingID, m, gatewayThingID: gateway).dumpBytes())
        } else {
            let list = entities(t, fresh: true)
            guard !list.isEmpty else { return false }
            for e in list {
                _ = client.publishRetained(
                    topic: HATraitMapping.configTopic(prefix: options.prefix, thingID: thingID, e),
                    payload: HATraitMapping.config(
                        thingID: thingID, thingType: t.thingType ?? "", gatewayThingID: gateway, e
                    ).dumpBytes())
            }
        }
        known.withLock { _ = $0.insert(thingID) }
        _ = client.publishRetained(
            topic: HATopics.availability(thingID),
            payload: Array((presence.isOnline(thingID) ? "online" : "offline").utf8))
        if let s = t.state { _ = client.publishRetained(topic: HATopics.state(thingID), payload: Array(s.utf8)) }
        return true
    }

    /// Every thing the hub has seen a status of (statuses are retained, so
    /// every thing that ever came online) or published before.
    func publishAll() -> Int {
        let ids = known.withLock { $0 }.union(presence.thingsSeen)
        return ids.sorted().filter { publish(thingID: $0) }.count
    }

    func availabilityChanged(thingID: String, online: Bool) {
        guard let t = store.thing(id: thingID) else { return }
        if !known.withLock({ $0.contains(thingID) }) {
            publish(thingID: thingID)
            return
        }
        guard mapping(t.thingType) != nil || !entities(t).isEmpty else { return }
        _ = client.publishRetained(
            topic: HATopics.availability(thingID), payload: Array((online ? "online" : "offline").utf8))
    }

    /// A deleted thing: an empty retained message on its config topic makes
    /// Home Assistant remove the entity (MQTT discovery: "publish an empty
    /// payload to the config topic"); its state and availability topics are
    /// cleared too, so that nothing of it stays on the broker.
    func removed(thingID: String) {
        known.withLock { _ = $0.remove(thingID) }
        let traitTopics = (traitEntities.withLock { $0.removeValue(forKey: thingID) }?.entities ?? []).map {
            HATraitMapping.configTopic(prefix: options.prefix, thingID: thingID, $0)
        }
        for topic in [
            HATopics.config(prefix: options.prefix, thingID: thingID), HATopics.state(thingID),
            HATopics.availability(thingID)
        ] + traitTopics {
            _ = client.publishRetained(topic: topic, payload: [])
        }
    }

    /// A state upload of `thing` (the record its request was authorised
    /// with: no second read on every upload).
    func stateChanged(thing t: ThingRecord, merged: String) {
        guard mapping(t.thingType) != nil || !entities(t).isEmpty else { return }
        _ = client.publishRetained(topic: HATopics.state(t.thingID), payload: Array(merged.utf8))
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
            self.metrics.homeAssistantCommand(ok: false)
            return true
        }
        let tid = parts[1]
        guard m.payload.count <= HATopics.maxCommandPayload else {
            return refused("a payload of \(m.payload.count) bytes (at most \(HATopics.maxCommandPayload))")
        }
        guard Topics.isSafeLevel(tid), let thing = store.thing(id: tid) else { return refused("unknown thing") }
        // A trait entity's command (`<alias>.<action>`; the climate's have no '.').
        if parts[3].contains(".") { return traitCommand(thing, field: parts[3], payload: m.payload, refused: refused) }
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
            id: CommandForm.newCommandID(), shape: .schema, schema: map.schema, schemaVersion: map.schemaVersion,
            issuer: HATopics.issuer,
            groups: [Command.Group(alias: nil, entries: [.action(name: control.action, params: params)])])
        return issue(command, to: thing, "\(control.action) \(params.dump())", refused: refused)
    }

    /// A command of Home Assistant's, through the rule every command passes
    /// (the trait registry's check; a schema command passes it), stored and sent.
    func issue(_ command: Command, to thing: ThingRecord, _ what: String, refused: (String) -> Bool) -> Bool {
        if let refusal = traits.check(command, for: thing) { return refused(refusal.message) }
        // A switch flipped in Home Assistant is meant for now, not for when
        // an offline thing comes back (CommandLifetimes.homeAssistantTimeToLive).
        let expiresAt = Platform.epochMs() + CommandLifetimes.homeAssistantTimeToLive * 1000
        guard
            let record = delivery.stored(
                command, to: thing, issuer: HATopics.issuer, installationID: nil, expiresAt: expiresAt)
        else {
            return refused("the hub could not store the command")
        }
        metrics.homeAssistantCommand(ok: true)
        log("\(what) for \(thing.thingID) as \(record.commandID)")
        return true
    }

    /// A command from a trait entity: the action's value from Home
    /// Assistant's payload, checked against the thing's entry by the rule
    /// every command passes (TraitRegistry.check), then stored and sent.
    func traitCommand(_ thing: ThingRecord, field: String, payload: [UInt8], refused: (String) -> Bool) -> Bool {
        guard let e = entities(thing).first(where: { $0.commandField == field }), let action = e.action else {
            return refused("no Home Assistant entity \(field) for thing type \(thing.thingType ?? "(none)")")
        }
        let value: JSON
        switch HATraitMapping.value(e, payload: String(decoding: payload, as: UTF8.self).trimmingSpaces()) {
        case .failure(let r): return refused("\(field) \(r.why)")
        case .success(let v): value = v
        }
        let command = Command(
            id: CommandForm.newCommandID(), shape: .trait, issuer: HATopics.issuer,
            groups: [Command.Group(alias: e.alias, entries: [.action(name: action, params: value)])])
        return issue(command, to: thing, "\(e.alias)/\(action) \(value.dump())", refused: refused)
    }
}
