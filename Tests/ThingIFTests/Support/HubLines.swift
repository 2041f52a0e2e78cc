// SPDX-License-Identifier: Apache-2.0

import Foundation

/// The lines a hub reports (`onEvent`, `onLog`), kept in order, for a test
/// to wait on: a wait wakes at each new line, not on a timer, so it sees an
/// event as soon as the hub reports it and never sleeps for a guess.
final class HubLines: @unchecked Sendable {
    private let condition = NSCondition()
    private var kept: [String] = []

    /// The sink to set as the hub's `onEvent` (or `onLog`).
    var sink: @Sendable (String) -> Void { { [self] line in append(line) } }

    func append(_ line: String) {
        condition.lock()
        kept.append(line)
        condition.broadcast()
        condition.unlock()
    }

    /// Every line so far, oldest first.
    var all: [String] {
        condition.lock()
        defer { condition.unlock() }
        return kept
    }

    /// Waits until `count` lines match (bounded: 30 s by default, a bound
    /// for a busy 2-core machine) and returns whether they came. It blocks:
    /// call it off the cooperative pool (`offPool { }`, or an `.offPool` suite).
    @discardableResult
    func wait(count: Int = 1, timeoutMs: Int = 30_000, _ match: (String) -> Bool) -> Bool {
        expectOffPool("HubLines.wait")
        let deadline = Date().addingTimeInterval(Double(timeoutMs) / 1000)
        condition.lock()
        defer { condition.unlock() }
        while kept.lazy.filter(match).count < count {
            if !condition.wait(until: deadline) { return kept.lazy.filter(match).count >= count }
        }
        return true
    }

    /// Waits for a line that contains `text` and returns the first such line.
    func first(containing text: String, timeoutMs: Int = 30_000) -> String? {
        wait(timeoutMs: timeoutMs) { $0.contains(text) } ? all.first { $0.contains(text) } : nil
    }
}
