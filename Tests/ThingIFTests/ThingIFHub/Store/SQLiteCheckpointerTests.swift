// SPDX-License-Identifier: Apache-2.0

import Foundation
import Testing
import ThingIF
@testable import ThingIFHub
#if canImport(Glibc)
    import Glibc
#endif

/// The hub's SQLite file is checkpointed by a worker of its own, off the
/// committing call (SQLiteCheckpointer), and its write-ahead log stays bounded.
@Suite("SQLite checkpoints", .offPool)
struct SQLiteCheckpointTests {
    private func fileSize(_ path: String) -> Int {
        var st = stat()
        return stat(path, &st) == 0 ? Int(st.st_size) : 0
    }

    @Test("The worker copies the log, the log stays under the backstop, and every write is there after a restart")
    func workerCheckpointsAndLogStaysBounded() throws {
        let dir = try makeTempDirectory(prefix: "thingif-ckpt")
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let path = dir + "/hub.sqlite"
        var s: SQLiteStore? = try SQLiteStore(
            path: path, secrets: .fastForTests, retention: StateRetention(),
            migrateTo: SQLiteStore.schemaVersion, checkpointPages: 16)
        let checkpointer = try #require(s!.checkpointer)
        #expect(checkpointer.backstop == 256)
        let t = try s!.registerThing(
            vendorThingID: "CK-1", password: "pw", thingType: "AirConditioner", firmwareVersion: nil,
            dataGroupingInterval: nil, layoutPosition: nil
        ).get()
        // About 3 pages a commit: without checkpoints the log would pass
        // 10,000 frames (40 MB); a log that never starts over, as under a
        // worker alone, grows as well.
        let filler = String(repeating: "x", count: 300)
        var largestLog = 0
        for i in 0..<3000 {
            let upload = #"{"n":\#(i),"pad":"\#(filler)"}"#
            _ = try #require(s!.applyState(thingID: t.thingID, method: "PUT", upload: upload, at: Int64(i + 1)))
            if i % 100 == 0 { largestLog = max(largestLog, fileSize(path + "-wal")) }
        }
        largestLog = max(largestLog, fileSize(path + "-wal"))
        #expect(poll { checkpointer.counts.worker >= 1 }, "the worker never checkpointed")
        // The log started over again and again, and never held more than
        // the backstop's 256 frames (1 MB) and one commit's: a commit that
        // finds the worker's checkpoint under way waits for it, however long
        // the disk takes. Without the backstop it never starts over and
        // reaches 58 MB; with one that gives up while the worker copies, it
        // reached 42 MB on a loaded machine.
        #expect(checkpointer.counts.restarts >= 5, "the log started over \(checkpointer.counts.restarts) times")
        let bound = 2 << 20
        #expect(largestLog <= bound, "the log reached \(largestLog) bytes, over \(bound)")
        #expect(largestLog > 0, "the store did not use a write-ahead log")
        s!.close()
        s = nil
        #expect(access(path + "-wal", F_OK) != 0, "closing left the log behind")

        let r = try SQLiteStore(path: path, secrets: .fastForTests)
        defer { r.close() }
        #expect(r.thing(id: t.thingID)?.state?.contains(#""n":2999"#) == true)
        #expect(r.stateHistory(thingID: t.thingID, from: 0, to: .max).count == 3000)
    }

    @Test("The hook wakes the worker at `pages` uncopied frames and checkpoints in the commit only at the backstop")
    func thresholds() {
        // Not started: nothing copies, so only the counting is seen.
        let c = SQLiteCheckpointer(path: "/nonexistent/hub.sqlite", pages: 10)
        #expect(c.backstop == 160)
        #expect(!c.committed(frames: 5))
        #expect(!c.committed(frames: 159))
        #expect(c.committed(frames: 160))
        #expect(c.committed(frames: 170))
        #expect(c.counts.inline == 2)
        c.checkpointed(frames: 170)
        // The log started over: small again, nothing to do in the commit.
        #expect(!c.committed(frames: 3))
        #expect(c.counts.inline == 2)
        #expect(c.counts.worker == 0)
        c.close()
    }

    @Test("At the backstop, a checkpoint refused while the worker's runs waits for it to end and copies again")
    func backstopWaitsForTheWorker() {
        // Not started: the test plays the worker, whose checkpoint holds
        // SQLite's checkpoint lock until `release` (a stalled fsync).
        let c = SQLiteCheckpointer(path: "/nonexistent/hub.sqlite", pages: 10)
        defer { c.close() }
        // No worker checkpoint under way: a refused one is not retried.
        var calls = 0
        c.checkpointAtBackstop {
            calls += 1
            return nil
        }
        #expect(calls == 1)
        #expect(c.counts.waits == 0)

        let inCheckpoint = DispatchSemaphore(value: 0)
        let release = DispatchSemaphore(value: 0)
        let workerDone = DispatchSemaphore(value: 0)
        let worker = Thread {
            c.workerCheckpoint {
                inCheckpoint.signal()
                release.wait()
                return 100
            }
            workerDone.signal()
        }
        worker.start()
        inCheckpoint.wait()
        // The worker's checkpoint ends only once the backstop waits for it
        // (or after 30 s, when the expectations below fail). A thread of
        // its own: Dispatch's pool can be busy with the rest of the suite.
        Thread {
            _ = poll(timeoutMs: 30_000) { c.counts.waits > 0 }
            release.signal()
        }.start()
        calls = 0
        var retriedAfterWorker = false
        c.checkpointAtBackstop {
            calls += 1
            if calls == 1 { return nil }  // SQLITE_BUSY: the worker's runs
            retriedAfterWorker = c.counts.worker == 1
            return 180
        }
        #expect(calls == 2)
        #expect(retriedAfterWorker, "the backstop copied again before the worker's checkpoint ended")
        #expect(c.counts.waits == 1)
        #expect(workerDone.wait(timeout: .now() + 10) == .success)
    }

    @Test("A store in memory has no checkpointer")
    func memoryHasNone() throws {
        let s = try SQLiteStore(path: ":memory:", secrets: .fastForTests)
        defer { s.close() }
        #expect(s.checkpointer == nil)
    }
}
