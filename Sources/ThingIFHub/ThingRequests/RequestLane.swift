// SPDX-License-Identifier: Apache-2.0

import CThingIF
import ThingIF

/// The hub's inbound MQTT messages (classified: `Inbound`), between libmosquitto's network thread
/// and the one worker thread that handles them in arrival order.
///
/// The network thread only appends, so the hub takes messages off the broker
/// as fast as they come: a burst from one thing does not fill the broker's
/// queue for the hub (mosquitto drops what passes max_queued_messages).
/// Bounded: at `capacity` messages or `maxBytes` of payload the network
/// thread waits for room, and the broker holds what follows. A message taken but not yet handled when
/// the hub dies is a request without an answer, which the thing sends again
/// (its outbox); the reliability contract does not move.
final class RequestLane: @unchecked Sendable {
    private let monitor = Monitor()
    private var items: [Inbound] = []
    private var head = 0
    private var closed = false
    private var worker: pthread_t?
    let capacity: Int
    let maxBytes: Int
    private var bytes = 0
    /// The most messages that waited at once (a gauge for operators and tests).
    private(set) var highWater = 0

    init(capacity: Int, maxBytes: Int) {
        self.capacity = max(1, capacity)
        self.maxBytes = max(1, maxBytes)
    }

    private func locked<T>(_ body: () -> T) -> T { monitor.locked(body) }

    /// How many messages wait.
    var count: Int { locked { items.count - head } }

    /// Appends a message; waits while the queue is full. False once closed.
    @discardableResult
    func push(_ m: Inbound) -> Bool {
        locked {
            while !closed && head < items.count && (items.count - head >= capacity || bytes >= maxBytes) {
                monitor.wait()
            }
            guard !closed else { return false }
            items.append(m)
            bytes += m.message.payload.count
            highWater = max(highWater, items.count - head)
            monitor.broadcast()
            return true
        }
    }

    /// The oldest messages, as many as wait and at most `max` (at least
    /// one); waits while none is there. Empty once closed and empty.
    func pop(upTo max: Int) -> [Inbound] {
        locked {
            while !closed && head == items.count { monitor.wait() }
            let n = Swift.min(Swift.max(1, max), items.count - head)
            guard n > 0 else { return [] }
            let out = Array(items[head..<head + n])
            head += n
            for m in out { bytes -= m.message.payload.count }
            // Reclaim the consumed prefix now and then, not on every pop.
            if head >= 1024 && head * 2 >= items.count {
                items.removeFirst(head)
                head = 0
            } else if head == items.count {
                items.removeAll(keepingCapacity: true)
                head = 0
            }
            monitor.broadcast()
            return out
        }
    }

    /// Starts the worker thread, which calls `handle` with what waits (at
    /// most `batch` messages at a time), in order.
    func start(batch: Int, _ handle: @escaping ([Inbound]) -> Void) -> Bool {
        guard
            let tid = startThread({
                while case let ms = self.pop(upTo: batch), !ms.isEmpty { handle(ms) }
            })
        else { return false }
        locked { worker = tid }
        return true
    }

    /// Stops taking messages, lets the worker finish what waits, and joins it.
    func close() {
        let tid = locked { () -> pthread_t? in
            closed = true
            monitor.broadcast()
            defer { worker = nil }
            return worker
        }
        if let tid, pthread_equal(tid, pthread_self()) == 0 { pthread_join(tid, nil) }
    }
}
