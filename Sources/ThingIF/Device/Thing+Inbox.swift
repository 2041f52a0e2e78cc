// SPDX-License-Identifier: Apache-2.0

import CThingIF

/// Inbound messages (handed to the pipeline, Pipeline/CommandPipeline.swift) and the
/// periodic state provider.
extension Thing {
    // MARK: inbound

    /// A message from libmosquitto (loop thread, inside client.loop): the
    /// pipeline's inbox takes it (CommandPipeline.received).
    func received(_ m: MqttClient.Message) { pipeline.received(m) }

    func runStateProvider() {
        let now = Platform.nowMs()
        let due = shared.withLock { s -> StateProvider? in
            guard s.connected, var p = s.provider, p.nextAt <= now else { return nil }
            p.nextAt = now + Int64(p.intervalMs)
            s.provider = p
            return p
        }
        guard let p = due else { return }
        let handle = OpaquePointer(Unmanaged.passUnretained(self).toOpaque())
        guard let state = p.callback(handle, p.userdata) else { return }
        let j = JSON(owning: state)
        guard j.isObject else {
            logger.error("the state provider returned \(j.typeName), not an object; skipped")
            return
        }
        _ = updateState(j, partial: false)
    }
}
