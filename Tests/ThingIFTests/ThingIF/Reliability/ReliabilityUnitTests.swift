// SPDX-License-Identifier: Apache-2.0

import Foundation
import Testing
@testable import ThingIF

private func json(_ text: String) -> JSON {
    guard case .success(let j) = JSON.parse(text) else { fatalError("bad JSON in a test: \(text)") }
    return j
}

/// A fresh storage directory, removed afterwards.
private func withStorage(_ body: (Storage, String) throws -> Void) throws {
    let dir = try makeTempDirectory(prefix: "thingif-unit")
    defer { try? FileManager.default.removeItem(atPath: dir) }
    try body(try #require(Storage(directory: dir)), dir)
}

/// The journal, the outbox and the command ledger on a real directory,
/// without a broker: seconds for what the fault streams take minutes to reach.
@Suite("Journal, outbox and ledger (fast)")
struct FastReliabilityTests {
    @Test(
        "Journal: appended records come back in order; a torn last line and garbage lines are skipped; rewrite compacts"
    )
    func journal() throws {
        try withStorage { storage, dir in
            let j = Journal(storage: storage, name: "j.jsonl")
            for i in 0..<5 { #expect(j.append(json(#"{"n":\#(i)}"#))) }
            // A power cut mid-write leaves a torn line; a stray line is not an object.
            let fh = try #require(FileHandle(forWritingAtPath: dir + "/j.jsonl"))
            fh.seekToEndOfFile()
            fh.write(Data("[1,2]\n{\"n\":99".utf8))
            fh.closeFile()
            let again = Journal(storage: storage, name: "j.jsonl")
            let loaded = again.load()
            #expect(loaded.compactMap { $0["n"]?.intValue } == [0, 1, 2, 3, 4])
            #expect(again.lineCount == 5)
            // A record appended after the torn line is a line of its own, read back.
            #expect(again.append(json(#"{"n":5}"#)))
            #expect(
                Journal(storage: storage, name: "j.jsonl").load().compactMap { $0["n"]?.intValue } == [0, 1, 2, 3, 4, 5]
            )
            #expect(again.rewrite([json(#"{"n":7}"#)]))
            #expect(again.append(json(#"{"n":8}"#)))
            #expect(Journal(storage: storage, name: "j.jsonl").load().compactMap { $0["n"]?.intValue } == [7, 8])
            let mode = try FileManager.default.attributesOfItem(atPath: dir + "/j.jsonl")[.posixPermissions] as? Int
            #expect(mode == 0o600)
        }
    }

    /// Results come in memory only, as the pipeline adds them (the ledger has them).
    private static func item(_ id: String, _ kind: Outbox.Kind, method: String = "PUT") -> Outbox.Item {
        Outbox.Item(
            id: id, method: method, path: "targets/thing:t/\(kind.rawValue)", contentType: "application/json",
            body: Array(#"{"id":"\#(id)"}"#.utf8), what: id, kind: kind, journaled: kind != .results)
    }

    @Test(
        "Outbox: a part's tag is kept as k and read back, never interpreted; whether an item is journaled is the adder's"
    )
    func outboxTags() throws {
        try withStorage { storage, dir in
            let o = Outbox(storage: storage, capacity: 10)
            var tagged = Self.item("g1", .other, method: "POST")
            tagged.tag = "someonesRequest"
            #expect(o.add(tagged) != nil)
            var transient = Self.item("g2", .other, method: "GET")
            transient.tag = "someonesRead"
            transient.journaled = false
            #expect(o.add(transient) != nil)
            #expect(o.add(Self.item("s1", .state)) != nil)
            let text = try String(contentsOfFile: dir + "/" + Outbox.fileName, encoding: .utf8)
            #expect(text.contains(#""k":"someonesRequest""#) && text.contains(#""k":"state""#), "\(text)")
            #expect(!text.contains("g2"), "an item added in memory only was journaled: \(text)")
            let reloaded = Outbox(storage: storage, capacity: 10)
            #expect(reloaded.items.map(\.id) == ["g1", "s1"])
            #expect(reloaded.items.map(\.tag) == ["someonesRequest", nil])
            #expect(reloaded.items.map(\.kind) == [.other, .state])
        }
    }

    @Test(
        "Outbox: a journal written before tags (k endNodeOnboarding, endNodeRemoval) loads its gateway requests as tagged items, written back the same"
    )
    func outboxLoadsJournalsFromBeforeTags() throws {
        try withStorage { storage, dir in
            // Lines as the outbox wrote them when its Kind named the gateway's requests.
            let lines = [
                #"{"op":"add","id":"r-1","m":"POST","p":"things/th.1/end-nodes","ct":"application/vnd.kii.OnboardingEndNodeWithGatewayThingID+json","b":"{\"gatewayThingID\":\"th.1\",\"endNodeVendorThingID\":\"LAMP-1\",\"endNodePassword\":\"pw\"}","w":"onboarding of end node LAMP-1","k":"endNodeOnboarding"}"#,
                #"{"op":"add","id":"r-2","m":"DELETE","p":"things/th.1/end-nodes/th.e2","b":"","w":"removal of end node LAMP-2","k":"endNodeRemoval"}"#,
                #"{"op":"add","id":"r-3","m":"PUT","p":"targets/thing:th.1/states","ct":"application/json","b":"{}","w":"state","k":"state"}"#,
                #"{"op":"add","id":"r-4","m":"PUT","p":"things/th.1/firmware-version","b":"{}","w":"firmware version 2","k":"other"}"#,
                #"{"op":"add","id":"r-5","m":"PUT","p":"x","b":"{}","w":"no kind"}"#
            ]
            try (lines.joined(separator: "\n") + "\n").write(
                toFile: dir + "/" + Outbox.fileName, atomically: true, encoding: .utf8)
            let o = Outbox(storage: storage, capacity: 10)
            #expect(o.items.map(\.id) == ["r-1", "r-2", "r-3", "r-4", "r-5"])
            #expect(o.items.map(\.kind) == [.other, .other, .state, .other, .other])
            #expect(o.items.map(\.tag) == ["endNodeOnboarding", "endNodeRemoval", nil, nil, nil])
            #expect(o.items.map { EndNodeRequest($0) } == [.onboarding, .removal, nil, nil, nil])
            #expect(o.items.allSatisfy { $0.journaled })
            // Compacted, the lines keep their names.
            for i in 0..<200 {
                #expect(o.add(Self.item("x\(i)", .other)) != nil)
                #expect(o.ack("x\(i)") != nil)
            }
            o.writeOut()
            let again = Outbox(storage: storage, capacity: 10)
            #expect(again.items.map(\.tag) == ["endNodeOnboarding", "endNodeRemoval", nil, nil, nil])
        }
    }

    @Test("Outbox: items survive a reload until acknowledged; a full state upload supersedes older ones")
    func outboxPersistsAndSupersedes() throws {
        try withStorage { storage, _ in
            let o = Outbox(storage: storage, capacity: 10)
            #expect(o.add(Self.item("r1", .results)) != nil)
            #expect(o.add(Self.item("s1", .state)) != nil)
            #expect(o.add(Self.item("f1", .other)) != nil)
            // A PUT of the whole state drops the older state upload.
            guard case .added(let dropped, let superseded)? = o.add(Self.item("s2", .state)) else {
                Issue.record("not added")
                return
            }
            #expect(superseded && dropped.map(\.id) == ["s1"])
            #expect(o.items.map(\.id) == ["r1", "f1", "s2"])
            #expect(o.ack("f1")?.id == "f1")
            #expect(o.ack("f1") == nil)
            // The acknowledgement waits in memory until the loop's writeOut.
            #expect(Outbox(storage: storage, capacity: 10).items.map(\.id) == ["f1", "s2"])
            o.writeOut()
            // Results are the ledger's to keep (CommandLedger.owedResults):
            // the outbox's journal has only the uploads.
            let reloaded = Outbox(storage: storage, capacity: 10)
            #expect(reloaded.items.map(\.id) == ["s2"])
            #expect(reloaded.items.first?.body == Array(#"{"id":"s2"}"#.utf8))
            #expect(reloaded.resultCount == 0)
        }
    }

    @Test("Outbox: when full, the oldest state goes first; results are never dropped and other uploads are refused")
    func outboxFull() throws {
        try withStorage { storage, _ in
            let o = Outbox(storage: storage, capacity: 3)
            #expect(o.add(Self.item("p1", .state, method: "PATCH")) != nil)
            #expect(o.add(Self.item("r1", .results)) != nil)
            #expect(o.add(Self.item("r2", .results)) != nil)
            // Full: a new upload pushes out the oldest state.
            guard case .added(let dropped, _)? = o.add(Self.item("f1", .other)) else {
                Issue.record("not added")
                return
            }
            #expect(dropped.map(\.id) == ["p1"])
            // No state left to drop: refused, but results still go in.
            guard case .full? = o.add(Self.item("f2", .other)) else {
                Issue.record("accepted over capacity")
                return
            }
            guard case .added? = o.add(Self.item("r3", .results)) else {
                Issue.record("results refused")
                return
            }
            #expect(o.items.map(\.id) == ["r1", "r2", "f1", "r3"])
        }
    }

    @Test("Outbox: a thousand add/ack pairs leave a journal compacted to what is pending")
    func outboxCompacts() throws {
        try withStorage { storage, dir in
            let o = Outbox(storage: storage, capacity: 10)
            for i in 0..<1000 {
                #expect(o.add(Self.item("x\(i)", .other)) != nil)
                #expect(o.ack("x\(i)") != nil)
            }
            #expect(o.add(Self.item("last", .other)) != nil)
            let lines = try String(contentsOfFile: dir + "/" + Outbox.fileName, encoding: .utf8).split(separator: "\n")
                .count
            #expect(lines < 200, "the journal kept \(lines) lines for one pending item")
            #expect(Outbox(storage: storage, capacity: 10).items.map(\.id) == ["last"])
        }
    }

    @Test("Ledger: started, then done; a reload knows both and lists what a restart cut off; capacity trims the oldest")
    func ledger() throws {
        try withStorage { storage, _ in
            let l = CommandLedger(storage: storage, capacity: 3)
            let skeleton = Array(#"[{"names":["turnPower","setFanSpeed"]}]"#.utf8)
            #expect(l.start("c1", skeleton: skeleton))
            #expect(l.start("c2", skeleton: skeleton))
            #expect(l.finish("c2", body: Array(#"{"actionResults":[]}"#.utf8), thingID: nil))
            let r = CommandLedger(storage: storage, capacity: 3)
            guard case .started? = r.state(of: "c1"), case .done? = r.state(of: "c2") else {
                Issue.record(
                    "states lost: \(String(describing: r.state(of: "c1"))) \(String(describing: r.state(of: "c2")))")
                return
            }
            #expect(r.interrupted.map(\.id) == ["c1"])
            let failed = CommandLedger.failedResults(skeleton: r.interrupted[0].skeleton, message: "cut").all
            #expect(failed.map(\.name) == ["turnPower", "setFanSpeed"] && failed.allSatisfy { !$0.succeeded })
            #expect(r.finish("c1", body: Array(#"{"actionResults":[]}"#.utf8), thingID: nil))
            #expect(r.interrupted.isEmpty)
            for i in 3...6 { #expect(r.start("c\(i)", skeleton: skeleton)) }
            #expect(r.count == 3 && r.state(of: "c1") == nil && r.state(of: "c6") != nil)
        }
    }

    @Test(
        "Ledger: results are owed until acknowledged, across a reload; unsynced records become durable with one flush; owed results outlive the capacity"
    )
    func ledgerOwedResults() throws {
        try withStorage { storage, dir in
            let l = CommandLedger(storage: storage, capacity: 2)
            let skeleton = Array(#"[{"names":["turnPower"]}]"#.utf8)
            let results = Array(#"{"actionResults":[{"turnPower":{"succeeded":true}}]}"#.utf8)
            // A batch: three starts and their results appended without a sync, then one flush.
            for i in 1...3 { #expect(l.start("b\(i)", skeleton: skeleton, sync: false)) }
            for i in 1...3 { #expect(l.finish("b\(i)", body: results, thingID: "th.1", sync: false)) }
            #expect(l.flush())
            #expect(l.owedResults().map(\.commandID) == ["b1", "b2", "b3"])
            // Capacity 2 trims only what is no longer owed.
            #expect(l.count == 3)
            l.acknowledge("b2")
            l.acknowledge("b2")  // a repeat writes nothing
            // Unsynced acknowledgements reach the file once a loop pass (writeOut).
            #expect(CommandLedger(storage: storage, capacity: 2).owedResults().count == 3)
            l.writeOut()
            let text = try String(contentsOfFile: dir + "/" + CommandLedger.fileName, encoding: .utf8)
            #expect(text.components(separatedBy: #""k":1"#).count - 1 == 1)
            let r = CommandLedger(storage: storage, capacity: 2)
            #expect(r.owedResults().map(\.commandID) == ["b1", "b3"])
            #expect(r.owedResults().first?.thingID == "th.1")
            #expect(r.owedResults().first?.body == results)
            #expect(r.interrupted.isEmpty)
            // A done record without "t" (an earlier version's) owes nothing.
            #expect(r.finish("old", body: results, thingID: nil))
            #expect(!r.owedResults().contains { $0.commandID == "old" })
        }
    }

    @Test(
        "Ledger records built as bytes: IDs with quotes, backslashes, control and non-ASCII characters come back as written"
    )
    func ledgerHostileIDs() throws {
        try withStorage { storage, _ in
            let ids = ["c\"q", "back\\slash", "line\nfeed\u{1}\u{1f}", "é✓", ""]
            for id in ids {
                let text = Array(#"{"k":"#.utf8) + JSON.quoted(id) + [0x7D]
                guard case .success(let parsed) = JSON.parse(text) else {
                    Issue.record("not JSON: \(String(decoding: text, as: UTF8.self))")
                    continue
                }
                #expect(parsed["k"]?.stringValue == id)
            }
            let l = CommandLedger(storage: storage, capacity: 16)
            let body = Array(#"{"actionResults":[]}"#.utf8)
            for id in ids {
                #expect(l.start(id, skeleton: Array(#"[{"names":["a"]}]"#.utf8)))
                #expect(l.finish(id, body: body, thingID: "th.\"x"))
            }
            let r = CommandLedger(storage: storage, capacity: 16)
            #expect(r.owedResults().map(\.commandID) == ids)
            #expect(r.owedResults().allSatisfy { $0.thingID == "th.\"x" && $0.body == body })
            #expect(r.interrupted.isEmpty)
        }
    }
}
