import ThingIF

/// A request lane's results and state uploads in one store transaction.
///
/// They are two of a command's three writes, and most of what a lane
/// does. On a store that offers it (SQLite: `inOneTransaction`), a run of
/// them that waits in the lane shares one BEGIN … COMMIT: one write lock,
/// one WAL commit and one read snapshot instead of one per statement.
/// Nothing is acknowledged or told before it is stored: each request's
/// reply, its results' notification, Home Assistant's state and the
/// trigger evaluation wait for the commit (`afterCommit`). When the
/// commit fails they are dropped, and every thing in the run sends its
/// requests again (its outbox, as after a hub crash): the reliability
/// contract does not move.
extension FrameworkSide {
    /// The most messages of a lane handled at a time (and so in one transaction).
    static let laneBatchMax = 32

    /// What a request lane took from its queue, in arrival order.
    func handleLane(_ ms: [MqttClient.Message]) {
        var i = ms.startIndex
        while i < ms.endIndex {
            var end = i
            while end < ms.endIndex && Self.sharesCommit(topic: ms[end].topic) { end += 1 }
            if end - i >= 2 {
                handleInOneCommit(ms[i..<end])
                i = end
            } else {
                handle(ms[i])
                i += 1
            }
        }
    }

    /// Whether a message may share its lane's transaction: a thing's
    /// results or state upload, which touch nothing but the store before
    /// their commit (their other effects go through `afterCommit`).
    static func sharesCommit(topic: String) -> Bool {
        guard let t = Topics.parseRequest(topic), t.api == .thingIF, t.path.hasPrefix("targets/") else { return false }
        let parts = t.path.utf8.split(separator: UInt8(ascii: "/"), omittingEmptySubsequences: false)
        switch parts.count {
        case 3: return parts[2].elementsEqual("states".utf8)
        case 5: return parts[2].elementsEqual("commands".utf8) && parts[4].elementsEqual("action-results".utf8)
        default: return false
        }
    }

    private func handleInOneCommit(_ run: ArraySlice<MqttClient.Message>) {
        let pending = AfterCommit()
        let outcome = store.inOneTransaction { AfterCommit.slot.with(pending) { for m in run { handle(m) } } }
        switch outcome {
        case .committed:
            pending.run()
        case .failed:
            onEvent?("the store's commit of \(run.count) request(s) failed: not answered, their things send them again")
        case .unsupported:
            for m in run { handle(m) }
        }
    }

    /// Runs `effect` now, or, on a lane in one transaction, after its commit.
    func afterCommit(_ effect: @escaping () -> Void) {
        if let pending = AfterCommit.slot.current {
            pending.effects.append(effect)
        } else {
            effect()
        }
    }
}

/// What waits for a lane's commit, in the order it was asked for.
final class AfterCommit {
    static let slot = ThreadSlot<AfterCommit>()
    var effects: [() -> Void] = []

    func run() {
        let now = effects
        effects = []
        for effect in now { effect() }
    }
}
