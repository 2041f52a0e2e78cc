// SPDX-License-Identifier: Apache-2.0

import ThingIF

/// A request lane's results and state uploads in one store transaction.
///
/// They are two of a command's three writes, and most of what a lane
/// does. On a store that offers it (`inOneTransaction`: SQLite and
/// PostgreSQL), a run of them that waits in the lane shares one BEGIN …
/// COMMIT: one commit and its flush instead of one per write.
/// Nothing is acknowledged or told before it is stored: each request's
/// reply, its results' notification, Home Assistant's state and the
/// trigger evaluation wait for the commit (`afterCommit`). When the
/// commit fails they are dropped, and every thing in the run sends its
/// requests again (its outbox, as after a hub crash): the reliability
/// contract does not move. When a call in it fails on PostgreSQL, which
/// then undoes the whole transaction, each message is handled again on
/// its own.
///
/// A run is handled thing by thing, in the order of their thingIDs (each
/// thing's messages in the order they came). Two hubs' transactions then
/// take the rows of their things in one order, and never wait for each
/// other in a circle (PostgreSQL's deadlock, which undoes one of them).
extension ThingRequests {
    /// The most messages of a lane handled at a time (and so in one transaction).
    static let laneBatchMax = 32

    /// What a request lane took from its queue, in arrival order.
    func handleLane(_ ms: [Inbound]) {
        var i = ms.startIndex
        while i < ms.endIndex {
            var run: [(thing: String, index: Int)] = []
            while i + run.count < ms.endIndex, let thing = Self.sharedCommitTarget(ms[i + run.count]) {
                run.append((thing, i + run.count))
            }
            if run.count >= 2 {
                run.sort { ($0.thing, $0.index) < ($1.thing, $1.index) }
                handleInOneCommit(run.map { ms[$0.index] })
                i += run.count
            } else {
                handle(ms[i])
                i += 1
            }
        }
    }

    /// The target ("thing:{thingID}") of a message that may share its
    /// lane's transaction (`RequestRoute.sharedCommitTarget`), nil for any other.
    static func sharedCommitTarget(_ m: Inbound) -> String? {
        guard case .request(_, let route) = m.kind else { return nil }
        return route.sharedCommitTarget
    }

    private func handleInOneCommit(_ run: [Inbound]) {
        let pending = AfterCommit()
        let outcome = store.inOneTransaction { AfterCommit.slot.with(pending) { for m in run { handle(m) } } }
        switch outcome {
        case .committed:
            pending.run()
        case .failed:
            events.event(
                "the store's commit of \(run.count) request(s) failed: not answered, their things send them again")
        case .undone:
            events.event(
                "a call in the store's transaction of \(run.count) request(s) failed: each handled again alone")
            for m in run { handle(m) }
        case .unsupported:
            for m in run { handle(m) }
        }
    }

    /// Runs `effect` now, or, on a lane in one transaction, after its commit.
    func afterCommit(_ effect: @escaping () -> Void) { AfterCommit.later(effect) }
}
