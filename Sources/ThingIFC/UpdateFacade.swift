// SPDX-License-Identifier: Apache-2.0

import CThingIF

// The @c functions of thingif.h's update group (docs/UPDATES.md §9):
// conversions only; the work is Update/Thing+Updates.swift's and the
// agent's. In a build without updates (Updates.built false) each answers
// THINGIF_ERR_UNSUPPORTED before anything else.

private let NO_UPDATES = THINGIF_ERR_UNSUPPORTED.code

/// A message the firmware gives: at most 256 bytes kept (cut at a UTF-8
/// boundary by String(decoding:)).
private func message(_ p: UnsafePointer<CChar>?) -> String? {
    guard let p else { return nil }
    let n = strnlen(p, 256)
    return p.withMemoryRebound(to: UInt8.self, capacity: n) {
        String(decoding: UnsafeBufferPointer(start: $0, count: n), as: UTF8.self)
    }
}

@c @implementation
public func thingif_set_installer(
    _ t: OpaquePointer?, _ installer: UnsafePointer<thingif_installer>?,
    _ config: UnsafePointer<thingif_update_config>?, _ userdata: UnsafeMutableRawPointer?
) -> Int32 {
    guard Updates.built else { return NO_UPDATES }
    guard let th = thing(t), let ops = installer?.pointee, let c = config?.pointee else { return INVALID }
    guard ops.offer != nil, ops.install != nil, ops.reboot != nil, ops.commit != nil, ops.rollback != nil,
        (ops.write == nil) == (ops.flush == nil)
    else { return INVALID }
    guard let type = nonEmpty(c.thing_type), type.utf8.count <= UpdateLimits.maxThingType,
        let version = string(c.running_version), UpdateCoding.isVersion(version),
        let trust = nonEmpty(c.trust_file), c.max_trial_boots >= 0, c.max_trial_boots <= 100
    else { return INVALID }
    return th.setInstaller(
        ops, userdata: userdata, thingType: type, runningVersion: version, trustFile: trust,
        maxTrialBoots: c.max_trial_boots == 0 ? 3 : Int(c.max_trial_boots))
}

@c @implementation
public func thingif_update_installed(_ t: OpaquePointer?, _ ok: Int32, _ msg: UnsafePointer<CChar>?) -> Int32 {
    guard Updates.built else { return NO_UPDATES }
    guard let th = thing(t) else { return INVALID }
    return th.updateInstalled(ok: ok != 0, message: message(msg))
}

@c @implementation
public func thingif_update_confirm(_ t: OpaquePointer?) -> Int32 {
    guard Updates.built else { return NO_UPDATES }
    guard let th = thing(t) else { return INVALID }
    return th.updateTrialVerdict(rejected: nil)
}

@c @implementation
public func thingif_update_reject(_ t: OpaquePointer?, _ msg: UnsafePointer<CChar>?) -> Int32 {
    guard Updates.built else { return NO_UPDATES }
    guard let th = thing(t) else { return INVALID }
    return th.updateTrialVerdict(rejected: message(msg) ?? "the firmware rejected its trial")
}

@c @implementation
public func thingif_update_status(
    _ t: OpaquePointer?, _ status: UnsafeMutablePointer<Int32>?, _ held: UnsafeMutablePointer<UInt64>?,
    _ blocks: UnsafeMutablePointer<UInt64>?
) -> Int32 {
    guard Updates.built else { return NO_UPDATES }
    guard let th = thing(t), let status else { return INVALID }
    guard let (s, h, b) = th.updateStatus() else { return THINGIF_ERR_STATE.code }
    status.pointee = Int32(cStatus(s).rawValue)
    held?.pointee = UInt64(h)
    blocks?.pointee = UInt64(b)
    return OK
}

private func cStatus(_ s: UpdateStatus?) -> thingif_update_status {
    switch s {
    case nil: return THINGIF_UPDATE_NONE
    case .accepted?, .delayed?, .downloading?: return THINGIF_UPDATE_DOWNLOADING
    case .verified?, .installing?: return THINGIF_UPDATE_INSTALLING
    case .rebooting?: return THINGIF_UPDATE_REBOOTING
    case .trial?: return THINGIF_UPDATE_TRIAL
    case .succeeded?: return THINGIF_UPDATE_SUCCEEDED
    case .rolledBack?: return THINGIF_UPDATE_ROLLED_BACK
    case .failed?, .rejected?: return THINGIF_UPDATE_FAILED
    case .cancelled?: return THINGIF_UPDATE_CANCELLED
    }
}
