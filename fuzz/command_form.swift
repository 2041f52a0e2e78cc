// SPDX-License-Identifier: Apache-2.0

// The CommandForm of POST …/targets/{target}/commands, as the hub checks it
// before it stores and publishes a command (CommandForm.command, the same
// function a trigger's command goes through): schema and trait shapes,
// issuer, title, description, metadata, the actions and their limits.
//
// Properties, beyond "no crash":
//  1. An accepted form gives a command the thing can take: 1 to
//     AppLimits.maxActions actions, no empty group, a commandID that is a
//     safe topic level, and a payload within the thing's limit
//     (WireLimits.maxPayload less the room delivery may add).
//  2. The payload the thing receives decodes (Command.decode, as the thing
//     runs it) to the same shape, aliases, action names and parameters;
//     its issuer is the form's.
//  3. A refused form gives a 4xx with an errorCode and a message, and its
//     body is JSON.
//  4. An issuer the caller may not use is never accepted.
//  5. jansson's memory returns to its baseline after each input.
import CThingIF
@testable import ThingIF

func fuzzCheck(_ input: [UInt8]) {
    guard case .success(let form) = JSON.parse(input) else { return }
    if case .success = CommandForm.command(form, issuerAllowed: { _ in false }) {
        fuzzFail("a command accepted from an issuer the caller may not use", input)
    }
    switch CommandForm.command(form, issuerAllowed: { _ in true }) {
    case .failure(let e):
        if !(400..<500).contains(e.status) || e.code.isEmpty || e.message.isEmpty {
            fuzzFail("a refusal that is not a 4xx with a code and a message: \(e.status) \(e.code)", input)
        }
        guard case .success = JSON.parse(e.body.dumpBytes()) else { fuzzFail("the error body is not JSON", input) }
    case .success(let cmd):
        accepted(cmd, form, input)
    }
}

private func accepted(_ cmd: Command, _ form: JSON, _ input: [UInt8]) {
    if !(1...AppLimits.maxActions).contains(cmd.actionCount) {
        fuzzFail("an accepted command with \(cmd.actionCount) actions", input)
    }
    if cmd.groups.contains(where: { $0.entries.isEmpty }) { fuzzFail("an accepted command with an empty group", input) }
    if !Topics.isSafeLevel(cmd.id) { fuzzFail("a commandID that is not a safe topic level", input) }
    if cmd.issuer != form["issuer"]?.stringValue { fuzzFail("the issuer is not the form's", input) }
    let payload = cmd.encode().dumpBytes()
    if payload.count + 128 > WireLimits.maxPayload { fuzzFail("an accepted command over the thing's limit", input) }
    guard case .success(let got) = Command.decode(payload, maxSize: WireLimits.maxPayload) else {
        fuzzFail("the thing cannot decode an accepted command", input)
    }
    if got.id != cmd.id || got.shape != cmd.shape || got.groups.count != cmd.groups.count {
        fuzzFail("the thing reads another command than the hub accepted", input)
    }
    for (g1, g2) in zip(cmd.groups, got.groups) {
        if g1.alias != g2.alias || g1.entries.count != g2.entries.count {
            fuzzFail("the thing reads other groups than the hub accepted", input)
        }
        for (e1, e2) in zip(g1.entries, g2.entries) {
            guard case .action(let n1, let p1) = e1, case .action(let n2, let p2) = e2 else {
                fuzzFail("an accepted action the thing reads as invalid", input)
            }
            if !n1.equals(n2) || json_equal(p1.raw, p2.raw) == 0 {
                fuzzFail("action \(n1) changed between the hub and the thing", input)
            }
        }
    }
}
