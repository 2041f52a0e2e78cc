// SPDX-License-Identifier: Apache-2.0

import Foundation
#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif
import Hummingbird
import NIOCore
import ThingIF
import ThingIFHub

/// The open Server-Sent Events streams, by app installation.
final class EventStreams: @unchecked Sendable {
    private struct State {
        var streams: [String: [Int: AsyncStream<ByteBuffer>.Continuation]] = [:]
        var nextID = 0
        var closed = false
    }

    private let state = Locked(State())

    /// A new stream for `installationID`; it starts with a ": connected"
    /// comment and gets a keepalive comment every `keepaliveSeconds`.
    func open(_ installationID: String, keepaliveSeconds: Int) -> (id: Int, stream: AsyncStream<ByteBuffer>) {
        let (stream, continuation) = AsyncStream<ByteBuffer>.makeStream(bufferingPolicy: .bufferingNewest(1000))
        continuation.yield(ByteBuffer(string: ": connected\n\n"))
        let id: Int? = state.withLock { s in
            guard !s.closed else { return nil }
            s.nextID += 1
            s.streams[installationID, default: [:]][s.nextID] = continuation
            return s.nextID
        }
        guard let id else {
            continuation.finish()
            return (0, stream)
        }
        let keepalive = Task {
            while !Task.isCancelled {
                try? await Task.sleep(nanoseconds: UInt64(keepaliveSeconds) * 1_000_000_000)
                if Task.isCancelled { break }
                continuation.yield(ByteBuffer(string: ": keepalive\n\n"))
            }
        }
        continuation.onTermination = { [weak self] _ in
            keepalive.cancel()
            self?.remove(installationID, id)
        }
        return (id, stream)
    }

    func remove(_ installationID: String, _ id: Int) {
        let c: AsyncStream<ByteBuffer>.Continuation? = state.withLock { s in
            let c = s.streams[installationID]?.removeValue(forKey: id)
            if s.streams[installationID]?.isEmpty == true { s.streams[installationID] = nil }
            return c
        }
        c?.finish()
    }

    /// Sends one event to every open stream of the installation; returns how many.
    @discardableResult
    func send(_ installationID: String, event: String, data: String) -> Int {
        let targets = state.withLock { Array(($0.streams[installationID] ?? [:]).values) }
        let text = "event: \(event)\ndata: \(data)\n\n"
        for c in targets { c.yield(ByteBuffer(string: text)) }
        return targets.count
    }

    func openCount(_ installationID: String) -> Int {
        state.withLock { $0.streams[installationID]?.count ?? 0 }
    }

    /// Ends the streams of a removed installation.
    func closeInstallation(_ installationID: String) {
        let all = state.withLock { s in Array((s.streams.removeValue(forKey: installationID) ?? [:]).values) }
        for c in all { c.finish() }
    }

    /// Ends every stream and refuses new ones (at shutdown).
    func closeAll() {
        let all = state.withLock { s -> [AsyncStream<ByteBuffer>.Continuation] in
            s.closed = true
            let all = s.streams.values.flatMap { $0.values }
            s.streams = [:]
            return all
        }
        for c in all { c.finish() }
    }
}

/// Tells the issuer of a command that it finished, on each of its
/// notification targets: MQTT (the installation's topic), SSE (its open
/// streams) and WEBHOOK (an HTTP POST, off the request thread).
final class Notifier: @unchecked Sendable {
    let hub: FrameworkSide
    let streams = EventStreams()
    private let log: @Sendable (String) -> Void
    private let session: URLSession
    let webhooks: WebhookGuard

    init(hub: FrameworkSide, webhooks: WebhookGuard = WebhookGuard(), log: @escaping @Sendable (String) -> Void) {
        self.hub = hub
        self.log = log
        self.webhooks = webhooks
        let config = URLSessionConfiguration.ephemeral
        config.timeoutIntervalForRequest = TimeInterval(HTTPLimits.webhookTimeoutSeconds)
        config.timeoutIntervalForResource = TimeInterval(HTTPLimits.webhookTimeoutSeconds)
        // No redirects: a public URL must not bounce the POST to an internal one.
        session = URLSession(configuration: config, delegate: NoRedirects(), delegateQueue: nil)
    }

    /// A claim of a sweep lasts this long: a hub that claimed notifications
    /// and died before it marked them sent leaves them to the next sweep after it.
    static let claimLeaseMs: Int64 = 30_000
    /// At most this many notifications per sweep.
    static let sweepLimit = 200

    /// Called on the hub's request thread; never blocks on the network.
    /// Once MQTT is published and the webhooks are handed to URLSession, the
    /// store is told (with the delivery tick's others), so no sweep sends
    /// them again. Results with no target a sweep sends to were stored
    /// never due (`recordResults(swept:)`), and need no mark.
    func commandFinished(_ command: CommandRecord, targets: [AppInstallation]) {
        deliver(command, to: .all, targets: targets)
        if targets.anySwept { hub.markNotifiedSoon(command.commandID) }
    }

    /// Sends the MQTT and webhook notifications of commands whose results a
    /// hub recorded and did not mark notified within the grace period (it
    /// died between the two, or its store call failed): claimed in the store,
    /// so of the hubs that sweep at once each command goes to one. Not the
    /// event streams: every hub told its own when the results were committed
    /// (SharedResultsFeed), and a dead hub's streams are gone. Returns the
    /// commands it notified.
    func sweep(now: Int64) -> [String] {
        let due = hub.store.claimUnnotified(now: now, leaseMs: Notifier.claimLeaseMs, limit: Notifier.sweepLimit)
        for command in due {
            deliver(command, to: .swept)
            _ = hub.store.markNotified(commandID: command.commandID)
            log("notified \(command.commandID) for the hub that recorded its results and did not")
        }
        return due.map(\.commandID)
    }

    /// A command whose results another hub on the same database recorded
    /// (SharedResultsFeed): that hub notified MQTT and webhooks; the event
    /// streams open on this hub are this hub's to notify.
    func commandFinishedElsewhere(_ commandID: String) {
        guard let command = hub.store.command(id: commandID) else { return }
        deliver(command, to: .sseOnly)
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
        let payload = FrameworkSide.notificationPayload(command)
        let text = String(decoding: payload, as: UTF8.self)
        for target in targets ?? hub.notificationTargets(for: command) where reach.includes(target.kind) {
            switch target.kind {
            case .mqtt:
                let published = hub.publishNotification(target, payload: payload)
                hub.metrics.notification(channel: "mqtt", ok: published)
                if !published {
                    log(
                        "notification of \(command.commandID) to MQTT installation \(target.installationID) not published"
                    )
                }
            case .sse:
                let n = streams.send(target.installationID, event: "command", data: text)
                // Another hub's command: its streams may be open on that hub.
                if reach == .sseOnly && n == 0 { continue }
                hub.metrics.notification(channel: "sse", ok: n > 0)
                // An app that is not open has no stream: usual, so an event
                // (not printed under --quiet), not one log line per command.
                if n == 0 {
                    hub.onEvent?(
                        "notification of \(command.commandID): no open event stream of \(target.installationID)")
                }
            case .webhook:
                guard let s = target.target else { continue }
                post(payload, to: s, commandID: command.commandID, installationID: target.installationID)
            case .ios, .android, .jpush:
                continue  // kept for Kii clients; the hub reaches no push service
            }
        }
    }

    private func post(_ payload: [UInt8], to urlText: String, commandID: String, installationID: String) {
        let metrics = hub.metrics
        guard let url = URL(string: urlText) else {
            metrics.notification(channel: "webhook", ok: false)
            log("webhook of \(installationID): bad URL \(urlText)")
            return
        }
        let log = self.log
        let webhooks = self.webhooks
        let session = self.session
        // Resolving the name may wait on DNS: off the request thread.
        DispatchQueue.global().async {
            // Checked again at each delivery: the name may resolve elsewhere now.
            if case .refused(let why) = webhooks.checkAtDelivery(url) {
                metrics.notification(channel: "webhook", ok: false)
                log("webhook of \(installationID) for \(commandID) refused: \(why)")
                return
            }
            var request = URLRequest(url: url, timeoutInterval: TimeInterval(HTTPLimits.webhookTimeoutSeconds))
            request.httpMethod = "POST"
            request.setValue("application/json", forHTTPHeaderField: "Content-Type")
            request.httpBody = Data(payload)
            // URLSession runs the request on its own threads; the completion only logs.
            session.dataTask(with: request) { _, response, error in
                let ok =
                    error == nil && (response as? HTTPURLResponse).map { (200..<300).contains($0.statusCode) } == true
                metrics.notification(channel: "webhook", ok: ok)
                if let error {
                    log("webhook of \(installationID) for \(commandID) failed: \(error.localizedDescription)")
                } else if let http = response as? HTTPURLResponse, !(200..<300).contains(http.statusCode) {
                    log("webhook of \(installationID) for \(commandID): HTTP \(http.statusCode)")
                }
            }.resume()
        }
    }

    func invalidate() { session.finishTasksAndInvalidate() }
}

/// Answers every redirect with "do not follow": the 3xx itself is the answer.
final class NoRedirects: NSObject, URLSessionTaskDelegate, @unchecked Sendable {
    func urlSession(
        _ session: URLSession, task: URLSessionTask, willPerformHTTPRedirection response: HTTPURLResponse,
        newRequest request: URLRequest, completionHandler: @escaping (URLRequest?) -> Void
    ) {
        completionHandler(nil)
    }
}
