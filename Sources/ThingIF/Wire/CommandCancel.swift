// SPDX-License-Identifier: Apache-2.0

/// A cancel from the hub on the thing's command topic (docs/PROTOCOL.md
/// §9.1): `{"commandID":"…","cancel":true}`, no "actions". The thing that
/// gets it before the command runs never runs that command: it records the
/// commandID in its ledger and, once it has the command, reports every
/// action failed with data {"reason":"CANCELLED"} (the hub's answer to the
/// cancel waits for those results). One that comes after the command started
/// is ignored; the results go as usual.
public enum CommandCancel {
    /// The machine-readable reason in each failed result's data.
    public static let reason = "CANCELLED"
    /// A cancel is small: a longer message is never taken for one.
    static let maxSize = 512

    /// The message the hub publishes.
    public static func encode(commandID: String) -> [UInt8] {
        var out = Array(#"{"commandID":"#.utf8)
        out += JSON.quoted(commandID)
        out += Array(#","cancel":true}"#.utf8)
        return out
    }

    /// The commandID that `payload` cancels; nil when it is not a cancel (a
    /// command, which has "actions", or anything else). Only small payloads
    /// that hold the bytes `"cancel"` are parsed, so commands cost no
    /// second parse.
    public static func commandID(of payload: [UInt8]) -> String? {
        guard payload.count <= maxSize, payload.containsSubsequence(Array(#""cancel""#.utf8)),
            case .success(let j) = JSON.parse(payload), j.isObject, j["actions"] == nil,
            j["cancel"]?.boolValue == true, let id = j["commandID"]?.stringValue, !id.isEmpty,
            id.utf8.count <= Command.maxCommandIDLength
        else { return nil }
        return id
    }

    /// The failed results of a cancelled command: one per action, in order,
    /// each with `data` {"reason":"CANCELLED"}.
    static func refusal(_ command: Command) -> [ActionResult] {
        ActionResult.refusals(
            command, message: "cancelled: the hub cancelled this command before it ran; not run", reason: reason)
    }

    /// True when every result is a cancel refusal (and there is one): what
    /// the hub reads as the thing's confirmation.
    public static func isRefusal(_ results: [ActionResult]) -> Bool {
        !results.isEmpty
            && results.allSatisfy { !$0.succeeded && $0.data?["reason"]?.stringValue == reason }
    }

}
