// SPDX-License-Identifier: Apache-2.0

// A trait version's definition (Kii's TraitCreationRequest), as the hub
// checks it before it stores a version and the CLI before it sends one
// (ThingIFRules' TraitDefinition.parse), and an entry's checks of a command's
// action and a state upload against it (TraitEntry).
//
// Properties, beyond "no crash":
//  1. A refusal has a message, and a field when it names one that is not empty.
//  2. An accepted definition is within TraitLimits: at most maxMembers actions
//     and states, at least one of them, names unique and 1 to maxName bytes.
//  3. Every enum value of an accepted schema passes its own schema.
//  4. The input itself, as a value, is checked against every accepted schema,
//     and as a state upload and an action against the entry, without a crash;
//     a refusal names a field.
//  5. jansson's memory returns to its baseline after each input.
//  6. The input as the hub's answer for a thing's entry (TraitEntry.parse(answer:),
//     the CLI's reading of GET …/traits): a refusal has a message; and the input
//     as the one alias's definition in such an answer is taken exactly when
//     TraitDefinition.parse takes it.
import CThingIF
@testable import ThingIF

func fuzzCheck(_ input: [UInt8]) {
    answers(input)
    let def: TraitDefinition
    switch TraitDefinition.parse(input) {
    case .failure(let e):
        if e.message.isEmpty || e.field == "" { fuzzFail("a refusal without a message or with an empty field", input) }
        return
    case .success(let d): def = d
    }
    let members = def.actions + def.states
    if def.actions.count > TraitLimits.maxMembers || def.states.count > TraitLimits.maxMembers || members.isEmpty {
        fuzzFail("an accepted definition outside the limits", input)
    }
    for list in [def.actions, def.states] {
        if Set(list.map(\.name)).count != list.count { fuzzFail("a name defined twice", input) }
    }
    guard case .success(let value) = JSON.parse(input) else { fuzzFail("accepted input that is no JSON", input) }
    for m in members {
        if !TraitNames.isMemberName(m.name) { fuzzFail("an accepted name that is not one", input) }
        enumsPass(m.schema, input)
        _ = m.schema.check(value, at: m.name)
    }
    let entry = TraitEntry(
        thingType: "t", firmwareVersion: "v",
        aliases: [TraitAliasDefinition(alias: "A", trait: "T", version: 1, definition: def)])
    for m in def.actions {
        if let e = entry.checkAction(alias: "A", name: m.name, params: value), e.field?.isEmpty != false {
            fuzzFail("an action refused without a field", input)
        }
    }
    let upload = JSON.object()
    upload.set("A", value)
    if let e = entry.checkState(upload), e.field?.isEmpty != false {
        fuzzFail("a state refused without a field", input)
    }
}

private func enumsPass(_ s: PayloadSchema, _ input: [UInt8]) {
    for v in s.enumValues where s.check(v, at: "v") != nil { fuzzFail("an enum value its own schema refuses", input) }
    for p in s.properties { enumsPass(p.schema, input) }
    for i in s.items { enumsPass(i, input) }
}

private func answers(_ input: [UInt8]) {
    guard input.count <= TraitLimits.maxBytes, case .success(let value) = JSON.parse(input) else { return }
    if case .failure(let e) = TraitEntry.parse(answer: value), e.message.isEmpty {
        fuzzFail("an answer refused without a message", input)
    }
    let alias = JSON.object()
    alias.set("alias", string: "A")
    alias.set("trait", string: "T")
    alias.set("traitVersion", .int(1))
    alias.set("definition", value)
    let list = JSON.array()
    list.append(alias)
    let answer = JSON.object()
    answer.set("registered", .bool(true))
    answer.set("thingType", string: "t")
    answer.set("firmwareVersion", string: "v")
    answer.set("aliases", list)
    let taken: Bool
    if case .success(.some) = TraitEntry.parse(answer: answer) { taken = true } else { taken = false }
    if case .success = TraitDefinition.parse(value), !taken { fuzzFail("a definition the answer refuses", input) }
    if case .failure = TraitDefinition.parse(value), taken { fuzzFail("an answer taking a refused definition", input) }
}
