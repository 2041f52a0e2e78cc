// SPDX-License-Identifier: Apache-2.0

import ThingIF

/// The open Server-Sent Events streams, by app installation: the REST API
/// opens one per GET …/events and writes its chunks to the client; the
/// hub's notifications send to them.
public final class EventStreams: @unchecked Sendable {
    private struct State {
        var streams: [String: [Int: AsyncStream<String>.Continuation]] = [:]
        var nextID = 0
        var closed = false
    }

    private let state = Locked(State())

    public init() {}

    /// A new stream for `installationID`; it starts with a ": connected"
    /// comment and gets a keepalive comment every `keepaliveSeconds`.
    public func open(_ installationID: String, keepaliveSeconds: Int) -> (id: Int, stream: AsyncStream<String>) {
        let (stream, continuation) = AsyncStream<String>.makeStream(bufferingPolicy: .bufferingNewest(1000))
        continuation.yield(": connected\n\n")
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
                continuation.yield(": keepalive\n\n")
            }
        }
        continuation.onTermination = { [weak self] _ in
            keepalive.cancel()
            self?.remove(installationID, id)
        }
        return (id, stream)
    }

    public func remove(_ installationID: String, _ id: Int) {
        let c: AsyncStream<String>.Continuation? = state.withLock { s in
            let c = s.streams[installationID]?.removeValue(forKey: id)
            if s.streams[installationID]?.isEmpty == true { s.streams[installationID] = nil }
            return c
        }
        c?.finish()
    }

    /// Sends one event to every open stream of the installation; returns how many.
    @discardableResult
    public func send(_ installationID: String, event: String, data: String) -> Int {
        let targets = state.withLock { Array(($0.streams[installationID] ?? [:]).values) }
        let text = "event: \(event)\ndata: \(data)\n\n"
        for c in targets { c.yield(text) }
        return targets.count
    }

    public func openCount(_ installationID: String) -> Int {
        state.withLock { $0.streams[installationID]?.count ?? 0 }
    }

    /// Ends the streams of a removed installation.
    public func closeInstallation(_ installationID: String) {
        let all = state.withLock { s in Array((s.streams.removeValue(forKey: installationID) ?? [:]).values) }
        for c in all { c.finish() }
    }

    /// Ends every stream and refuses new ones (at shutdown).
    public func closeAll() {
        let all = state.withLock { s -> [AsyncStream<String>.Continuation] in
            s.closed = true
            let all = s.streams.values.flatMap { $0.values }
            s.streams = [:]
            return all
        }
        for c in all { c.finish() }
    }
}
