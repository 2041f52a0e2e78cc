// SPDX-License-Identifier: Apache-2.0

import ThingIF

/// The owner's onboarding body, Kii's OnboardingWithVendorThingIDByOwner
/// ({"vendorThingID","thingPassword","owner","thingType"?,
/// "firmwareVersion"?,"dataGroupingInterval"?,"layoutPosition"?}) or
/// OnboardingWithThingIDByOwner ({"thingID",…} for a thing that onboarded
/// itself): every field checked, before the store is asked. Pure (no store,
/// no hub), so the REST route and the onboarding_form fuzz target share it.
public struct OnboardingForm: Equatable, Sendable {
    /// How the body names the thing.
    public enum Thing: Equatable, Sendable {
        case vendorThingID(String)
        case thingID(String)
    }

    public var thing: Thing
    public var password: String
    /// A typed ID: user:{userID} or group:{groupID}.
    public var owner: String
    public var thingType: String?
    public var firmwareVersion: String?
    /// One of AppLimits.groupingIntervals' keys.
    public var dataGroupingInterval: String?
    /// STANDALONE or GATEWAY; nil names none (a new thing is STANDALONE, a
    /// known one keeps its own).
    public var layoutPosition: LayoutPosition?

    /// The longest vendorThingID, thingID, password, thingType and firmware version.
    public static let maxField = 200

    /// Reads and checks a body. `byThingID`: the request's media type named
    /// OnboardingWithThingIDByOwner; a body with a thingID and no
    /// vendorThingID is read so too.
    public static func parse(_ body: JSON, byThingID: Bool) -> Result<OnboardingForm, HubError> {
        do {
            return .success(try read(body, byThingID: byThingID))
        } catch {
            return .failure(error)
        }
    }

    private static func read(_ body: JSON, byThingID: Bool) throws(HubError) -> OnboardingForm {
        guard body.isObject else { throw HubError.invalid("the body must be a JSON object, not \(body.typeName)") }
        let named: Thing
        if byThingID || (body["thingID"] != nil && body["vendorThingID"] == nil) {
            named = .thingID(try FormFields.requiredString(body, "thingID"))
        } else {
            named = .vendorThingID(try FormFields.requiredString(body, "vendorThingID"))
        }
        let layout: LayoutPosition?
        switch LayoutPosition.named(in: body) {
        case .success(let named): layout = named
        case .failure(let r): throw HubError.invalid(r.message, field: LayoutPosition.field)
        }
        let form = OnboardingForm(
            thing: named,
            password: try FormFields.requiredString(body, "thingPassword"),
            owner: try FormFields.requiredString(body, "owner"),
            thingType: try FormFields.optionalString(body, "thingType"),
            firmwareVersion: try FormFields.optionalString(body, "firmwareVersion"),
            dataGroupingInterval: try FormFields.optionalString(body, "dataGroupingInterval"),
            layoutPosition: layout)
        if case .thingID(let id) = named, id.isEmpty || id.count > maxField {
            throw HubError.invalid("thingID must be 1 to \(maxField) characters", field: "thingID")
        }
        for (key, v) in [("thingType", form.thingType), ("firmwareVersion", form.firmwareVersion)] {
            if let v, v.utf8.count > maxField {
                throw HubError.invalid("\(key) is longer than \(maxField) bytes", field: key)
            }
        }
        let vendorThingID: String? = if case .vendorThingID(let v) = named { v } else { nil }
        if let e = check(vendorThingID: vendorThingID, password: form.password)
            ?? check(owner: form.owner, dataGroupingInterval: form.dataGroupingInterval)
        {
            throw e
        }
        return form
    }

    /// The rule for the credentials the thing will log in with (a nil
    /// vendorThingID: the thing is named by its thingID); `fields` are the
    /// body's names of the two, for invalidFields.
    static func check(
        vendorThingID: String?, password: String, fields: (String, String) = ("vendorThingID", "thingPassword")
    ) -> HubError? {
        let fits = { (s: String) in !s.isEmpty && s.count <= maxField }
        let vendorFits = vendorThingID.map(fits) ?? true
        guard vendorFits, fits(password) else {
            return .invalid(
                "vendorThingID and thingPassword must be 1 to \(maxField) characters",
                field: vendorFits ? fields.1 : fields.0)
        }
        return nil
    }

    /// The rule for the owner (a typed ID) and the grouping interval.
    static func check(owner: String, dataGroupingInterval: String?) -> HubError? {
        guard owner.hasPrefix("user:") || owner.hasPrefix("group:") else {
            return .invalid("owner must be a typed ID: user:{userID} or group:{groupID}", field: "owner")
        }
        if let i = dataGroupingInterval, AppLimits.groupingIntervals[i] == nil {
            return .invalid(
                "dataGroupingInterval must be one of \(AppLimits.groupingIntervals.keys.sorted().joined(separator: ", "))",
                field: "dataGroupingInterval")
        }
        return nil
    }

    /// The body again (the fuzz target's fixed point).
    public func encode() -> JSON {
        let o = JSON.object()
        switch thing {
        case .vendorThingID(let v): o.set("vendorThingID", string: v)
        case .thingID(let v): o.set("thingID", string: v)
        }
        o.set("thingPassword", string: password)
        o.set("owner", string: owner)
        if let thingType { o.set("thingType", string: thingType) }
        if let firmwareVersion { o.set("firmwareVersion", string: firmwareVersion) }
        if let dataGroupingInterval { o.set("dataGroupingInterval", string: dataGroupingInterval) }
        if let layoutPosition { o.set(LayoutPosition.field, string: layoutPosition.rawValue) }
        return o
    }
}
