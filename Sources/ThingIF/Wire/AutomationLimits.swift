/// The limits of device automation, in one place for both sides: the hub
/// refuses an API change that would pass them (and so never publishes such a
/// configuration), and the thing refuses, as a whole, a remote configuration
/// (p/{mqttTopic}/config) that passes any of them. docs/PROTOCOL.md lists
/// them; docs/openapi.yaml gives the API's side.
public enum AutomationLimits {
    /// Largest name of an action set or timer trigger (1 ... maxName bytes
    /// on the thing; the hub counts characters, which is never more).
    public static let maxName = 64
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
    public static let maxConfigBytes = 65536
    /// Shortest and longest recurrence of a timer trigger.
    public static let minRecurrenceMs: Int64 = 5 * 60_000
    public static let maxRecurrenceMs: Int64 = 5 * 7 * 86_400_000
    /// Where time zone names are looked up.
    public static let zoneinfo = "/usr/share/zoneinfo"
    /// Milliseconds of each recurrence unit.
    public static let unitMs: [String: Int64] = ["minute": 60_000, "hour": 3_600_000, "day": 86_400_000, "week": 604_800_000]
}
