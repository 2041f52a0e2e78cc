// SPDX-License-Identifier: Apache-2.0

import ArgumentParser
import Foundation
import ThingIF

// MARK: - end-node (a gateway's end nodes, by its owner)

/// A gateway's end nodes over the hub's REST API (docs/PROTOCOL.md §12.5,
/// openapi.yaml): the owner's onboarding of one (Kii's
/// OnboardingEndNodeWithGatewayThingID, the body the core encodes for the
/// gateway's library too), the list with each one's presence, one read,
/// and the removal. An end node is a thing of its own: its commands and
/// state go through `thingif command …` and `thingif state get` with its thingID.
struct EndNodeGroup: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "end-node",
        abstract: "A gateway's end nodes: onboard, list (with their online status), get, remove.",
        discussion: """
            The gateway is a thing onboarded with --layout gateway (or by itself as a gateway). \
            An end node is a thing of its own: send it commands and read its state with its thingID.
            """,
        subcommands: [Onboard.self, List.self, Get.self, Remove.self])

    static func path(_ client: HubClient, _ gateway: String, _ endNode: String? = nil) -> String {
        var p = client.thingIF + "/things/" + HubClient.pathComponent(gateway) + "/end-nodes"
        if let endNode { p += "/" + HubClient.pathComponent(endNode) }
        return p
    }

    struct Onboard: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Onboard an end node onto a gateway you own: prints its thingID and access token.",
            discussion: """
                Onboarding the same end node again with the same password answers the same thingID. \
                The gateway is told of the new end node (if it is connected, at once; else when it comes back).
                """)

        @OptionGroup var global: GlobalOptions
        @Argument(help: "The gateway's thingID.") var gateway: String
        @Option(
            name: .customLong("vendor-thing-id"),
            help: ArgumentHelp("The end node's vendor thing ID (e.g. LAMP-1).", valueName: "id"))
        var vendorThingID: String
        @Option(help: ArgumentHelp("The end node's password.", valueName: "password")) var password: String
        @Option(
            name: .customLong("thing-type"), help: ArgumentHelp("Its thing type (e.g. Lamp).", valueName: "type"))
        var thingType: String?
        @Option(
            name: .customLong("firmware-version"), help: ArgumentHelp("Its firmware version.", valueName: "version"))
        var firmwareVersion: String?
        @Option(
            help: ArgumentHelp(
                "The owner as a typed ID (default user:{your userID}; a group: group:{groupID}).",
                valueName: "typed-id"))
        var owner: String?

        func validate() throws {
            if gateway.isEmpty { throw ValidationError("the gateway's thingID must not be empty") }
            if vendorThingID.isEmpty { throw ValidationError("--vendor-thing-id must not be empty") }
            if password.isEmpty { throw ValidationError("--password must not be empty") }
        }

        func run() throws {
            try global.asUser { ctx, client in
                let request = EndNodeOnboardingRequest(
                    gateway: .thingID(gateway), vendorThingID: vendorThingID, password: password,
                    owner: try owner ?? "user:" + ctx.requireUserID(), thingType: thingType,
                    firmwareVersion: firmwareVersion)
                let answer = try client.call(
                    "POST", client.thingIF + "/onboardings", body: try JSONValue.parse(request.encode().dump()),
                    contentType: request.mediaType)
                if ctx.json { print(answer.pretty); return }
                guard let thingID = answer["endNodeThingID"]?.stringValue else {
                    throw HubClientError(description: "the hub's answer lacks endNodeThingID: \(answer.text)")
                }
                print(Format.table([["thingID", thingID], ["accessToken", answer["accessToken"]?.stringValue ?? "-"]]))
                print("end node \(vendorThingID) is on gateway \(gateway)")
            }
        }
    }

    struct List: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "List a gateway's end nodes with their online status (all pages, or the first N with --limit).")

        @OptionGroup var global: GlobalOptions
        @Argument(help: "The gateway's thingID.") var gateway: String
        @Option(help: "Show at most N end nodes.") var limit: Int?

        func validate() throws {
            if let limit, limit <= 0 { throw ValidationError("--limit must be positive") }
        }

        func run() throws {
            try global.asUser { ctx, client in
                var nodes: [JSONValue] = []
                var key: String?
                repeat {
                    var query = [("bestEffortLimit", String(min(100, (limit ?? 100) - nodes.count)))]
                    if let key { query.append(("paginationKey", key)) }
                    let page = try client.call("GET", EndNodeGroup.path(client, gateway), query: query)
                    guard let items = page["results"]?.arrayValue else {
                        throw HubClientError(description: "the hub's answer lacks results: \(page.text.prefix(200))")
                    }
                    nodes += items
                    key = page["nextPaginationKey"]?.stringValue
                    if items.isEmpty { break }
                } while key != nil && nodes.count < (limit ?? .max)
                if let limit, nodes.count > limit { nodes = Array(nodes.prefix(limit)) }
                if ctx.json {
                    var out: [(String, JSONValue)] = [("results", .array(nodes))]
                    if let key { out.append(("nextPaginationKey", .string(key))) }
                    print(JSONValue.object(out).pretty)
                    return
                }
                if nodes.isEmpty { print("no end nodes on \(gateway)"); return }
                print(Format.endNodeList(nodes))
                if key != nil { print("(more: raise --limit to see them)") }
            }
        }
    }

    struct Get: ParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Show one end node of a gateway.")

        @OptionGroup var global: GlobalOptions
        @Argument(help: "The gateway's thingID.") var gateway: String
        @Argument(help: "The end node's thingID.") var endNode: String

        func run() throws {
            try global.asUser { ctx, client in
                let e = try client.call("GET", EndNodeGroup.path(client, gateway, endNode))
                print(ctx.json ? e.pretty : Format.endNode(e))
            }
        }
    }

    struct Remove: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Remove an end node from its gateway: the end node is deleted as a thing is.",
            discussion: """
                Its commands, state and token go; the gateway is told. To bring it back, onboard it again \
                (it becomes a new thing).
                """)

        @OptionGroup var global: GlobalOptions
        @Argument(help: "The gateway's thingID.") var gateway: String
        @Argument(help: "The end node's thingID.") var endNode: String

        func run() throws {
            try global.asUser { ctx, client in
                try client.call("DELETE", EndNodeGroup.path(client, gateway, endNode))
                if ctx.json { print("{}") } else { print("end node \(endNode) of \(gateway) removed") }
            }
        }
    }
}

extension Format {
    static func online(_ v: JSONValue?) -> String {
        switch v?.boolValue {
        case true?: return "online"
        case false?: return "offline"
        case nil: return "-"
        }
    }

    /// A gateway's end nodes, one per row.
    static func endNodeList(_ nodes: [JSONValue]) -> String {
        var rows = [["THING ID", "VENDOR THING ID", "THING TYPE", "STATUS"]]
        for n in nodes {
            rows.append([
                n["thingID"]?.stringValue ?? "-", n["vendorThingID"]?.stringValue ?? "-",
                n["thingType"]?.stringValue ?? "-", online(n["online"])
            ])
        }
        return table(rows)
    }

    /// One end node, one field per row.
    static func endNode(_ n: JSONValue) -> String {
        var rows = [
            ["thingID", n["thingID"]?.stringValue ?? "-"], ["vendorThingID", n["vendorThingID"]?.stringValue ?? "-"]
        ]
        if let t = n["thingType"]?.stringValue { rows.append(["thingType", t]) }
        if let f = n["firmwareVersion"]?.stringValue { rows.append(["firmwareVersion", f]) }
        rows.append(["status", online(n["online"])])
        if let g = n["gatewayThingID"]?.stringValue { rows.append(["gateway", g]) }
        rows.append(["created", time(n["createdAt"]?.intValue)])
        return table(rows)
    }
}
