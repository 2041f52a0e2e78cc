// SPDX-License-Identifier: Apache-2.0

import ThingIF

/// The store's connections to its database: each call borrows one for its
/// statements (a transaction stays on the one it began on) and gives it
/// back. At most `capacity` are open; they are opened when calls overlap and
/// kept. A caller waits only when all of them are lent. Several at once let
/// a command's insert (an HTTP handler), its results (the request thread)
/// and the notifications' marks run side by side, and PostgreSQL flush their
/// commits together, instead of queuing behind one connection's lock.
final class PostgresPool: @unchecked Sendable {
    private let monitor = Monitor()
    private var idle: [PostgresConnection]
    private var open: Int
    private var closed = false
    let capacity: Int
    private let url: String
    private let timeout: Int

    /// `first` is the connection the store migrated the schema with.
    init(first: PostgresConnection, url: String, timeout: Int, capacity: Int) {
        idle = [first]
        open = 1
        self.capacity = max(1, capacity)
        self.url = url
        self.timeout = timeout
    }

    private enum Lend {
        case connection(PostgresConnection)
        case openOne
        case closed
    }

    /// Runs `body` with a connection of its own for the duration.
    func with<R>(_ body: (PostgresConnection) throws -> R) throws -> R {
        let c = try borrow()
        defer { giveBack(c) }
        return try body(c)
    }

    private func borrow() throws -> PostgresConnection {
        let lend = monitor.locked { () -> Lend in
            while true {
                if closed { return .closed }
                if let c = idle.popLast() { return .connection(c) }
                if open < capacity {
                    open += 1
                    return .openOne
                }
                monitor.wait()
            }
        }
        switch lend {
        case .connection(let c): return c
        case .closed: throw PostgresError(sqlState: "", message: "the store is closed")
        case .openOne:
            // Connecting happens outside the lock; a failure frees the place.
            do {
                return try PostgresConnection(url: url, timeout: timeout)
            } catch {
                monitor.locked {
                    open -= 1
                    monitor.signal()
                }
                throw error
            }
        }
    }

    private func giveBack(_ c: PostgresConnection) {
        let keep = monitor.locked { () -> Bool in
            defer { monitor.signal() }
            guard !closed else {
                open -= 1
                return false
            }
            idle.append(c)
            return true
        }
        if !keep { c.close() }
    }

    /// Closes the idle connections now and each lent one when it comes
    /// back; later calls fail.
    func close() {
        let toClose = monitor.locked { () -> [PostgresConnection] in
            closed = true
            defer {
                open -= idle.count
                idle = []
                monitor.broadcast()
            }
            return idle
        }
        for c in toClose { c.close() }
    }
}
