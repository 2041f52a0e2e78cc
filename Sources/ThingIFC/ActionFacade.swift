// SPDX-License-Identifier: Apache-2.0

import CThingIF

// The @c functions of thingif.h that act on a thingif_action_t (inside a handler).

@c @implementation
public func thingif_action_name(_ a: OpaquePointer?) -> UnsafePointer<CChar>? {
    action(a).map { UnsafePointer($0.name) }
}

@c @implementation
public func thingif_action_params(_ a: OpaquePointer?) -> UnsafeMutablePointer<json_t>? {
    action(a)?.params.raw
}

@c @implementation
public func thingif_action_command_id(_ a: OpaquePointer?) -> UnsafePointer<CChar>? {
    action(a).map { UnsafePointer($0.command.id) }
}

@c @implementation
public func thingif_action_issuer(_ a: OpaquePointer?) -> UnsafePointer<CChar>? {
    action(a)?.command.issuer.map { UnsafePointer($0) }
}

@c @implementation
public func thingif_action_schema(_ a: OpaquePointer?) -> UnsafePointer<CChar>? {
    action(a)?.command.schema.map { UnsafePointer($0) }
}

@c @implementation
public func thingif_action_schema_version(_ a: OpaquePointer?) -> Int32 {
    action(a)?.command.schemaVersion ?? 0
}

@c @implementation
public func thingif_action_alias(_ a: OpaquePointer?) -> UnsafePointer<CChar>? {
    action(a)?.alias.map { UnsafePointer($0) }
}

@c @implementation
public func thingif_action_title(_ a: OpaquePointer?) -> UnsafePointer<CChar>? {
    action(a)?.command.title.map { UnsafePointer($0) }
}

@c @implementation
public func thingif_action_description(_ a: OpaquePointer?) -> UnsafePointer<CChar>? {
    action(a)?.command.description.map { UnsafePointer($0) }
}

@c @implementation
public func thingif_action_metadata(_ a: OpaquePointer?) -> UnsafeMutablePointer<json_t>? {
    action(a)?.command.metadata?.raw
}

@c @implementation
public func thingif_action_index(_ a: OpaquePointer?) -> Int32 {
    action(a)?.index ?? -1
}

@c @implementation
public func thingif_action_command_expires_at(_ a: OpaquePointer?) -> CLongLong {
    CLongLong(action(a)?.command.expiresAt ?? 0)
}

@c @implementation
public func thingif_action_thing(_ a: OpaquePointer?) -> OpaquePointer? {
    action(a).map { OpaquePointer(Unmanaged.passUnretained($0.thing).toOpaque()) }
}

@c @implementation
public func thingif_action_fail(_ a: OpaquePointer?, _ error_message: UnsafePointer<CChar>?) -> Int32 {
    guard let ctx = action(a) else { return INVALID }
    // The action fails whatever the message: a NULL one is replaced by a
    // fixed text (and THINGIF_ERR_INVALID returned), invalid UTF-8 is
    // repaired (each bad sequence becomes U+FFFD).
    guard let error_message else {
        ctx.fail("failed (thingif_action_fail was given no message)")
        return INVALID
    }
    ctx.fail(
        String(
            decoding: UnsafeRawBufferPointer(start: error_message, count: strlen(error_message)),
            as: UTF8.self))
    return OK
}

@c @implementation
public func thingif_action_attach_data(_ a: OpaquePointer?, _ data: UnsafeMutablePointer<json_t>?) -> Int32 {
    guard let data else { return INVALID }
    let j = JSON(owning: data)  // stolen, also on failure
    guard let ctx = action(a) else { return INVALID }
    guard j.isObject else { return THINGIF_ERR_JSON.code }
    ctx.setData(j)
    return OK
}

@c @implementation
public func thingif_action_defer(_ a: OpaquePointer?) -> OpaquePointer? {
    guard let ctx = action(a) else { return nil }
    let d =
        ctx.deferred
        ?? DeferredAction(
            thing: ctx.thing, commandID: String(cString: ctx.command.id),
            index: Int(ctx.index), name: String(cString: ctx.name))
    if ctx.deferred == nil {
        ctx.deferred = d
        return OpaquePointer(Unmanaged.passRetained(d).toOpaque())
    }
    return OpaquePointer(Unmanaged.passUnretained(d).toOpaque())
}

@c @implementation
public func thingif_deferred_complete(
    _ deferred: OpaquePointer?, _ error_message: UnsafePointer<CChar>?,
    _ data: UnsafeMutablePointer<json_t>?
) -> Int32 {
    let j = data.map { JSON(owning: $0) }  // stolen, also on failure
    guard let deferred else { return INVALID }
    // Check the arguments before taking the handle: after THINGIF_ERR_INVALID
    // the caller still owns it and may complete it again.
    if error_message != nil && string(error_message) == nil { return INVALID }
    let d = Unmanaged<DeferredAction>.fromOpaque(UnsafeRawPointer(deferred)).takeRetainedValue()
    guard let th = d.thing else { return THINGIF_ERR_STATE.code }
    let rc = th.completeDeferred(d, errorMessage: string(error_message), data: j.flatMap { $0.isObject ? $0 : nil })
    if rc == OK, let j, !j.isObject { return THINGIF_ERR_JSON.code }
    return rc
}
