// SPDX-License-Identifier: Apache-2.0

import CThingIF

/// A gateway's end nodes as the firmware sees them (docs/GATEWAYS.md §8):
/// the layout, registration, online status, uploads per end node and the
/// end-node callback. The registry and the requests live in the pipeline
/// (GatewayTargets, Gateway/CommandPipeline+Gateway.swift); this is the C
/// facade's way in.
extension Thing {
    /// thingif_set_layout_position: the layout sent at onboarding, and
    /// whether end-node topics are this handle's. Not while a loop runs.
    func setLayout(_ layout: LayoutPosition) -> Int32 {
        if isLoopRunning { return THINGIF_ERR_STATE.code }
        let rc = configure { c in
            c.layout = layout
            return OK
        }
        pipeline.setGateway(layout == .gateway)
        return rc
    }

    func setEndNodeCallback(_ cb: thingif_end_node_cb?, userdata: UnsafeMutableRawPointer?) {
        shared.withLock { s in s.endNodeCallback = cb.map { ($0, userdata) } }
    }

    /// The firmware's end-node callback (loop thread, no lock held).
    func notify(_ n: EndNodeNotice) {
        guard let (cb, userdata) = shared.withLock({ $0.endNodeCallback }) else { return }
        let handle = OpaquePointer(Unmanaged.passUnretained(self).toOpaque())
        n.vendorThingID.withCString { v in
            Platform.withOptionalCString(n.thingID) { t in
                Platform.withOptionalCString(n.detail) { d in cb(handle, n.event.rawValue, v, t, d, userdata) }
            }
        }
    }

    func addEndNode(
        vendorThingID: String, password: String, thingType: String?, firmwareVersion: String?, properties: JSON?
    ) -> Int32 {
        guard let gw = shared.withLock({ $0.identity?.thingID }) else {
            return pipeline.isGateway ? THINGIF_ERR_NOT_ONBOARDED.code : THINGIF_ERR_STATE.code
        }
        return pipeline.addEndNode(
            EndNodeOnboardingRequest(
                gateway: .thingID(gw), vendorThingID: vendorThingID, password: password, thingType: thingType,
                firmwareVersion: firmwareVersion, thingProperties: properties))
    }

    /// thingif_end_node_thing_id: a C copy per thingID handed out, kept
    /// until thingif_destroy(), so that a change on the loop thread never
    /// frees a string another thread reads (one small copy per end node
    /// the handle has known).
    func endNodeThingIDPointer(_ v: String) -> UnsafePointer<CChar>? {
        guard case .success(let found) = pipeline.endNodeThingID(v), let id = found else { return nil }
        return endNodeIDStrings.withLock { table in
            if let p = table[ByteKey(id)] { return UnsafePointer(p) }
            let p = Platform.cString(id)
            table[ByteKey(id)] = p
            return UnsafePointer(p)
        }
    }

    /// An end node's upload: thingif_end_node_state_update / _patch /
    /// _firmware_version_update for `v`, as the thing's own for itself.
    func endNodeTarget(_ v: String) -> Result<String, StatusError> {
        switch pipeline.endNodeThingID(v) {
        case .failure(let e): return .failure(e)
        case .success(nil): return .failure(StatusError(THINGIF_ERR_NOT_ONBOARDED.code))
        case .success(let id?): return .success(id)
        }
    }
}
