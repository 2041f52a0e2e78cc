// SPDX-License-Identifier: Apache-2.0

import CThingIF
import CThingIFTestSupport
import Foundation
import ThingIF

/// A firmware's installer as the C API sees it, written in Swift for the
/// tests: it records every callback, answers offers as told, and keeps the
/// image in the library's file (file mode) or in memory (sink mode).
final class TestInstaller: @unchecked Sendable {
    struct Seen {
        var offers: [String] = []
        var offeredVersion: String?
        var offeredSize: UInt64 = 0
        var writes = 0
        var flushes = 0
        var installs = 0
        var installPath: String?
        /// With `finishesInInstall`: what thingif_update_installed answered inside the callback.
        var installedRC: Int32?
        var reboots = 0
        var commits = 0
        var rollbacks = 0
        /// Sink mode: the image as written.
        var image: [UInt8] = []
    }

    /// How it answers; set by the test, read on the loop thread.
    struct Behaviour {
        /// What offer answers (a thingif_update_decision) and says.
        var decision = Int32(THINGIF_UPDATE_ACCEPT.rawValue)
        var decisionMessage = ""
        /// commit's answer.
        var commitFails = false
        /// install tells its outcome from inside the callback (as a quick
        /// installer does), not later from the test.
        var finishesInInstall = false
    }

    private let lock = NSLock()
    private var seen = Seen()
    private var behaviour = Behaviour()
    let sink: Bool

    var decision: Int32 {
        get { lock.withLock { behaviour.decision } }
        set { lock.withLock { behaviour.decision = newValue } }
    }
    var decisionMessage: String {
        get { lock.withLock { behaviour.decisionMessage } }
        set { lock.withLock { behaviour.decisionMessage = newValue } }
    }
    var commitFails: Bool {
        get { lock.withLock { behaviour.commitFails } }
        set { lock.withLock { behaviour.commitFails = newValue } }
    }
    var finishesInInstall: Bool {
        get { lock.withLock { behaviour.finishesInInstall } }
        set { lock.withLock { behaviour.finishesInInstall = newValue } }
    }

    /// Every installer ever set stays alive: a handle destroyed after the
    /// test's last use of its installer may still call it.
    private static let keptLock = NSLock()
    nonisolated(unsafe) private static var kept: [TestInstaller] = []

    init(sink: Bool = false) { self.sink = sink }

    var state: Seen { lock.withLock { seen } }

    private func record(_ change: (inout Seen) -> Void) { lock.withLock { change(&seen) } }

    private static func box(_ ud: UnsafeMutableRawPointer?) -> TestInstaller {
        Unmanaged<TestInstaller>.fromOpaque(ud!).takeUnretainedValue()
    }

    /// thingif_set_installer on `handle` (ct_handle) with a trust file
    /// holding `trust` (key JSON objects).
    func install(
        on handle: OpaquePointer, trustFile: String, thingType: String = "AirConditioner", running: String,
        maxTrialBoots: Int32 = 0
    ) -> Int32 {
        var ops = thingif_installer()
        ops.offer = { _, info, message, size, ud in
            let me = TestInstaller.box(ud)
            let i = info!.pointee
            me.record {
                $0.offers.append(String(cString: i.job_id))
                $0.offeredVersion = String(cString: i.version)
                $0.offeredSize = i.size
            }
            let text = me.decisionMessage
            if !text.isEmpty, let message {
                _ = text.withCString { strncpy(message, $0, size - 1) }
            }
            return me.decision
        }
        if sink {
            ops.write = { _, offset, bytes, length, ud in
                let me = TestInstaller.box(ud)
                let b = UnsafeRawBufferPointer(start: bytes, count: length)
                me.record { s in
                    s.writes += 1
                    let end = Int(offset) + length
                    if s.image.count < end { s.image += [UInt8](repeating: 0, count: end - s.image.count) }
                    s.image.replaceSubrange(Int(offset)..<end, with: b)
                }
                return 0
            }
            ops.flush = { _, ud in
                TestInstaller.box(ud).record { $0.flushes += 1 }
                return 0
            }
        }
        ops.install = { t, info, ud in
            let me = TestInstaller.box(ud)
            let path = info!.pointee.image_path.map { String(cString: $0) }
            let rc = me.finishesInInstall ? thingif_update_installed(t, 1, nil) : nil
            me.record {
                $0.installs += 1
                $0.installPath = path
                $0.installedRC = rc
            }
            return 0
        }
        ops.reboot = { _, ud in TestInstaller.box(ud).record { $0.reboots += 1 } }
        ops.commit = { _, ud in
            let me = TestInstaller.box(ud)
            me.record { $0.commits += 1 }
            return me.commitFails ? 1 : 0
        }
        ops.rollback = { _, ud in TestInstaller.box(ud).record { $0.rollbacks += 1 } }
        TestInstaller.keptLock.withLock { TestInstaller.kept.append(self) }
        return thingType.withCString { type in
            running.withCString { version in
                trustFile.withCString { trust in
                    var config = thingif_update_config(
                        thing_type: type, running_version: version, trust_file: trust, max_trial_boots: maxTrialBoots)
                    return thingif_set_installer(handle, &ops, &config, Unmanaged.passUnretained(self).toOpaque())
                }
            }
        }
    }
}

/// An update offer as the hub sends it: the `update` action of the reserved
/// alias, in trait form.
enum UpdateCommands {
    static func offer(
        commandID: String, jobID: String, attempt: Int = 1, manifest: [UInt8], signatures: [ManifestSignature],
        trialS: Int? = nil
    ) -> String {
        let params = UpdateOffer.encode(
            jobID: jobID, attempt: attempt, manifest: manifest, signatures: signatures, trialSeconds: trialS)
        return command(commandID, params: String(decoding: params.dumpBytes(), as: UTF8.self))
    }

    static func command(_ commandID: String, params: String) -> String {
        #"{"commandID":"\#(commandID)","issuer":"user:test","actions":[{"_thingif":[{"update":\#(params)}]}]}"#
    }

    /// A trust file for `signers`, written under `dir`.
    static func trustFile(_ signers: [TestSigner], in dir: String) throws -> String {
        let path = dir + "/trust-\(UUID().uuidString).json"
        let text = #"{"keys":[\#(signers.map(\.keyJSON).joined(separator: ","))]}"#
        try text.write(toFile: path, atomically: true, encoding: .utf8)
        return path
    }
}
