// SPDX-License-Identifier: Apache-2.0

/// The topics of the Home Assistant bridge (HomeAssistantOptions says what
/// each carries) and the issuer of the commands it takes from them.
public enum HATopics {
    public static let issuer = "hub:homeassistant"
    /// The largest command payload taken from Home Assistant, in bytes.
    public static let maxCommandPayload = 64
    public static func config(prefix: String, thingID: String) -> String { "\(prefix)/climate/\(thingID)/config" }
    public static func state(_ thingID: String) -> String { "thingif/\(thingID)/state" }
    public static func availability(_ thingID: String) -> String { "thingif/\(thingID)/availability" }
    public static func command(_ thingID: String, _ field: String) -> String { "thingif/\(thingID)/set/\(field)" }
    public static let commandFilter = "thingif/+/set/+"
    /// What every topic of this bridge's (state, availability, commands) starts with.
    static let thingPrefix = "thingif/"
    public static func status(prefix: String) -> String { "\(prefix)/status" }
}
