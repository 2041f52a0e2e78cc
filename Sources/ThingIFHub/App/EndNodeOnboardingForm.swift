// SPDX-License-Identifier: Apache-2.0

import ThingIF

/// Kii's end-node onboarding body (docs/GATEWAYS.md §3.2):
/// OnboardingEndNodeWithGatewayThingID ({"gatewayThingID",…}) or
/// OnboardingEndNodeWithGatewayVendorThingID ({"gatewayVendorThingID",…}),
/// with "endNodeVendorThingID", "endNodePassword", "owner"?,
/// "endNodeThingType"?, "endNodeFirmwareVersion"?,
/// "endNodeThingProperties"?: every field checked before the store is
/// asked. Pure (no store, no hub), so the REST route, the gateway's own
/// onboarding and the end_node_onboarding_form fuzz target share it.
public struct EndNodeOnboardingForm: Equatable, Sendable {
    /// How the body names the gateway (the core's, which encodes the body).
    public typealias Gateway = EndNodeOnboardingRequest.Gateway

    public var gateway: Gateway
    public var vendorThingID: String
    public var password: String
    /// A typed ID with its type in lower case, user:{userID} or
    /// group:{groupID}, whatever case the body wrote the type in
    /// (kii-gateway-agent writes USER:). nil when the body names none,
    /// which only the gateway's own onboarding may do: an owner's must
    /// name one (AppAPI.onboardEndNode).
    public var owner: String?
    public var thingType: String?
    public var firmwareVersion: String?
    /// endNodeThingProperties as the compact text of a JSON object, read
    /// from an object (Android) or from a string holding one (kii_go).
    /// Checked, not stored: the hub keeps no thing's properties.
    public var thingProperties: String?

    /// The longest ID, password, thingType and firmware version, as for things.
    public static var maxField: Int { OnboardingForm.maxField }

    /// Reads and checks a body. `byGatewayVendorThingID`: the request's
    /// media type named OnboardingEndNodeWithGatewayVendorThingID (the
    /// gateway is read from "gatewayVendorThingID", else from "gatewayThingID").
    public static func parse(_ body: JSON, byGatewayVendorThingID: Bool) -> Result<EndNodeOnboardingForm, HubError> {
        do {
            return .success(try read(body, byGatewayVendorThingID: byGatewayVendorThingID))
        } catch {
            return .failure(error)
        }
    }

    private static func read(_ body: JSON, byGatewayVendorThingID: Bool) throws(HubError) -> EndNodeOnboardingForm {
        guard body.isObject else { throw HubError.invalid("the body must be a JSON object, not \(body.typeName)") }
        let gatewayKey = byGatewayVendorThingID ? "gatewayVendorThingID" : "gatewayThingID"
        let gatewayID = try FormFields.requiredString(body, gatewayKey)
        let vendorThingID = try FormFields.requiredString(body, "endNodeVendorThingID")
        let password = try FormFields.requiredString(body, "endNodePassword")
        for (key, v) in [
            (gatewayKey, gatewayID), ("endNodeVendorThingID", vendorThingID), ("endNodePassword", password)
        ]
        where v.isEmpty || v.count > maxField {
            throw HubError.invalid("\(key) must be 1 to \(maxField) characters", field: key)
        }
        var owner: String?
        if let named = try FormFields.optionalString(body, "owner") {
            guard let typed = typedID(named) else {
                throw HubError.invalid("owner must be a typed ID: user:{userID} or group:{groupID}", field: "owner")
            }
            owner = typed
        }
        let thingType = try FormFields.optionalString(body, "endNodeThingType")
        let firmwareVersion = try FormFields.optionalString(body, "endNodeFirmwareVersion")
        for (key, v) in [("endNodeThingType", thingType), ("endNodeFirmwareVersion", firmwareVersion)] {
            if let v, v.utf8.count > maxField {
                throw HubError.invalid("\(key) is longer than \(maxField) bytes", field: key)
            }
        }
        return EndNodeOnboardingForm(
            gateway: byGatewayVendorThingID ? .vendorThingID(gatewayID) : .thingID(gatewayID),
            vendorThingID: vendorThingID, password: password, owner: owner, thingType: thingType,
            firmwareVersion: firmwareVersion, thingProperties: try properties(body))
    }

    /// "user:{id}" or "group:{id}" with the type in lower case, for a type
    /// written in any ASCII case and an ID of 1 to maxField characters;
    /// nil for anything else. ASCII only: a Unicode case mapping would take
    /// letters that are not ASCII for the type's (U+017F for "s").
    static func typedID(_ s: String) -> String? {
        guard let colon = s.utf8.firstIndex(of: UInt8(ascii: ":")) else { return nil }
        let type = String(decoding: s.utf8[..<colon].map { (0x41...0x5A).contains($0) ? $0 | 0x20 : $0 }, as: UTF8.self)
        let id = String(s[s.index(after: colon)...])
        guard type == "user" || type == "group", !id.isEmpty, id.count <= maxField else { return nil }
        return "\(type):\(id)"
    }

    /// endNodeThingProperties as compact text: an object, or a string that
    /// holds one; absent or null: nil; anything else 400.
    private static func properties(_ body: JSON) throws(HubError) -> String? {
        let key = "endNodeThingProperties"
        guard let v = body[key], !v.isNull else { return nil }
        if v.isObject { return v.dump() }
        if let text = v.stringValue, case .success(let inner) = JSON.parse(text), inner.isObject {
            return inner.dump()
        }
        throw HubError.invalid("\(key) must be a JSON object (or a string holding one), not \(v.typeName)", field: key)
    }

    /// The body again, with the gateway named as the form names it (the
    /// fuzz target's fixed point).
    public func encode() -> JSON {
        var properties: JSON?
        if let thingProperties, case .success(let p) = JSON.parse(thingProperties) { properties = p }
        return EndNodeOnboardingRequest(
            gateway: gateway, vendorThingID: vendorThingID, password: password, owner: owner, thingType: thingType,
            firmwareVersion: firmwareVersion, thingProperties: properties
        ).encode()
    }
}
