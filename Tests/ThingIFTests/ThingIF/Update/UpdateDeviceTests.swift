// SPDX-License-Identifier: Apache-2.0

import CThingIF
import CThingIFTestSupport
import Foundation
import Testing
import ThingIF
import ThingIFHub

/// The thing's side of an update offer through the C API, on a real
/// broker and hub (docs/UPDATES.md §9): what it refuses before a block is
/// fetched, and what a thing without an installer answers.
@Suite("Update offers on a running thing", .serialized, .offPool)
struct UpdateDeviceTests {
    static let image = (0..<5000).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ 7) }

    /// The update action's one result for `command`.
    func offerResult(_ env: Env, _ tid: String, _ command: (String) -> String) throws -> ResultEntry {
        let id = FrameworkSide.newCommandID()
        try env.publish(command(id), to: tid)
        let results = try env.results(of: id)
        try #require(results.count == 1)
        #expect(results[0].alias == "_thingif")
        #expect(results[0].name == "update")
        return results[0]
    }

    func status(_ t: TestThing) -> Int32? {
        var s: Int32 = -1
        guard thingif_update_status(OpaquePointer(ct_handle(t.ct)!), &s, nil, nil) == RC.ok else { return nil }
        return s
    }

    @Test("Without an installer, an offer fails NO_INSTALLER and the thing goes on")
    func noInstaller() throws {
        try withEnv { env in
            let (_, tid) = try env.onlineAircon()
            let signer = TestSigner(kid: "fw-1")
            let m = TestSigner.manifest(for: Self.image)
            let r = try offerResult(env, tid) {
                UpdateCommands.offer(commandID: $0, jobID: "j-1", manifest: m.bytes, signatures: [signer.sign(m.bytes)])
            }
            #expect(!r.succeeded)
            #expect(r.data?["reason"] as? String == "NO_INSTALLER")
            #expect(r.errorMessage?.hasPrefix("NO_INSTALLER") == true)
            try env.expectAlive(tid)
        }
    }

    @Test("Offers the thing must refuse are refused before a block is fetched, each with its reason")
    func refusals() throws {
        try withEnv { env in
            let signer = TestSigner(kid: "fw-1")
            let stranger = TestSigner(kid: "fw-x")
            let trust = try UpdateCommands.trustFile([signer], in: env.root)
            let installer = TestInstaller()
            let (t, tid) = try env.onlineAircon { t in
                #expect(
                    installer.install(on: OpaquePointer(ct_handle(t.ct)!), trustFile: trust, running: "1.0.0") == RC.ok)
            }
            let m = TestSigner.manifest(for: Self.image)
            func refused(_ reason: String, _ command: (String) -> String) throws {
                let r = try offerResult(env, tid, command)
                #expect(!r.succeeded, "\(reason)")
                #expect(r.data?["reason"] as? String == reason, "\(r.data ?? [:]) \(r.errorMessage ?? "")")
                #expect(r.data?["status"] as? String == "REJECTED")
            }
            // Not an offer's form: no jobID, a manifest that is not base64.
            try refused("MALFORMED") {
                UpdateCommands.command($0, params: #"{"attempt":1,"manifest":"AAAA","signatures":[]}"#)
            }
            try refused("MALFORMED") {
                UpdateCommands.command(
                    $0,
                    params:
                        #"{"jobID":"j-2","attempt":1,"manifest":"!!","signatures":[{"kid":"fw-1","alg":"ES256","sig":"AAAA"}]}"#
                )
            }
            // Signed by a key the thing does not trust.
            try refused("UNTRUSTED") {
                UpdateCommands.offer(
                    commandID: $0, jobID: "j-3", manifest: m.bytes, signatures: [stranger.sign(m.bytes)])
            }
            // A signature over other bytes (the manifest tampered with after signing).
            let other = TestSigner.manifest(for: Self.image, securityVersion: 2)
            try refused("UNTRUSTED") {
                UpdateCommands.offer(
                    commandID: $0, jobID: "j-4", manifest: other.bytes, signatures: [signer.sign(m.bytes)])
            }
            // For another thing type.
            let lamp = TestSigner.manifest(for: Self.image, thingType: "Lamp")
            try refused("WRONG_THING_TYPE") {
                UpdateCommands.offer(
                    commandID: $0, jobID: "j-5", manifest: lamp.bytes, signatures: [signer.sign(lamp.bytes)])
            }
            #expect(installer.state.offers.isEmpty, "a refused manifest reached the installer")
            // The installer refuses, then defers: each says why.
            installer.decision = Int32(THINGIF_UPDATE_REFUSE.rawValue)
            installer.decisionMessage = "only 1 MB free"
            let r1 = try offerResult(env, tid) {
                UpdateCommands.offer(commandID: $0, jobID: "j-6", manifest: m.bytes, signatures: [signer.sign(m.bytes)])
            }
            #expect(r1.data?["reason"] as? String == "INSTALLER_REFUSED")
            #expect(r1.errorMessage == "INSTALLER_REFUSED: only 1 MB free")
            installer.decision = Int32(THINGIF_UPDATE_DEFER.rawValue)
            installer.decisionMessage = ""
            let r2 = try offerResult(env, tid) {
                UpdateCommands.offer(commandID: $0, jobID: "j-7", manifest: m.bytes, signatures: [signer.sign(m.bytes)])
            }
            #expect(!r2.succeeded)
            #expect(r2.data?["status"] as? String == "DELAYED")
            #expect(r2.data?["reason"] as? String == "DEFERRED")
            #expect(installer.state.offers == ["j-6", "j-7"])
            #expect(installer.state.offeredVersion == "1.2.0")
            #expect(installer.state.offeredSize == UInt64(Self.image.count))
            // No job was taken.
            #expect(status(t) == Int32(THINGIF_UPDATE_NONE.rawValue))
            #expect(installer.state.installs == 0)
            try env.expectAlive(tid)
        }
    }

    @Test("thingif_set_installer checks its arguments and the trust file")
    func setInstallerChecks() throws {
        try withEnv { env in
            let t = try env.newThing()
            let h = OpaquePointer(ct_handle(t.ct)!)
            let installer = TestInstaller()
            let missing = env.root + "/no-such-trust.json"
            #expect(
                installer.install(on: h, trustFile: missing, running: "1.0.0") == Int32(THINGIF_ERR_STORAGE.rawValue))
            let bad = env.root + "/bad-trust.json"
            try #"{"keys":[{"kid":"k","publicKey":"not a key"}]}"#.write(toFile: bad, atomically: true, encoding: .utf8)
            #expect(installer.install(on: h, trustFile: bad, running: "1.0.0") == RC.json)
            let trust = try UpdateCommands.trustFile([TestSigner(kid: "fw-1")], in: env.root)
            #expect(installer.install(on: h, trustFile: trust, running: "has space") == RC.invalid)
            #expect(installer.install(on: h, trustFile: trust, thingType: "", running: "1.0.0") == RC.invalid)
            #expect(thingif_set_installer(h, nil, nil, nil) == RC.invalid)
            #expect(thingif_set_installer(nil, nil, nil, nil) == RC.invalid)
            #expect(status(t) == nil, "a status without an installer")
            #expect(installer.install(on: h, trustFile: trust, running: "1.0.0") == RC.ok)
            #expect(installer.install(on: h, trustFile: trust, running: "1.0.0") == RC.state, "set twice")
            #expect(status(t) == Int32(THINGIF_UPDATE_NONE.rawValue))
            // No install runs, no trial: the installer's calls are refused.
            #expect(thingif_update_installed(h, 1, nil) == RC.state)
            #expect(thingif_update_confirm(h) == RC.state)
            #expect(thingif_update_reject(h, "x") == RC.state)
            #expect(thingif_update_confirm(nil) == RC.invalid)
        }
    }
}
