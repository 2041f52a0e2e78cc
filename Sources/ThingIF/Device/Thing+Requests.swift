// SPDX-License-Identifier: Apache-2.0

import CThingIF

/// Requests to the framework: the persisted outbox, what is due to be (re)sent, state and
/// firmware-version uploads.
extension Thing {
    // MARK: requests to the framework

    /// A request to the framework, through the pipeline's outbox
    /// (CommandPipeline.sendRequest): persisted, sent when connected, sent
    /// again until answered.
    func sendRequest(
        method: String, path: String, contentType: String?, body: [UInt8], what: String,
        kind: Outbox.Kind, journaled: Bool = true, commandID: String? = nil
    ) -> Int32 {
        pipeline.sendRequest(
            method: method, path: path, contentType: contentType, body: body, what: what, kind: kind,
            journaled: journaled, commandID: commandID)
    }

    /// Sends what is due from the outbox (CommandPipeline.sendDue).
    func sendDue() { pipeline.sendDue() }

    /// The thing's state, or with `thingID` an end node's (a gateway's).
    func updateState(_ state: JSON, partial: Bool, thingID: String? = nil) -> Int32 {
        guard let tid = thingID ?? shared.withLock({ $0.identity?.thingID }) else {
            return THINGIF_ERR_NOT_ONBOARDED.code
        }
        return sendRequest(
            method: partial ? "PATCH" : "PUT", path: str("targets/thing:\(tid)/states"),
            contentType: MediaType.json, body: state.dumpBytes(),
            what: partial ? "partial state" : "state", kind: .state)
    }

    func updateFirmwareVersion(_ version: String, thingID: String? = nil) -> Int32 {
        guard let tid = thingID ?? shared.withLock({ $0.identity?.thingID }) else {
            return THINGIF_ERR_NOT_ONBOARDED.code
        }
        let body = JSON.object()
        body.set("firmwareVersion", string: version)
        return sendRequest(
            method: "PUT", path: str("things/\(tid)/firmware-version"),
            contentType: "application/vnd.kii.ThingFirmwareVersionUpdateRequest+json",
            body: body.dumpBytes(), what: str("firmware version \(version)"), kind: .other)
    }
}
