// SPDX-License-Identifier: Apache-2.0

/// Whether a command that carries `expiresAt` (set by the hub: docs/PROTOCOL.md
/// §9.1) has expired by the thing's own clock. One rule, used by the thing's
/// pipeline when a command arrives; the hub's own expiry is ThingIFHub's
/// CommandLifecycle.
public enum CommandExpiry {
    /// A clock before 2020-01-01T00:00:00Z has not been set (an RTC after a
    /// power loss, no SNTP yet): such a thing does not judge expiry.
    public static let clockSetSinceMs: Int64 = 1_577_836_800_000
    /// How far the thing's clock may be ahead of the hub's before a command
    /// counts as expired (THINGIF_OPT_EXPIRY_SKEW_MS).
    public static let defaultSkewToleranceMs: Int64 = 60_000
    /// The machine-readable reason in each failed result's data.
    public static let reason = "EXPIRED"

    /// True when the command must not run: it has an expiry, the clock is
    /// set, and `now` is past the expiry by more than `skewToleranceMs`.
    public static func isExpired(expiresAt: Int64?, now: Int64, skewToleranceMs: Int64) -> Bool {
        guard let expiresAt, now >= clockSetSinceMs else { return false }
        return now - skewToleranceMs > expiresAt
    }

    /// The failed results of a refused command: one per action, in order,
    /// each with `data` {"reason":"EXPIRED","expiresAt","thingTime"}.
    static func refusal(_ command: Command, now: Int64, skewToleranceMs: Int64) -> [ActionResult] {
        let message = str(
            "expired: the command expired at \(command.expiresAt ?? 0) (epoch ms) and arrived at \(now) by this thing's clock (tolerance \(skewToleranceMs) ms); not run"
        )
        return ActionResult.refusals(command, message: message, reason: reason) { data in
            data.set("expiresAt", .int64(command.expiresAt ?? 0))
            data.set("thingTime", .int64(now))
        }
    }
}
