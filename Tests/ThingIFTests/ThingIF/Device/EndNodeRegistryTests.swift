// SPDX-License-Identifier: Apache-2.0

import Foundation
import Testing
@testable import ThingIF

/// The registry's lookups by vendorThingID and thingID (maps, so that a
/// gateway's cost per command does not grow with its end nodes) against a
/// scan of its entries in order, after every step of a random sequence of
/// the changes the pipeline makes: adds, onboarding answers, renames, the
/// hub's thingID moving to another vendorThingID, removals; and after a
/// save and a load.
@Suite("End-node registry (fast)")
struct EndNodeRegistryTests {
    /// A small generator with a fixed seed: the same sequence every run.
    struct SplitMix {
        var state: UInt64
        mutating func next(_ n: Int) -> Int {
            state &+= 0x9E37_79B9_7F4A_7C15
            var z = state
            z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
            z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
            return Int((z ^ (z >> 31)) % UInt64(n))
        }
    }

    static func expectConsistent(_ r: EndNodeRegistry, step: Int, sourceLocation: SourceLocation = #_sourceLocation) {
        for (i, e) in r.entries.enumerated() {
            #expect(
                r.index(vendorThingID: e.vendorThingID) == r.entries.firstIndex { $0.vendorThingID == e.vendorThingID },
                "step \(step): \(e.vendorThingID) at \(i)", sourceLocation: sourceLocation)
            if let t = e.thingID {
                #expect(
                    r.index(thingID: t) == r.entries.firstIndex { $0.thingID == t }, "step \(step): \(t)",
                    sourceLocation: sourceLocation)
            }
        }
        for n in 0..<40 {
            if !r.entries.contains(where: { $0.vendorThingID == "V\(n)" }) {
                #expect(
                    r.index(vendorThingID: "V\(n)") == nil, "step \(step): V\(n) is gone",
                    sourceLocation: sourceLocation)
            }
            if !r.entries.contains(where: { $0.thingID == "th.\(n)" }) {
                #expect(
                    r.index(thingID: "th.\(n)") == nil, "step \(step): th.\(n) is gone", sourceLocation: sourceLocation)
            }
        }
    }

    @Test("Lookups by vendorThingID and thingID agree with a scan in order through 2,000 random changes and a reload")
    func indicesFollowEveryChange() throws {
        let dir = try makeTempDirectory(prefix: "thingif-registry")
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let storage = try #require(Storage(directory: dir))
        var r = EndNodeRegistry(storage: storage)
        var rnd = SplitMix(state: 45)
        for step in 0..<2000 {
            let v = "V\(rnd.next(40))", t = "th.\(rnd.next(40))"
            switch rnd.next(6) {
            case 0, 1:  // thingif_end_node_add, or an owner's end node learned
                if r.index(vendorThingID: v) == nil {
                    r.append(
                        .init(
                            vendorThingID: v, thingID: rnd.next(2) == 0 ? nil : (r.index(thingID: t) == nil ? t : nil)))
                }
            case 2:  // an onboarding answered, or the hub's word moving a thingID
                if let i = r.index(vendorThingID: v) {
                    if let j = r.index(thingID: t), j != i { r.remove(at: j) }
                    if let k = r.index(vendorThingID: v) { r.update(k) { $0.thingID = t } }
                }
            case 3:  // a rename by the hub
                if let j = r.index(thingID: t), r.index(vendorThingID: v) == nil {
                    r.update(j) { $0.vendorThingID = v }
                }
            case 4:  // a removal
                if let i = r.index(vendorThingID: v) { r.remove(at: i) }
            default:  // status and removal marks change no name
                if let i = r.index(vendorThingID: v) {
                    r.update(i) {
                        $0.online.toggle(); $0.removing.toggle()
                    }
                }
            }
            Self.expectConsistent(r, step: step)
        }
        #expect(r.entries.count > 5, "the sequence left some end nodes: \(r.entries.count)")
        #expect(r.save(storage))
        let loaded = EndNodeRegistry(storage: storage)
        #expect(loaded.entries.map(\.vendorThingID) == r.entries.map(\.vendorThingID))
        Self.expectConsistent(loaded, step: -1)
    }
}
