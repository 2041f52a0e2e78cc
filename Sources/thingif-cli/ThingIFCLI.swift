// SPDX-License-Identifier: Apache-2.0

import ArgumentParser
import Foundation
import ThingIF
#if canImport(Glibc)
    import Glibc
#endif

// thingif: the app side of a Thing Interaction Framework at a terminal. It
// calls thingif-hub's REST API (docs/openapi.yaml): users, onboarding,
// commands, state, result notifications over Server-Sent Events, a thing's
// action sets and timer triggers, the hub's server triggers, and a
// gateway's end nodes.

@main
struct ThingIFCLI: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "thingif",
        abstract: "The app side of thingif-hub: users, onboarding, commands, state, results as they arrive.",
        discussion: """
            Start with `thingif user create` (saves the user's token), onboard a thing with \
            `thingif onboard VENDOR_THING_ID PASSWORD`, then `thingif command send THING_ID turnPower power=true --wait 10`. \
            A gateway (`thingif onboard … --layout gateway`) carries end nodes: `thingif end-node …`.

            Environment: THINGIF_HUB_URL, THINGIF_APP_ID, THINGIF_TOKEN, THINGIF_USER_ID, \
            THINGIF_CONFIG (the saved credentials, default ~/.config/thingif/cli.json).
            Exit status: 0 on success, 1 when the hub refused or could not be reached, 2 on a usage error.
            """,
        subcommands: [
            UserGroup.self, Onboard.self, ThingGroup.self, CommandGroup.self, StateGroup.self, Watch.self,
            ActionSetGroup.self, TimerGroup.self, TriggerGroup.self, ThingsGroup.self, EndNodeGroup.self,
            UpdateGroup.self, TraitGroup.self
        ]
    )

    /// Like ArgumentParser's main, but usage errors exit with status 2.
    static func main() {
        setvbuf(stdout, nil, _IOLBF, 0)
        do {
            var command = try parseAsRoot()
            try command.run()
        } catch {
            if exitCode(for: error) == .validationFailure {
                FileHandle.standardError.write(Data((fullMessage(for: error) + "\n").utf8))
                Foundation.exit(2)
            }
            exit(withError: error)
        }
    }
}

// MARK: - options every command takes

struct GlobalOptions: ParsableArguments {
    @Option(
        help: ArgumentHelp(
            "The hub's URL (env THINGIF_HUB_URL; else the saved one; default http://127.0.0.1:8080).",
            valueName: "url"))
    var hub: String?

    @Option(
        name: .customLong("app-id"),
        help: ArgumentHelp("The application ID (env THINGIF_APP_ID; default demoApp).", valueName: "id"))
    var appID: String?

    @Option(help: ArgumentHelp("A user's access token (env THINGIF_TOKEN; else the saved one).", valueName: "token"))
    var token: String?

    @Option(
        name: .customLong("user-id"),
        help: ArgumentHelp("The user the token belongs to (env THINGIF_USER_ID; else the saved one).", valueName: "id"))
    var userID: String?

    @Flag(help: "Print the hub's JSON instead of tables.")
    var json = false
}

/// The options resolved against the environment and the saved credentials.
struct Context {
    var hub: String
    var appID: String
    var token: String?
    var userID: String?
    var json: Bool
    var configPath: String
    var saved: SavedConfig?
    /// True when the token in use is the saved one (so the saved user and
    /// installation belong to it).
    var usesSavedUser: Bool

    static let defaultHub = "http://127.0.0.1:8080"
    static let defaultAppID = "demoApp"

    init(_ o: GlobalOptions, environment env: [String: String] = ProcessInfo.processInfo.environment) throws {
        func nonEmpty(_ s: String?) -> String? { s.flatMap { $0.isEmpty ? nil : $0 } }
        configPath = SavedConfig.path(environment: env)
        saved = try SavedConfig.load(from: configPath)
        hub = nonEmpty(o.hub) ?? nonEmpty(env["THINGIF_HUB_URL"]) ?? saved?.hub ?? Context.defaultHub
        appID = nonEmpty(o.appID) ?? nonEmpty(env["THINGIF_APP_ID"]) ?? saved?.appID ?? Context.defaultAppID
        json = o.json
        let resolvedHub = hub, resolvedApp = appID
        let savedMatches = saved.map { Context.sameHub($0.hub, resolvedHub) && $0.appID == resolvedApp } ?? false
        if let t = nonEmpty(o.token) ?? nonEmpty(env["THINGIF_TOKEN"]) {
            token = t
            usesSavedUser = savedMatches && saved?.token == t
        } else {
            token = savedMatches ? saved?.token : nil
            usesSavedUser = savedMatches
        }
        userID = nonEmpty(o.userID) ?? nonEmpty(env["THINGIF_USER_ID"]) ?? (usesSavedUser ? saved?.userID : nil)
    }

    static func sameHub(_ a: String, _ b: String) -> Bool {
        func norm(_ s: String) -> String { s.hasSuffix("/") ? String(s.dropLast()) : s }
        return norm(a) == norm(b)
    }

    func client() throws -> HubClient { try HubClient(hub: hub, appID: appID, token: token) }

    /// A client with a user's token; a clear error without one.
    func userClient() throws -> HubClient {
        guard token != nil else {
            throw HubClientError(
                description: "no user token for \(hub) (app \(appID)): run `thingif user create` or pass --token")
        }
        return try client()
    }

    func requireUserID() throws -> String {
        guard let userID else {
            throw HubClientError(
                description:
                    "the user ID is not known: run `thingif user create`/`user login`, or pass --user-id with --token")
        }
        return userID
    }

    func save(userID: String, token: String, loginName: String?) throws {
        let config = SavedConfig(hub: hub, appID: appID, userID: userID, token: token, loginName: loginName)
        try config.save(to: configPath)
    }
}

extension GlobalOptions {
    /// The body of most commands: the context of these options and a client
    /// with the saved user's token, errors reported as `guarded` does.
    func asUser(_ body: (Context, HubClient) throws -> Void) throws {
        try guarded {
            let ctx = try Context(self)
            try body(ctx, try ctx.userClient())
        }
    }
}

/// Runs a command body, turning the hub's refusals and connection problems
/// into a message on stderr and exit status 1, and bad command words into a
/// usage error (status 2).
func guarded(_ body: () throws -> Void) throws {
    do {
        try body()
    } catch let e as HubHTTPError {
        FileHandle.standardError.write(Data("thingif: the hub refused: \(e)\n".utf8))
        throw ExitCode.failure
    } catch let e as HubClientError {
        FileHandle.standardError.write(Data("thingif: \(e)\n".utf8))
        throw ExitCode.failure
    } catch let e as SavedConfig.Error {
        FileHandle.standardError.write(Data("thingif: \(e)\n".utf8))
        throw ExitCode.failure
    } catch let e as ActionParseError {
        throw ValidationError(e.message)
    }
}

func printErr(_ s: String) { FileHandle.standardError.write(Data((s + "\n").utf8)) }

// MARK: - user

struct UserGroup: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "user", abstract: "Create a user or log in; the token is saved for the next commands.",
        subcommands: [Create.self, Login.self])

    struct Create: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Create a user: a pseudo user, or a normal one with --login and --password.")

        @OptionGroup var global: GlobalOptions
        @Option(help: ArgumentHelp("A login name (a normal user).", valueName: "name")) var login: String?
        @Option(help: ArgumentHelp("Its password.", valueName: "password")) var password: String?

        func validate() throws {
            if (login == nil) != (password == nil) { throw ValidationError("--login and --password go together") }
        }

        func run() throws {
            try guarded {
                let ctx = try Context(global)
                var body: [(String, JSONValue)] = []
                if let login, let password { body = [("loginName", .string(login)), ("password", .string(password))] }
                let answer = try ctx.client().call(
                    "POST", try ctx.client().app + "/users", body: .object(body), authorized: false)
                guard let userID = answer["userID"]?.stringValue, let token = answer["accessToken"]?.stringValue else {
                    throw HubClientError(description: "the hub's answer lacks userID or accessToken: \(answer.text)")
                }
                try ctx.save(userID: userID, token: token, loginName: answer["loginName"]?.stringValue ?? login)
                if ctx.json { print(answer.pretty); return }
                var rows = [["userID", userID], ["accessToken", token]]
                if let name = answer["loginName"]?.stringValue ?? login { rows.append(["loginName", name]) }
                print(Format.table(rows))
                print("saved to \(ctx.configPath)")
            }
        }
    }

    struct Login: ParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Log a normal user in and save its token.")

        @OptionGroup var global: GlobalOptions
        @Argument(help: "The login name.") var name: String
        @Argument(help: "The password.") var password: String

        func run() throws {
            try guarded {
                let ctx = try Context(global)
                let client = try ctx.client()
                let answer = try client.call(
                    "POST", client.app + "/oauth2/token",
                    body: .object([("username", .string(name)), ("password", .string(password))]),
                    authorized: false)
                guard let userID = answer["id"]?.stringValue, let token = answer["access_token"]?.stringValue else {
                    throw HubClientError(description: "the hub's answer lacks id or access_token: \(answer.text)")
                }
                try ctx.save(userID: userID, token: token, loginName: name)
                if ctx.json { print(answer.pretty); return }
                print(Format.table([["userID", userID], ["accessToken", token], ["loginName", name]]))
                print("saved to \(ctx.configPath)")
            }
        }
    }
}

// MARK: - onboard

struct Onboard: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Onboard a thing for the user: prints the thing's ID and access token to hand to the device.")

    @OptionGroup var global: GlobalOptions
    @Argument(help: "The thing's vendor thing ID (e.g. AC-0001).") var vendorThingID: String
    @Argument(help: "The thing's password.") var password: String
    @Option(
        name: .customLong("thing-type"), help: ArgumentHelp("Its thing type (e.g. AirConditioner).", valueName: "type"))
    var thingType: String?
    @Option(name: .customLong("firmware-version"), help: ArgumentHelp("Its firmware version.", valueName: "version"))
    var firmwareVersion: String?
    @Option(
        help: ArgumentHelp(
            "The state history's grouping interval: 1_MINUTE, 15_MINUTES, 30_MINUTES, 1_HOUR or 12_HOURS.",
            valueName: "interval"))
    var interval: String?
    @Option(
        help: ArgumentHelp(
            "The owner as a typed ID (default user:{your userID}; a group: group:{groupID}).",
            valueName: "typed-id"))
    var owner: String?
    @Option(
        help: ArgumentHelp(
            "What the thing is: standalone (the hub's default) or gateway (it carries end nodes: `thingif end-node`).",
            valueName: "layout"))
    var layout: String?

    static let intervals = ["1_MINUTE", "15_MINUTES", "30_MINUTES", "1_HOUR", "12_HOURS"]

    /// --layout as the core reads Kii's layoutPosition; an end node is
    /// onboarded onto its gateway (`thingif end-node onboard`), not here.
    func layoutPosition() throws -> LayoutPosition? {
        guard let layout else { return nil }
        guard let named = LayoutPosition(parsing: layout), named != .endNode else {
            throw ValidationError(
                "--layout must be standalone or gateway (an end node is onboarded with `thingif end-node onboard`)")
        }
        return named
    }

    func validate() throws {
        if let interval, !Onboard.intervals.contains(interval) {
            throw ValidationError("--interval must be one of \(Onboard.intervals.joined(separator: ", "))")
        }
        _ = try layoutPosition()
    }

    func run() throws {
        try global.asUser { ctx, client in
            var body: [(String, JSONValue)] = [
                ("vendorThingID", .string(vendorThingID)),
                ("thingPassword", .string(password)),
                ("owner", .string(try owner ?? "user:" + ctx.requireUserID()))
            ]
            if let thingType { body.append(("thingType", .string(thingType))) }
            if let firmwareVersion { body.append(("firmwareVersion", .string(firmwareVersion))) }
            if let interval { body.append(("dataGroupingInterval", .string(interval))) }
            if let layout = try layoutPosition() { body.append((LayoutPosition.field, .string(layout.rawValue))) }
            let answer = try client.call(
                "POST", client.thingIF + "/onboardings", body: .object(body),
                contentType: "application/vnd.kii.OnboardingWithVendorThingIDByOwner+json")
            if ctx.json { print(answer.pretty); return }
            let thingID = answer["thingID"]?.stringValue ?? "-"
            let token = answer["accessToken"]?.stringValue ?? "-"
            print(Format.table([["thingID", thingID], ["accessToken", token]]))
            print("hand both to the device, e.g. aircon --thing-id \(thingID) --token \(token)")
        }
    }
}

// MARK: - thing

struct ThingGroup: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "thing", abstract: "Things the user owns.", subcommands: [Delete.self])

    struct Delete: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract:
                "Delete a thing with its commands, state, triggers and automation; its token and broker login stop working.",
            discussion: """
                The hub also clears the thing's retained messages on the broker, and Home Assistant \
                removes its entity. The device must be onboarded again to come back (as a new thing).
                """)

        @OptionGroup var global: GlobalOptions
        @Argument(help: "The thing's ID.") var thingID: String

        func run() throws {
            try global.asUser { ctx, client in
                try client.call("DELETE", client.app + "/targets/thing:" + HubClient.pathComponent(thingID))
                if ctx.json { print("{}") } else { print("thing \(thingID) deleted") }
            }
        }
    }
}

// MARK: - command

struct CommandGroup: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "command", abstract: "Send commands to a thing and read them back with their results.",
        subcommands: [Send.self, Get.self, List.self, Cancel.self])

    /// States a command does not leave (EXPIRED and CANCELLED only by late results).
    static let finished: Set<String> = ["DONE", "INCOMPLETE", "EXPIRED", "CANCELLED"]
    /// Finished with results.
    static let answered: Set<String> = ["DONE", "INCOMPLETE"]

    struct Send: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Send a command: ACTION [key=value …] [ACTION [key=value …]] …, or --raw JSON.",
            discussion: """
                A word without '=' starts an action; key=value words are its parameters. A value that is \
                valid JSON (true, 25, "x", {"a":1}) is sent as that JSON, anything else as a string; an \
                action without parameters gets {}. For example: \
                thingif command send th.1234 turnPower power=true setFanSpeed fanSpeed=5 --wait 30

                With --wait the command's results are printed once it is DONE or INCOMPLETE (exit status 0 \
                either way; 1 when none came within the time, or the command ended EXPIRED or CANCELLED).

                With --expires-in (90, 90s, 10m, 2h, 1d) the hub never delivers the command after that \
                span, counted by the hub's clock; it ends EXPIRED if no results came by then.

                A trait command (Thing-IF's actions by alias) names each action ALIAS/ACTION: \
                ALIAS/ACTION=VALUE gives its value, key=value words after ALIAS/ACTION an object: \
                thingif command send th.1234 AirConditionerAlias/turnPower=true \
                AirConditionerAlias/setPresetTemperature=25. Where the thing's type and firmware version have \
                a trait registry entry, each action and its value are checked against it as the hub checks \
                them, before anything is sent (exit status 2, the alias, action and field named); the shell \
                completion (`thingif --generate-completion-script`) offers the entry's ALIAS/ACTION names.
                """)

        @OptionGroup var global: GlobalOptions
        @Argument(help: "The thing's ID.") var thingID: String
        @Argument(
            help: ArgumentHelp(
                "Actions and their parameters (a trait command: ALIAS/ACTION[=VALUE]).",
                valueName: "action-or-key=value"),
            completion: .custom { ActionCompletion.complete($0, $1, $2) })
        var words: [String] = []
        @Option(
            help: ArgumentHelp(
                #"The actions as a JSON array, e.g. '[{"turnPower":{"power":true}}]'."#, valueName: "json"))
        var raw: String?
        @Option(help: "The schema name.") var schema = "AirConditioner-Demo"
        @Option(name: .customLong("schema-version"), help: "The schema version.") var schemaVersion = 1
        @Option(help: "A title (up to 50 characters).") var title: String?
        @Option(name: .customLong("description"), help: "A description (up to 200 characters).") var commandDescription:
            String?
        @Option(help: ArgumentHelp("Metadata, a JSON object.", valueName: "json")) var metadata: String?
        @Option(
            help: ArgumentHelp("Wait up to this many seconds for the results and print them.", valueName: "seconds"))
        var wait: Double?
        @Option(
            name: .customLong("installation-id"),
            help: ArgumentHelp(
                "The issuing installation to notify (default: the one `thingif watch` saved).", valueName: "id"))
        var installationID: String?
        @Option(
            name: .customLong("expires-in"),
            help: ArgumentHelp(
                "The command expires this long after the hub stores it: 90, 90s, 10m, 2h or 1d (timeToLive).",
                valueName: "span"))
        var expiresIn: String?

        /// A schema command's actions, or a trait command's (ALIAS/ACTION words, or --raw grouped by alias).
        enum Parsed {
            case schema(JSONValue)
            case trait([TraitAction])
        }

        func actions() throws -> Parsed {
            switch (raw, words.isEmpty) {
            case (nil, true): throw ValidationError("give the actions (e.g. turnPower power=true) or --raw JSON")
            case (.some, false): throw ValidationError("give the actions either as words or with --raw, not both")
            case (.some(let raw), true):
                let v = try Actions.parse(raw: raw)
                return try TraitActions.parse(raw: v).map(Parsed.trait) ?? .schema(v)
            case (nil, false):
                return try TraitActions.parse(words: words).map(Parsed.trait)
                    ?? .schema(try Actions.parse(words: words))
            }
        }

        func metadataValue() throws -> JSONValue? {
            guard let metadata else { return nil }
            guard let v = try? JSONValue.parse(metadata), v.objectValue != nil else {
                throw ValidationError(#"--metadata must be a JSON object, e.g. '{"origin":"cli"}'"#)
            }
            return v
        }

        func validate() throws {
            do { _ = try actions() } catch let e as ActionParseError { throw ValidationError(e.message) }
            _ = try metadataValue()
            if let wait, !(wait > 0) { throw ValidationError("--wait needs a positive number of seconds") }
            if let expiresIn, TimeSpan.seconds(expiresIn) == nil {
                throw ValidationError(
                    "--expires-in must be a whole number with an optional unit s, m, h or d (e.g. 10m)")
            }
        }

        func run() throws {
            try global.asUser { ctx, client in
                let userID = try ctx.requireUserID()
                var body: [(String, JSONValue)]
                switch try actions() {
                case .schema(let actions):
                    body = [
                        ("schema", .string(schema)), ("schemaVersion", .number(String(schemaVersion))),
                        ("actions", actions)
                    ]
                case .trait(let actions):
                    // The hub's rule before the request, where the thing has a registry entry.
                    let entry = try TraitActions.entry(client, thingID: thingID)
                    body = [("actions", try TraitActions.command(actions, entry: entry))]
                }
                body.append(("issuer", .string("user:" + userID)))
                if let title { body.append(("title", .string(title))) }
                if let commandDescription { body.append(("description", .string(commandDescription))) }
                if let m = try metadataValue() { body.append(("metadata", m)) }
                if let span = expiresIn.flatMap(TimeSpan.seconds) {
                    body.append(("timeToLive", .number(String(span))))
                }
                var headers: [String: String] = [:]
                if let inst = installationID ?? (ctx.usesSavedUser ? ctx.saved?.installationID : nil) {
                    headers["X-Thingif-Installation-ID"] = inst
                }
                let answer = try client.call(
                    "POST", client.target(thingID) + "/commands", body: .object(body), headers: headers)
                guard let commandID = answer["commandID"]?.stringValue else {
                    throw HubClientError(description: "the hub's answer lacks commandID: \(answer.text)")
                }
                guard let wait else {
                    if ctx.json { print(answer.pretty) } else { print("command \(commandID) sent to \(thingID)") }
                    return
                }
                if !ctx.json {
                    print("command \(commandID) sent to \(thingID); waiting up to \(seconds(wait)) for its results …")
                }
                let deadline = Date().addingTimeInterval(wait)
                var command = try client.call(
                    "GET", client.target(thingID) + "/commands/" + HubClient.pathComponent(commandID))
                while !CommandGroup.finished.contains(command["commandState"]?.stringValue ?? ""), Date() < deadline {
                    Thread.sleep(forTimeInterval: 0.25)
                    command = try client.call(
                        "GET", client.target(thingID) + "/commands/" + HubClient.pathComponent(commandID))
                }
                if ctx.json { print(command.pretty) } else { print(Format.command(command)) }
                let state = command["commandState"]?.stringValue ?? "?"
                guard CommandGroup.answered.contains(state) else {
                    let why =
                        CommandGroup.finished.contains(state)
                        ? "ended \(state) (\(command["endReason"]?.stringValue ?? "?")) without results"
                        : "has no results after \(seconds(wait)) (state \(state))"
                    throw HubClientError(description: "command \(commandID) \(why)")
                }
            }
        }

        func seconds(_ s: Double) -> String { s == s.rounded() ? "\(Int(s)) s" : "\(s) s" }
    }

    struct Get: ParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Show a command with its state and results.")

        @OptionGroup var global: GlobalOptions
        @Argument(help: "The thing's ID.") var thingID: String
        @Argument(help: "The command's ID.") var commandID: String

        func run() throws {
            try global.asUser { ctx, client in
                let c = try client.call(
                    "GET", client.target(thingID) + "/commands/" + HubClient.pathComponent(commandID))
                print(ctx.json ? c.pretty : Format.command(c))
            }
        }
    }

    struct Cancel: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Cancel a command that has no results yet; it is never delivered afterwards.",
            discussion: """
                A SENDING command becomes CANCELLED at the hub. A DELIVERED one is cancelled by the thing \
                (thingif's library), if it has not started it: CANCELLED; if the thing does not answer \
                within a few seconds, the command is shown as it is (DELIVERED, cancel pending) and the \
                thing still refuses it if the cancel reaches it first. Too late (results came, it EXPIRED, \
                or a device that cannot be told of a cancel): the hub answers 409 COMMAND_NOT_CANCELLABLE \
                with its state, and this exits 1.
                """)

        @OptionGroup var global: GlobalOptions
        @Argument(help: "The thing's ID.") var thingID: String
        @Argument(help: "The command's ID.") var commandID: String

        func run() throws {
            try global.asUser { ctx, client in
                let c = try client.call(
                    "POST", client.target(thingID) + "/commands/" + HubClient.pathComponent(commandID) + "/cancel")
                print(ctx.json ? c.pretty : Format.command(c))
            }
        }
    }

    struct List: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "List a thing's commands, oldest first (all pages, or the first N with --limit).")

        @OptionGroup var global: GlobalOptions
        @Argument(help: "The thing's ID.") var thingID: String
        @Option(help: "Show at most N commands.") var limit: Int?

        func validate() throws {
            if let limit, limit <= 0 { throw ValidationError("--limit must be positive") }
        }

        func run() throws {
            try global.asUser { ctx, client in
                var commands: [JSONValue] = []
                var key: String?
                repeat {
                    var query = [("bestEffortLimit", String(min(100, (limit ?? 100) - commands.count)))]
                    if let key { query.append(("paginationKey", key)) }
                    let page = try client.call("GET", client.target(thingID) + "/commands", query: query)
                    guard let items = page["commands"]?.arrayValue else {
                        throw HubClientError(description: "the hub's answer lacks commands: \(page.text.prefix(200))")
                    }
                    commands += items
                    key = page["nextPaginationKey"]?.stringValue
                    if items.isEmpty { break }
                } while key != nil && commands.count < (limit ?? .max)
                if let limit, commands.count > limit { commands = Array(commands.prefix(limit)) }
                if ctx.json {
                    var out: [(String, JSONValue)] = [("commands", .array(commands))]
                    if let key { out.append(("nextPaginationKey", .string(key))) }
                    print(JSONValue.object(out).pretty)
                    return
                }
                if commands.isEmpty { print("no commands for \(thingID)"); return }
                print(Format.commandList(commands))
                if key != nil { print("(more: raise --limit to see them)") }
            }
        }
    }
}

// MARK: - state

struct StateGroup: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "state", abstract: "Read a thing's state.", subcommands: [Get.self])

    struct Get: ParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Show the thing's latest state.")

        @OptionGroup var global: GlobalOptions
        @Argument(help: "The thing's ID.") var thingID: String

        func run() throws {
            try global.asUser { ctx, client in
                let state = try client.call("GET", client.target(thingID) + "/states")
                print(ctx.json ? state.pretty : Format.state(state))
            }
        }
    }
}

// MARK: - watch

struct Watch: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Print a thing's commands with their results as they finish (Server-Sent Events).",
        discussion: """
            Registers an SSE installation for the user (kept in the saved credentials and reused), \
            then prints every finished command of the thing as the hub reports it. `thingif command send` \
            names that installation as the issuing one, so a pseudo user is notified there too. \
            With --json, prints one command per line.
            """)

    @OptionGroup var global: GlobalOptions
    @Argument(help: "The thing's ID.") var thingID: String
    @Option(help: ArgumentHelp("Stop after this many seconds (default: until interrupted).", valueName: "seconds"))
    var timeout: Double?

    func validate() throws {
        if let timeout, !(timeout > 0) { throw ValidationError("--timeout needs a positive number of seconds") }
    }

    func run() throws {
        try guarded {
            var ctx = try Context(global)
            let client = try ctx.userClient()
            let say: (String) -> Void = ctx.json ? printErr : { print($0) }

            func newInstallation() throws -> String {
                let answer = try client.call(
                    "POST", client.app + "/installations", body: .object([("deviceType", .string("SSE"))]))
                guard let id = answer["installationID"]?.stringValue else {
                    throw HubClientError(description: "the hub's answer lacks installationID: \(answer.text)")
                }
                if ctx.usesSavedUser, var saved = ctx.saved {
                    saved.installationID = id
                    try saved.save(to: ctx.configPath)
                    ctx.saved = saved
                }
                return id
            }

            var installation = try (ctx.usesSavedUser ? ctx.saved?.installationID : nil) ?? newInstallation()
            let queue = DispatchQueue(label: "thingif.watch")
            let json = ctx.json
            let deadline = timeout.map { Date().addingTimeInterval($0) }
            for attempt in 0..<2 {
                let stream = EventStream(
                    onOpen: { _ in
                        say(
                            "watching \(thingID) (installation \(installation))\(timeout.map { " for \(Int($0)) s" } ?? "; Ctrl-C to stop") …"
                        )
                    },
                    onEvent: { event in
                        queue.async { Watch.handle(event, thingID: thingID, client: client, json: json) }
                    })
                let req = client.request(
                    "GET", client.app + "/installations/" + HubClient.pathComponent(installation) + "/events")
                let timedOut = stream.run(req, timeout: deadline.map { max(0.1, $0.timeIntervalSinceNow) })
                queue.sync {}
                if timedOut { return }
                if stream.status == 404, attempt == 0 {
                    installation = try newInstallation()  // the saved installation is gone
                    continue
                }
                if !(200..<300).contains(stream.status), stream.status != 0 {
                    let body = (try? JSONValue.parse(String(decoding: stream.errorBody, as: UTF8.self)))
                    throw HubHTTPError(
                        status: stream.status, errorCode: body?["errorCode"]?.stringValue ?? "HTTP \(stream.status)",
                        message: body?["message"]?.stringValue ?? "the event stream was refused")
                }
                if let failure = stream.failure {
                    throw HubClientError(
                        description: "the event stream from \(ctx.hub) failed: \(failure.localizedDescription)")
                }
                throw HubClientError(description: "the hub closed the event stream")
            }
        }
    }

    static func handle(_ event: EventStream.Event, thingID: String, client: HubClient, json: Bool) {
        guard event.name == "command", let data = try? JSONValue.parse(event.data),
            data["thingID"]?.stringValue == thingID, let commandID = data["commandID"]?.stringValue
        else { return }
        let state = data["commandState"]?.stringValue ?? "?"
        guard CommandGroup.finished.contains(state) else {
            if !json { print("command \(commandID): \(state)") }
            return
        }
        do {
            let c = try client.call("GET", client.target(thingID) + "/commands/" + HubClient.pathComponent(commandID))
            if json { print(c.text) } else { print(Format.command(c) + "\n") }
        } catch {
            printErr("thingif: command \(commandID) finished (\(state)) but could not be read: \(error)")
        }
    }
}
