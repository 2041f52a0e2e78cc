// SPDX-License-Identifier: Apache-2.0

import ThingIF

/// Home Assistant's MQTT discovery for the hub's things (docs: README
/// "Home Assistant"). Topics:
/// - `<prefix>/climate/<thingID>/config` (retained): the entity's config;
/// - `thingif/<thingID>/state` (retained): the thing's merged state JSON;
/// - `thingif/<thingID>/availability` (retained): online / offline;
/// - `thingif/<thingID>/set/{mode,power,temperature,fan_mode}`: Home
///   Assistant's commands, issued as Thing-IF commands by "hub:homeassistant";
/// - `<prefix>/status`: Home Assistant's birth message; "online" makes the
///   hub publish every config again.
public struct HomeAssistantOptions: Sendable {
    public var prefix: String
    public var mappings: [HAClimateMapping]
    public init(prefix: String = "homeassistant", mappings: [HAClimateMapping] = [.airConditionerDemo]) {
        self.prefix = prefix
        self.mappings = mappings
    }

    /// A discovery prefix: one or more topic levels, no wildcards.
    public static func isValidPrefix(_ p: String) -> Bool {
        !p.isEmpty && p.utf8.count <= 64 && !p.hasPrefix("$")
            && p.split(separator: "/", omittingEmptySubsequences: false).allSatisfy {
                !$0.isEmpty && Topics.isSafeLevel(String($0))
            }
    }
}
