// SPDX-License-Identifier: Apache-2.0

import CThingIF

// The @c functions of thingif.h that act on a thingif_t. `@implementation`
// makes the compiler check each signature against the header.

@c @implementation
public func thingif_version() -> UnsafePointer<CChar>? {
    thingif_sys_version()  // THINGIF_VERSION_STRING of the header
}

@c @implementation
public func thingif_strerror(_ status: Int32) -> UnsafePointer<CChar>? {
    UnsafeRawPointer(statusText(status).utf8Start).assumingMemoryBound(to: CChar.self)
}

@c @implementation
public func thingif_new(
    _ app_id: UnsafePointer<CChar>?, _ app_key: UnsafePointer<CChar>?,
    _ storage_dir: UnsafePointer<CChar>?
) -> OpaquePointer? {
    // No app key (NULL): a thing that onboards with a claim certificate.
    guard let app = nonEmpty(app_id), let key = app_key == nil ? "" : string(app_key), let dir = nonEmpty(storage_dir),
        let t = Thing(appID: app, appKey: key, storageDir: dir)
    else { return nil }
    return OpaquePointer(Unmanaged.passRetained(t).toOpaque())
}

@c @implementation
public func thingif_destroy(_ t: OpaquePointer?) -> Int32 {
    guard let th = thing(t) else { return OK }
    let rc = th.shutdown()
    guard rc == OK else { return rc }
    LiveThings.forget(th)  // deferred handles now answer THINGIF_ERR_STATE
    Unmanaged<Thing>.fromOpaque(UnsafeRawPointer(t!)).release()
    return OK
}

@c @implementation
public func thingif_set_log_callback(
    _ t: OpaquePointer?, _ cb: thingif_log_cb?, _ max_level: Int32,
    _ userdata: UnsafeMutableRawPointer?
) -> Int32 {
    guard let th = thing(t), (0...Int32(THINGIF_LOG_DEBUG.rawValue)).contains(max_level) else { return INVALID }
    th.logger.set(callback: cb, maxLevel: max_level, userdata: userdata)
    return OK
}

@c @implementation
public func thingif_set_option(_ t: OpaquePointer?, _ option: Int32, _ value: Int) -> Int32 {
    guard let th = thing(t) else { return INVALID }
    switch UInt32(bitPattern: option) {
    case THINGIF_OPT_OUTBOX_MAX.rawValue:
        guard (8...100_000).contains(value) else { return INVALID }
        th.pipeline.setOutboxCapacity(value)
        return OK
    case THINGIF_OPT_LEDGER_SIZE.rawValue:
        guard (16...1_000_000).contains(value) else { return INVALID }
        th.pipeline.setLedgerCapacity(value)
        return OK
    case THINGIF_OPT_MAX_END_NODES.rawValue:
        guard (1...EndNodeRegistry.hardMax).contains(value) else { return INVALID }
        th.pipeline.setMaxEndNodes(value)
        return OK
    case THINGIF_OPT_DURABILITY.rawValue:
        guard value == Int(THINGIF_DURABILITY_SYNC.rawValue) || value == Int(THINGIF_DURABILITY_NONE.rawValue) else {
            return INVALID
        }
        let durable = value == Int(THINGIF_DURABILITY_SYNC.rawValue)
        th.pipeline.setDurable(durable)
        return OK
    default:
        break
    }
    return th.configure { c in
        func set(_ range: ClosedRange<Int>, _ apply: (inout Thing.Config) -> Void) -> Int32 {
            guard range.contains(value) else { return INVALID }
            apply(&c)
            return OK
        }
        switch UInt32(bitPattern: option) {
        case THINGIF_OPT_MAX_PAYLOAD.rawValue: return set(256...16_777_216) { $0.maxPayload = value }
        case THINGIF_OPT_KEEPALIVE_S.rawValue: return set(5...65535) { $0.keepaliveS = value }
        case THINGIF_OPT_INBOX_MAX.rawValue: return set(1...100_000) { $0.inboxMax = value }
        case THINGIF_OPT_REQUEST_TIMEOUT_MS.rawValue: return set(100...600_000) { $0.requestTimeoutMs = value }
        case THINGIF_OPT_RECONNECT_MIN_MS.rawValue: return set(10...3_600_000) { $0.reconnectMinMs = value }
        case THINGIF_OPT_RECONNECT_MAX_MS.rawValue: return set(10...3_600_000) { $0.reconnectMaxMs = value }
        case THINGIF_OPT_EXPIRY_SKEW_MS.rawValue: return set(0...86_400_000) { $0.expirySkewMs = Int64(value) }
        default: return INVALID
        }
    }
}

@c @implementation
public func thingif_set_broker(_ t: OpaquePointer?, _ host: UnsafePointer<CChar>?, _ port: Int32) -> Int32 {
    guard let th = thing(t), let h = nonEmpty(host), (1...65535).contains(port) else { return INVALID }
    if th.isLoopRunning { return THINGIF_ERR_STATE.code }
    return th.configure { c in
        c.host = h
        c.port = Int(port)
        return OK
    }
}

@c @implementation
public func thingif_set_tls(
    _ t: OpaquePointer?, _ cafile: UnsafePointer<CChar>?, _ certfile: UnsafePointer<CChar>?,
    _ keyfile: UnsafePointer<CChar>?
) -> Int32 {
    guard let th = thing(t), let ca = nonEmpty(cafile) else { return INVALID }
    let cert = string(certfile), key = string(keyfile)
    if (certfile != nil && cert == nil) || (keyfile != nil && key == nil) { return INVALID }
    if th.isLoopRunning { return THINGIF_ERR_STATE.code }
    guard (cert == nil) == (key == nil) else {
        th.logger.error("TLS: a client certificate needs its key and a key its certificate; TLS not set")
        return THINGIF_ERR_TLS.code
    }
    for f in [ca, cert, key].compactMap({ $0 }) where !Platform.isReadableFile(f) {
        th.logger.error("TLS file \(f) cannot be read; TLS not set")
        return THINGIF_ERR_TLS.code
    }
    let rc = th.configure { c in
        c.tls = (ca, cert, key)
        return OK
    }
    // A connection made before uses the old settings: the next one uses TLS.
    th.resetConnection()
    return rc
}

@c @implementation
public func thingif_set_claim_certificate(
    _ t: OpaquePointer?, _ certfile: UnsafePointer<CChar>?, _ keyfile: UnsafePointer<CChar>?
) -> Int32 {
    guard let th = thing(t), (certfile == nil) == (keyfile == nil) else { return INVALID }
    if th.isLoopRunning { return THINGIF_ERR_STATE.code }
    var claim: (name: String, certfile: String, keyfile: String)?
    if certfile != nil {
        guard let cert = nonEmpty(certfile), let key = nonEmpty(keyfile) else { return INVALID }
        guard let name = th.claimName(certfile: cert, keyfile: key) else { return THINGIF_ERR_TLS.code }
        claim = (name, cert, key)
    }
    th.shared.withLock { $0.config.claim = claim }  // no limit changes: not configure()
    return OK
}

@c @implementation
public func thingif_onboard(
    _ t: OpaquePointer?, _ vendor_thing_id: UnsafePointer<CChar>?,
    _ password: UnsafePointer<CChar>?, _ thing_type: UnsafePointer<CChar>?,
    _ firmware_version: UnsafePointer<CChar>?,
    _ properties_json: UnsafePointer<CChar>?
) -> Int32 {
    guard let th = thing(t), let vid = nonEmpty(vendor_thing_id), let pw = nonEmpty(password) else { return INVALID }
    if (thing_type != nil && string(thing_type) == nil) || (firmware_version != nil && string(firmware_version) == nil)
    {
        return INVALID
    }
    guard case .success(let props) = objectText(properties_json) else { return THINGIF_ERR_JSON.code }
    return th.onboard(
        vendorThingID: vid, password: pw, thingType: string(thing_type),
        firmwareVersion: string(firmware_version), properties: props)
}

@c @implementation
public func thingif_use_onboarded(
    _ t: OpaquePointer?, _ thing_id: UnsafePointer<CChar>?,
    _ access_token: UnsafePointer<CChar>?
) -> Int32 {
    guard let th = thing(t), let id = nonEmpty(thing_id), Topics.isSafeLevel(id),
        let token = nonEmpty(access_token)
    else { return INVALID }
    return th.useOnboarded(thingID: id, accessToken: token)
}

@c @implementation
public func thingif_thing_id(_ t: OpaquePointer?) -> UnsafePointer<CChar>? {
    thing(t)?.thingIDPointer
}

@c @implementation
public func thingif_is_connected(_ t: OpaquePointer?) -> Int32 {
    guard let th = thing(t) else { return 0 }
    return th.shared.withLock { $0.connected && $0.subscribed } ? 1 : 0
}

@c @implementation
public func thingif_on_action(
    _ t: OpaquePointer?, _ schema: UnsafePointer<CChar>?, _ schema_version: Int32,
    _ action: UnsafePointer<CChar>?, _ cb: thingif_action_cb?,
    _ userdata: UnsafeMutableRawPointer?
) -> Int32 {
    guard let th = thing(t), let name = nonEmpty(action), schema_version >= 0 else { return INVALID }
    var scope: String?
    if schema != nil {
        guard let s = nonEmpty(schema) else { return INVALID }
        scope = s
    }
    th.withHandlers {
        $0.setSchema(
            scope, version: Int(schema_version), action: name, cb.map { .init(callback: $0, userdata: userdata) })
    }
    return OK
}

@c @implementation
public func thingif_on_alias_action(
    _ t: OpaquePointer?, _ alias: UnsafePointer<CChar>?,
    _ action: UnsafePointer<CChar>?, _ cb: thingif_action_cb?,
    _ userdata: UnsafeMutableRawPointer?
) -> Int32 {
    guard let th = thing(t), let a = nonEmpty(alias), let name = nonEmpty(action) else { return INVALID }
    th.withHandlers { $0.setAlias(a, action: name, cb.map { .init(callback: $0, userdata: userdata) }) }
    return OK
}

@c @implementation
public func thingif_on_any_action(
    _ t: OpaquePointer?, _ cb: thingif_action_cb?,
    _ userdata: UnsafeMutableRawPointer?
) -> Int32 {
    guard let th = thing(t) else { return INVALID }
    th.withHandlers { $0.setCatchAll(cb.map { .init(callback: $0, userdata: userdata) }) }
    return OK
}

/// A state upload, the thing's own or (with `endNode`) an end node's.
func uploadState(
    _ t: OpaquePointer?, _ state: UnsafePointer<json_t>?, partial: Bool, endNode: UnsafePointer<CChar>? = nil
) -> Int32 {
    guard let th = thing(t), let state else { return INVALID }
    let j = JSON(borrowing: UnsafeMutablePointer(mutating: state))
    guard j.isObject else { return THINGIF_ERR_JSON.code }
    guard let endNode else { return th.updateState(j, partial: partial) }
    guard let v = nonEmpty(endNode) else { return INVALID }
    switch th.endNodeTarget(v) {
    case .failure(let e): return e.code
    case .success(let id): return th.updateState(j, partial: partial, thingID: id)
    }
}

@c @implementation
public func thingif_state_update(_ t: OpaquePointer?, _ state: UnsafePointer<json_t>?) -> Int32 {
    uploadState(t, state, partial: false)
}

@c @implementation
public func thingif_state_patch(_ t: OpaquePointer?, _ partial_state: UnsafePointer<json_t>?) -> Int32 {
    uploadState(t, partial_state, partial: true)
}

@c @implementation
public func thingif_set_state_provider(
    _ t: OpaquePointer?, _ cb: thingif_state_cb?, _ interval_ms: Int32,
    _ userdata: UnsafeMutableRawPointer?
) -> Int32 {
    guard let th = thing(t) else { return INVALID }
    if cb != nil && !(100...86_400_000).contains(interval_ms) { return INVALID }
    th.setStateProvider(cb, intervalMs: Int(interval_ms), userdata: userdata)
    return OK
}

@c @implementation
public func thingif_firmware_version_update(_ t: OpaquePointer?, _ version: UnsafePointer<CChar>?) -> Int32 {
    guard let th = thing(t), let v = nonEmpty(version) else { return INVALID }
    return th.updateFirmwareVersion(v)
}

@c @implementation
public func thingif_loop(_ t: OpaquePointer?, _ timeout_ms: Int32) -> Int32 {
    guard let th = thing(t), (0...60_000).contains(timeout_ms) else { return INVALID }
    return th.loop(timeoutMs: Int(timeout_ms))
}

@c @implementation
public func thingif_loop_start(_ t: OpaquePointer?) -> Int32 {
    guard let th = thing(t) else { return INVALID }
    return th.startThread()
}

@c @implementation
public func thingif_loop_stop(_ t: OpaquePointer?) -> Int32 {
    guard let th = thing(t) else { return INVALID }
    return th.stopThread()
}

// The names of 0.2.0 (thingif.h, "Old names"): the same functions, exported
// under those names too, so that programs linked against libthingif 0.2 keep working.

@c @implementation
public func thingif_update_state(_ t: OpaquePointer?, _ state: UnsafePointer<json_t>?) -> Int32 {
    thingif_state_update(t, state)
}

@c @implementation
public func thingif_patch_state(_ t: OpaquePointer?, _ partial_state: UnsafePointer<json_t>?) -> Int32 {
    thingif_state_patch(t, partial_state)
}

@c @implementation
public func thingif_update_firmware_version(_ t: OpaquePointer?, _ version: UnsafePointer<CChar>?) -> Int32 {
    thingif_firmware_version_update(t, version)
}
