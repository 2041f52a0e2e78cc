// SPDX-License-Identifier: Apache-2.0

import ArgumentParser
import ThingIFRules

// The shell completion of `thingif command send THING_ID <TAB>`: the
// actions of the thing's trait aliases, `ALIAS/ACTION`, from the hub (the
// CLI's saved hub, app and token, or the line's --hub, --app-id, --token),
// through ArgumentParser's custom completion (`thingif ---completion …`,
// which the generated scripts call). Nothing when the hub cannot be asked
// within a few seconds or the thing has no entry.

enum ActionCompletion {
    /// Options of `command send` that take a value.
    static let valued: Set<String> = [
        "--hub", "--app-id", "--token", "--user-id", "--raw", "--schema", "--schema-version", "--title",
        "--description", "--metadata", "--wait", "--installation-id", "--expires-in"
    ]
    static let global: Set<String> = ["--hub", "--app-id", "--token", "--user-id"]
    /// Candidates at most (a registry's entry is bounded; this bounds the shell's list too).
    static let maxCandidates = 500

    /// ArgumentParser's custom completion: the shell's words, the index of
    /// the one being completed, and its text before the cursor.
    @Sendable static func complete(_ words: [String], _ index: Int, _ prefix: String) -> [String] {
        guard !prefix.contains("="), let (thingID, options) = scan(words, completing: index) else { return [] }
        do {
            let ctx = try Context(try GlobalOptions.parse(options))
            guard ctx.token != nil else { return [] }
            let client = try HubClient(hub: ctx.hub, appID: ctx.appID, token: ctx.token, timeout: 3)
            guard let entry = try TraitActions.entry(client, thingID: thingID) else { return [] }
            return candidates(entry, prefix: prefix)
        } catch {
            return []
        }
    }

    static func candidates(_ entry: TraitEntry, prefix: String) -> [String] {
        let all = entry.aliases.flatMap { a in a.definition.actions.map { a.alias + "/" + $0.name } }
        return Array(all.filter { $0.hasPrefix(prefix) }.prefix(maxCandidates))
    }

    /// The thing's ID (the first word after `send` that is no option or an
    /// option's value) and the line's global options, leaving out the word
    /// being completed.
    static func scan(_ words: [String], completing index: Int) -> (String, [String])? {
        guard let send = words.firstIndex(of: "send") else { return nil }
        var thingID: String?
        var options: [String] = []
        var i = send + 1
        while i < words.count {
            let w = words[i]
            if i == index {
                i += 1
                continue
            }
            if w.hasPrefix("--") {
                let name = String(w.prefix { $0 != "=" })
                if w.contains("=") {
                    if global.contains(name) { options.append(w) }
                } else if valued.contains(name) {
                    if i + 1 < words.count, i + 1 != index, global.contains(name) { options += [w, words[i + 1]] }
                    i += 1
                }
            } else if thingID == nil {
                thingID = w
            }
            i += 1
        }
        return thingID.map { ($0, options) }
    }
}
