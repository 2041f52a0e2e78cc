// SPDX-License-Identifier: Apache-2.0

import Foundation
import Testing
@testable import ThingIF

/// The device side of a cancel (CommandCancel, docs/PROTOCOL.md §9.1) on the
/// broker-free pipeline rig: the ledger keeps the cancel, the command is
/// refused per action with reason CANCELLED, never run, also after a restart.
@Suite("Pipeline: cancel")
struct PipelineCancelTests {
    static func cancel(_ id: String) -> TransportMessage {
        TransportMessage(
            topic: PipelineRig.topic, payload: CommandCancel.encode(commandID: id), qos: 1, retain: false,
            responseTopic: nil, correlationData: nil)
    }

    @Test("The wire: a cancel is recognised; a command, a cancel with actions or cancel:false is not")
    func wire() {
        #expect(CommandCancel.commandID(of: CommandCancel.encode(commandID: "c-1")) == "c-1")
        #expect(CommandCancel.commandID(of: Array(#"{"commandID":"c","cancel":false}"#.utf8)) == nil)
        #expect(CommandCancel.commandID(of: Array(#"{"commandID":"c","cancel":true,"actions":[]}"#.utf8)) == nil)
        #expect(CommandCancel.commandID(of: PipelineRig.command("c").payload) == nil)
        #expect(CommandCancel.commandID(of: Array(#"{"cancel":true}"#.utf8)) == nil)
    }

    @Test("A cancel behind its command in the same pass: refused, no handler, results with reason CANCELLED")
    func sameBatch() throws {
        let rig = try PipelineRig()
        defer { rig.remove() }
        rig.connect()
        rig.deliver([PipelineRig.command("c1", actions: 2), Self.cancel("c1"), PipelineRig.command("c2", actions: 1)])
        #expect(rig.runs == ["c2#0"])
        let r = try #require(rig.results.first { $0.commandID == "c1" })
        #expect(r.body.contains(#""reason":"CANCELLED""#) && r.body.contains(#""succeeded":false"#), "\(r.body)")
        #expect(r.body.components(separatedBy: "CANCELLED").count == 3, "one per action: \(r.body)")
    }

    @Test("A cancel before the command, then a restart: the command arriving later is never run")
    func beforeAndRestart() throws {
        let dir = try makeTempDirectory(prefix: "thingif-pipeline")
        defer { try? FileManager.default.removeItem(atPath: dir) }
        do {
            let rig = try PipelineRig(dir: dir)
            rig.connect()
            rig.deliver([Self.cancel("c9")])
            #expect(rig.results.isEmpty)
        }
        let rig = try PipelineRig(dir: dir)
        rig.connect()
        rig.deliver([PipelineRig.command("c9", actions: 2)])
        #expect(rig.runs.isEmpty)
        let r = try #require(rig.results.first { $0.commandID == "c9" })
        #expect(r.body.contains("CANCELLED"))
        // A redelivery only sends the refusal again (once acknowledged).
        rig.acknowledgeAll()
        rig.deliver([PipelineRig.command("c9", actions: 2)])
        #expect(rig.runs.isEmpty)
    }

    @Test("A cancel after the command ran is ignored: its results stand")
    func afterRun() throws {
        let rig = try PipelineRig()
        defer { rig.remove() }
        rig.connect()
        rig.deliver([PipelineRig.command("c3", actions: 1)])
        rig.deliver([Self.cancel("c3")])
        #expect(rig.runs == ["c3#0"])
        #expect(rig.results.filter { $0.commandID == "c3" }.count == 1)
        #expect(!(rig.results.first?.body.contains("CANCELLED") ?? true))
    }
}
