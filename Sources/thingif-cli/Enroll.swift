// SPDX-License-Identifier: Apache-2.0

import ArgumentParser
import Foundation

// MARK: - things (the operator's enrollment)

struct ThingsGroup: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "things", abstract: "The operator's commands for the app's things.",
        subcommands: [Import.self])

    struct Import: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "import",
            abstract:
                "Enroll things before they onboard: vendorThingID,thingPassword[,thingType[,firmwareVersion]] a line.",
            discussion: """
                With the hub's --onboarding enrolled, onboarding by the thing accepts only the \
                vendorThingIDs (and passwords) imported here. A first line starting with \
                vendorThingID is a header and skipped; empty lines and lines starting with # too. \
                The hub needs --admin-token; give it with --admin-token or THINGIF_ADMIN_TOKEN. \
                Sent 50 rows a request; a thing already enrolled with the same password counts as existing.
                """)

        @OptionGroup var global: GlobalOptions
        @Option(
            name: .customLong("admin-token"),
            help: ArgumentHelp("The hub's adminToken (env THINGIF_ADMIN_TOKEN).", valueName: "token"))
        var adminToken: String?
        @Argument(help: "The CSV file.") var file: String

        /// The rows of a CSV file: (vendorThingID, password, thingType?, firmwareVersion?).
        static func rows(_ text: String) throws -> [[String]] {
            var out: [[String]] = []
            for (n, raw) in text.split(omittingEmptySubsequences: false, whereSeparator: \.isNewline).enumerated() {
                let line = raw.trimmingCharacters(in: .whitespaces)
                if line.isEmpty || line.hasPrefix("#") { continue }
                let fields = line.split(separator: ",", omittingEmptySubsequences: false).map {
                    $0.trimmingCharacters(in: .whitespaces)
                }
                if out.isEmpty && fields[0] == "vendorThingID" { continue }
                guard (2...4).contains(fields.count), !fields[0].isEmpty, !fields[1].isEmpty else {
                    throw ValidationError(
                        "line \(n + 1): expected vendorThingID,thingPassword[,thingType[,firmwareVersion]]")
                }
                out.append(fields)
            }
            return out
        }

        func run() throws {
            try guarded {
                let ctx = try Context(global)
                let env = ProcessInfo.processInfo.environment
                guard let admin = adminToken ?? env["THINGIF_ADMIN_TOKEN"], !admin.isEmpty else {
                    throw ValidationError("give the hub's adminToken: --admin-token or THINGIF_ADMIN_TOKEN")
                }
                guard let data = FileManager.default.contents(atPath: file) else {
                    throw ValidationError("cannot read \(file)")
                }
                let rows = try Self.rows(String(decoding: data, as: UTF8.self))
                let client = try HubClient(hub: ctx.hub, appID: ctx.appID, token: admin, timeout: 600)
                var imported = 0
                var existing = 0
                var failed: [JSONValue] = []
                var i = 0
                while i < rows.count {
                    let chunk = rows[i..<min(i + 50, rows.count)]
                    i += chunk.count
                    let things = JSONValue.array(
                        chunk.map { f in
                            var o: [(String, JSONValue)] = [
                                ("vendorThingID", .string(f[0])), ("thingPassword", .string(f[1]))
                            ]
                            if f.count > 2, !f[2].isEmpty { o.append(("thingType", .string(f[2]))) }
                            if f.count > 3, !f[3].isEmpty { o.append(("firmwareVersion", .string(f[3]))) }
                            return .object(o)
                        })
                    let answer = try client.call(
                        "POST", client.app + "/things/import", body: .object([("things", things)]))
                    imported += Int(answer["imported"]?.intValue ?? 0)
                    existing += Int(answer["existing"]?.intValue ?? 0)
                    if case .array(let f)? = answer["failed"] { failed += f }
                }
                if ctx.json {
                    print(
                        JSONValue.object([
                            ("imported", .number(String(imported))), ("existing", .number(String(existing))),
                            ("failed", .array(failed))
                        ]).text)
                } else {
                    print("imported \(imported), already enrolled \(existing), failed \(failed.count)")
                    for f in failed {
                        print(
                            "  \(f["vendorThingID"]?.stringValue ?? "?"): \(f["errorCode"]?.stringValue ?? "") \(f["message"]?.stringValue ?? "")"
                        )
                    }
                }
                if !failed.isEmpty { throw ExitCode(1) }
            }
        }
    }
}
