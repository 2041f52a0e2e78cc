// SPDX-License-Identifier: Apache-2.0

import CThingIF
import ThingIF

// The fuzz target compiles ThingIFRules' files into its own module.
#if canImport(ThingIFRules)
    import ThingIFRules
#endif

// The body of a server trigger (Thing-IF's trigger API) as the hub checks
// it: pure (no store, no hub), so the REST routes and the trigger_form fuzz
// target share it.

/// A trigger's predicate, parsed.
enum TriggerPredicate {
    enum When: String {
        case conditionTrue = "CONDITION_TRUE", falseToTrue = "CONDITION_FALSE_TO_TRUE", changed = "CONDITION_CHANGED"
    }
    case states(StateCondition, When)
    case schedule(CronSchedule)
    case scheduleOnce(Int64)

    /// `now` is only for SCHEDULE_ONCE (scheduleAt must be later).
    static func parse(_ p: JSON?, now: Int64?) -> Result<TriggerPredicate, HubError> {
        guard let p, p.isObject else {
            return .failure(.invalid("\"predicate\" is required: an object", field: "predicate"))
        }
        guard let source = p["eventSource"]?.stringValue else {
            return .failure(
                .invalid("the predicate needs \"eventSource\": STATES, SCHEDULE or SCHEDULE_ONCE", field: "eventSource")
            )
        }
        switch source {
        case "STATES":
            guard let w = p["triggersWhen"]?.stringValue, let when = When(rawValue: w) else {
                return .failure(
                    .invalid(
                        "\"triggersWhen\" must be CONDITION_TRUE, CONDITION_FALSE_TO_TRUE or CONDITION_CHANGED",
                        field: "triggersWhen"))
            }
            guard let c = p["condition"] else {
                return .failure(.invalid("a STATES predicate needs \"condition\"", field: "condition"))
            }
            return StateCondition.parse(c).map { .states($0, when) }.mapError {
                .invalid($0.message, field: $0.field ?? "condition")
            }
        case "SCHEDULE":
            guard let s = p["schedule"]?.stringValue else {
                return .failure(.invalid("a SCHEDULE predicate needs \"schedule\": a cron string", field: "schedule"))
            }
            guard let cron = CronSchedule(s) else {
                return .failure(.wrongSchedule)
            }
            return .success(.schedule(cron))
        case "SCHEDULE_ONCE":
            guard let at = p["scheduleAt"]?.intValue else {
                return .failure(
                    .invalid("a SCHEDULE_ONCE predicate needs \"scheduleAt\": milliseconds", field: "scheduleAt"))
            }
            if let now, Int64(at) <= now {
                return .failure(.invalid("\"scheduleAt\" must be in the future", field: "scheduleAt"))
            }
            return .success(.scheduleOnce(Int64(at)))
        default:
            return .failure(
                .invalid("unknown eventSource \(source): STATES, SCHEDULE or SCHEDULE_ONCE", field: "eventSource"))
        }
    }
}

/// A trigger's body, checked.
public enum TriggerForm {
    /// Checks {"predicate","command","title"?,"description"?,"metadata"?}
    /// and gives the definition to store: the predicate, the command form
    /// without commandID and firedByTriggerID, the title, description and
    /// metadata. `now` is for SCHEDULE_ONCE (scheduleAt must be later);
    /// `checkCommand` adds the hub's own checks of the command form (its
    /// timeToLive).
    public static func definition(
        _ body: JSON, now: Int64, issuerAllowed: (String) -> Bool, checkCommand: (JSON) -> HubError?
    ) -> Result<JSON, HubError> {
        guard body.isObject else { return .failure(.invalid("the body must be a JSON object")) }
        if body["serverCode"] != nil {
            return .failure(
                .invalid(
                    "server-code triggers are not run by this hub: give a \"command\" instead", field: "serverCode"))
        }
        if case .failure(let e) = TriggerPredicate.parse(body["predicate"], now: now) {
            return .failure(e)
        }
        guard let form = body["command"], form.isObject else {
            return .failure(.invalid("\"command\" is required: an object (a CommandForm)", field: "command"))
        }
        if case .failure(let e) = CommandForm.command(form, issuerAllowed: issuerAllowed) { return .failure(e) }
        if let e = checkCommand(form) { return .failure(e) }
        let def = JSON.object()
        def.set("predicate", body["predicate"]!)
        let command = form.deepCopy() ?? JSON.object()
        json_object_del(command.raw, "commandID")
        json_object_del(command.raw, "firedByTriggerID")
        def.set("command", command)
        for (key, max) in [("title", AppLimits.maxTitle), ("description", AppLimits.maxDescription)] {
            guard let v = body[key], !v.isNull else { continue }
            guard let s = v.stringValue, s.count <= max else {
                return .failure(.invalid("\"\(key)\" must be a string of at most \(max) characters", field: key))
            }
            def.set(key, string: s)
        }
        if let m = body["metadata"], !m.isNull {
            guard m.isObject, m.dump().utf8.count <= AppLimits.maxMetadataBytes else {
                return .failure(
                    .invalid(
                        "\"metadata\" must be an object of at most \(AppLimits.maxMetadataBytes) bytes",
                        field: "metadata"))
            }
            def.set("metadata", m)
        }
        return .success(def)
    }
}
