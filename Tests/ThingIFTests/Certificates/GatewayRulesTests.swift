// SPDX-License-Identifier: Apache-2.0

import Testing
@testable import ThingIFHub

/// The gateways' section of the broker's acl_file (GatewayRules): pure text in, text out.
@Suite("Gateway rules in the acl_file")
struct GatewayRulesTests {
    static let operatorFile = "pattern read %u\npattern write p/%u/status\n\nuser thingif-hub\ntopic readwrite #\n"

    @Test(
        "Each gateway installation is a user with its three end-node rules; a topic that could break the file is left out"
    )
    func section() {
        let text = GatewayRules.section(["tAAA", "bad topic", "tBBB", "x/y", "line\nbreak", ""])
        let lines = text.split(separator: "\n").map(String.init)
        #expect(
            lines == [
                GatewayRules.begin,
                "user tAAA", "topic read p/tAAA/end-nodes/+/commands", "topic read p/tAAA/end-nodes/+/events",
                "topic write p/tAAA/end-nodes/+/status",
                "user tBBB", "topic read p/tBBB/end-nodes/+/commands", "topic read p/tBBB/end-nodes/+/events",
                "topic write p/tBBB/end-nodes/+/status",
                GatewayRules.end
            ], "\(lines)")
        #expect(GatewayRules.section([]) == GatewayRules.begin + "\n" + GatewayRules.end + "\n")
    }

    @Test("The section goes at the end, once, and replaces the one before; the operator's lines stay as they were")
    func replacing() {
        let first = GatewayRules.replacing(in: Self.operatorFile, with: GatewayRules.section(["tAAA"]))
        #expect(first.hasPrefix(Self.operatorFile))
        #expect(first.hasSuffix(GatewayRules.section(["tAAA"])))
        // Again with another set: the old section is gone, the operator's text unchanged.
        let second = GatewayRules.replacing(in: first, with: GatewayRules.section(["tBBB"]))
        #expect(!second.contains("tAAA") && second.contains("user tBBB"))
        #expect(second.hasPrefix(Self.operatorFile))
        #expect(second.components(separatedBy: GatewayRules.begin).count == 2)
        // The same set again changes nothing (the hub then writes nothing).
        #expect(GatewayRules.replacing(in: second, with: GatewayRules.section(["tBBB"])) == second)
        // A section in the middle (an operator appended after it) moves to the end: a user's
        // block runs to the next user line, so nothing may follow it.
        let middle = GatewayRules.section(["tAAA"]) + "user other\ntopic read x\n"
        let moved = GatewayRules.replacing(in: middle, with: GatewayRules.section(["tAAA"]))
        #expect(moved == "user other\ntopic read x\n\n" + GatewayRules.section(["tAAA"]), "\(moved)")
        // An empty file gets the section alone.
        #expect(GatewayRules.replacing(in: "", with: GatewayRules.section([])) == GatewayRules.section([]))
    }
}
