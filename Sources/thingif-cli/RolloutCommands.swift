// SPDX-License-Identifier: Apache-2.0

import ArgumentParser
import Foundation

// MARK: - update cancel, update rollout (docs/UPDATES.md §9, §11, §12)

extension UpdateGroup {
    struct Cancel: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Cancel a thing's update job before its install starts.",
            discussion: """
                The hub ends it CANCELLED (CANCELLED_BY_OPERATOR) and cancels its offer. From INSTALLING on the \
                hub answers 409 UPDATE_TOO_LATE (exit 1): the thing finishes what it started.
                """)

        @OptionGroup var global: GlobalOptions
        @OptionGroup var admin: AdminOption
        @Argument(help: "The thingID.") var thingID: String
        @Argument(help: "The jobID.") var jobID: String

        func run() throws {
            try guarded {
                let (client, ctx) = try UpdateGroup.admin(global, admin.adminToken)
                let job = try client.call(
                    "POST", UpdateGroup.jobsPath(client, thingID, jobID) + "/cancel", body: .object([]))
                print(ctx.json ? job.text : UpdateGroup.describe(job))
            }
        }
    }

    struct Rollout: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Roll an image out to many things at a rate, a few at a time; follow, pause, resume, cancel.",
            discussion: """
                `thingif update rollout create --image fw.img --manifest fw.json --thing-type AirConditioner \
                --firmware-version 1.0.0 --rate 10 --max-in-flight 5 --abort-percent 20`, then \
                `thingif update rollout show ROLLOUT_ID --wait completed --timeout 3600`.
                """,
            subcommands: [Create.self, List.self, Show.self, Things.self, Pause.self, Resume.self, Cancel.self])

        static func path(_ client: HubClient, _ id: String? = nil) -> String {
            client.app + "/rollouts" + (id.map { "/" + HubClient.pathComponent($0) } ?? "")
        }

        /// A rollout as rows: its settings, status and members by state.
        static func describe(_ r: JSONValue) -> String {
            var text = UpdateGroup.rows(
                r,
                [
                    "rolloutID", "version", "status", "reason", "members", "ratePerMinute", "maxInFlight", "timeoutS",
                    "retries", "image", "createdAt", "updatedAt"
                ])
            if let ramp = r["ramp"], ramp != .null {
                text += "\n" + "ramp".padding(toLength: 16, withPad: " ", startingAt: 0) + ramp.text
            }
            if case .object(let counts)? = r["counts"] {
                for (state, n) in counts {
                    text += "\n" + ("  " + state).padding(toLength: 16, withPad: " ", startingAt: 0) + n.text
                }
            }
            return text
        }

        /// The ramp's words `START,FACTOR,EVERY_S` as the hub's object.
        static func ramp(_ words: String) throws -> JSONValue {
            let parts = words.split(separator: ",", omittingEmptySubsequences: false).map {
                $0.trimmingCharacters(in: .whitespaces)
            }
            guard parts.count == 3, let start = Int(parts[0]), Double(parts[1]) != nil, let every = Int(parts[2]) else {
                throw ValidationError("--ramp: START,FACTOR,EVERY_S, e.g. 1,2,60 (1 a minute, doubled every 60 s)")
            }
            return .object([
                ("startPerMinute", .number(String(start))), ("factor", .number(parts[1])),
                ("everyS", .number(String(every)))
            ])
        }

        struct Create: ParsableCommand {
            static let configuration = CommandConfiguration(
                abstract: "Push the image and create a rollout of it; prints its rolloutID.",
                discussion: """
                    The target's criteria all hold (at least one): --thing-type, --firmware-version (repeatable), \
                    --thing (repeatable). The hub checks every value and names the field it refuses.
                    """)

            @OptionGroup var global: GlobalOptions
            @OptionGroup var admin: AdminOption
            @Option(help: ArgumentHelp("The image file (pushed first).", valueName: "file")) var image: String
            @Option(help: ArgumentHelp("The signed manifest file.", valueName: "file")) var manifest: String
            @Option(help: ArgumentHelp("The signatures file (default MANIFEST.sigs.json).", valueName: "file"))
            var signatures: String?
            @Option(
                name: .customLong("trial"),
                help: ArgumentHelp("Seconds the new image has to be confirmed (default 300).", valueName: "s"))
            var trialS: Int?
            @Option(name: .customLong("thing-type"), help: ArgumentHelp("Things of this type.", valueName: "type"))
            var thingType: String?
            @Option(
                name: .customLong("firmware-version"),
                help: ArgumentHelp("Things running this version (repeatable).", valueName: "version"))
            var firmwareVersions: [String] = []
            @Option(name: .customLong("thing"), help: ArgumentHelp("This thing (repeatable).", valueName: "thingID"))
            var things: [String] = []
            @Option(help: ArgumentHelp("At most this many released a minute.", valueName: "n")) var rate: Int
            @Option(
                name: .customLong("max-in-flight"),
                help: ArgumentHelp("At most this many offered and not final at once.", valueName: "n"))
            var maxInFlight: Int
            @Option(
                help: ArgumentHelp(
                    "An exponential ramp: START a minute, times FACTOR every EVERY_S seconds.",
                    valueName: "START,FACTOR,EVERY_S"))
            var ramp: String?
            @Option(
                help: ArgumentHelp("Seconds a member's job may take before its install starts.", valueName: "s"))
            var timeout: Int?
            @Option(help: ArgumentHelp("New attempts of a member whose job FAILED (0-3).", valueName: "n"))
            var retries: Int?
            @Option(
                name: .customLong("abort-percent"),
                help: ArgumentHelp("Abort when this share of the executed failed.", valueName: "percent"))
            var abortPercent: Int?
            @Option(
                name: .customLong("abort-min-executed"),
                help: ArgumentHelp("…once at least this many are final (default 1).", valueName: "n"))
            var abortMinExecuted: Int?
            @Option(
                name: .customLong("abort-status"),
                help: ArgumentHelp("A final status that counts as a failure (repeatable).", valueName: "status"))
            var abortStatuses: [String] = []

            func validate() throws {
                guard thingType != nil || !firmwareVersions.isEmpty || !things.isEmpty else {
                    throw ValidationError("name the target: --thing-type, --firmware-version or --thing")
                }
                if (abortMinExecuted != nil || !abortStatuses.isEmpty) && abortPercent == nil {
                    throw ValidationError("--abort-min-executed and --abort-status need --abort-percent")
                }
                if let ramp { _ = try Rollout.ramp(ramp) }
            }

            func run() throws {
                try guarded {
                    let (client, ctx) = try UpdateGroup.admin(global, admin.adminToken)
                    func n(_ v: Int) -> JSONValue { .number(String(v)) }
                    var target: [(String, JSONValue)] = []
                    if let thingType { target.append(("thingType", .string(thingType))) }
                    if !firmwareVersions.isEmpty {
                        target.append(("firmwareVersions", .array(firmwareVersions.map { .string($0) })))
                    }
                    if !things.isEmpty { target.append(("things", .array(things.map { .string($0) }))) }
                    var body = try UpdateGroup.offer(
                        client, image: image, manifest: manifest, signatures: signatures, trialS: trialS)
                    body += [("target", .object(target)), ("ratePerMinute", n(rate)), ("maxInFlight", n(maxInFlight))]
                    if let ramp { body.append(("ramp", try Rollout.ramp(ramp))) }
                    if let timeout { body.append(("timeoutS", n(timeout))) }
                    if let retries { body.append(("retries", n(retries))) }
                    if let abortPercent {
                        var abort: [(String, JSONValue)] = [("failurePercent", n(abortPercent))]
                        if let abortMinExecuted { abort.append(("minExecuted", n(abortMinExecuted))) }
                        if !abortStatuses.isEmpty {
                            abort.append(("statuses", .array(abortStatuses.map { .string($0) })))
                        }
                        body.append(("abort", .object(abort)))
                    }
                    let r = try client.call("POST", Rollout.path(client), body: .object(body))
                    if ctx.json { print(r.text) } else { print(r["rolloutID"]?.stringValue ?? r.text) }
                }
            }
        }

        struct List: ParsableCommand {
            static let configuration = CommandConfiguration(abstract: "Every rollout, newest first.")

            @OptionGroup var global: GlobalOptions
            @OptionGroup var admin: AdminOption

            func run() throws {
                try guarded {
                    let (client, ctx) = try UpdateGroup.admin(global, admin.adminToken)
                    let answer = try client.call("GET", Rollout.path(client))
                    if ctx.json {
                        print(answer.text)
                        return
                    }
                    for r in answer["rollouts"]?.arrayValue ?? [] {
                        print(
                            [
                                r["rolloutID"]?.stringValue ?? "?", r["version"]?.stringValue ?? "?",
                                r["status"]?.stringValue ?? "?", (r["members"]?.text ?? "?") + " things"
                            ].joined(separator: "  "))
                    }
                }
            }
        }

        struct Show: ParsableCommand {
            static let configuration = CommandConfiguration(
                abstract: "A rollout: its settings, status and members by state.",
                discussion: """
                    --wait STATUS polls until the rollout has it (or ends otherwise: exit 1), at most --timeout seconds.
                    """)

            @OptionGroup var global: GlobalOptions
            @OptionGroup var admin: AdminOption
            @Argument(help: "The rolloutID.") var rolloutID: String
            @Option(help: ArgumentHelp("A status to wait for (e.g. completed).", valueName: "status")) var wait: String?
            @Option(help: ArgumentHelp("Seconds to wait at most (default 60).", valueName: "s")) var timeout: Double =
                60

            func run() throws {
                try guarded {
                    let (client, ctx) = try UpdateGroup.admin(global, admin.adminToken)
                    let r = try UpdateGroup.waiting(
                        for: wait, finals: ["completed", "aborted", "cancelled"], timeout: timeout
                    ) { try client.call("GET", Rollout.path(client, rolloutID)) }
                    print(ctx.json ? r.text : Rollout.describe(r))
                    if let wait, r["status"]?.stringValue != wait { throw ExitCode.failure }
                }
            }
        }

        struct Things: ParsableCommand {
            static let configuration = CommandConfiguration(
                abstract: "A rollout's members: thingID, state, attempts and job.")

            @OptionGroup var global: GlobalOptions
            @OptionGroup var admin: AdminOption
            @Argument(help: "The rolloutID.") var rolloutID: String

            func run() throws {
                try guarded {
                    let (client, ctx) = try UpdateGroup.admin(global, admin.adminToken)
                    let answer = try client.call("GET", Rollout.path(client, rolloutID) + "/things")
                    if ctx.json {
                        print(answer.text)
                        return
                    }
                    for m in answer["things"]?.arrayValue ?? [] {
                        print(
                            [
                                m["thingID"]?.stringValue ?? "?", m["state"]?.stringValue ?? "?",
                                m["attempts"]?.text ?? "0", m["jobID"]?.stringValue ?? "-"
                            ].joined(separator: "  "))
                    }
                }
            }
        }

        /// pause, resume, cancel: one POST each.
        struct Change: ParsableArguments {
            @OptionGroup var global: GlobalOptions
            @OptionGroup var admin: AdminOption
            @Argument(help: "The rolloutID.") var rolloutID: String

            func run(_ what: String) throws {
                try guarded {
                    let (client, ctx) = try UpdateGroup.admin(global, admin.adminToken)
                    let r = try client.call("POST", Rollout.path(client, rolloutID) + "/" + what, body: .object([]))
                    print(ctx.json ? r.text : Rollout.describe(r))
                }
            }
        }

        struct Pause: ParsableCommand {
            static let configuration = CommandConfiguration(
                abstract: "Pause a running rollout: nothing more is released; offered jobs go on.")
            @OptionGroup var change: Change
            func run() throws { try change.run("pause") }
        }

        struct Resume: ParsableCommand {
            static let configuration = CommandConfiguration(abstract: "Resume a paused rollout.")
            @OptionGroup var change: Change
            func run() throws { try change.run("resume") }
        }

        struct Cancel: ParsableCommand {
            static let configuration = CommandConfiguration(
                abstract: "Cancel a rollout: nothing more is released; jobs not installing yet are ended.")
            @OptionGroup var change: Change
            func run() throws { try change.run("cancel") }
        }
    }
}
