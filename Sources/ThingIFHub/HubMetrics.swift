// SPDX-License-Identifier: Apache-2.0

import Prometheus
import ThingIF

/// The hub's Prometheus metrics (GET /metrics): one registry per
/// FrameworkSide, so that several hubs in one process (the tests) keep
/// their own numbers. Every method may be called from any thread.
///
/// Names (all prefixed `thingif_hub_`): commands_{issued,delivered,done,failed}_total,
/// commands_ended_total{state,reason} (EXPIRED or CANCELLED, CommandLifecycle),
/// command_result_latency_seconds (created -> results recorded), things_online,
/// end_nodes and end_nodes_online (the store's end nodes, and those online behind their
/// gateway, both counted at a scrape, at most once a second),
/// mqtt_requests_total{kind,status}, notifications_total{channel,outcome},
/// store_latency_seconds{op}, homeassistant_commands_total{outcome},
/// bootstrap_dropped_total{reason} (MQTT bootstrap requests dropped: budget,
/// busy), refused_total{defence} (calls refused by a flood defence: costly_busy,
/// address_budget, app_budget, creation_cap, installation_cap, enrollment,
/// header_timeout, body_timeout, address_connections, end_node_onboarding_budget,
/// end_node_onboarding_busy, end_node_status, end_node_status_budget),
/// partitions_held (the request partitions this hub serves in the
/// partitioned mode, HubPartitions), foreign_requests_dropped_total
/// (requests of partitions it does not hold, dropped unread).
public final class HubMetrics: Sendable {
    public let registry = PrometheusCollectorRegistry()

    let commandsIssued: Counter
    let commandsDelivered: Counter
    let commandsDone: Counter
    let commandsFailed: Counter
    let resultLatency: ValueHistogram
    let thingsOnline: Gauge
    let endNodes: Gauge
    let endNodesOnline: Gauge
    let bootstrapOverBudget: Counter
    let bootstrapBusy: Counter
    let partitionsHeld: Gauge
    let foreignDropped: Counter
    /// Bytes of update jobs' blocks and hash pages served (UpdateRequests).
    let updateBytesServed: Counter

    /// Seconds: from a few milliseconds (a thing on the same machine) to a
    /// minute (a thing that was offline).
    public static let latencyBuckets: [Double] = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60]
    public static let storeBuckets: [Double] = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1]

    /// The request kinds of mqtt_requests_total, by route.
    public static let requestKinds = [
        "onboarding", "installation", "mqtt-endpoint", "action-results", "state", "firmware-version",
        "command-report", "automation-report", "end-nodes", "other"
    ]

    /// `endNodeCountIntervalMs`: the end-node gauges are counted at most once
    /// in this many ms (FrameworkSide.Options.endNodeGaugeIntervalMs).
    public init(endNodeCountIntervalMs: Int64 = 1000) {
        self.endNodeCountIntervalMs = endNodeCountIntervalMs
        func d(_ name: String, _ unit: String, _ help: String) -> MetricNameDescriptor {
            MetricNameDescriptor(
                namespace: "thingif", subsystem: "hub", metricName: name, unitName: unit, helpText: help)
        }
        commandsIssued = registry.makeCounter(descriptor: d("commands_issued", "total", "Commands stored by the hub."))
        commandsDelivered = registry.makeCounter(
            descriptor: d("commands_delivered", "total", "Commands published to an online thing."))
        commandsDone = registry.makeCounter(
            descriptor: d("commands_done", "total", "Commands whose results say every action succeeded (DONE)."))
        commandsFailed = registry.makeCounter(
            descriptor: d("commands_failed", "total", "Commands whose results have a failed action (INCOMPLETE)."))
        resultLatency = registry.makeValueHistogram(
            descriptor: d("command_result_latency", "seconds", "From a command's creation to its results recorded."),
            buckets: HubMetrics.latencyBuckets)
        thingsOnline = registry.makeGauge(
            descriptor: d("things_online", "", "Things whose last status message was online."))
        endNodes = registry.makeGauge(
            descriptor: d("end_nodes", "", "End nodes onboarded onto a gateway, of every gateway (the store's count)."))
        endNodesOnline = registry.makeGauge(
            descriptor: d(
                "end_nodes_online", "", "End nodes online through their gateway's live installation (presence)."))
        let dropped = d(
            "bootstrap_dropped", "total",
            "MQTT bootstrap requests (onboardings, installations, endpoints) dropped: over the global budget, or the costly-work queue full."
        )
        bootstrapOverBudget = registry.makeCounter(descriptor: dropped, labels: [("reason", "budget")])
        bootstrapBusy = registry.makeCounter(descriptor: dropped, labels: [("reason", "busy")])
        partitionsHeld = registry.makeGauge(
            descriptor: d(
                "partitions_held", "",
                "Request partitions this hub holds in the partitioned mode (of \(HubPartitions.count); 0 in the shared mode)."
            ))
        foreignDropped = registry.makeCounter(
            descriptor: d(
                "foreign_requests_dropped", "total",
                "Things' requests of partitions this hub does not hold, dropped unread (the thing sends them again)."))
        updateBytesServed = registry.makeCounter(
            descriptor: d(
                "update_bytes_served", "total", "Bytes of update jobs' blocks and hash pages served to things."))
    }

    /// A call refused by a flood defence (see the type's comment for the names).
    public func refused(_ defence: String) {
        counter("refused", defence) {
            registry.makeCounter(
                descriptor: descriptor("refused", "total", "Calls refused by a flood defence, by defence."),
                labels: [("defence", defence)])
        }.increment()
    }

    /// The registry's metric for a name and label values, made once: making
    /// it builds and checks its name and takes the registry's lock, which
    /// was a few percent of the hub's CPU per command when done per call.
    private let counters = Locked([String: Counter]())
    private let storeTimers = Locked([String: ValueHistogram]())

    private func counter(_ name: String, _ labels: String, _ make: () -> Counter) -> Counter {
        let key = name + "\u{1F}" + labels
        return counters.withLock { m in
            if let c = m[key] { return c }
            let c = make()
            m[key] = c
            return c
        }
    }

    private func descriptor(_ name: String, _ unit: String, _ help: String) -> MetricNameDescriptor {
        MetricNameDescriptor(namespace: "thingif", subsystem: "hub", metricName: name, unitName: unit, helpText: help)
    }

    func commandIssued() { commandsIssued.increment() }

    /// A command ended without results (CommandLifecycle): EXPIRED or CANCELLED, by reason.
    func commandEnded(state: CommandState, reason: EndReason) {
        counter("commands_ended", state.rawValue + "\u{1F}" + reason.rawValue) {
            registry.makeCounter(
                descriptor: descriptor(
                    "commands_ended", "total", "Commands the hub ended without results (EXPIRED, CANCELLED), by reason."
                ),
                labels: [("state", state.rawValue), ("reason", reason.rawValue)])
        }.increment()
    }
    func commandDelivered(_ n: Int = 1) { if n > 0 { commandsDelivered.increment(by: Int64(n)) } }

    /// A command's results were recorded: `createdAt` and `now` in epoch ms.
    func commandFinished(done: Bool, createdAt: Int64, now: Int64) {
        (done ? commandsDone : commandsFailed).increment()
        resultLatency.record(Double(max(0, now - createdAt)) / 1000)
    }

    func setOnline(_ count: Int) { thingsOnline.set(Double(count)) }

    func setPartitionsHeld(_ count: Int) { partitionsHeld.set(Double(count)) }

    /// The end-node gauges are counted at most once in this many ms.
    let endNodeCountIntervalMs: Int64
    /// When they were last counted (Platform.nowMs), and how many times.
    private let endNodesCounted = Locked<(at: Int64?, times: Int)>((nil, 0))
    /// How many times the end-node gauges were counted (the tests' bound).
    public var endNodeCounts: Int { endNodesCounted.withLock { $0.times } }

    /// Sets end_nodes_online (`online`: CommandDelivery.endNodesOnline, a walk
    /// over every end node's presence under Presence's lock) and end_nodes
    /// (`total`: HubStore.endNodeTotal, a query) before an exposition, at most
    /// once a second: GET /metrics is open by default, so anyone may ask it
    /// as often as they like, and this work must stay bounded and off the
    /// commands' lock (the gauges are then up to a second old).
    public func countEndNodes(
        online: () -> Int, total: () -> Int?, rolloutMembers: () -> [String: Int]? = { nil },
        updateJobs: () -> [String: Int]? = { nil }
    ) {
        let now = Platform.nowMs()
        let due = endNodesCounted.withLock { c -> Bool in
            if let at = c.at, now - at < endNodeCountIntervalMs { return false }
            c = (now, c.times + 1)
            return true
        }
        guard due else { return }
        endNodesOnline.set(Double(online()))
        if let t = total() { endNodes.set(Double(t)) }
        if let counts = rolloutMembers() {
            setCounts(
                "rollout_members", label: "state",
                help: "Rollouts' members by state (queued, offered, a final status).",
                counts)
        }
        if let counts = updateJobs() {
            setCounts(
                "update_jobs", label: "status",
                help: "Update jobs by their last report's status (none: no report yet), rollouts' and single.", counts)
        }
    }

    /// Gauges by name, then by label value.
    private let countGauges = Locked([String: [String: Gauge]]())

    /// `name{label}`: counts counted at the scrape with the end-node gauges
    /// (rollout_members{state}: every rollout's members by state;
    /// update_jobs{status}: every job by status); a value no row has any
    /// more reads 0.
    func setCounts(_ name: String, label: String, help: String, _ counts: [String: Int]) {
        countGauges.withLock { all in
            var m = all[name] ?? [:]
            for value in Set(m.keys).union(counts.keys) {
                let g =
                    m[value]
                    ?? registry.makeGauge(descriptor: descriptor(name, "", help), labels: [(label, value)])
                m[value] = g
                g.set(Double(counts[value] ?? 0))
            }
            all[name] = m
        }
    }

    /// One request from a thing (over MQTT or HTTP), by route and answer.
    func request(kind: String, status: Int) {
        counter("mqtt_requests", kind + "\u{1F}" + String(status)) {
            registry.makeCounter(
                descriptor: descriptor("mqtt_requests", "total", "Requests from things, by route and status code."),
                labels: [("kind", kind), ("status", String(status))])
        }.increment()
    }

    /// One notification delivery: channel mqtt, sse or webhook; ok or failed.
    public func notification(channel: String, ok: Bool) {
        counter("notifications", channel + (ok ? "\u{1F}ok" : "\u{1F}failed")) {
            registry.makeCounter(
                descriptor: descriptor("notifications", "total", "Result notifications, by channel and outcome."),
                labels: [("channel", channel), ("outcome", ok ? "ok" : "failed")])
        }.increment()
    }

    /// A command from Home Assistant: issued, or refused (bad input).
    func homeAssistantCommand(ok: Bool) {
        counter("homeassistant_commands", ok ? "issued" : "refused") {
            registry.makeCounter(
                descriptor: descriptor(
                    "homeassistant_commands", "total", "Commands Home Assistant asked for, issued or refused."),
                labels: [("outcome", ok ? "issued" : "refused")])
        }.increment()
    }

    /// Runs a store call and records how long it took (op: its name).
    public func timed<T>(_ op: String, _ body: () -> T) -> T {
        let clock = ContinuousClock()
        let start = clock.now
        let result = body()
        let elapsed = start.duration(to: clock.now).components
        let seconds = Double(elapsed.seconds) + Double(elapsed.attoseconds) / 1e18
        let timer = storeTimers.withLock { m in
            if let h = m[op] { return h }
            let h = registry.makeValueHistogram(
                descriptor: descriptor("store_latency", "seconds", "Store calls on the request path, by operation."),
                labels: [("op", op)], buckets: HubMetrics.storeBuckets)
            m[op] = h
            return h
        }
        timer.record(seconds)
        return result
    }

    /// The text exposition format.
    public func exposition() -> [UInt8] { registry.emitToBuffer() }
}
