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

/// A thing's own fields (firmware version, thing type), read and set by
/// the thing (FieldRequests) and by an owner (AppAPI): one rule for both.
/// Given the things' store and the event sink.
public final class ThingFields: @unchecked Sendable {
    let store: ThingStore
    let events: HubEvents

    init(store: ThingStore, events: HubEvents) {
        self.store = store
        self.events = events
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
            let object = (try? JSON.parse(body).get())?.isObject ?? false
            return .failure(
                .invalid("\(field.key) must be a string of 1 to 200 bytes", field: object ? field.key : nil))
        }
        let done =
            field == .firmwareVersion
            ? store.setFirmwareVersion(thingID: thingID, v) : store.setThingType(thingID: thingID, v)
        guard done else { return .failure(.thingNotFound(thingID)) }
        events.event("\(field.words) of \(thingID): \(v)")
        return .success(())
    }
}
