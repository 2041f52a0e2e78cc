// SPDX-License-Identifier: Apache-2.0

import ThingIF

/// A thing's requests for its own fields (ThingFields) and its word on the
/// automation config it was sent. Given the fields, the automation
/// configs' store, the event sink and the requests' authorization.
final class FieldRequests: @unchecked Sendable {
    let fields: ThingFields
    let store: AutomationStore
    let events: HubEvents
    let authorization: RequestAuthorization

    init(fields: ThingFields, store: AutomationStore, events: HubEvents, authorization: RequestAuthorization) {
        self.fields = fields
        self.store = store
        self.events = events
        self.authorization = authorization
    }

    /// GET or PUT things/{id}/firmware-version or …/thing-type by the thing.
    func request(_ req: KiiRequest, _ field: ThingField, from clientID: String?, thingID tid: String) -> KiiResponse {
        if let denied = authorization.authorize(req, thingID: tid, clientID: clientID) { return denied }
        let r: Result<JSON?, HubError> =
            req.method == "GET"
            ? fields.read(field, thingID: tid).map { $0 }
            : fields.set(field, thingID: tid, body: req.body).map { nil }
        switch r {
        case .failure(let e): return .refusal(e)
        case .success(let body): return body.map { .answer(200, $0) } ?? .answer(204)
        }
    }

    /// The thing's word on the automation configuration it was sent:
    /// {"version"?,"applied","message"?} (docs/PROTOCOL.md 11.2).
    func automationReport(_ req: KiiRequest, thingID tid: String) -> KiiResponse {
        guard case .success(let j) = JSON.parse(req.body), j.isObject, let applied = j["applied"]?.boolValue else {
            return .refusal(400, "INVALID_INPUT_DATA", "the body must be {\"version\",\"applied\",\"message\"}")
        }
        let report = JSON.object()
        if let v = j["version"]?.intValue { report.set("version", .int(v)) }
        report.set("applied", .bool(applied))
        if let m = j["message"]?.stringValue { report.set("message", string: String(m.prefix(1024))) }
        report.set("reportedAt", .int(Int(Platform.epochMs())))
        guard store.saveAutomationReport(thingID: tid, report: report.dump()) else {
            return .refusal(404, "CONFIGURATION_NOT_FOUND", "\(tid) was sent no automation configuration")
        }
        events.event("automation report of \(tid): \(report.dump())")
        return .answer(204)
    }
}
