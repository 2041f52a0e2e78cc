// SPDX-License-Identifier: Apache-2.0

import CThingIF
import ThingIF

/// Tells the issuer of a command that it finished (results, or the hub
/// ended it), on each of its notification targets: MQTT (the installation's
/// topic), SSE (its open event streams, which the REST API opens here) and
/// WEBHOOK (an HTTP POST, off the caller's thread).
///
/// A hub marks what it sent in the store (`markSoon`, flushed by the
/// scheduler in one statement); a command whose results a hub recorded and
/// did not mark within StoreRules.notificationGraceMs (it died between the
/// two) is claimed and sent by a sweep of any hub on the same data.
public final class Notifications: @unchecked Sendable {
    /// A claim of a sweep lasts this long: a hub that claimed notifications
    /// and died before it marked them sent leaves them to the next sweep after it.
    static let claimLeaseMs: Int64 = 30_000
    /// At most this many notifications per sweep.
    static let sweepLimit = 200

    let store: any CommandStore & UserStore
    let metrics: HubMetrics
    let client: MqttClient
    let events: HubEvents
    let webhooks: Webhooks
    /// The open event streams (GET …/installations/{id}/events).
    public let streams = EventStreams()
    /// The callers in this process waiting for a command's end (a cancel's answer).
    public let ends = CommandEnds()
    /// Commands whose notification was sent, to be marked in the store.
    let marks = Locked<[String]>([])
    private let listening = Locked(false)

    init(
        store: any CommandStore & UserStore, metrics: HubMetrics, client: MqttClient, events: HubEvents,
        webhooks: WebhookGuard
    ) {
        self.store = store
        self.metrics = metrics
        self.client = client
        self.events = events
        self.webhooks = Webhooks(guard: webhooks)
    }

    /// At the hub's start: webhooks can go, and on a store that hubs share,
    /// the results another hub recorded reach the event streams open here.
    func open() {
        guard let feed = store as? SharedResultsFeed, !listening.withLock({ $0 }) else { return }
        do {
            try feed.listenForResults { [weak self] in self?.finishedElsewhere($0) }
            listening.withLock { $0 = true }
        } catch {
            events.log("cannot hear of other hubs' results (their commands reach no event stream here): \(error)")
        }
    }

    /// At the hub's stop: what was sent is marked, the streams end.
    func close() {
        flushMarks()
        streams.closeAll()
        webhooks.close()
    }

    /// Who is told that a command finished: for a pseudo user only the
    /// installation the command was posted from; for a group every
    /// installation of its owner and members.
    public func targets(for command: CommandRecord) -> [AppInstallation] {
        guard let issuer = command.issuer else { return [] }
        if issuer.hasPrefix("user:") {
            return store.notificationInstallations(
                userID: String(issuer.dropFirst(5)), issuingInstallationID: command.issuingInstallationID)
        }
        if issuer.hasPrefix("group:"), let g = store.group(id: String(issuer.dropFirst(6))) {
            return ([g.ownerUserID] + g.members).flatMap { store.appInstallations(userID: $0) }
        }
        return []
    }

    /// The notification body: {"commandID","thingID","commandState"}, and
    /// "endReason" for a command the hub ended (CommandLifecycle).
    public static func payload(_ c: CommandRecord) -> [UInt8] {
        let o = JSON.object()
        o.set("commandID", string: c.commandID)
        o.set("thingID", string: c.thingID)
        o.set("commandState", string: c.state.rawValue)
        if let r = c.endReason { o.set("endReason", string: r) }
        return o.dumpBytes()
    }

    /// A command this hub finished, with its targets as read where its end
    /// was written. Never blocks on the network. Once MQTT is published and
    /// the webhooks are handed over, the store is told (`markSoon`), so no
    /// sweep sends them again; an end with no target a sweep sends to was
    /// stored never due, and needs no mark.
    func finished(_ command: CommandRecord, targets: [AppInstallation]) {
        ends.ended(command.commandID)
        deliver(command, to: .all, targets: targets)
        let marks = targets.anySwept
        if marks { markSoon(command.commandID) }
        events.event("notified of the end of \(command.commandID)\(marks ? ", to be marked sent" : "")")
    }

    /// Sends the MQTT and webhook notifications of commands whose results a
    /// hub recorded and did not mark notified within the grace period:
    /// claimed in the store, so of the hubs that sweep at once each command
    /// goes to one. Not the event streams: every hub told its own when the
    /// results were committed, and a dead hub's streams are gone. Returns
    /// the commands it notified.
    @discardableResult
    public func sweep(now: Int64 = Platform.epochMs()) -> [String] {
        let due = store.claimUnnotified(now: now, leaseMs: Self.claimLeaseMs, limit: Self.sweepLimit)
        for command in due {
            deliver(command, to: .swept)
            _ = store.markNotified(commandID: command.commandID)
            events.log("notified \(command.commandID) for the hub that recorded its results and did not")
        }
        return due.map(\.commandID)
    }

    /// A command whose results another hub on the same data recorded: that
    /// hub notified MQTT and webhooks; the event streams open here are this
    /// hub's to notify.
    func finishedElsewhere(_ commandID: String) {
        ends.ended(commandID)
        guard let command = store.command(id: commandID) else { return }
        deliver(command, to: .sseOnly)
    }

    /// Marks a command's notification sent, with others in one statement
    /// at the next flush (well within StoreRules.notificationGraceMs, before
    /// which no sweep claims it; a hub that dies first leaves it to a sweep,
    /// which sends it again, as for a hub that dies before the mark).
    public func markSoon(_ commandID: String) {
        marks.withLock { $0.append(commandID) }
    }

    func flushMarks() {
        let ids = marks.withLock { m -> [String] in
            defer { m = [] }
            return m
        }
        guard !ids.isEmpty else { return }
        _ = metrics.timed("markNotified") { store.markNotified(commandIDs: ids) }
        events.event("marked notified: \(ids.joined(separator: " "))")
    }

    /// Which of a command's notification targets a delivery reaches.
    private enum Reach {
        case all, sseOnly, swept
        func includes(_ kind: AppInstallation.Kind) -> Bool {
            switch self {
            case .all: return true
            case .sseOnly: return kind == .sse
            case .swept: return kind.isSwept
            }
        }
    }

    /// `targets`: the command's notification targets when the caller has read them.
    private func deliver(_ command: CommandRecord, to reach: Reach, targets: [AppInstallation]? = nil) {
        let payload = Self.payload(command)
        let text = String(decoding: payload, as: UTF8.self)
        for target in targets ?? self.targets(for: command) where reach.includes(target.kind) {
            switch target.kind {
            case .mqtt:
                let published = publish(target, payload: payload)
                metrics.notification(channel: "mqtt", ok: published)
                if !published {
                    events.log(
                        "notification of \(command.commandID) to MQTT installation \(target.installationID) not published"
                    )
                }
            case .sse:
                let n = streams.send(target.installationID, event: "command", data: text)
                // Another hub's command: its streams may be open on that hub.
                if reach == .sseOnly && n == 0 { continue }
                metrics.notification(channel: "sse", ok: n > 0)
                // An app that is not open has no stream: usual, so an event
                // (not printed under --quiet), not one log line per command.
                if n == 0 {
                    events.event(
                        "notification of \(command.commandID): no open event stream of \(target.installationID)")
                }
            case .webhook:
                guard let url = target.target else { continue }
                let (metrics, events) = (self.metrics, self.events)
                let (commandID, installationID) = (command.commandID, target.installationID)
                webhooks.post(payload, to: url) { ok, why in
                    metrics.notification(channel: "webhook", ok: ok)
                    if let why {
                        events.log("webhook of \(installationID) for \(commandID): \(why)")
                    } else {
                        events.event("webhook of \(installationID) for \(commandID) delivered")
                    }
                }
            case .ios, .android, .jpush:
                continue  // kept for Kii clients; the hub reaches no push service
            }
        }
    }

    /// Publishes a notification on an MQTT installation's topic (QoS 1).
    func publish(_ installation: AppInstallation, payload: [UInt8]) -> Bool {
        guard installation.kind == .mqtt, let topic = installation.target else { return false }
        return client.publish(topic: topic, payload: payload, qos: 1) == MOSQ_ERR_SUCCESS.rawValue
    }
}
