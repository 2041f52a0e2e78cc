// SPDX-License-Identifier: Apache-2.0

import ThingIF

/// The hub's inbound MQTT messages spread over `count` request threads, each
/// a RequestLane of its own. All messages of one client (its requests and
/// its status: topics p/{clientID}/…) go to the same lane, so each thing's
/// requests are still handled one at a time in arrival order; other topics
/// (Home Assistant's) go to the first lane. With a store that serves calls
/// side by side (PostgreSQL's pool), the lanes' store round trips overlap
/// instead of queuing behind one thread; with SQLite there is one lane.
final class RequestLanes: @unchecked Sendable {
    let lanes: [RequestLane]

    /// `capacity` and `maxBytes` are shared out among the lanes.
    init(count: Int, capacity: Int, maxBytes: Int) {
        let n = max(1, count)
        lanes = (0..<n).map { _ in RequestLane(capacity: max(1, capacity / n), maxBytes: max(1, maxBytes / n)) }
    }

    /// Starts every lane's thread, which calls `handle` with what waits in
    /// its lane (at most `batch` messages at a time); false (and none left
    /// running) when one cannot start.
    func start(batch: Int, _ handle: @escaping ([Inbound]) -> Void) -> Bool {
        for (i, lane) in lanes.enumerated() where !lane.start(batch: batch, handle) {
            for started in lanes[..<i] { started.close() }
            return false
        }
        return true
    }

    /// Appends a message to its client's lane; waits while that lane is full.
    @discardableResult
    func push(_ m: Inbound) -> Bool { lanes[Self.lane(of: m.message.topic, count: lanes.count)].push(m) }

    /// Stops every lane after what waits in it is handled.
    func close() { for lane in lanes { lane.close() } }

    /// The lane of a topic: FNV-1a of its client ID (the second level of
    /// p/{clientID}/…), lane 0 for any other topic.
    static func lane(of topic: String, count: Int) -> Int {
        guard count > 1 else { return 0 }
        var hash = FNV1a()
        var level = 0
        var prefixOK = false
        for (i, b) in topic.utf8.enumerated() {
            if i == 0 {
                prefixOK = b == UInt8(ascii: "p")
                continue
            }
            if b == UInt8(ascii: "/") {
                level += 1
                if level == 2 { break }
                continue
            }
            if level == 0 { prefixOK = false }
            if level == 1 {
                hash.add(b)
            }
        }
        guard prefixOK, level >= 1 else { return 0 }
        return Int(hash.value % UInt64(count))
    }
}
