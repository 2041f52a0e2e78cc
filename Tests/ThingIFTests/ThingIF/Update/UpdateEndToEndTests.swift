// SPDX-License-Identifier: Apache-2.0

import CThingIF
import CThingIFTestSupport
import Crypto
import Foundation
import Testing
@testable import ThingIF
import ThingIFHub
import ThingIFHubServer

/// A firmware update from the operator's upload to the confirmed image:
/// the real hub serves the blocks to a real libthingif thing whose installer
/// is written against the C API (docs/UPDATES.md §9–§10). "Reboot" is the
/// handle destroyed and a new one made on the same storage with the version
/// the board would run.
@Suite("Updates end to end: libthingif and the hub", .serialized, .offPool)
struct UpdateEndToEndTests {
    static let admin = "update-e2e-admin-token"

    func withHub(_ body: (HubAPIEnv) async throws -> Void) async throws {
        var security = HubServer.Security()
        security.adminToken = Self.admin
        try await withHubAPI(security: security, body)
    }

    /// Runs blocking harness code off the cooperative pool.
    func blocking<T>(_ body: @escaping () throws -> T) async throws -> T {
        try await offPool { Result { try body() } }.get()
    }

    static func image(_ n: Int) -> [UInt8] {
        var state: UInt64 = 0x9E37_79B9_7F4A_7C15
        return (0..<n).map { _ in
            state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
            return UInt8(truncatingIfNeeded: state >> 33)
        }
    }

    /// Uploads `image` and creates the thing's job; returns the jobID.
    func startJob(_ e: HubAPIEnv, _ tid: String, image: [UInt8], signer: TestSigner, blockSize: Int, trialS: Int? = nil)
        async throws -> String
    {
        let up = try await e.call(
            "POST", "\(e.api)/images", token: Self.admin, body: Data(image), contentType: "application/octet-stream")
        #expect(up.status == 201, "\(up.text)")
        let sha = try #require(up.string("sha256"))
        let m = TestSigner.manifest(for: image, blockSize: blockSize)
        let sig = signer.sign(m.bytes)
        var body: [String: Any] = [
            "image": sha, "manifest": Data(m.bytes).base64EncodedString(),
            "signatures": [["kid": sig.kid, "alg": "ES256", "sig": Data(sig.der).base64EncodedString()]]
        ]
        if let trialS { body["trialS"] = trialS }
        let r = try await e.call("POST", "\(e.api)/things/\(tid)/updates", token: Self.admin, json: body)
        #expect(r.status == 201, "\(r.text)")
        return try #require(r.string("jobID"))
    }

    /// The hub's record of the job over REST, once its store holds the
    /// report of `status` (the harness's bounded wait on that state).
    func job(_ e: HubAPIEnv, _ tid: String, _ jobID: String, reaching status: String) async throws -> [String: Any] {
        let store = e.hub.store
        let reached = await offPool {
            poll(timeoutMs: 60_000) {
                guard case .found(let j) = store.updateJob(id: jobID) else { return false }
                return j.status?.rawValue == status
            }
        }
        let last = try await e.get("\(e.api)/things/\(tid)/updates/\(jobID)", token: Self.admin).json
        if !reached { Issue.record("job \(jobID) did not reach \(status): \(last)") }
        return last
    }

    func handle(_ t: TestThing) -> OpaquePointer { OpaquePointer(ct_handle(t.ct)!) }

    /// A start of the board running `running`: the aircon test appliance
    /// with `installer`, onboarded and online.
    func boot(_ e: HubAPIEnv, _ installer: TestInstaller, trust: String, running: String) async throws -> (
        TestThing, String
    ) {
        try await blocking {
            try e.env.onlineAircon { t in
                #expect(installer.install(on: self.handle(t), trustFile: trust, running: running) == RC.ok)
            }
        }
    }

    @Test("A file-mode update: download, install, reboot, trial, confirm; the hub records SUCCEEDED and the version")
    func fileModeToSucceeded() async throws {
        try await withHub { e in
            let signer = TestSigner(kid: "fw-1")
            let trust = try UpdateCommands.trustFile([signer], in: e.env.root)
            let installer = TestInstaller()
            let (t, tid) = try await boot(e, installer, trust: trust, running: "1.0.0")
            // 37 blocks of 4 KiB, the last short: three checkpoints.
            let image = Self.image(150_000)
            let jobID = try await startJob(e, tid, image: image, signer: signer, blockSize: 4096)
            let installed = await offPool { poll { installer.state.installs == 1 } }
            try #require(installed, "no install: \(t.logs)")
            let path = try #require(installer.state.installPath)
            #expect(FileManager.default.contents(atPath: path) == Data(image), "the image file is not the image")
            var s: Int32 = -1
            var held: UInt64 = 0
            var blocks: UInt64 = 0
            #expect(thingif_update_status(handle(t), &s, &held, &blocks) == RC.ok)
            #expect(s == Int32(THINGIF_UPDATE_INSTALLING.rawValue))
            #expect(held == 37 && blocks == 37)
            _ = try await job(e, tid, jobID, reaching: "INSTALLING")
            // The installer finishes: the library records REBOOTING and reboots.
            #expect(thingif_update_installed(handle(t), 1, nil) == RC.ok)
            let rebooted = await offPool { poll { installer.state.reboots == 1 } }
            #expect(rebooted)
            _ = try await job(e, tid, jobID, reaching: "REBOOTING")
            #expect(await offPool { t.destroy() } == RC.ok)

            // The board boots the new image.
            let trial = TestInstaller()
            let (t2, _) = try await boot(e, trial, trust: trust, running: "1.2.0")
            _ = try await job(e, tid, jobID, reaching: "TRIAL")
            #expect(trial.state.commits == 0)
            #expect(thingif_update_confirm(handle(t2)) == RC.ok)
            let done = try await job(e, tid, jobID, reaching: "SUCCEEDED")
            #expect(trial.state.commits == 1)
            #expect(done["reportedVersion"] as? String == "1.2.0", "\(done)")
            #expect(thingif_update_status(handle(t2), &s, nil, nil) == RC.ok)
            #expect(s == Int32(THINGIF_UPDATE_SUCCEEDED.rawValue))
            // The trust the confirmed image leaves is in the journal.
            let journal = try String(contentsOfFile: e.env.storage("thing") + "/update.jsonl", encoding: .utf8)
            #expect(journal.contains(#""k":"#), "no trust record: \(journal)")
            try await blocking { try e.env.expectAlive(tid) }
        }
    }

    @Test("The installer refuses: the hub's job ends REJECTED with the reason, and the next job may follow")
    func refusedAtTheHub() async throws {
        try await withHub { e in
            let signer = TestSigner(kid: "fw-1")
            let trust = try UpdateCommands.trustFile([signer], in: e.env.root)
            let installer = TestInstaller()
            installer.decision = Int32(THINGIF_UPDATE_REFUSE.rawValue)
            installer.decisionMessage = "no room in the slot"
            let (_, tid) = try await boot(e, installer, trust: trust, running: "1.0.0")
            let first = try await startJob(e, tid, image: Self.image(10_000), signer: signer, blockSize: 4096)
            let r = try await job(e, tid, first, reaching: "REJECTED")
            #expect(r["reason"] as? String == "INSTALLER_REFUSED", "\(r)")
            #expect(r["step"] as? String == "no room in the slot", "\(r)")
            // A final job lets the next one be created; this one is taken.
            installer.decision = Int32(THINGIF_UPDATE_ACCEPT.rawValue)
            let second = try await startJob(e, tid, image: Self.image(12_000), signer: signer, blockSize: 4096)
            _ = try await job(e, tid, second, reaching: "INSTALLING")
            #expect(installer.state.offers == [first, second])
        }
    }

    @Test("A sink-mode update cut off twice mid-download resumes and ends with the image intact")
    func sinkModeAcrossRestarts() async throws {
        try await withHub { e in
            let signer = TestSigner(kid: "fw-1")
            let trust = try UpdateCommands.trustFile([signer], in: e.env.root)
            // One installer object across the restarts: its sink is the
            // board's flash, which keeps what was written.
            let installer = TestInstaller(sink: true)
            var t = try await boot(e, installer, trust: trust, running: "1.0.0").0
            let tid = try #require(t.thingID)
            // 293 blocks of 1 KiB.
            let image = Self.image(300_000)
            _ = try await startJob(e, tid, image: image, signer: signer, blockSize: 1024)
            for cut in 1...2 {
                let flushes = installer.state.flushes
                let advanced = await offPool { poll { installer.state.flushes >= flushes + 2 } }
                #expect(advanced, "cut \(cut): no checkpoint")
                #expect(await offPool { t.destroy() } == RC.ok)
                t = try await boot(e, installer, trust: trust, running: "1.0.0").0
            }
            let installed = await offPool { poll(timeoutMs: 60_000) { installer.state.installs == 1 } }
            try #require(installed, "no install: \(t.logs)")
            #expect(Array(installer.state.image.prefix(image.count)) == image)
            // Two cuts cost at most a checkpoint plus the window each.
            let extra = installer.state.writes - 293
            #expect(extra >= 0 && extra <= 2 * (UpdateAgent.checkpointBlocks + UpdateAgent.window), "\(extra)")
        }
    }

    @Test("A trial rejected by the firmware rolls back; the next boot on the old version reports ROLLED_BACK")
    func trialRolledBack() async throws {
        try await withHub { e in
            let signer = TestSigner(kid: "fw-1")
            let trust = try UpdateCommands.trustFile([signer], in: e.env.root)
            let installer = TestInstaller()
            let (t, tid) = try await boot(e, installer, trust: trust, running: "1.0.0")
            // This installer tells its outcome from inside its install callback.
            installer.finishesInInstall = true
            let jobID = try await startJob(e, tid, image: Self.image(20_000), signer: signer, blockSize: 4096)
            #expect(await offPool { poll { installer.state.installs == 1 } })
            #expect(installer.state.installedRC == RC.ok)
            #expect(thingif_update_installed(handle(t), 1, nil) == RC.state, "told twice")
            #expect(await offPool { poll { installer.state.reboots == 1 } })
            #expect(await offPool { t.destroy() } == RC.ok)
            let trial = TestInstaller()
            let (t2, _) = try await boot(e, trial, trust: trust, running: "1.2.0")
            _ = try await job(e, tid, jobID, reaching: "TRIAL")
            #expect(thingif_update_reject(handle(t2), "the compressor does not start") == RC.ok)
            #expect(await offPool { poll { trial.state.rollbacks == 1 } })
            #expect(trial.state.commits == 0)
            #expect(await offPool { t2.destroy() } == RC.ok)
            // The bootloader runs the previous slot again.
            let back = TestInstaller()
            _ = try await boot(e, back, trust: trust, running: "1.0.0")
            let r = try await job(e, tid, jobID, reaching: "ROLLED_BACK")
            #expect(r["reason"] as? String == "TRIAL_ROLLED_BACK", "\(r)")
        }
    }

    @Test(
        "The CLI's release: manifest, sign, start; the thing installs and confirms; show --wait SUCCEEDED",
        .enabled(if: CLIEndToEnd.cli != nil, "needs the thingif CLI next to the test bundle"))
    func cliRelease() async throws {
        try await withHub { e in
            let cli = try #require(CLIEndToEnd.cli)
            let root = e.env.root
            let signer = TestSigner(kid: "fw-2026")
            let trust = try UpdateCommands.trustFile([signer], in: root)
            let installer = TestInstaller()
            let (t, tid) = try await boot(e, installer, trust: trust, running: "1.0.0")
            let image = Self.image(50_000)
            try Data(image).write(to: URL(fileURLWithPath: root + "/fw.img"))
            try signer.key.pemRepresentation.write(toFile: root + "/fw-2026.pem", atomically: true, encoding: .utf8)
            let env = [
                "THINGIF_HUB_URL": e.base, "THINGIF_APP_ID": Env.appID, "THINGIF_ADMIN_TOKEN": Self.admin,
                "THINGIF_CONFIG": root + "/cli/cli.json"
            ]
            func thingif(_ args: String...) async throws -> (status: Int32, output: String) {
                try await blocking { try runProgram(cli, args, environment: env) }
            }
            var r = try await thingif(
                "update", "manifest", root + "/fw.img", "--version", "1.2.0", "--thing-type", "AirConditioner",
                "--block-size", "2048", "--out", root + "/fw.json")
            #expect(r.status == 0, "\(r.output)")
            r = try await thingif(
                "update", "sign", root + "/fw.json", "--key", root + "/fw-2026.pem", "--kid", "fw-2026")
            #expect(r.status == 0, "\(r.output)")
            r = try await thingif("update", "start", tid, "--image", root + "/fw.img", "--manifest", root + "/fw.json")
            #expect(r.status == 0, "\(r.output)")
            let jobID = try #require(r.output.split(separator: "\n").last.map(String.init))
            #expect(await offPool { poll { installer.state.installs == 1 } }, "\(t.logs)")
            #expect(thingif_update_installed(handle(t), 1, nil) == RC.ok)
            #expect(await offPool { poll { installer.state.reboots == 1 } })
            #expect(await offPool { t.destroy() } == RC.ok)
            let trial = TestInstaller()
            let (t2, _) = try await boot(e, trial, trust: trust, running: "1.2.0")
            r = try await thingif("update", "show", tid, jobID, "--wait", "TRIAL", "--timeout", "30")
            #expect(r.status == 0, "\(r.output)")
            #expect(thingif_update_confirm(handle(t2)) == RC.ok)
            r = try await thingif("update", "show", tid, jobID, "--wait", "SUCCEEDED", "--timeout", "30")
            #expect(r.status == 0, "\(r.output)")
            #expect(field(r.output, "reportedVersion") == "1.2.0", "\(r.output)")
            r = try await thingif("update", "list", tid)
            #expect(r.output.contains("\(jobID)  1.2.0  SUCCEEDED"), "\(r.output)")
            // The operator's token is required: another one is refused (exit 1).
            r = try await blocking {
                try runProgram(
                    cli, ["update", "show", tid, jobID, "--admin-token", "not-the-token"], environment: env)
            }
            #expect(r.status == 1, "\(r.output)")
        }
    }
}
