// SPDX-License-Identifier: Apache-2.0

import Foundation
import Testing

@testable import ThingIF

/// An installer's sink as a power cut sees it: what was written since the
/// last flush is lost, what was flushed stays.
struct CutSink {
    var written: [UInt8]
    var flushed: [UInt8]

    init(size: Int) {
        written = [UInt8](repeating: 0, count: size)
        flushed = written
    }

    mutating func write(_ bytes: [UInt8], at offset: Int64) {
        written.replaceSubrange(Int(offset)..<Int(offset) + bytes.count, with: bytes)
    }

    mutating func flush() { flushed = written }
}

/// A deterministic generator, so that a failing run can be run again.
struct SplitMix: RandomNumberGenerator {
    var state: UInt64
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

@Suite("Update jobs: the journal, the block download, the restart")
struct UpdateJobTests {
    let image: [UInt8] = (0..<200_000).map { UInt8(truncatingIfNeeded: $0 &* 131 &+ ($0 >> 9)) }
    let signer = TestSigner(kid: "fw-2026")

    func offer(jobID: String = "r-1.th.1", attempt: Int = 1, blockSize: Int = 1024) throws -> (
        UpdateOffer, BlockHashList
    ) {
        let (bytes, list) = TestSigner.manifest(for: image, blockSize: blockSize)
        let o = try UpdateOffer.parse(
            UpdateOffer.encode(
                jobID: jobID, attempt: attempt, manifest: bytes, signatures: [signer.sign(bytes)], trialSeconds: 60)
        ).get()
        return (o, try BlockHashList.verify(list, for: o.manifest).get())
    }

    func deliver(_ d: inout UpdateDownload, _ n: Int, _ bytes: [UInt8]) -> UpdateDownload.Arrival {
        bytes.withUnsafeBytes { d.arrived(block: n, $0) }
    }

    func storage() throws -> Storage { Storage(directory: try makeTempDirectory(prefix: "thingif-update"))! }

    func block(_ n: Int, of m: UpdateManifest) -> [UInt8] {
        Array(image[n * m.blockSize..<n * m.blockSize + m.blockLength(n)])
    }

    /// The journal's file as a power cut leaves it, in a new storage
    /// directory; with `torn`, a half-written line after it.
    func cut(_ from: Storage, torn: Bool) throws -> Storage {
        let to = try storage()
        var bytes = from.read(UpdateJournal.fileName, limit: 64 << 20) ?? []
        if torn { bytes += Array(#"{"u":"r-1.th.1","w":[[3,"#.utf8) }
        #expect(to.write(UpdateJournal.fileName, bytes))
        return to
    }

    @Test("A job's journal reads back what it wrote; a compaction keeps it and its sequence numbers grow on")
    func journalRoundTrip() throws {
        let (o, _) = try offer()
        let s = try storage()
        let j = UpdateJournal(storage: s)
        guard case .taken(let job) = j.take(o, commandID: "c-1", runningVersion: "1.0.0") else {
            Issue.record("not taken")
            return
        }
        #expect(job.status == .accepted && job.previousVersion == "1.0.0" && job.targetVersion == "1.2.0")
        #expect(j.checkpoint([0, 1, 2, 5]) && j.checkpoint([3, 4, 7]))
        #expect(j.enter(.verified) && j.enter(.installing, installStart: 1))
        let before = try #require(j.job)
        let again = try #require(UpdateJournal(storage: s).job)
        #expect(again.jobID == "r-1.th.1" && again.commandID == "c-1" && again.status == .installing)
        #expect(again.durable == before.durable && again.durable.held == 7 && !again.durable.contains(6))
        #expect(again.installStarts == 1 && again.records == 5 && again.manifest.bytes == o.manifest.bytes)
        #expect(again.durable.ranges.map { [$0.first, $0.last] } == [[0, 5], [7, 7]])
        // Compacted: fewer lines, the same job, and report sequence numbers that do not go back.
        let seq = before.sequence(progress: 1023)
        #expect(j.compact())
        let lines = s.read(UpdateJournal.fileName)!.split(separator: 10).count
        let compacted = try #require(UpdateJournal(storage: s).job)
        #expect(lines == 3 && compacted.durable == before.durable && compacted.status == .installing)
        #expect(compacted.installStarts == 1 && compacted.records == before.records)
        let next = UpdateJournal(storage: s)
        #expect(next.enter(.rebooting) && next.job!.sequence() > seq)
        // Trust is recorded and read back.
        #expect(next.confirmTrust(TrustRing(keys: [signer.trusted], securityVersion: 4)))
        #expect(next.finish(.succeeded))
        let done = UpdateJournal(storage: s)
        #expect(done.trust?.securityVersion == 4 && done.trust?.key("fw-2026") != nil && done.job?.status == .succeeded)
        #expect(done.resume(runningVersion: "1.2.0", maxTrialBoots: 3) == .idle)
        #expect(done.passedOver == 0)
    }

    @Test("A power cut at any point of a download costs at most one checkpoint and the window, never a wrong byte")
    func powerCuts() throws {
        let (o, hashes) = try offer()
        let m = o.manifest
        let window = 4
        let checkpoint = 16
        var rng = SplitMix(state: 58)
        var s = try storage()
        var journal = UpdateJournal(storage: s)
        guard case .taken = journal.take(o, commandID: "c-1", runningVersion: "1.0.0") else {
            Issue.record("not taken")
            return
        }
        var sink = CutSink(size: image.count)
        var download = UpdateDownload(
            manifest: m, hashes: hashes, durable: journal.job!.durable, window: window, checkpointBlocks: checkpoint)
        var received = Set<Int>()
        var cuts = 0
        var refetchedInAll = 0
        var worst = 0
        var badCopies = 0
        var deliveries = 0
        while !download.isComplete {
            deliveries += 1
            #expect(deliveries < 20_000, "the download does not end")
            if deliveries >= 20_000 { return }
            _ = download.requests()
            let flight = download.inFlight
            #expect(!flight.isEmpty && flight.count <= window)
            // The hub answers one of the blocks in flight; now and then a copy is bad, or a request times out.
            let n = flight[Int.random(in: 0..<flight.count, using: &rng)]
            let roll = Int.random(in: 0..<100, using: &rng)
            if roll < 3 {
                download.timedOut(block: n)
                continue
            }
            var bytes = block(n, of: m)
            if roll < 6 {
                bytes[Int.random(in: 0..<bytes.count, using: &rng)] ^= 0x5A
                badCopies += 1
            }
            switch deliver(&download, n, bytes) {
            case .write(let offset):
                sink.write(bytes, at: offset)
                received.insert(n)
                if download.wrote(block: n) {
                    sink.flush()
                    #expect(journal.checkpoint(download.takeCheckpoint()))
                }
            case .refetch(let why):
                #expect(roll < 6 && why.code == .badHash, "a good copy refused, or a bad one not: \(why.message)")
            case .fail(let why):
                Issue.record("the job failed: \(why.message)")
                return
            case .ignore:
                Issue.record("block \(n) was in flight but ignored")
            }
            // A power cut, at one delivery in 40 on average.
            if Int.random(in: 0..<40, using: &rng) == 0 {
                cuts += 1
                sink.written = sink.flushed
                s = try cut(s, torn: Int.random(in: 0..<2, using: &rng) == 0)
                journal = UpdateJournal(storage: s)
                let step = journal.resume(runningVersion: "1.0.0", maxTrialBoots: 3)
                let durable = journal.job!.durable
                #expect(step == (durable.isComplete ? .verify : .download))
                // Every block the journal holds is in the sink as flushed.
                for b in 0..<m.blocks where durable.contains(b) {
                    let at = b * m.blockSize
                    #expect(Array(sink.flushed[at..<at + m.blockLength(b)]) == block(b, of: m), "block \(b)")
                }
                let lost = received.filter { !durable.contains($0) }.count
                worst = max(worst, lost)
                refetchedInAll += lost
                #expect(lost <= checkpoint + window, "cut \(cuts) lost \(lost) blocks")
                received = received.filter { durable.contains($0) }
                download = UpdateDownload(
                    manifest: m, hashes: hashes, durable: durable, window: window, checkpointBlocks: checkpoint)
            }
        }
        #expect(cuts >= 3 && badCopies >= 3, "the run cut \(cuts) times and sent \(badCopies) bad copies")
        #expect(sink.flushed == image, "the image in the sink is not the image")
        #expect(UpdateCoding.sha256(sink.flushed) == m.sha256)
        let end = UpdateJournal(storage: s)
        #expect(end.job!.durable.isComplete && end.resume(runningVersion: "1.0.0", maxTrialBoots: 3) == .verify)
        print(
            "update power cuts: \(m.blocks) blocks, \(cuts) cuts, \(refetchedInAll) blocks fetched again "
                + "(at most \(worst) a cut; bound \(checkpoint + window)), \(badCopies) bad copies refused")
    }

    @Test("A bad copy is asked for again and never written; three bad copies of a block fail the job")
    func badBlocks() throws {
        let (o, hashes) = try offer()
        var d = UpdateDownload(
            manifest: o.manifest, hashes: hashes, durable: UpdateBlocks(count: o.manifest.blocks), window: 2,
            checkpointBlocks: 8)
        let first = d.requests()
        #expect(first == [0, 1])
        var bad = block(0, of: o.manifest)
        bad[0] ^= 1
        for copy in 1...3 {
            let arrival = deliver(&d, 0, bad)
            if copy < 3 {
                guard case .refetch(let why) = arrival else {
                    Issue.record("copy \(copy): \(arrival)")
                    return
                }
                #expect(why.code == .badHash && why.message.contains("block 0"))
                let again = d.requests()
                #expect(again == [0], "the bad block is asked for again")
            } else {
                guard case .fail(let why) = arrival else {
                    Issue.record("copy \(copy): \(arrival)")
                    return
                }
                #expect(why.code == .badHash)
            }
            #expect(!d.written.contains(0))
        }
        // A block not asked for, one held already, and a short or long one.
        let unasked = deliver(&d, 5, block(5, of: o.manifest))
        #expect(unasked == .ignore)
        let short = deliver(&d, 1, Array(block(1, of: o.manifest).dropLast()))
        guard case .refetch(let why) = short else {
            Issue.record("a short block: \(short)")
            return
        }
        #expect(why.message.contains("bytes"))
        _ = d.requests()
        let good = deliver(&d, 1, block(1, of: o.manifest))
        #expect(good == .write(offset: 1024))
        let due = d.wrote(block: 1)
        #expect(!due, "a checkpoint is due after one block of eight")
        let twice = deliver(&d, 1, block(1, of: o.manifest))
        #expect(twice == .ignore, "held already")
        let checkpoint = d.takeCheckpoint()
        let empty = d.takeCheckpoint()
        #expect(checkpoint == [1] && empty.isEmpty)
    }

    @Test("After a restart: the install again at most three times; the running version decides the trial")
    func restarts() throws {
        let (o, _) = try offer()
        func job(at status: UpdateStatus, _ extra: (UpdateJournal) -> Void = { _ in }) throws -> Storage {
            let s = try storage()
            let j = UpdateJournal(storage: s)
            guard case .taken = j.take(o, commandID: "c-1", runningVersion: "1.0.0") else { throw CancellationError() }
            extra(j)
            if status != .accepted { #expect(j.enter(status, installStart: status == .installing ? 1 : nil)) }
            return s
        }
        func resume(_ s: Storage, running: String) -> UpdateResume {
            UpdateJournal(storage: s).resume(runningVersion: running, maxTrialBoots: 2)
        }
        #expect(resume(try job(at: .accepted), running: "1.0.0") == .download)
        #expect(resume(try job(at: .verified), running: "1.0.0") == .install(start: 1))
        // Cut off during the install: started again, the third start the last.
        let installing = try job(at: .installing)
        #expect(resume(installing, running: "1.0.0") == .install(start: 2))
        #expect(resume(installing, running: "1.0.0") == .install(start: 3))
        #expect(resume(installing, running: "1.0.0") == .ended(.failed))
        let failed = UpdateJournal(storage: installing).job!
        #expect(failed.status == .failed && failed.reason == "INSTALL_INTERRUPTED")
        #expect(resume(installing, running: "1.0.0") == .idle)
        // After the reboot: the target runs (a trial), the previous (the bootloader fell back), another.
        let onTarget = try job(at: .rebooting)
        #expect(resume(onTarget, running: "1.2.0") == .trial(boot: 1))
        #expect(resume(onTarget, running: "1.2.0") == .trial(boot: 2))
        #expect(resume(onTarget, running: "1.2.0") == .rollback, "past the trial's boots")
        #expect(resume(onTarget, running: "1.0.0") == .ended(.rolledBack))
        #expect(UpdateJournal(storage: onTarget).job!.reason == "TRIAL_ROLLED_BACK")
        let fellBack = try job(at: .rebooting)
        #expect(resume(fellBack, running: "1.0.0") == .ended(.rolledBack))
        let back = UpdateJournal(storage: fellBack).job!
        #expect(back.reason == "BOOTLOADER_FELL_BACK" && back.message!.contains("1.0.0"))
        let other = try job(at: .rebooting)
        #expect(resume(other, running: "0.9.9") == .ended(.failed))
        #expect(UpdateJournal(storage: other).job!.reason == "UNEXPECTED_VERSION")
        // A download whose every block is durable goes to the hash check.
        let full = try job(at: .accepted) { #expect($0.checkpoint(Array(0..<o.manifest.blocks))) }
        #expect(resume(full, running: "1.0.0") == .verify)
    }

    @Test("One job at a time: the same offer again is known, another waits until the last is final")
    func oneJob() throws {
        let (first, _) = try offer()
        let (retry, _) = try offer(attempt: 2)
        let (next, _) = try offer(jobID: "r-2.th.1")
        let s = try storage()
        let j = UpdateJournal(storage: s)
        guard case .taken = j.take(first, commandID: "c-1", runningVersion: "1.0.0") else {
            Issue.record("not taken")
            return
        }
        guard case .known(let known) = j.take(first, commandID: "c-1", runningVersion: "1.0.0") else {
            Issue.record("the same offer again is not known")
            return
        }
        #expect(known.attempt == 1)
        guard case .busy(let busy) = j.take(next, commandID: "c-2", runningVersion: "1.0.0") else {
            Issue.record("another job taken while one is under way")
            return
        }
        #expect(busy.jobID == "r-1.th.1")
        guard case .busy = j.take(retry, commandID: "c-3", runningVersion: "1.0.0") else {
            Issue.record("another attempt taken while the first is under way")
            return
        }
        #expect(j.finish(.failed, reason: "BAD_HASH", message: "block 3"))
        #expect(!j.enter(.downloading) && !j.finish(.cancelled), "a final job does not move")
        guard case .taken(let taken) = j.take(retry, commandID: "c-3", runningVersion: "1.0.0") else {
            Issue.record("a new attempt after a final job not taken")
            return
        }
        #expect(taken.attempt == 2 && taken.durable.held == 0 && taken.status == .accepted)
        let read = UpdateJournal(storage: s)
        #expect(read.job?.attempt == 2 && read.job?.commandID == "c-3" && read.passedOver == 0)
    }

    @Test("Lines that are not the journal's form are passed over: torn, not JSON, wrong types, another job's")
    func badLines() throws {
        let (o, _) = try offer()
        let s = try storage()
        let j = UpdateJournal(storage: s)
        guard case .taken = j.take(o, commandID: "c-1", runningVersion: "1.0.0") else {
            Issue.record("not taken")
            return
        }
        #expect(j.checkpoint([0, 1]))
        var bytes = s.read(UpdateJournal.fileName)!
        for line in [
            #"not json"#, #"[1,2]"#, #"{"x":1}"#, #"{"u":7,"w":[[2,2]]}"#, #"{"u":"r-9.th.1","w":[[2,2]]}"#,
            #"{"u":"r-1.th.1","w":[[3,2]]}"#, #"{"u":"r-1.th.1","w":[[0,999999]]}"#, #"{"u":"r-1.th.1","w":"x"}"#,
            #"{"u":"r-1.th.1","w":[[1.5,2]]}"#, #"{"u":"r-1.th.1","p":"SOMETHING"}"#,
            #"{"u":"r-1.th.1","p":"INSTALLING"}"#, #"{"u":"r-1.th.1","p":"TRIAL","b":"1"}"#,
            #"{"u":"r-2.th.1","o":{"jobID":"r-2.th.1"},"c":"c-2","prev":"1.0.0"}"#, #"{"k":{"keys":7}}"#,
            #"{"u":"r-1.th.1","w":[[4,4]]}"#
        ] {
            bytes += Array(line.utf8) + [10]
        }
        bytes += [0xFF, 0xFE, 10] + Array(#"{"u":"r-1.th.1","w":[[5,"#.utf8)
        #expect(s.write(UpdateJournal.fileName, bytes))
        let read = UpdateJournal(storage: s)
        let job = try #require(read.job)
        #expect(job.jobID == "r-1.th.1" && job.status == .downloading)
        #expect(job.durable.ranges.map { [$0.first, $0.last] } == [[0, 1], [4, 4]])
        // The list's wrong-typed and out-of-range lines (JSON objects, not the torn or non-UTF-8 ones).
        #expect(read.passedOver == 12, "passed over \(read.passedOver)")
    }
}
