// SPDX-License-Identifier: Apache-2.0

// The body of a server trigger (POST/PATCH …/triggers), as the hub checks
// it (TriggerForm.definition: the predicate, STATES conditions, cron
// schedules, SCHEDULE_ONCE, the command form, title, description,
// metadata).
//
// Properties, beyond "no crash":
//  1. An accepted body gives a definition whose predicate parses again and
//     whose command is an accepted CommandForm without commandID or
//     firedByTriggerID; the definition is JSON.
//  2. The definition is a fixed point: checked again as a body, it is
//     accepted and gives the same definition (what the hub stores reads
//     back as it was stored, e.g. after a PATCH).
//  3. A refusal is a 4xx with a code and a message.
//  4. jansson's memory returns to its baseline after each input.
import CThingIF
@testable import ThingIF

func fuzzCheck(_ input: [UInt8]) {
    guard case .success(let body) = JSON.parse(input) else { return }
    let now: Int64 = 1_700_000_000_000
    switch TriggerForm.definition(body, now: now, issuerAllowed: { _ in true }, checkCommand: { _ in nil }) {
    case .failure(let e):
        if !(400..<500).contains(e.status) || e.code.isEmpty || e.message.isEmpty {
            fuzzFail("a refusal that is not a 4xx with a code and a message", input)
        }
    case .success(let def):
        guard case .success = TriggerPredicate.parse(def["predicate"], now: now) else {
            fuzzFail("a stored predicate that does not parse", input)
        }
        guard let form = def["command"], case .success = CommandForm.command(form, issuerAllowed: { _ in true })
        else { fuzzFail("a stored command form that is refused", input) }
        if form["commandID"] != nil || form["firedByTriggerID"] != nil {
            fuzzFail("a stored command form with a commandID or firedByTriggerID", input)
        }
        let text = def.dumpBytes()
        guard case .success(let again) = JSON.parse(text),
            case .success(let def2) = TriggerForm.definition(
                again, now: now, issuerAllowed: { _ in true }, checkCommand: { _ in nil })
        else { fuzzFail("a stored definition is refused when checked again", input) }
        if json_equal(def.raw, def2.raw) == 0 { fuzzFail("the definition is not a fixed point", input) }
    }
}
