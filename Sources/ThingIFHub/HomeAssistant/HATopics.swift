// SPDX-License-Identifier: Apache-2.0

/// The topics of the Home Assistant bridge (HomeAssistantOptions says what
/// each carries) and the issuer of the commands it takes from them.
public enum HATopics {
    public static let issuer = "hub:homeassistant"
    /// The largest command payload taken from Home Assistant, in bytes.
    public static let maxCommandPayload = 64
    /// The climate entity's discovery topic: its object ID is the thing's
    /// (`discoveryID`).
    public static func config(prefix: String, thingID: String) -> String {
        "\(prefix)/climate/\(discoveryID(thingID))/config"
    }
    /// A thing as a discovery topic's node or object ID, `thingif_<thingID>`
    /// with anything but [A-Za-z0-9_-] as '_': Home Assistant's discovery
    /// drops a config whose IDs hold anything else (its TOPIC_MATCHER), and
    /// a thing ID holds a '.'.
    static func discoveryID(_ thingID: String) -> String {
        "thingif_"
            + String(
                String.UnicodeScalarView(
                    thingID.unicodeScalars.map { c in
                        c.isASCII && (c.properties.isAlphabetic || ("0"..."9").contains(c) || c == "_" || c == "-")
                            ? c : "_"
                    }))
    }
    public static func state(_ thingID: String) -> String { "thingif/\(thingID)/state" }
    public static func availability(_ thingID: String) -> String { "thingif/\(thingID)/availability" }
    public static func command(_ thingID: String, _ field: String) -> String { "thingif/\(thingID)/set/\(field)" }
    public static let commandFilter = "thingif/+/set/+"
    /// The thing of a command topic thingif/{thingID}/set/{field}; nil for
    /// any other topic. Only the topic is read (no store, no payload).
    static func commandThing(_ topic: String) -> String? {
        guard topic.utf8.starts(with: thingPrefix.utf8) else { return nil }
        let parts = topic.utf8.split(separator: UInt8(ascii: "/"), omittingEmptySubsequences: false)
        guard parts.count == 4, parts[2].elementsEqual("set".utf8) else { return nil }
        return String(Substring(parts[1]))
    }
    /// What every topic of this bridge's (state, availability, commands) starts with.
    static let thingPrefix = "thingif/"
    public static func status(prefix: String) -> String { "\(prefix)/status" }
}
