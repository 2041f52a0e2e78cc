// SPDX-License-Identifier: Apache-2.0

import ThingIF

/// A field of a thing that Kii serves at things/{thingID}/{rawValue}.
public enum ThingField: String, Sendable {
    case firmwareVersion = "firmware-version"
    case thingType = "thing-type"

    /// Its name in the JSON body.
    public var key: String { self == .firmwareVersion ? "firmwareVersion" : "thingType" }
    /// Its name in the hub's log lines.
    var words: String { self == .firmwareVersion ? "firmware version" : "thing type" }
}

/// The thing's own fields (firmware version, thing type), read and set by
/// the thing (its requests) and by an owner (AppAPI), and the thing's word
/// on the automation config it was sent. Given the things' and the
/// automation configs' store, the event sink and the requests' authorization.
public final class ThingFields: @unchecked Sendable {
    let store: ThingStore & AutomationStore
    let events: HubEvents
    let authorization: RequestAuthorization

    init(store: ThingStore & AutomationStore, events: HubEvents, authorization: RequestAuthorization) {
        self.store = store
        self.events = events
        self.authorization = authorization
    }

    /// GET or PUT things/{id}/firmware-version or …/thing-type by the thing.
    func request(_ req: KiiRequest, _ field: ThingField, from clientID: String?, thingID tid: String) -> KiiResponse {
        if let denied = authorization.authorize(req, thingID: tid, clientID: clientID) { return denied }
        let r: Result<JSON?, HubError> =
            req.method == "GET"
            ? read(field, thingID: tid).map { $0 }
            : set(field, thingID: tid, body: req.body).map { nil }
        switch r {
        case .failure(let e): return .refusal(e)
        case .success(let body): return body.map { .answer(200, $0) } ?? .answer(204)
        }
    }

    /// A thing's firmware version or thing type as Kii answers it:
    /// {"firmwareVersion": …} or {"thingType": …}; 404 when it has none.
    /// The caller has checked who asks (the thing, or an owner).
    public func read(_ field: ThingField, thingID: String) -> Result<JSON, HubError> {
        guard let t = store.thing(id: thingID) else { return .failure(.thingNotFound(thingID)) }
        guard let v = field == .firmwareVersion ? t.firmwareVersion : t.thingType else {
            return .failure(field == .firmwareVersion ? .thingWithoutFirmwareVersion : .thingWithoutThingType)
        }
        let o = JSON.object()
        o.set(field.key, string: v)
        return .success(o)
    }

    /// Sets a thing's firmware version (ThingFirmwareVersionUpdateRequest) or
    /// thing type (ThingTypeUpdateRequest): {"firmwareVersion": …} or
    /// {"thingType": …}, 1 to 200 bytes. The caller has checked who asks.
    public func set(_ field: ThingField, thingID: String, body: [UInt8]) -> Result<Void, HubError> {
        guard case .success(let j) = JSON.parse(body), let v = j[field.key]?.stringValue,
            (1...200).contains(v.utf8.count)
        else {
            return .failure(.invalid("\(field.key) must be a string of 1 to 200 bytes"))
        }
        let done =
            field == .firmwareVersion
            ? store.setFirmwareVersion(thingID: thingID, v) : store.setThingType(thingID: thingID, v)
        guard done else { return .failure(.thingNotFound(thingID)) }
        events.event("\(field.words) of \(thingID): \(v)")
        return .success(())
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
