// SPDX-License-Identifier: Apache-2.0

import CThingIF

// The @c functions of thingif.h's gateway group (docs/GATEWAYS.md §8):
// conversions only; the work is Thing+EndNodes.swift's and the pipeline's.
// In a build without gateways (Gateways.built false) each answers
// THINGIF_ERR_UNSUPPORTED (or NULL) before anything else, and the code
// behind it is dropped.

private let NO_GATEWAYS = THINGIF_ERR_UNSUPPORTED.code

/// Whether the end-node calls apply to `th`: a gateway, in a build with
/// gateways (else they answer `notGateway(th)`).
@inline(__always)
private func isGateway(_ th: Thing) -> Bool { Gateways.built && th.pipeline.isGateway }

/// What an end-node call answers on a handle that is not a gateway:
/// THINGIF_ERR_UNSUPPORTED in a build without gateways, else THINGIF_ERR_STATE.
@inline(__always)
private var notGateway: Int32 { Gateways.built ? THINGIF_ERR_STATE.code : NO_GATEWAYS }

@c @implementation
public func thingif_set_layout_position(_ t: OpaquePointer?, _ layout: Int32) -> Int32 {
    guard let th = thing(t) else { return INVALID }
    guard Gateways.built || layout == Int32(THINGIF_LAYOUT_STANDALONE.rawValue) else { return NO_GATEWAYS }
    switch UInt32(bitPattern: layout) {
    case THINGIF_LAYOUT_STANDALONE.rawValue: return th.setLayout(.standalone)
    case THINGIF_LAYOUT_GATEWAY.rawValue: return th.setLayout(.gateway)
    default: return INVALID
    }
}

@c @implementation
public func thingif_set_end_node_callback(
    _ t: OpaquePointer?, _ cb: thingif_end_node_cb?, _ userdata: UnsafeMutableRawPointer?
) -> Int32 {
    guard let th = thing(t) else { return INVALID }
    guard Gateways.built else { return NO_GATEWAYS }
    th.setEndNodeCallback(cb, userdata: userdata)
    return OK
}

/// A vendorThingID or password as the end-node calls take it: 1 to 200
/// bytes of UTF-8.
private func field(_ p: UnsafePointer<CChar>?) -> String? {
    guard let s = nonEmpty(p), s.utf8.count <= 200 else { return nil }
    return s
}

@c @implementation
public func thingif_end_node_add(
    _ t: OpaquePointer?, _ vendor_thing_id: UnsafePointer<CChar>?, _ password: UnsafePointer<CChar>?,
    _ thing_type: UnsafePointer<CChar>?, _ firmware_version: UnsafePointer<CChar>?,
    _ properties_json: UnsafePointer<CChar>?
) -> Int32 {
    guard let th = thing(t), let v = field(vendor_thing_id), let pw = field(password) else { return INVALID }
    guard isGateway(th) else { return notGateway }
    let type = string(thing_type), firmware = string(firmware_version)
    if (thing_type != nil && type == nil) || (firmware_version != nil && firmware == nil) { return INVALID }
    guard case .success(let props) = objectText(properties_json) else { return THINGIF_ERR_JSON.code }
    return th.addEndNode(
        vendorThingID: v, password: pw, thingType: type, firmwareVersion: firmware, properties: props)
}

@c @implementation
public func thingif_end_node_thing_id(_ t: OpaquePointer?, _ vendor_thing_id: UnsafePointer<CChar>?) -> UnsafePointer<
    CChar
>? {
    guard let th = thing(t), isGateway(th), let v = nonEmpty(vendor_thing_id) else { return nil }
    return th.endNodeThingIDPointer(v)
}

@c @implementation
public func thingif_end_node_set_online(_ t: OpaquePointer?, _ vendor_thing_id: UnsafePointer<CChar>?, _ online: Int32)
    -> Int32
{
    guard let th = thing(t), let v = nonEmpty(vendor_thing_id) else { return INVALID }
    guard isGateway(th) else { return notGateway }
    return th.pipeline.setEndNodeOnline(v, online: online != 0)
}

@c @implementation
public func thingif_end_node_remove(_ t: OpaquePointer?, _ vendor_thing_id: UnsafePointer<CChar>?) -> Int32 {
    guard let th = thing(t), let v = nonEmpty(vendor_thing_id) else { return INVALID }
    guard isGateway(th) else { return notGateway }
    return th.pipeline.removeEndNode(v)
}

/// An end node's state upload, full or partial.
private func endNodeState(
    _ t: OpaquePointer?, _ vendor_thing_id: UnsafePointer<CChar>?, _ state: UnsafePointer<json_t>?, partial: Bool
) -> Int32 {
    guard let th = thing(t), vendor_thing_id != nil else { return INVALID }
    guard isGateway(th) else { return notGateway }
    return uploadState(t, state, partial: partial, endNode: vendor_thing_id)
}

@c @implementation
public func thingif_end_node_state_update(
    _ t: OpaquePointer?, _ vendor_thing_id: UnsafePointer<CChar>?, _ state: UnsafePointer<json_t>?
) -> Int32 {
    endNodeState(t, vendor_thing_id, state, partial: false)
}

@c @implementation
public func thingif_end_node_state_patch(
    _ t: OpaquePointer?, _ vendor_thing_id: UnsafePointer<CChar>?, _ partial_state: UnsafePointer<json_t>?
) -> Int32 {
    endNodeState(t, vendor_thing_id, partial_state, partial: true)
}

@c @implementation
public func thingif_end_node_firmware_version_update(
    _ t: OpaquePointer?, _ vendor_thing_id: UnsafePointer<CChar>?, _ version: UnsafePointer<CChar>?
) -> Int32 {
    guard let th = thing(t), let v = nonEmpty(vendor_thing_id), let version = nonEmpty(version) else {
        return INVALID
    }
    guard isGateway(th) else { return notGateway }
    switch th.endNodeTarget(v) {
    case .failure(let e): return e.code
    case .success(let id): return th.updateFirmwareVersion(version, thingID: id)
    }
}

@c @implementation
public func thingif_end_node_foreach(
    _ t: OpaquePointer?, _ cb: thingif_end_node_each_cb?, _ userdata: UnsafeMutableRawPointer?
) -> Int32 {
    guard let th = thing(t), let cb else { return INVALID }
    guard isGateway(th) else { return OK }  // no end nodes
    for e in th.pipeline.endNodeEntries {
        e.vendorThingID.withCString { v in
            Platform.withOptionalCString(e.thingID) { id in cb(v, id, e.online ? 1 : 0, userdata) }
        }
    }
    return OK
}

@c @implementation
public func thingif_action_end_node(_ a: OpaquePointer?) -> UnsafePointer<CChar>? {
    Gateways.built ? action(a)?.command.endNode.map { UnsafePointer($0) } : nil
}

@c @implementation
public func thingif_action_thing_id(_ a: OpaquePointer?) -> UnsafePointer<CChar>? {
    action(a).map { UnsafePointer($0.command.thingID) }
}
