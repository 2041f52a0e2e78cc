// SPDX-License-Identifier: Apache-2.0

// Action results: the body the hub reads from PUT
// …/commands/{commandID}/action-results (ActionResults.decode, flat for
// schema commands, grouped by alias for trait commands) and the one the
// thing writes (ActionResults.bytes, built without jansson).
//
// Properties, beyond "no crash":
//  1. A decoded body re-encodes (bytes()) to JSON that decodes to the same
//     results: the same groups, aliases, names, outcomes, messages, data.
//  2. The thing's byte encoder writes valid JSON for any strings
//     (the names and messages are escaped).
//  3. jansson's memory returns to its baseline after each input.
import CThingIF
@testable import ThingIF

func fuzzCheck(_ input: [UInt8]) {
    // Property 2 with arbitrary text as a name and a message (the handler's
    // error message is any C string; invalid UTF-8 is repaired by String).
    // No NUL: names are jansson object keys and messages C strings, neither
    // can hold one (and jansson refuses "\u0000" when it reads them back).
    let text = String(decoding: input.prefix(300).filter { $0 != 0 }, as: UTF8.self)
    let own = ActionResults(groups: [
        .init(alias: text, results: [.failure(text, text)]), .init(alias: nil, results: [.failure("a", text)])
    ])
    guard case .success = JSON.parse(own.bytes()) else { fuzzFail("the thing's results body is not JSON", input) }

    guard case .success(let j) = JSON.parse(input), let r = ActionResults.decode(j) else { return }
    guard case .success(let j2) = JSON.parse(r.bytes()), let r2 = ActionResults.decode(j2) else {
        fuzzFail("decoded results do not decode after encode", input)
    }
    // A flat group right after a flat group merges; compare the flat lists
    // and the aliases in order.
    if r.all.count != r2.all.count { fuzzFail("result count changed in the round trip", input) }
    let a1 = r.groups.compactMap { $0.alias }, a2 = r2.groups.compactMap { $0.alias }
    if a1.count != a2.count || zip(a1, a2).contains(where: { !$0.equals($1) }) {
        fuzzFail("aliases changed in the round trip", input)
    }
    for (x, y) in zip(r.all, r2.all) {
        if !x.name.equals(y.name) || x.succeeded != y.succeeded || x.errorMessage != y.errorMessage
            || (x.data == nil) != (y.data == nil)
        {
            fuzzFail("result \(x.name) changed in the round trip", input)
        }
        if let d1 = x.data, let d2 = y.data, json_equal(d1.raw, d2.raw) == 0 {
            fuzzFail("result \(x.name)'s data changed in the round trip", input)
        }
    }
}
