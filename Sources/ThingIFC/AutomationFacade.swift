// SPDX-License-Identifier: Apache-2.0

import CThingIF

// The @c functions of thingif.h for action sets, timer triggers and the clock.

@c @implementation
public func thingif_actionset_create(_ t: OpaquePointer?, _ name: UnsafePointer<CChar>?) -> Int32 {
    guard let th = thing(t), let n = nonEmpty(name) else { return INVALID }
    return th.createActionSet(n)
}

@c @implementation
public func thingif_actionset_add_action(
    _ t: OpaquePointer?, _ set: UnsafePointer<CChar>?,
    _ schema: UnsafePointer<CChar>?, _ schema_version: Int32,
    _ action: UnsafePointer<CChar>?, _ params: UnsafePointer<json_t>?
) -> Int32 {
    guard let th = thing(t), let s = nonEmpty(set), let sc = nonEmpty(schema), schema_version >= 0,
        let a = nonEmpty(action)
    else { return INVALID }
    let copy: JSON
    if let params {
        guard let c = json_deep_copy(params) else { return THINGIF_ERR_NOMEM.code }
        copy = JSON(owning: c)
    } else {
        copy = JSON.object()
    }
    return th.addAction(
        set: s, AutomationAction(schema: sc, schemaVersion: Int(schema_version), action: a, params: copy))
}

@c @implementation
public func thingif_actionset_remove_action(_ t: OpaquePointer?, _ set: UnsafePointer<CChar>?, _ index: Int32) -> Int32
{
    guard let th = thing(t), let s = nonEmpty(set) else { return INVALID }
    return th.removeAction(set: s, index: Int(index))
}

@c @implementation
public func thingif_actionset_delete(_ t: OpaquePointer?, _ name: UnsafePointer<CChar>?) -> Int32 {
    guard let th = thing(t), let n = nonEmpty(name) else { return INVALID }
    return th.deleteActionSet(n)
}

@c @implementation
public func thingif_actionset_execute(_ t: OpaquePointer?, _ name: UnsafePointer<CChar>?) -> Int32 {
    guard let th = thing(t), let n = nonEmpty(name) else { return INVALID }
    return th.executeActionSet(n)
}

@c @implementation
public func thingif_timer_create(
    _ t: OpaquePointer?, _ name: UnsafePointer<CChar>?, _ fire_date_ms: Int64,
    _ recurrence_unit: Int32, _ recurrence_count: Int32,
    _ time_zone: UnsafePointer<CChar>?,
    _ action_sets: UnsafePointer<UnsafePointer<CChar>?>?, _ n_action_sets: Int32
) -> Int32 {
    guard let th = thing(t), let n = nonEmpty(name), let tz = nonEmpty(time_zone), let action_sets,
        n_action_sets >= 0
    else { return INVALID }
    var sets: [String] = []
    for i in 0..<Int(n_action_sets) {
        guard let s = nonEmpty(action_sets[i]) else { return INVALID }
        sets.append(s)
    }
    var recurrence: Recurrence?
    switch UInt32(bitPattern: recurrence_unit) {
    case THINGIF_RECUR_NONE.rawValue: recurrence = nil
    case THINGIF_RECUR_MINUTE.rawValue: recurrence = Recurrence(unit: .minute, count: Int(recurrence_count))
    case THINGIF_RECUR_HOUR.rawValue: recurrence = Recurrence(unit: .hour, count: Int(recurrence_count))
    case THINGIF_RECUR_DAY.rawValue: recurrence = Recurrence(unit: .day, count: Int(recurrence_count))
    case THINGIF_RECUR_WEEK.rawValue: recurrence = Recurrence(unit: .week, count: Int(recurrence_count))
    default:
        th.logger.error("timer trigger \(n): unknown recurrence unit \(recurrence_unit)")
        return INVALID
    }
    return th.createTimer(
        TimerTrigger(
            name: n, startDate: fire_date_ms, fireDate: fire_date_ms, recurrence: recurrence,
            timeZone: tz, actionSets: sets, enabled: false, remote: false))
}

@c @implementation
public func thingif_timer_enable(_ t: OpaquePointer?, _ name: UnsafePointer<CChar>?, _ enabled: Int32) -> Int32 {
    guard let th = thing(t), let n = nonEmpty(name), enabled == 0 || enabled == 1 else { return INVALID }
    return th.enableTimer(n, enabled: enabled == 1)
}

@c @implementation
public func thingif_timer_delete(_ t: OpaquePointer?, _ name: UnsafePointer<CChar>?) -> Int32 {
    guard let th = thing(t), let n = nonEmpty(name) else { return INVALID }
    return th.deleteTimer(n)
}

@c @implementation
public func thingif_set_clock(_ t: OpaquePointer?, _ cb: thingif_clock_cb?, _ userdata: UnsafeMutableRawPointer?)
    -> Int32
{
    guard let th = thing(t) else { return INVALID }
    th.setClock(cb, userdata: userdata)
    return OK
}

// The names of 0.2.0 (thingif.h, "Old names"), exported under those names too.

@c @implementation
public func thingif_action_set_create(_ t: OpaquePointer?, _ name: UnsafePointer<CChar>?) -> Int32 {
    thingif_actionset_create(t, name)
}

@c @implementation
public func thingif_action_set_add_action(
    _ t: OpaquePointer?, _ set: UnsafePointer<CChar>?,
    _ schema: UnsafePointer<CChar>?, _ schema_version: Int32,
    _ action: UnsafePointer<CChar>?, _ params: UnsafePointer<json_t>?
) -> Int32 {
    thingif_actionset_add_action(t, set, schema, schema_version, action, params)
}

@c @implementation
public func thingif_action_set_remove_action(_ t: OpaquePointer?, _ set: UnsafePointer<CChar>?, _ index: Int32) -> Int32
{
    thingif_actionset_remove_action(t, set, index)
}

@c @implementation
public func thingif_action_set_delete(_ t: OpaquePointer?, _ name: UnsafePointer<CChar>?) -> Int32 {
    thingif_actionset_delete(t, name)
}

@c @implementation
public func thingif_action_set_execute(_ t: OpaquePointer?, _ name: UnsafePointer<CChar>?) -> Int32 {
    thingif_actionset_execute(t, name)
}
