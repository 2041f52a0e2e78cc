// SPDX-License-Identifier: Apache-2.0

import ThingIF

/// The end-node rights of gateways with certificates, in the broker's
/// acl_file (docs/GATEWAYS.md §4.3). The file's patterns apply to every
/// certificate, so they carry no end-node rule; each gateway installation
/// that holds a certificate gets its three as a user of its own (CN =
/// topic): read p/{G}/end-nodes/+/commands and p/{G}/end-nodes/+/events,
/// write p/{G}/end-nodes/+/status.
/// The hub keeps them in one section at the end of the file, between two
/// marker lines, and leaves the rest as the operator wrote it. Pure: the
/// text in, the text out (ThingAuthority writes it and signals the broker).
enum GatewayRules {
    static let begin = "# thingif-hub: gateways with certificates (written by thingif-hub --broker-acl; do not edit)"
    static let end = "# thingif-hub: end of gateways"
    /// The largest acl_file the hub reads (its section holds about 150
    /// bytes per gateway installation).
    static let maxFileBytes = 64 * 1024 * 1024

    /// The section for `topics`: one user per gateway installation. A
    /// topic that could break the file (not a topic-safe level, or with a
    /// space or a line end) is left out; the hub makes none such.
    static func section(_ topics: [String]) -> String {
        var lines = [begin]
        for topic in topics where Self.fits(topic) {
            lines.append("user \(topic)")
            lines.append("topic read \(Topics.endNodeCommands(clientID: topic, endNode: "+"))")
            lines.append("topic read \(Topics.endNodeEvents(clientID: topic, endNode: "+"))")
            lines.append("topic write \(Topics.endNodeStatus(clientID: topic, endNode: "+"))")
        }
        lines.append(end)
        return lines.joined(separator: "\n") + "\n"
    }

    /// `file` with its section (wherever it was, if anywhere) replaced by
    /// `section`, at the end: a user line starts a block that runs to the
    /// next user line, so nothing of the operator's may follow it.
    static func replacing(in file: String, with section: String) -> String {
        var kept: [Substring] = []
        var inside = false
        for line in file.split(separator: "\n", omittingEmptySubsequences: false) {
            if line == begin {
                inside = true
            } else if inside {
                if line == end { inside = false }
            } else {
                kept.append(line)
            }
        }
        while let last = kept.last, last.isEmpty { kept.removeLast() }
        let head = kept.joined(separator: "\n")
        return (head.isEmpty ? "" : head + "\n\n") + section
    }

    static func fits(_ topic: String) -> Bool {
        Topics.isSafeLevel(topic) && !topic.utf8.contains { $0 <= 0x20 || $0 == 0x7F }
    }

    /// When the scheduler's job looks at the file next.
    struct State {
        var nextCheckMs: Int64 = 0
    }
}
