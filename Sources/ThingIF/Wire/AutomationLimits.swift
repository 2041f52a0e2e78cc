// SPDX-License-Identifier: Apache-2.0

/// The limits of device automation, in one place for both sides: the hub
/// refuses an API change that would pass them (and so never publishes such a
/// configuration), and the thing refuses, as a whole, a remote configuration
/// (p/{mqttTopic}/config) that passes any of them. docs/PROTOCOL.md lists
/// them; docs/openapi.yaml gives the API's side.
public enum AutomationLimits {
    /// Largest name of an action set or timer trigger, in bytes of UTF-8
    /// (the thing, the hub and the CLI all count bytes).
    public static let maxName = 64
    /// Largest schema or action name of an action in an action set, in bytes.
    public static let maxIdentifier = 200
    /// Largest recurrence count (so that count x unit never overflows).
    public static let maxRecurrenceCount = 1_000_000
    /// Action sets in one configuration.
    public static let maxActionSets = 100
    /// Timer triggers in one configuration.
    public static let maxTimerTriggers = 100
    /// Actions in one action set.
    public static let maxActionsPerSet = 100
    /// Action sets one timer trigger runs.
    public static let maxActionSetsPerTrigger = 16
    /// Largest configuration message, in bytes. The thing also drops any
    /// message over its THINGIF_OPT_MAX_PAYLOAD (default 65536) before
    /// parsing it, so the smaller of the two applies.
    public static let maxConfigBytes = WireLimits.maxPayload
    /// Shortest and longest recurrence of a timer trigger.
    public static let minRecurrenceMs: Int64 = 5 * 60_000
    public static let maxRecurrenceMs: Int64 = 5 * 7 * 86_400_000
}
