// SPDX-License-Identifier: Apache-2.0

import ThingIF

/// MemoryStore's commands and their lifecycle.
extension MemoryStore {
    // MARK: commands

    public func insertCommand(_ command: CommandRecord) -> CommandRecord? {
        data.withLock { d in
            guard d.commands[command.commandID] == nil else { return nil }
            d.seq += 1
            var c = command
            c.seq = d.seq
            d.commands[c.commandID] = c
            d.commandOrder.append(c.commandID)
            return c
        }
    }

    public func command(id: String) -> CommandRecord? { data.withLock { $0.commands[id] } }

    public func markDelivered(commandIDs: [String], at: Int64) -> Set<String> {
        data.withLock { d in
            var marked = Set<String>()
            for id in commandIDs {
                guard var c = d.commands[id], c.results == nil, c.state.isOpen else { continue }
                c.state = .delivered
                c.modifiedAt = at
                d.commands[id] = c
                marked.insert(id)
            }
            return marked
        }
    }

    public func recordResults(commandID: String, results: String, state: CommandState, at: Int64, swept: Bool)
        -> Bool
    {
        data.withLock { d in
            guard var c = d.commands[commandID], c.results == nil else { return false }
            c.results = results
            c.state = state
            c.modifiedAt = at
            d.commands[commandID] = c
            if swept { d.notifyDue[commandID] = at + StoreRules.notificationGraceMs }
            return true
        }
    }

    public func markUndelivered(commandID: String, at: Int64) -> Bool {
        data.withLock { d in
            guard var c = d.commands[commandID], c.results == nil, c.state == .delivered else { return false }
            c.state = .sending
            c.modifiedAt = at
            d.commands[commandID] = c
            return true
        }
    }

    public func markNotified(commandIDs: [String]) -> Int {
        data.withLock { d in commandIDs.reduce(0) { $0 + (d.notifyDue.removeValue(forKey: $1) != nil ? 1 : 0) } }
    }

    public func claimUnnotified(now: Int64, leaseMs: Int64, limit: Int) -> [CommandRecord] {
        data.withLock { d in
            let due = d.notifyDue.filter { $0.value <= now }.sorted { ($0.value, $0.key) < ($1.value, $1.key) }
                .prefix(max(0, limit))
            for (id, _) in due { d.notifyDue[id] = now + max(0, leaseMs) }
            return due.compactMap { d.commands[$0.key] }.sorted { $0.seq < $1.seq }
        }
    }

    public func commands(thingID: String, afterSeq: Int64, limit: Int) -> [CommandRecord] {
        data.withLock { d in
            let all = d.commands
            return Array(
                d.commandOrder.compactMap { all[$0] }
                    .filter { $0.thingID == thingID && $0.seq > afterSeq }.prefix(max(0, limit)))
        }
    }

    public func unansweredCommands(thingID: String) -> [CommandRecord] {
        data.withLock { d in
            d.commandOrder.compactMap { d.commands[$0] }.filter { $0.thingID == thingID && $0.results == nil }
        }
    }

    // MARK: command lifecycle

    public func setCommandExpiry(commandID: String, expiresAt: Int64) -> Bool {
        data.withLock { d in
            guard d.commands[commandID] != nil else { return false }
            d.commands[commandID]?.expiresAt = expiresAt
            return true
        }
    }

    public func endCommand(commandID: String, state: CommandState, reason: String, at: Int64, swept: Bool) -> Bool {
        data.withLock { d in
            guard var c = d.commands[commandID], c.results == nil, c.state.isOpen else { return false }
            c.state = state
            c.endReason = reason
            c.modifiedAt = at
            d.commands[commandID] = c
            if swept { d.notifyDue[commandID] = at + StoreRules.notificationGraceMs }
            return true
        }
    }

    public func commandsDueToEnd(now: Int64, sentBefore: Int64?, deliveredBefore: Int64?, limit: Int)
        -> [CommandRecord]
    {
        data.withLock { d in
            let all = d.commands
            let due = d.commandOrder.lazy.compactMap { all[$0] }.filter { c in
                guard c.results == nil, c.state.isOpen else { return false }
                if let e = c.expiresAt, e <= now { return true }
                if c.state == .sending, let b = sentBefore { return c.createdAt <= b }
                if c.state == .delivered, let b = deliveredBefore { return c.modifiedAt <= b }
                return false
            }
            return Array(due.prefix(max(0, limit)))
        }
    }
}
