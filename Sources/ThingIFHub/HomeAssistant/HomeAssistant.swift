// SPDX-License-Identifier: Apache-2.0

import ThingIF

/// Home Assistant's MQTT discovery for the hub's things, `hub.homeAssistant`:
/// always present, off until `enable`. The hub calls its hooks (subscribe,
/// handle, availabilityChanged, stateChanged, removed) whether or not it is
/// enabled; off, they do nothing, so that no caller asks first.
///
/// It is given the store, the MQTT client, the command delivery, the
/// metrics and the event sink the bridge (HomeAssistantBridge) works with,
/// the partitions (whether the hub subscribes through the shared group), and the broker's
/// administration for Home Assistant's own broker client.
///
/// Threads: every method may be called from any thread.
public final class HomeAssistant: @unchecked Sendable {
    let store: ThingStore
    let client: MqttClient
    let delivery: CommandDelivery
    let presence: Presence
    let metrics: HubMetrics
    let events: HubEvents
    /// The trait registry: a thing type without a mapping is shown by its traits.
    let traits: TraitRegistry
    let partitions: HubPartitions
    /// The broker's dynamic-security administration (nil: none), and why
    /// there is none when there is not.
    let admin: BrokerAdmin?
    let brokerAdmin: FrameworkSide.BrokerAdminMode
    /// The bridge, once enabled.
    private let bridge = Locked<HomeAssistantBridge?>(nil)

    init(
        store: ThingStore, client: MqttClient, delivery: CommandDelivery, presence: Presence, metrics: HubMetrics,
        events: HubEvents, traits: TraitRegistry,
        partitions: HubPartitions, admin: BrokerAdmin?, brokerAdmin: FrameworkSide.BrokerAdminMode
    ) {
        self.store = store
        self.client = client
        self.delivery = delivery
        self.presence = presence
        self.metrics = metrics
        self.events = events
        self.traits = traits
        self.partitions = partitions
        self.admin = admin
        self.brokerAdmin = brokerAdmin
    }

    private var enabled: HomeAssistantBridge? { bridge.withLock { $0 } }

    /// Turns Home Assistant's MQTT discovery on: subscribes to its status
    /// and command topics and publishes the configs of the things it knows.
    /// Call after the hub's `start()`; once.
    public func enable(_ options: HomeAssistantOptions) {
        let b = HomeAssistantBridge(
            options: options, store: store, client: client, delivery: delivery, presence: presence, metrics: metrics,
            events: events, traits: traits,
            partitions: partitions)
        bridge.withLock { $0 = b }
        b.subscribe()
        let n = b.publishAll()
        events.event("homeassistant: discovery under \(options.prefix)/, \(n) config(s) published")
    }

    /// Makes (or sets the password of) Home Assistant's broker client: it may
    /// read `<prefix>/#` and the things' state and availability topics, and
    /// publish only Home Assistant's command topics and its status. nil when
    /// it worked, else the problem.
    public func provisionClient(username: String, password: String, prefix: String) -> String? {
        guard let admin else {
            return brokerAdmin == .none
                ? "the hub administers nothing in the broker (--broker-admin none): make Home Assistant's client there"
                : "the hub has no broker identity"
        }
        return admin.homeAssistantClient(username: username, password: password, prefix: prefix)
    }

    // MARK: the hub's hooks

    /// At every connection of the hub's client: Home Assistant's topics
    /// are subscribed again with the hub's own.
    func subscribe() { enabled?.subscribe() }

    /// True when the message was Home Assistant's (handled or refused);
    /// false when it is not, or discovery is off.
    func handle(_ m: MqttClient.Message) -> Bool { enabled?.handle(m) ?? false }

    /// A status of the thing: its availability topic follows.
    func availabilityChanged(thingID: String, online: Bool) {
        enabled?.availabilityChanged(thingID: thingID, online: online)
    }

    /// Whether discovery is on (so that a caller reads the store for it only then).
    var isEnabled: Bool { enabled != nil }

    /// A state upload of `thing` (the record its request was authorised
    /// with: no second read on every upload).
    func stateChanged(thing: ThingRecord, merged: String) { enabled?.stateChanged(thing: thing, merged: merged) }

    /// A deleted thing: its entity leaves Home Assistant.
    func removed(thingID: String) { enabled?.removed(thingID: thingID) }
}
