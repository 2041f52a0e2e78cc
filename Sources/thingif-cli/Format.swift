// SPDX-License-Identifier: Apache-2.0

#if canImport(Glibc)
    import Glibc
#endif

// How the CLI prints the hub's answers as tables (without --json).

enum Format {
    /// Rows in aligned columns, two spaces apart; the last column is not padded.
    static func table(_ rows: [[String]], indent: String = "") -> String {
        let columns = rows.map(\.count).max() ?? 0
        var widths = [Int](repeating: 0, count: columns)
        for row in rows {
            for (i, cell) in row.enumerated() where i < columns - 1 { widths[i] = max(widths[i], cell.count) }
        }
        return rows.map { row in
            var line = indent
            for (i, cell) in row.enumerated() {
                line += cell
                if i < row.count - 1 { line += String(repeating: " ", count: widths[i] - cell.count + 2) }
            }
            return line
        }.joined(separator: "\n")
    }

    /// Milliseconds since the epoch as `2024-05-01 10:00:00Z` (UTC).
    static func time(_ ms: Int64?) -> String {
        guard let ms else { return "-" }
        var t = time_t(ms / 1000)
        var parts = tm()
        gmtime_r(&t, &parts)
        var buf = [CChar](repeating: 0, count: 32)
        let n = strftime(&buf, buf.count, "%Y-%m-%d %H:%M:%S", &parts)
        return String(decoding: buf[0..<n].map { UInt8(bitPattern: $0) }, as: UTF8.self) + "Z"
    }

    /// One action's result: name, success, error message and data.
    struct Result: Equatable {
        var name: String
        var succeeded: Bool
        var errorMessage: String?
        var data: JSONValue?
    }

    /// Kii's flat actionResults list: `[{"turnPower":{"succeeded":true}}, …]`.
    static func results(_ v: JSONValue?) -> [Result] {
        guard let items = v?.arrayValue else { return [] }
        return items.compactMap { item in
            guard let (name, body) = item.objectValue?.first else { return nil }
            return Result(
                name: name, succeeded: body["succeeded"]?.boolValue ?? false,
                errorMessage: body["errorMessage"]?.stringValue, data: body["data"])
        }
    }

    static func resultText(_ r: Result?) -> String {
        guard let r else { return "…" }
        if r.succeeded { return "✓" + (r.data.map { "  data=\($0.text)" } ?? "") }
        var s = "✗ " + (r.errorMessage ?? "failed")
        if let d = r.data { s += "  data=\(d.text)" }
        return s
    }

    /// A command in full: its fields, then one row per action with its result.
    static func command(_ c: JSONValue) -> String {
        var fields: [[String]] = [
            ["commandID", c["commandID"]?.stringValue ?? "-"],
            ["state", c["commandState"]?.stringValue ?? "-"]
        ]
        if let t = c["target"]?.stringValue { fields.append(["target", t]) }
        if let i = c["issuer"]?.stringValue { fields.append(["issuer", i]) }
        if let s = c["schema"]?.stringValue {
            fields.append(["schema", s + (c["schemaVersion"].map { " (version \($0.text))" } ?? "")])
        }
        if let t = c["title"]?.stringValue { fields.append(["title", t]) }
        if let d = c["description"]?.stringValue { fields.append(["description", d]) }
        if let m = c["metadata"] { fields.append(["metadata", m.text]) }
        fields.append(["created", time(c["createdAt"]?.intValue)])
        fields.append(["modified", time(c["modifiedAt"]?.intValue)])
        if let e = c["expiresAt"]?.intValue { fields.append(["expires", time(e)]) }
        if let r = c["endReason"]?.stringValue { fields.append(["ended", r]) }

        let actions = c["actions"]?.arrayValue ?? []
        let results = results(c["actionResults"])
        var rows = [["#", "ACTION", "PARAMETERS", "RESULT"]]
        for (i, action) in actions.enumerated() {
            let name = action.objectValue?.first?.0 ?? "?"
            let params = action.objectValue?.first.map { Actions.summary(action: .object([$0])) } ?? action.text
            let paramText = params.hasPrefix(name) ? String(params.dropFirst(name.count)).trimmingLeadingSpace : params
            rows.append([
                "\(i + 1)", name, paramText.isEmpty ? "-" : paramText, resultText(i < results.count ? results[i] : nil)
            ])
        }
        return table(fields) + "\n\n" + table(rows, indent: "  ")
    }

    /// The results column of a list: ✓/✗ per action, then the first failure.
    static func resultsSummary(_ c: JSONValue) -> String {
        let results = results(c["actionResults"])
        if results.isEmpty { return "-" }
        var s = results.map { $0.succeeded ? "✓" : "✗" }.joined()
        if let bad = results.first(where: { !$0.succeeded }) {
            s += "  \(bad.name): \(bad.errorMessage ?? "failed")"
        }
        return s
    }

    /// Commands, one per row.
    static func commandList(_ commands: [JSONValue]) -> String {
        var rows = [["COMMAND ID", "STATE", "CREATED", "ACTIONS", "RESULTS"]]
        for c in commands {
            rows.append([
                c["commandID"]?.stringValue ?? "-", c["commandState"]?.stringValue ?? "-",
                time(c["createdAt"]?.intValue), Actions.summary(c["actions"]), resultsSummary(c)
            ])
        }
        return table(rows)
    }

    /// A state object, one field per row.
    static func state(_ s: JSONValue) -> String {
        guard let members = s.objectValue else { return s.pretty }
        if members.isEmpty { return "(empty state)" }
        return table(members.map { [$0.0, Actions.paramText($0.1)] })
    }
}

extension String {
    var trimmingLeadingSpace: String { String(drop(while: { $0 == " " })) }
}
