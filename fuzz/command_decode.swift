// SPDX-License-Identifier: Apache-2.0

// The command decoder, as the thing runs it on every message of its command
// topic (Command.decode with the default size limit): schema (v0) and trait
// (v1) shapes, alias grouping, and the commandID recovery from payloads that
// are too large or not JSON.
//
// Properties, beyond "no crash":
//  1. A payload whose commandID is readable always yields a Command (one
//     result slot per action, or a failed slot), never silence: when the
//     payload parses as a JSON object with a valid string commandID, decode
//     succeeds with that ID; when decode fails, the ID is recovered if the
//     raw bytes carry a plain one at the front.
//  2. No result topic from unchecked input: any ID decode or recovery gives
//     is safe as one MQTT topic level (no '/', '+', '#', NUL; <= 256 bytes).
//  3. Every decoded command has >= 1 entry, and allFailed gives exactly one
//     result per entry.
//  4. Re-encoding a decoded command and decoding it again gives the same
//     shape, aliases and action names and parameters (JSON equality).
//  5. An oversized payload that begins {"commandID":"<plain ID>" has its
//     ID recovered (the thing reports it as dropped: issue #26's
//     oversized-command rule, thing side).
//  6. jansson's memory returns to its baseline after each input.
import CThingIF
@testable import ThingIF

func fuzzCheck(_ input: [UInt8]) {
    // Property 1 for payloads over a thing's limit (a small limit here, so
    // short inputs reach that path): the commandID of a payload that begins
    // {"commandID":"<plain ID>" is always recovered, so the thing can report
    // the command as dropped instead of leaving it DELIVERED.
    if input.count > 64, case .failure(let e) = Command.decode(input, maxSize: 64), e.commandID == nil,
        let id = plainLeadingID(input)
    {
        fuzzFail("an oversized command's commandID \(id) was not recovered", input)
    }
    switch Command.decode(input, maxSize: WireLimits.maxPayload) {
    case .failure(let e):
        if let id = e.commandID {
            if !Topics.isSafeLevel(id) { fuzzFail("recovered commandID is not a safe topic level", input) }
        } else if case .success(let doc) = JSON.parse(input), doc.isObject, let id = doc["commandID"]?.stringValue,
            Topics.isSafeLevel(id), id.utf8.count <= Command.maxCommandIDLength, input.count <= WireLimits.maxPayload
        {
            fuzzFail("a JSON object with a valid commandID gave no command: \(e.message)", input)
        }
    case .success(let cmd):
        if !Topics.isSafeLevel(cmd.id) || cmd.id.utf8.count > Command.maxCommandIDLength {
            fuzzFail("decoded commandID is not a safe topic level", input)
        }
        if cmd.groups.isEmpty || cmd.actionCount == 0 { fuzzFail("a command without any result slot", input) }
        if cmd.groups.contains(where: { $0.entries.isEmpty }) { fuzzFail("an empty group", input) }
        let failed = ActionResults.allFailed(cmd, message: "fuzz")
        if failed.all.count != cmd.actionCount {
            fuzzFail("allFailed gave \(failed.all.count) results for \(cmd.actionCount) actions", input)
        }
        // The results body as the thing sends it parses and keeps the count.
        guard case .success(let body) = JSON.parse(failed.bytes()), let back = ActionResults.decode(body),
            back.all.count == cmd.actionCount
        else { fuzzFail("the failed results body does not read back with one result per action", input) }
        roundTrip(cmd, input)
    }
}

/// Property 4: a command whose every entry is a valid action re-encodes to
/// the same actions.
private func roundTrip(_ cmd: Command, _ input: [UInt8]) {
    for g in cmd.groups {
        for e in g.entries {
            if case .invalid = e { return }
        }
    }
    let bytes = cmd.encode().dumpBytes()
    guard case .success(let again) = Command.decode(bytes, maxSize: Int.max) else {
        fuzzFail("a decoded command does not decode after encode: \(String(decoding: bytes, as: UTF8.self))", input)
    }
    if again.shape != cmd.shape { fuzzFail("shape changed in the round trip", input) }
    if again.groups.count != cmd.groups.count { fuzzFail("group count changed in the round trip", input) }
    for (g1, g2) in zip(cmd.groups, again.groups) {
        if g1.alias != g2.alias { fuzzFail("alias changed in the round trip", input) }
        if g1.entries.count != g2.entries.count { fuzzFail("action count changed in the round trip", input) }
        for (e1, e2) in zip(g1.entries, g2.entries) {
            guard case .action(let n1, let p1) = e1, case .action(let n2, let p2) = e2 else {
                fuzzFail("an action became invalid in the round trip", input)
            }
            if n1 != n2 { fuzzFail("action name changed in the round trip", input) }
            if json_equal(p1.raw, p2.raw) == 0 {
                fuzzFail("action \(n1)'s parameters changed in the round trip", input)
            }
        }
    }
    if cmd.id != again.id { fuzzFail("commandID changed in the round trip", input) }
}

/// The ID of a payload that starts exactly {"commandID":"ID" with ID 1 to
/// 256 printable ASCII bytes other than '"', '\\', '/', '+', '#'.
private func plainLeadingID(_ input: [UInt8]) -> String? {
    let head = Array(#"{"commandID":""#.utf8)
    guard input.count > head.count, Array(input[0..<head.count]) == head else { return nil }
    var j = head.count
    while j < input.count, input[j] != 0x22 {
        let b = input[j]
        guard b > 0x20, b < 0x7f, b != 0x5c, b != 0x2f, b != 0x2b, b != 0x23 else { return nil }
        j += 1
    }
    guard j < input.count, j > head.count, j - head.count <= Command.maxCommandIDLength else { return nil }
    return String(decoding: input[head.count..<j], as: UTF8.self)
}
