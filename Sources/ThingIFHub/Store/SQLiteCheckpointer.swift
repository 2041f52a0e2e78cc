// SPDX-License-Identifier: Apache-2.0

import CSQLite
#if canImport(Glibc)
    import Glibc
#endif

/// Copies the hub's SQLite write-ahead log back into the database file on a
/// thread of its own, with a connection of its own, instead of inside the
/// commit that crossed SQLite's threshold.
///
/// SQLite's automatic checkpoint runs in the committing call, that is under
/// SQLiteStore's one lock: every request waits while it copies and syncs up
/// to `pages` scattered pages, and the bigger the file the more of them are
/// distinct (bench/fleet, seven runs: the running thing's p99 was 12.8 to
/// 16.4 ms over a roll-out to 20,000 things, 9.0 to 11.8 ms with this). A
/// PASSIVE checkpoint from another connection blocks neither the writer nor
/// the readers (WAL mode), so requests go on while it runs.
///
/// The hub's connection reports each commit's WAL size through SQLite's WAL
/// hook (which replaces the automatic checkpoint). Once `pages` frames wait
/// that no checkpoint has copied, the worker is woken; requests that come
/// meanwhile only note the size.
///
/// The log starts over only when a write begins with every frame copied,
/// and under steady load a commit nearly always lands while the worker
/// copies, so its checkpoints alone would leave the log growing. Bounded:
/// once the log holds `backstop` frames the committing call checkpoints as
/// SQLite's automatic checkpoint would, on its own connection under the
/// store's lock, which copies everything and lets the next write start the
/// log over. The worker has copied all but the last few frames by then, so
/// that checkpoint is short. It also keeps the log bounded should the worker
/// fail to start or open its connection. Should a checkpoint of the worker's
/// still run then (a stalled fsync: a WAL commit does not sync, the
/// checkpoint does), the backstop's own is refused, and the committing call
/// waits for the worker's to end and tries again (`checkpointAtBackstop(_:)`): the log
/// never grows past the backstop by more than one commit, whatever the disk
/// does, at the price of that one wait.
final class SQLiteCheckpointer: @unchecked Sendable {
    /// Frames not yet copied that wake the worker: a quarter of SQLite's own
    /// threshold for its automatic checkpoint (1,000), so that the backstop
    /// finds little left to copy.
    static let defaultPages: Int32 = 256

    let pages: Int32
    let backstop: Int32
    private let path: String
    private let monitor = Monitor()
    private var due = false
    private var closed = false
    private var worker: pthread_t?
    /// Frames of the log that the last checkpoint copied (0 after the log
    /// started over).
    private var copied: Int32 = 0
    /// Frames in the log at the last commit.
    private var seen: Int32 = 0
    private var checkpoints = 0
    private var inline = 0
    private var restarts = 0
    /// The worker is in a checkpoint (which holds SQLite's checkpoint lock).
    private var copying = false
    private var waits = 0

    init(path: String, pages: Int32 = defaultPages) {
        self.path = path
        self.pages = max(1, pages)
        backstop = self.pages * 16
    }

    /// Checkpoints done by the worker and by committing calls (the
    /// backstop), how often the log started over, and how often a
    /// committing call waited for the worker's checkpoint to end.
    var counts: (worker: Int, inline: Int, restarts: Int, waits: Int) {
        monitor.locked { (checkpoints, inline, restarts, waits) }
    }

    /// Called from the hub connection's WAL hook after each commit, with the
    /// frames now in the log. Wakes the worker when `pages` of them are not
    /// copied yet; true when the committing call must checkpoint itself
    /// (the backstop).
    func committed(frames: Int32) -> Bool {
        monitor.locked {
            if frames < seen {  // the log started over
                copied = 0
                restarts += 1
                if due { monitor.broadcast() }  // a worker held back by the backstop
            }
            seen = frames
            if frames >= backstop {
                // The worker is not woken now: a checkpoint of its own
                // would hold the lock the committing call needs.
                inline += 1
                return true
            }
            if frames - copied >= pages && !due && !closed {
                due = true
                monitor.broadcast()
            }
            return false
        }
    }

    /// The backstop's checkpoint in the committing call, once `committed`
    /// said so: `copy` checkpoints and says the frames copied, or nil when
    /// it could not (SQLITE_BUSY while the worker's checkpoint runs). Then
    /// the call waits for the worker's to end and copies again.
    func checkpointAtBackstop(_ copy: () -> Int32?) {
        var copied = copy()
        if copied == nil {
            let waited = monitor.locked { () -> Bool in
                guard copying else { return false }
                waits += 1
                while copying { monitor.wait() }
                return true
            }
            if waited { copied = copy() }
        }
        if let copied { checkpointed(frames: copied) }
    }

    /// After a checkpoint (the worker's or the backstop's) copied `frames`.
    /// More than the log now holds: it started over meanwhile, and what is
    /// there now was not copied.
    func checkpointed(frames: Int32) {
        monitor.locked { copied = frames <= seen ? max(0, frames) : 0 }
    }

    private func take() -> Bool {
        monitor.locked {
            // Past the backstop the commits checkpoint; the worker waits
            // for the log to start over.
            while !closed && (!due || seen >= backstop) { monitor.wait() }
            due = false
            return !closed
        }
    }

    /// Starts the worker. False when the thread cannot be made: the
    /// backstop then keeps the log bounded.
    func start() -> Bool {
        guard let tid = startThread({ self.run() }) else { return false }
        monitor.locked { worker = tid }
        return true
    }

    private func run() {
        // Opened here, on the worker: a failure leaves the backstop in charge.
        guard let c = try? SQLiteConnection(path: path) else { return }
        defer { c.close() }
        // A connection learns that the file is in WAL mode when it first
        // reads it; until then a checkpoint does nothing and says -1.
        guard (try? c.first("SELECT count(*) FROM sqlite_master", [], { $0.int(0) })) != nil else { return }
        while take() { workerCheckpoint { try? c.checkpointPassive() } }
    }

    /// One checkpoint of the worker's: `copy` checkpoints and says the
    /// frames copied (nil: it could not). A committing call that waits in
    /// `checkpointAtBackstop(_:)` meanwhile goes on when it ends.
    func workerCheckpoint(_ copy: () -> Int32?) {
        monitor.locked { copying = true }
        let copied = copy()
        if let copied { checkpointed(frames: copied) }
        monitor.locked {
            if copied != nil { checkpoints += 1 }
            copying = false
            monitor.broadcast()
        }
    }

    /// Stops the worker (a checkpoint under way finishes first) and joins it.
    func close() {
        let tid = monitor.locked { () -> pthread_t? in
            closed = true
            monitor.broadcast()
            defer { worker = nil }
            return worker
        }
        if let tid, pthread_equal(tid, pthread_self()) == 0 { pthread_join(tid, nil) }
    }
}
