// SPDX-License-Identifier: Apache-2.0

/// What waits for a lane's commit, in the order it was asked for.
final class AfterCommit {
    static let slot = ThreadSlot<AfterCommit>()
    var effects: [() -> Void] = []

    /// Runs `effect` now, or, on a thread in a lane's transaction, after
    /// its commit: what tells anyone of a write waits for it
    /// (ThingRequests+Lanes.swift).
    static func later(_ effect: @escaping () -> Void) {
        if let pending = slot.current {
            pending.effects.append(effect)
        } else {
            effect()
        }
    }

    func run() {
        let now = effects
        effects = []
        for effect in now { effect() }
    }
}
