// SPDX-License-Identifier: Apache-2.0

/// A membership event from the hub on a gateway's end-node events topic
/// p/{G}/end-nodes/{E}/events (Topics.endNodeEvents, docs/GATEWAYS.md
/// §4.2): an end node added (an owner onboarded it), removed, or given
/// another vendorThingID. The hub publishes them; the gateway's library
/// takes every message of that topic for one, by its topic alone, before
/// the batch's commands: a small object whose thingID is the topic's end
/// node. Nothing on the command topic is ever taken for an event.
public enum EndNodeEvent: Equatable, Sendable {
    case added(thingID: String, vendorThingID: String, thingType: String?)
    case removed(thingID: String)
    case changed(thingID: String, vendorThingID: String)

    /// An event is small: a longer message is never taken for one.
    public static let maxSize = 1024

    /// The end node it is about.
    public var thingID: String {
        switch self {
        case .added(let id, _, _), .removed(let id), .changed(let id, _): return id
        }
    }

    /// The message the hub publishes.
    public func encode() -> [UInt8] {
        let o = JSON.object()
        switch self {
        case .added(let id, let vendor, let type):
            o.set("event", string: "endNodeAdded")
            o.set("thingID", string: id)
            o.set("vendorThingID", string: vendor)
            if let type { o.set("thingType", string: type) }
        case .removed(let id):
            o.set("event", string: "endNodeRemoved")
            o.set("thingID", string: id)
        case .changed(let id, let vendor):
            o.set("event", string: "endNodeChanged")
            o.set("thingID", string: id)
            o.set("vendorThingID", string: vendor)
        }
        return o.dumpBytes()
    }

    /// The event `payload` holds for the end node `endNode` (the topic's);
    /// nil when it is not an event (anything over `maxSize`, not an object,
    /// one with a command's "actions"), names an unknown event, lacks a
    /// field, or names another end node than the topic's.
    public static func decode(_ payload: [UInt8], endNode: String) -> EndNodeEvent? {
        // Bytes, not String ==: the core carries no Unicode tables (Text/Bytes.swift).
        guard payload.count <= maxSize, case .success(let j) = JSON.parse(payload), j.isObject, j["actions"] == nil,
            let event = j["event"]?.stringValue, let id = j["thingID"]?.stringValue, id.equals(endNode)
        else { return nil }
        let vendor = j["vendorThingID"]?.stringValue
        if event.equals("endNodeRemoved") { return .removed(thingID: id) }
        guard let vendor, !vendor.isEmpty else { return nil }
        if event.equals("endNodeChanged") { return .changed(thingID: id, vendorThingID: vendor) }
        guard event.equals("endNodeAdded") else { return nil }
        let type = j["thingType"]
        guard type == nil || type?.stringValue != nil else { return nil }
        return .added(thingID: id, vendorThingID: vendor, thingType: type?.stringValue)
    }

    /// The same event about the same end node, field by field, as bytes.
    public static func == (a: EndNodeEvent, b: EndNodeEvent) -> Bool {
        switch (a, b) {
        case (.added(let i, let v, let t), .added(let j, let w, let u)):
            return i.equals(j) && v.equals(w) && (t == nil ? u == nil : u.map { t!.equals($0) } ?? false)
        case (.removed(let i), .removed(let j)):
            return i.equals(j)
        case (.changed(let i, let v), .changed(let j, let w)):
            return i.equals(j) && v.equals(w)
        default:
            return false
        }
    }
}
