// SPDX-License-Identifier: Apache-2.0

// The hub's server-trigger rules, as the REST API reads a trigger's body
// (ThingIFRules: a STATES predicate's condition, a SCHEDULE predicate's cron
// expression) and as the hub evaluates them against a thing's state.
// Input: condition JSON, a NUL byte, state JSON, a NUL byte, a cron line.
//
// Properties, beyond "no crash":
//  1. A parsed condition is evaluated against any state object without a
//     trap, and gives the same answer twice.
//  2. A parsed cron schedule's next fire time is after the given time.
//  3. jansson's memory returns to its baseline after each input.
import CThingIF
import ThingIF

func fuzzCheck(_ input: [UInt8]) {
    let parts = input.split(separator: 0, maxSplits: 2, omittingEmptySubsequences: false)
    if case .success(let cj) = JSON.parse(Array(parts[0])), case .success(let c) = StateCondition.parse(cj) {
        let state: JSON
        if parts.count > 1, case .success(let s) = JSON.parse(Array(parts[1])) {
            state = s
        } else {
            state = cj
        }
        if c.matches(state) != c.matches(state) { fuzzFail("a condition answered twice differently", input) }
    }
    if parts.count > 2 || parts.count == 1 {
        let line = String(decoding: parts[parts.count - 1].prefix(200), as: UTF8.self)
        if let s = CronSchedule(line) {
            let now: Int64 = 1_764_000_000_000
            if let n = s.next(after: now), n <= now { fuzzFail("cron next(after:) is not after", input) }
        }
    }
}
