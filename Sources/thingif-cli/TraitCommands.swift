// SPDX-License-Identifier: Apache-2.0

import ArgumentParser
import Foundation
import ThingIF
import ThingIFRules

// MARK: - trait (Kii's trait registry, docs/decisions/kii-trait-registry.md)

struct TraitGroup: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "trait",
        abstract: "The trait registry: trait versions, thing types, firmware versions and aliases.",
        discussion: """
            A thing type's capabilities: `thingif trait define AirConditioner ac.json` (a trait version, Kii's \
            TraitCreationRequest; checked here by the hub's own parser before anything is sent), \
            `thingif trait firmware MyAirConditioner v1` (the thing type and one firmware version), then \
            `thingif trait alias MyAirConditioner v1 AirConditionerAlias AirConditioner 1`. Things of that type and \
            firmware version then get only commands and states the trait defines. define, firmware and alias need \
            the hub's adminToken (--admin-token or THINGIF_ADMIN_TOKEN); list, show and aliases take it or the \
            saved user's token. A published version never changes: define it again with --version N to check \
            that the hub has this very definition (200), a different one is refused (409).
            """,
        subcommands: [Define.self, List.self, Show.self, Firmware.self, Alias.self, Aliases.self])

    /// The adminToken when given (option or environment), else the user's token.
    static func reader(_ global: GlobalOptions, _ token: String?) throws -> (HubClient, Context) {
        if token != nil || ProcessInfo.processInfo.environment["THINGIF_ADMIN_TOKEN"]?.isEmpty == false {
            return try UpdateGroup.admin(global, token)
        }
        let ctx = try Context(global)
        return (try ctx.client(), ctx)
    }

    static func name(_ s: String, _ what: String) throws -> String {
        guard TraitNames.isPathName(s) else {
            throw ValidationError("\(what) must be 1 to \(TraitLimits.maxName) letters, digits, '-', '_' or '.': \(s)")
        }
        return HubClient.pathComponent(s)
    }

    /// A thing type and firmware version: a registry entry's two names.
    struct EntryArguments: ParsableArguments {
        @Argument(help: "The thing type.") var thingType: String
        @Argument(help: "The firmware version.") var firmwareVersion: String

        /// Both as path components, or a usage error naming the one at fault.
        func paths() throws -> (thingType: String, firmwareVersion: String) {
            (
                try TraitGroup.name(thingType, "the thing type"),
                try TraitGroup.name(firmwareVersion, "the firmware version")
            )
        }
    }

    /// One row of a list: the name in a column of 32, then the rest.
    static func row(_ name: String?, _ rest: String) {
        print((name ?? "").padding(toLength: 32, withPad: " ", startingAt: 0) + rest)
    }

    struct Define: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Publish a trait version from a JSON file (- for stdin); prints its number.")

        @OptionGroup var global: GlobalOptions
        @OptionGroup var admin: UpdateGroup.AdminOption
        @Argument(help: "The trait's name.") var trait: String
        @Argument(help: "The definition: {\"dataGroupingInterval\"?,\"actions\":[…],\"states\":[…]}.") var file: String
        @Option(help: ArgumentHelp("Publish as this version (default: the next).", valueName: "n")) var version: Int?

        func run() throws {
            let path = try TraitGroup.name(trait, "the trait")
            let data: Data
            if file == "-" {
                data = FileHandle.standardInput.readDataToEndOfFile()
            } else {
                data = try UpdateGroup.read(file)
            }
            // The hub's own rule, before a request is made.
            if case .failure(let e) = TraitDefinition.parse(Array(data)) {
                throw ValidationError("\(file): \(e.message)")
            }
            if let version, !(1...TraitLimits.maxVersion).contains(version) {
                throw ValidationError("--version must be from 1 to \(TraitLimits.maxVersion)")
            }
            try guarded {
                let (client, ctx) = try UpdateGroup.admin(global, admin.adminToken)
                let base = client.thingIF + "/traits/" + path + "/versions"
                let answer = try client.call(
                    version == nil ? "POST" : "PUT", version.map { base + "/\($0)" } ?? base,
                    contentType: "application/vnd.kii.TraitCreationRequest+json", data: data)
                if ctx.json {
                    print(answer.text)
                } else {
                    print("\(trait) version \(answer["traitVersion"]?.text ?? "?")")
                }
            }
        }
    }

    struct List: ParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Every trait and its latest version.")

        @OptionGroup var global: GlobalOptions
        @OptionGroup var admin: UpdateGroup.AdminOption

        func run() throws {
            try guarded {
                let (client, ctx) = try TraitGroup.reader(global, admin.adminToken)
                let answer = try client.call("GET", client.thingIF + "/traits")
                if ctx.json { return print(answer.text) }
                for t in answer["traits"]?.arrayValue ?? [] {
                    TraitGroup.row(t["trait"]?.stringValue, t["latestVersion"]?.text ?? "")
                }
            }
        }
    }

    struct Show: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "A trait's versions, or one version's definition.")

        @OptionGroup var global: GlobalOptions
        @OptionGroup var admin: UpdateGroup.AdminOption
        @Argument(help: "The trait's name.") var trait: String
        @Argument(help: "The version (default: list the versions).") var version: Int?

        func run() throws {
            let path = try TraitGroup.name(trait, "the trait")
            try guarded {
                let (client, ctx) = try TraitGroup.reader(global, admin.adminToken)
                let base = client.thingIF + "/traits/" + path + "/versions"
                let answer = try client.call("GET", version.map { base + "/\($0)" } ?? base)
                if ctx.json || version != nil { return print(answer.text) }
                for v in answer["versions"]?.arrayValue ?? [] { print(v["traitVersion"]?.text ?? "") }
            }
        }
    }

    struct Firmware: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Register a thing type and one of its firmware versions (each may be there already).")

        @OptionGroup var global: GlobalOptions
        @OptionGroup var admin: UpdateGroup.AdminOption
        @OptionGroup var entry: EntryArguments

        func run() throws {
            let (tt, fw) = try entry.paths()
            try guarded {
                let (client, _) = try UpdateGroup.admin(global, admin.adminToken)
                let types = client.app + "/configuration/thing-types/" + tt
                _ = try client.call(
                    "PUT", types, body: .object([]),
                    contentType: "application/vnd.kii.ThingTypeConfigurationRequest+json")
                _ = try client.call("PUT", types + "/firmware-versions/" + fw, contentType: "text/plain", data: Data())
                print("\(entry.thingType) \(entry.firmwareVersion) registered")
            }
        }
    }

    struct Alias: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Bind an alias of a thing type and firmware version to a trait version.")

        @OptionGroup var global: GlobalOptions
        @OptionGroup var admin: UpdateGroup.AdminOption
        @OptionGroup var entry: EntryArguments
        @Argument(help: "The alias.") var alias: String
        @Argument(help: "The trait.") var trait: String
        @Argument(help: "The trait's version.") var traitVersion: Int

        func run() throws {
            let (tt, fw) = try entry.paths()
            let a = try TraitGroup.name(alias, "the alias")
            _ = try TraitGroup.name(trait, "the trait")
            guard (1...TraitLimits.maxVersion).contains(traitVersion) else {
                throw ValidationError("the trait version must be from 1 to \(TraitLimits.maxVersion)")
            }
            try guarded {
                let (client, _) = try UpdateGroup.admin(global, admin.adminToken)
                _ = try client.call(
                    "PUT",
                    client.thingIF + "/configuration/thing-types/\(tt)/firmware-versions/\(fw)/aliases/\(a)",
                    body: .object([("trait", .string(trait)), ("traitVersion", .number(String(traitVersion)))]),
                    contentType: "application/vnd.kii.TraitAliasCreationRequest+json")
                print("\(alias) of \(entry.thingType) \(entry.firmwareVersion): \(trait) version \(traitVersion)")
            }
        }
    }

    struct Aliases: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "The aliases of a thing type and firmware version.")

        @OptionGroup var global: GlobalOptions
        @OptionGroup var admin: UpdateGroup.AdminOption
        @OptionGroup var entry: EntryArguments

        func run() throws {
            let (tt, fw) = try entry.paths()
            try guarded {
                let (client, ctx) = try TraitGroup.reader(global, admin.adminToken)
                let answer = try client.call(
                    "GET", client.thingIF + "/configuration/thing-types/\(tt)/firmware-versions/\(fw)/aliases")
                if ctx.json { return print(answer.text) }
                for a in answer["aliases"]?.arrayValue ?? [] {
                    TraitGroup.row(
                        a["alias"]?.stringValue, "\(a["trait"]?.stringValue ?? "") \(a["traitVersion"]?.text ?? "")")
                }
            }
        }
    }
}
