// SPDX-License-Identifier: Apache-2.0

// The remote configuration / automation codec: what the thing reads on
// p/{mqttTopic}/config (AutomationCodec.decodeConfig, with its limits, after
// the size check the thing makes first) and what the hub checks before it
// publishes one. The same codec reads the thing's automation.json.
//
// Properties, beyond "no crash":
//  1. An accepted configuration re-encodes (every set and trigger) into one
//     that is accepted again, with the same names, actions, parameters,
//     recurrences, time zones and action-set lists.
//  2. Every accepted trigger passes AutomationCodec.check, and its time
//     zone passes checkTimeZone (no trigger the scheduler cannot run).
//  3. jansson's memory returns to its baseline after each input.
import CThingIF
@testable import ThingIF

func fuzzCheck(_ input: [UInt8]) {
    guard input.count <= AutomationLimits.maxConfigBytes, case .success(let j) = JSON.parse(input) else { return }
    // Each element alone too, as the hub's REST API takes one at a time.
    if j.isObject {
        _ = AutomationCodec.decodeSet(j)
        _ = AutomationCodec.decodeTrigger(j)
    }
    guard case .success(let (sets, triggers)) = AutomationCodec.decodeConfig(j, localSets: ["local"]) else { return }
    for t in triggers {
        let known: (String) -> Bool = { n in n.equals("local") || sets.contains { $0.name.equals(n) } }
        if let p = AutomationCodec.check(t, knownSets: known) {
            fuzzFail("an accepted trigger fails check: \(p)", input)
        }
        if let p = AutomationCodec.checkTimeZone(t.timeZone) {
            fuzzFail("an accepted trigger's time zone fails: \(p)", input)
        }
    }
    let config = JSON.object()
    let sl = JSON.array()
    for s in sets { sl.append(AutomationCodec.encode(s)) }
    let tl = JSON.array()
    for t in triggers { tl.append(AutomationCodec.encode(t)) }
    config.set("actionSets", sl)
    config.set("timerTriggers", tl)
    guard case .success(let text) = JSON.parse(config.dumpBytes()),
        case .success(let (sets2, triggers2)) = AutomationCodec.decodeConfig(text, localSets: ["local"])
    else { fuzzFail("an accepted configuration is refused after encode", input) }
    if sets2.count != sets.count || triggers2.count != triggers.count {
        fuzzFail("set or trigger count changed in the round trip", input)
    }
    for (a, b) in zip(sets, sets2) {
        if !a.name.equals(b.name) || a.actions.count != b.actions.count { fuzzFail("set \(a.name) changed", input) }
        for (x, y) in zip(a.actions, b.actions) {
            if !x.schema.equals(y.schema) || !x.action.equals(y.action) || x.schemaVersion != y.schemaVersion
                || json_equal(x.params.raw, y.params.raw) == 0
            {
                fuzzFail("an action of set \(a.name) changed in the round trip", input)
            }
        }
    }
    for (a, b) in zip(triggers, triggers2) {
        if !a.name.equals(b.name) || a.fireDate != b.fireDate || !a.timeZone.equals(b.timeZone)
            || a.enabled != b.enabled || a.actionSets.count != b.actionSets.count
            || a.recurrence?.unit != b.recurrence?.unit || a.recurrence?.count != b.recurrence?.count
            || zip(a.actionSets, b.actionSets).contains(where: { !$0.equals($1) })
        {
            fuzzFail("trigger \(a.name) changed in the round trip", input)
        }
    }
}
