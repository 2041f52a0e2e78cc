// SPDX-License-Identifier: Apache-2.0

import Testing
import ThingIF

/// `LayoutPosition`: the layout names Kii's clients write, and the one rule
/// for an onboarding body's `layoutPosition` that the owner's form and the
/// thing's own onboarding share.
@Suite("Layout position")
struct FastLayoutPositionTests {
    @Test("Kii's spellings in any ASCII case, kii_go's END_NODE; nothing else")
    func parsing() {
        let read: [(String, LayoutPosition)] = [
            ("STANDALONE", .standalone), ("standalone", .standalone), ("Gateway", .gateway), ("GATEWAY", .gateway),
            ("ENDNODE", .endNode), ("EndNode", .endNode), ("END_NODE", .endNode), ("end_node", .endNode)
        ]
        for (text, layout) in read { #expect(LayoutPosition(parsing: text) == layout, "\(text)") }
        // What the framework writes and stores.
        #expect(LayoutPosition.allCases.map(\.rawValue) == ["STANDALONE", "GATEWAY", "ENDNODE"])
        // Near misses, blanks, a long s (ſ uppercases to S in Unicode) and a
        // Turkish dotless ı (to I): only ASCII case folds.
        for text in [
            "", "GATE WAY", " GATEWAY", "GATEWAY ", "END-NODE", "STANDALONE\u{0}", "ſTANDALONE", "GATEWAı", "NODE"
        ] {
            #expect(LayoutPosition(parsing: text) == nil, "\(text)")
        }
    }

    @Test("An onboarding body: absent names none; a gateway or a thing on its own; an end node or a bad value refused")
    func named() throws {
        func named(_ body: String) throws -> Result<LayoutPosition?, LayoutRefusal> {
            guard case .success(let j) = JSON.parse(Array(body.utf8)) else { throw LayoutRefusal("not JSON: \(body)") }
            return LayoutPosition.named(in: j)
        }
        #expect(try named(#"{"vendorThingID":"v"}"#) == .success(nil))
        #expect(try named(#"{"layoutPosition":"gateway"}"#) == .success(.gateway))
        #expect(try named(#"{"layoutPosition":"STANDALONE"}"#) == .success(.standalone))
        for bad in [#"{"layoutPosition":"ROUTER"}"#, #"{"layoutPosition":1}"#, #"{"layoutPosition":null}"#] {
            guard case .failure(let r) = try named(bad) else {
                Issue.record("\(bad) was taken")
                continue
            }
            #expect(r.message.contains("STANDALONE or GATEWAY"), "\(bad): \(r.message)")
        }
        for endNode in [#"{"layoutPosition":"ENDNODE"}"#, #"{"layoutPosition":"END_NODE"}"#] {
            guard case .failure(let r) = try named(endNode) else {
                Issue.record("\(endNode) was taken")
                continue
            }
            #expect(r.message.contains("OnboardingEndNodeWithGatewayThingID"), "\(endNode): \(r.message)")
        }
    }

    @Test("Onboarding by the thing: the layout is sent, read back, and absent when the body names none")
    func onboardingRequest() throws {
        let sent = OnboardingRequest(vendorThingID: "GW-1", thingPassword: "pw", layoutPosition: .gateway)
        #expect(sent.encode()["layoutPosition"]?.stringValue == "GATEWAY")
        #expect(OnboardingRequest.decode(sent.encode())?.layoutPosition == .gateway)
        guard case .success(let none) = JSON.parse(Array(#"{"vendorThingID":"v","thingPassword":"p"}"#.utf8)),
            case .success(let endNode) = JSON.parse(
                Array(#"{"vendorThingID":"v","thingPassword":"p","layoutPosition":"ENDNODE"}"#.utf8))
        else {
            Issue.record("the test's bodies do not parse")
            return
        }
        let decoded = try #require(OnboardingRequest.decode(none))
        #expect(decoded.layoutPosition == nil)
        #expect(OnboardingRequest.decode(endNode) == nil)
    }
}
