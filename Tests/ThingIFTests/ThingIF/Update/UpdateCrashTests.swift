// SPDX-License-Identifier: Apache-2.0

import CThingIF
import CThingIFTestSupport
import Foundation
import Testing
@testable import ThingIF
import ThingIFHub
import ThingIFHubServer

/// A simulated A/B board across the lives of one device: the slot the
/// bootloader boots and the installer's flash, where only what a flush made
/// durable survives a power cut.
struct CrashBoard {
    /// The confirmed slot's version.
    var current = "1.0.0"
    /// The other slot, installed and on trial.
    var pending: String?
    var trialBoots = 0
    var written: [UInt8] = []
    var flushed: [UInt8] = []
    /// Installs started on an image that was not the whole image, flushed.
    var unverifiedInstalls = 0
    /// Every write the sink took, in all lives: the bytes fetched.
    var writes = 0

    /// The version the bootloader starts: a pending slot for at most three
    /// trial boots, then the confirmed one again.
    mutating func boot() -> String {
        written = flushed
        guard let p = pending else { return current }
        trialBoots += 1
        if trialBoots > 3 {
            pending = nil
            return current
        }
        return p
    }
}

/// Where a life of the device is cut off: inside an installer callback,
/// before or after its side effect, or at a log line the library writes
/// between a journal record and what it does next.
enum CrashPoint: String, CaseIterable, Sendable {
    case taken  // the job's record synced, its ACCEPTED report not yet sent
    case write  // block 20 arriving, after the first checkpoint
    case flushBefore  // the second checkpoint's flush, not done
    case flushAfter  // the second flush done, its record not written
    case installBefore  // INSTALLING recorded, the slot not written
    case installAfter  // the slot written, the outcome not told
    case reboot  // REBOOTING recorded, the reboot asked
    case trialBoot  // the first TRIAL record, its report not yet sent
    case commitBefore  // the confirmation: commit not done
    case commitAfter  // commit done, SUCCEEDED not recorded
    case succeeded  // SUCCEEDED recorded, its report not yet sent
    case rollbackBefore  // the firmware rejected its trial: rollback not done
    case rollbackAfter  // the rollback done, the reboot not yet
    case rolledBack  // ROLLED_BACK recorded at the next boot, its report not yet sent

    /// The firmware rejects its trial in the scenarios of these points.
    var rejects: Bool { [.rollbackBefore, .rollbackAfter, .rolledBack].contains(self) }

    /// The log line that marks the point, for those that are one.
    var logLine: String? {
        switch self {
        case .taken: return "took update job"
        case .trialBoot: return "runs, trial boot 1;"
        case .succeeded: return "succeeded: 1.2.0 confirmed"
        case .rolledBack: return "ended ROLLED_BACK"
        default: return nil
        }
    }
}

/// One life of the device: its installer's callbacks on the board, and the
/// crash, which cuts the connection at once (nothing more reaches the
/// broker) and keeps what a power cut would leave: the storage directory's
/// files and the board with only its flushed flash.
final class CrashLife: @unchecked Sendable {
    struct Snapshot {
        var files: [String: Data]
        var board: CrashBoard
    }

    private let lock = NSLock()
    private var board: CrashBoard
    private let point: CrashPoint?
    private let image: [UInt8]
    private let dir: String
    private let proxy: CuttingProxy
    private var flushes = 0
    private var writesHere = 0
    private(set) var snapshot: Snapshot?
    private var rebootAsked = false

    init(board: CrashBoard, crashAt point: CrashPoint?, image: [UInt8], dir: String, proxy: CuttingProxy) {
        self.board = board
        self.point = point
        self.image = image
        self.dir = dir
        self.proxy = proxy
    }

    var crashed: Bool { lock.withLock { snapshot != nil } }
    var rebooted: Bool { lock.withLock { rebootAsked } }
    var boardNow: CrashBoard { lock.withLock { board } }

    private func change<T>(_ body: (inout CrashBoard) -> T) -> T { lock.withLock { body(&board) } }

    /// The power cut at `p`, once.
    func cut(at p: CrashPoint) {
        guard p == point else { return }
        lock.lock()
        defer { lock.unlock() }
        guard snapshot == nil else { return }
        proxy.refuse(true)
        proxy.cutAll()
        var files: [String: Data] = [:]
        for name in (try? FileManager.default.contentsOfDirectory(atPath: dir)) ?? [] {
            files[name] = FileManager.default.contents(atPath: dir + "/" + name)
        }
        var b = board
        b.written = b.flushed
        snapshot = Snapshot(files: files, board: b)
    }

    func logged(_ line: String) {
        for p in CrashPoint.allCases { if let l = p.logLine, line.contains(l) { cut(at: p) } }
    }

    private static func box(_ ud: UnsafeMutableRawPointer?) -> CrashLife {
        Unmanaged<CrashLife>.fromOpaque(ud!).takeUnretainedValue()
    }

    /// thingif_set_installer in sink mode, the board running `running`.
    func install(on handle: OpaquePointer, trustFile: String, running: String) -> Int32 {
        var ops = thingif_installer()
        ops.offer = { _, _, _, _, _ in Int32(THINGIF_UPDATE_ACCEPT.rawValue) }
        ops.write = { _, offset, bytes, length, ud in
            let me = CrashLife.box(ud)
            let twentieth = me.lock.withLock { () -> Bool in
                me.writesHere += 1
                return me.writesHere == 20
            }
            if twentieth { me.cut(at: .write) }
            let b = UnsafeRawBufferPointer(start: bytes, count: length)
            me.change { s in
                s.writes += 1
                let end = Int(offset) + length
                if s.written.count < end { s.written += [UInt8](repeating: 0, count: end - s.written.count) }
                s.written.replaceSubrange(Int(offset)..<end, with: b)
            }
            return 0
        }
        ops.flush = { _, ud in
            let me = CrashLife.box(ud)
            let second = me.lock.withLock { () -> Bool in
                me.flushes += 1
                return me.flushes == 2
            }
            if second { me.cut(at: .flushBefore) }
            me.change { $0.flushed = $0.written }
            if second { me.cut(at: .flushAfter) }
            return 0
        }
        ops.install = { t, _, ud in
            let me = CrashLife.box(ud)
            me.cut(at: .installBefore)
            me.change { s in
                if Array(s.flushed.prefix(me.image.count)) != me.image { s.unverifiedInstalls += 1 }
                s.pending = "1.2.0"
                s.trialBoots = 0
            }
            me.cut(at: .installAfter)
            _ = thingif_update_installed(t, 1, nil)
            return 0
        }
        ops.reboot = { _, ud in
            let me = CrashLife.box(ud)
            me.cut(at: .reboot)
            me.lock.withLock { me.rebootAsked = true }
        }
        ops.commit = { _, ud in
            let me = CrashLife.box(ud)
            me.cut(at: .commitBefore)
            me.change { s in
                if let p = s.pending { s.current = p }
                s.pending = nil
            }
            me.cut(at: .commitAfter)
            return 0
        }
        ops.rollback = { _, ud in
            let me = CrashLife.box(ud)
            me.cut(at: .rollbackBefore)
            me.change { $0.pending = nil }
            me.cut(at: .rollbackAfter)
            me.lock.withLock { me.rebootAsked = true }
        }
        return "AirConditioner".withCString { type in
            running.withCString { version in
                trustFile.withCString { trust in
                    var config = thingif_update_config(
                        thing_type: type, running_version: version, trust_file: trust, max_trial_boots: 3)
                    return thingif_set_installer(handle, &ops, &config, Unmanaged.passUnretained(self).toOpaque())
                }
            }
        }
    }
}

/// docs/UPDATES.md §6: a power cut at every step of an update job, each
/// journal record before and after its side effect, as the pipeline's
/// crash test does for commands. Each point is its own device and job on
/// the real hub and broker: the device is cut off there (the connection
/// closed at once, its files and its board's flushed flash kept), then
/// started again on what the cut left, through as many boots as the job
/// needs. Pass: the job ends as the firmware decided (SUCCEEDED, or
/// ROLLED_BACK when it rejects its trial), the hub's record agrees with the
/// board, exactly one final report reaches the broker (sent again maybe,
/// never two different ones), no install starts on an image that is not
/// the whole image flushed, and the cut costs at most a checkpoint and the
/// window of blocks fetched again.
@Suite("Updates: a power cut at every step of a job", .serialized, .offPool)
struct UpdateCrashTests {
    static let blocks = 40
    /// Point i's image: its own, so that each upload is a new one.
    func image(_ i: Int) -> [UInt8] {
        var bytes = UpdateEndToEndTests.image(UpdateCrashTests.blocks * 1024 - 300)
        bytes[0] = UInt8(i)
        return bytes
    }
    let e2e = UpdateEndToEndTests()

    enum LifeEnd {
        case crashed(CrashLife.Snapshot)
        case rebooted(CrashBoard)
        case final(CrashBoard)
        /// None of those within the life's time: the job is stuck.
        case stuck(CrashBoard)
    }

    struct Report {
        var status: String
        var seq: Int64
    }

    /// One life on `dir`: boots the board, starts the thing through a
    /// proxy, runs the firmware's part (its verdict on a trial), and ends at
    /// the crash, at a reboot or rollback the installer asked for, or when
    /// the hub's job is final.
    func live(
        _ e: HubAPIEnv, proxy: CuttingProxy, vendorThingID: String, dir: String, board start: CrashBoard,
        image: [UInt8],
        crashAt point: CrashPoint?, rejects: Bool, trust: String, jobID: (String) async throws -> String?
    ) async throws -> (LifeEnd, String) {
        var board = start
        let running = board.boot()
        proxy.refuse(false)
        let life = CrashLife(board: board, crashAt: point, image: image, dir: dir, proxy: proxy)
        guard let ct = ct_new(Env.appID, Env.appKey, dir, Int32(proxy.port), LogLevel.info) else {
            throw HarnessError("ct_new failed")
        }
        let t = TestThing(ct: ct)
        defer { _ = t.destroy() }
        ct_set_log_hook(
            ct,
            { line, ud in Unmanaged<CrashLife>.fromOpaque(ud!).takeUnretainedValue().logged(String(cString: line!)) },
            Unmanaged.passUnretained(life).toOpaque())
        #expect(ct_register_aircon_handlers(ct, Aircon.schema, Aircon.version) == RC.ok)
        #expect(life.install(on: OpaquePointer(ct_handle(ct)!), trustFile: trust, running: running) == RC.ok)
        let tid: String = try await e2e.blocking {
            let rc = ct_onboard(ct, vendorThingID, "password-1", "AirConditioner", "1.0.0", nil)
            guard rc == RC.ok else { throw HarnessError("onboarding failed: \(rc); logs:\n\(t.logs)") }
            let tid = try #require(t.thingID)
            #expect(ct_start(ct) == RC.ok)
            // A cut at the boot (the trial's record) comes before it is online.
            guard poll(timeoutMs: 30_000, { life.crashed || e.hub.waitForOnline(tid, timeoutMs: 100) }) else {
                throw HarnessError("\(tid) did not come online; logs:\n\(t.logs)")
            }
            return tid
        }
        guard let job = try await jobID(tid) else { throw HarnessError("no job") }
        let store = e.hub.store
        let handle = OpaquePointer(ct_handle(ct)!)
        let ended = await offPool { () -> Bool in
            var verdictGiven = false
            return poll(timeoutMs: 30_000) {
                if life.crashed || life.rebooted { return true }
                if case .found(let j) = store.updateJob(id: job), j.isFinal { return true }
                var s: Int32 = -1
                if !verdictGiven, thingif_update_status(handle, &s, nil, nil) == RC.ok,
                    s == Int32(THINGIF_UPDATE_TRIAL.rawValue), t.isConnected
                {
                    verdictGiven = true
                    if rejects {
                        _ = thingif_update_reject(handle, "the compressor does not start")
                    } else {
                        _ = thingif_update_confirm(handle)
                    }
                }
                return false
            }
        }
        _ = await offPool { t.destroy() }
        if let s = life.snapshot { return (.crashed(s), tid) }
        if life.rebooted { return (.rebooted(life.boardNow), tid) }
        if !ended {
            Issue.record("\(point?.rawValue ?? "-"): the job did not move on: \(t.logs)")
            return (.stuck(life.boardNow), tid)
        }
        return (.final(life.boardNow), tid)
    }

    /// The reports the thing published for `jobID`, as the broker passed them on.
    func reports(_ watcher: MqttProbe, _ jobID: String) -> [Report] {
        watcher.messages().compactMap { m in
            guard m.topic.hasSuffix("/updates/" + jobID), let r = KiiRequest.decode(m.payload), r.method == "PUT",
                let o = try? JSONSerialization.jsonObject(with: Data(r.body)) as? [String: Any],
                let status = o["status"] as? String, let seq = o["seq"] as? Int64
            else { return nil }
            return Report(status: status, seq: seq)
        }
    }

    @Test("A power cut at every step: one final report, the board on a good slot, the hub in agreement")
    func cutAtEveryStep() async throws {
        // Every connection of the devices goes through one proxy: the hub
        // advertises its port, so a cut closes the device's MQTT connection.
        let proxyBox = Locked<CuttingProxy?>(nil)
        var security = HubServer.Security()
        security.adminToken = UpdateEndToEndTests.admin
        try await withHubAPI(
            security: security,
            options: { o in
                guard let p = try? CuttingProxy(upstreamPort: o.brokerPort) else { return }
                proxyBox.withLock { $0 = p }
                o.advertisedPort = p.port
            }
        ) { e in
            let proxy = try #require(proxyBox.withLock { $0 })
            defer { proxy.stop() }
            let signer = TestSigner(kid: "fw-1")
            let trust = try UpdateCommands.trustFile([signer], in: e.env.root)
            let watcher = try MqttProbe.watcher(e.env.broker, "p/+/thing-if/apps/\(Env.appID)/things/+/updates/#")
            defer { watcher.stop() }
            for (i, point) in CrashPoint.allCases.enumerated() {
                let vendor = "AC-CUT-\(i)"
                let image = image(i)
                var board = CrashBoard()
                var job: String?
                var crashes = 0
                var lives = 0
                var dir = e.env.storage("cut-\(i)-0")
                var tid = ""
                var trace: [String] = []
                livesLoop: while lives < 6 {
                    lives += 1
                    let (end, id) = try await live(
                        e, proxy: proxy, vendorThingID: vendor, dir: dir, board: board, image: image,
                        crashAt: crashes == 0 ? point : nil, rejects: point.rejects, trust: trust
                    ) { id in
                        if job == nil {
                            job = try await e2e.startJob(e, id, image: image, signer: signer, blockSize: 1024)
                        }
                        return job
                    }
                    tid = id
                    trace.append("\(end)".prefix(40) + "…")
                    switch end {
                    case .crashed(let s):
                        crashes += 1
                        board = s.board
                        dir = e.env.storage("cut-\(i)-\(lives)")
                        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
                        for (name, bytes) in s.files { try bytes.write(to: URL(fileURLWithPath: dir + "/" + name)) }
                    case .rebooted(let b):
                        board = b
                    case .final(let b), .stuck(let b):
                        board = b
                        break livesLoop
                    }
                }
                let jobID = try #require(job, "\(point): no job")
                #expect(crashes == 1, "\(point): the cut was never reached")
                let expected = point.rejects ? "ROLLED_BACK" : "SUCCEEDED"
                let record = try await e2e.job(e, tid, jobID, reaching: expected)
                #expect(record["status"] as? String == expected, "\(point): \(record)")
                // The board on a good slot, the one the hub records.
                #expect(board.pending == nil, "\(point): the board has \(board.pending ?? "") pending; lives \(trace)")
                #expect(
                    board.current == (point.rejects ? "1.0.0" : "1.2.0"), "\(point): the board runs \(board.current)")
                if !point.rejects { #expect(record["reportedVersion"] as? String == "1.2.0", "\(point): \(record)") }
                #expect(board.unverifiedInstalls == 0, "\(point): an install on an image not whole and flushed")
                // Exactly one final report (sent again maybe, never another).
                let finals = reports(watcher, jobID).filter { UpdateStatus(named: $0.status)?.isFinal == true }
                #expect(Set(finals.map(\.seq)).count == 1, "\(point): final reports \(finals)")
                #expect(Set(finals.map(\.status)) == [expected], "\(point): final reports \(finals)")
                // The cut costs at most a checkpoint and the window.
                let bound = Self.blocks + UpdateAgent.checkpointBlocks + UpdateAgent.window
                #expect(board.writes >= Self.blocks && board.writes <= bound, "\(point): \(board.writes) writes")
            }
        }
    }
}
