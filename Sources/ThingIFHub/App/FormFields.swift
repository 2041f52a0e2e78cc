// SPDX-License-Identifier: Apache-2.0

import ThingIF

/// Reading one field of a request body: the one rule for "a string or
/// absent" that the REST routes and the pure forms (OnboardingForm,
/// StateQueryForm) share. A JSON null counts as absent.
public enum FormFields {
    /// The string at `key`, nil when absent or null; 400 for another type.
    public static func optionalString(_ o: JSON, _ key: String) throws(HubError) -> String? {
        guard let v = o[key], !v.isNull else { return nil }
        guard let s = v.stringValue else {
            throw HubError.invalid("\"\(key)\" must be a string, not \(v.typeName)", field: key)
        }
        return s
    }

    /// The string at `key`; 400 when absent, null or not a string.
    public static func requiredString(_ o: JSON, _ key: String) throws(HubError) -> String {
        guard let s = try optionalString(o, key) else {
            throw HubError.invalid("\"\(key)\" is required: a string", field: key)
        }
        return s
    }

    /// The kind of installation a POST …/installations asks for: Kii's
    /// `deviceType`, or `installationType`, the name KiiThingSDK-Embedded
    /// (thing-if-ThingSDK) sends. `deviceType` wins when both are present.
    /// 400 when neither is a string.
    public static func installationType(_ o: JSON) throws(HubError) -> String {
        if let t = try optionalString(o, "deviceType") { return t }
        guard let t = try optionalString(o, "installationType") else {
            throw HubError.invalid(
                "\"deviceType\" (or \"installationType\") is required: a string", field: "deviceType")
        }
        return t
    }
}
