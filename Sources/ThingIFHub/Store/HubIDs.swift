// SPDX-License-Identifier: Apache-2.0

import ThingIF

/// New IDs and tokens, the same for every store.
public enum HubIDs {
    public static func thingID() -> String { "th." + Platform.randomHex(bytes: 10) }
    public static func userID() -> String { "u." + Platform.randomHex(bytes: 10) }
    public static func groupID() -> String { "g." + Platform.randomHex(bytes: 10) }
    public static func installationID() -> String { Platform.randomHex(bytes: 10) }
    public static func token() -> String { Platform.randomHex(bytes: 20) }
    public static func mqttTopic() -> String { "t" + Platform.randomHex(bytes: 11) }
    /// The MQTT topic an app installation is notified on.
    public static func notificationTopic(_ installationID: String) -> String { "n/\(installationID)" }
}
