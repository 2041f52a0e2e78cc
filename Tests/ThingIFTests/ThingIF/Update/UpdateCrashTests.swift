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
    /// The confirmed slot's version, and the other slot's.
    var current = "1.0.0"
    var previous = "1.0.0"
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
    /// The write (.write) or flush (.flushBefore, .flushAfter) of this
    /// life that is cut.
    private let nth: Int
    private let image: [UInt8]
    private let dir: String
    private let proxy: CuttingProxy
    private var flushes = 0
    private var writesHere = 0
    private(set) var snapshot: Snapshot?
    private var rebootAsked = false

    init(
        board: CrashBoard, crashAt point: CrashPoint?, nth: Int? = nil, image: [UInt8], dir: String,
        proxy: CuttingProxy
    ) {
        self.board = board
        self.point = point
        self.nth = nth ?? (point == .write ? 20 : 2)
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
                return me.writesHere == me.nth
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
                return me.flushes == me.nth
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
                if let p = s.pending {
                    s.previous = s.current
                    s.current = p
                }
                s.pending = nil
            }
            me.cut(at: .commitAfter)
            return 0
        }
        ops.rollback = { _, ud in
            let me = CrashLife.box(ud)
            me.cut(at: .rollbackBefore)
            // The slot on trial is dropped; with none (it was committed,
            // and the library still counts its trial), the other slot is
            // made the one that boots.
            me.change { s in
                if s.pending != nil {
                    s.pending = nil
                } else {
                    (s.current, s.previous) = (s.previous, s.current)
                }
            }
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
        crashAt point: CrashPoint?, nth: Int?, rejects: Bool, trust: String,
        jobID: (String) async throws -> String?
    ) async throws -> (LifeEnd, String) {
        var board = start
        let running = board.boot()
        proxy.refuse(false)
        let life = CrashLife(board: board, crashAt: point, nth: nth, image: image, dir: dir, proxy: proxy)
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

    /// What a scenario's runs share: the hub (with one proxy for every
    /// device connection: it advertises the proxy's port, so a cut closes
    /// the device's MQTT connection), the release key and trust file, and a
    /// watcher of the things' update reports.
    struct Rig {
        let e: HubAPIEnv
        let proxy: CuttingProxy
        let signer: TestSigner
        let trust: String
        let watcher: MqttProbe
    }

    func withRig(_ body: (Rig) async throws -> Void) async throws {
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
            try await body(Rig(e: e, proxy: proxy, signer: signer, trust: trust, watcher: watcher))
        }
    }

    /// One device's job `i` through its lives, cut at each point of `plan`
    /// in turn (a point and, for a write or a flush, which one of its life):
    /// a point is armed in every life until it is reached, then the next;
    /// one the job has passed is never reached. Then the checks.
    /// `expected`: the job's final status; nil takes any the board agrees
    /// with (the soak's cuts can pass the trial's boots or the install's
    /// starts). Returns the cuts made and the final status.
    func scenario(_ rig: Rig, _ i: Int, plan: [(CrashPoint, Int?)], rejects: Bool, expected wanted: String? = nil)
        async throws -> (cuts: Int, status: String)
    {
        let e = rig.e
        let name = "job \(i) (\(plan.map { "\($0.0)\($0.1.map { "#\($0)" } ?? "")" }.joined(separator: ", ")))"
        let image = image(i)
        var board = CrashBoard()
        var job: String?
        var crashes = 0
        var lives = 0
        var dir = e.env.storage("cut-\(i)-0")
        var tid = ""
        var trace: [String] = []
        livesLoop: while lives < plan.count + 6 {
            let cut = crashes < plan.count ? plan[crashes] : nil
            lives += 1
            let (end, id) = try await live(
                e, proxy: rig.proxy, vendorThingID: "AC-CUT-\(i)", dir: dir, board: board, image: image,
                crashAt: cut?.0, nth: cut?.1, rejects: rejects, trust: rig.trust
            ) { id in
                if job == nil {
                    job = try await e2e.startJob(e, id, image: image, signer: rig.signer, blockSize: 1024)
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
        let jobID = try #require(job, "\(name): no job")
        let store = e.hub.store
        let final = await offPool { () -> String? in
            var status: String?
            _ = poll(timeoutMs: 30_000) {
                guard case .found(let j) = store.updateJob(id: jobID), j.isFinal else { return false }
                status = j.status?.rawValue
                return true
            }
            return status
        }
        let expected = wanted ?? final ?? "none"
        let record = try await e2e.job(e, tid, jobID, reaching: expected)
        #expect(final == expected, "\(name): \(record); lives \(trace)")
        // The board on a good slot, the one the hub records.
        #expect(board.pending == nil, "\(name): the board has \(board.pending ?? "") pending; lives \(trace)")
        let good = expected == "SUCCEEDED" ? "1.2.0" : "1.0.0"
        #expect(board.current == good, "\(name): the board runs \(board.current), the hub says \(expected)")
        if expected == "SUCCEEDED" {
            #expect(record["reportedVersion"] as? String == "1.2.0", "\(name): \(record)")
        }
        #expect(board.unverifiedInstalls == 0, "\(name): an install on an image not whole and flushed")
        // Exactly one final report (sent again maybe, never another).
        let finals = reports(rig.watcher, jobID).filter { UpdateStatus(named: $0.status)?.isFinal == true }
        #expect(Set(finals.map(\.seq)).count == 1, "\(name): final reports \(finals)")
        #expect(Set(finals.map(\.status)) == [expected], "\(name): final reports \(finals)")
        // Each cut costs at most a checkpoint and the window.
        let bound = Self.blocks + crashes * (UpdateAgent.checkpointBlocks + UpdateAgent.window)
        #expect(board.writes >= Self.blocks && board.writes <= bound, "\(name): \(board.writes) writes")
        return (crashes, expected)
    }

    @Test("A power cut at every step: one final report, the board on a good slot, the hub in agreement")
    func cutAtEveryStep() async throws {
        try await withRig { rig in
            for (i, point) in CrashPoint.allCases.enumerated() {
                let (crashes, _) = try await scenario(
                    rig, i, plan: [(point, nil)], rejects: point.rejects,
                    expected: point.rejects ? "ROLLED_BACK" : "SUCCEEDED")
                #expect(crashes == 1, "\(point): the cut was never reached")
            }
        }
    }

    /// docs/UPDATES.md §6: the soak, behind a flag (THINGIF_UPDATE_SOAK=N
    /// cuts, 200 for "1"; THINGIF_UPDATE_SOAK_SEED): jobs of five lives each
    /// cut at a random point (a random write of the 40, a random flush of
    /// the 3, or any other point), one job in five rejecting its trial,
    /// until N cuts were made.
    @Test(
        "The power soak: random cuts across download, install, reboot and trial",
        .enabled(if: ProcessInfo.processInfo.environment["THINGIF_UPDATE_SOAK"] != nil, "THINGIF_UPDATE_SOAK=N"))
    func powerSoak() async throws {
        let env = ProcessInfo.processInfo.environment
        let wanted = env["THINGIF_UPDATE_SOAK"].flatMap(Int.init).map { $0 > 1 ? $0 : 200 } ?? 200
        var rng = SplitMix(state: env["THINGIF_UPDATE_SOAK_SEED"].flatMap(UInt64.init) ?? 58)
        try await withRig { rig in
            var cuts = 0
            var jobs = 0
            var rejected = 0
            var ends: [String: Int] = [:]
            while cuts < wanted {
                let rejects = Int.random(in: 0..<5, using: &rng) == 0
                let points = CrashPoint.allCases.filter {
                    rejects ? ![.commitBefore, .commitAfter, .succeeded].contains($0) : !$0.rejects
                }
                // In the job's order, so that most are reached.
                let order = { (p: CrashPoint) in CrashPoint.allCases.firstIndex(of: p)! }
                let plan: [(CrashPoint, Int?)] = (0..<5).map { _ -> (CrashPoint, Int?) in
                    let p = points.randomElement(using: &rng)!
                    switch p {
                    case .write: return (p, Int.random(in: 1...Self.blocks, using: &rng))
                    case .flushBefore, .flushAfter: return (p, Int.random(in: 1...3, using: &rng))
                    default: return (p, nil)
                    }
                }.sorted { order($0.0) < order($1.0) }
                let (made, status) = try await scenario(rig, 100 + jobs, plan: plan, rejects: rejects)
                cuts += made
                ends[status, default: 0] += 1
                jobs += 1
                if rejects { rejected += 1 }
            }
            // A job that rejects its trial never succeeds; one that does
            // not may still end ROLLED_BACK (its cuts passed the trial's
            // boots) or FAILED (the install's starts).
            #expect(ends["SUCCEEDED", default: 0] <= jobs - rejected)
            print(
                "update power soak: \(cuts) cuts in \(jobs) jobs (\(rejected) rejecting their trial): "
                    + ends.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)" }.joined(separator: ", "))
        }
    }
}
