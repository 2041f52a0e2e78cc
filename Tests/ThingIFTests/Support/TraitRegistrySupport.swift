// SPDX-License-Identifier: Apache-2.0

import Foundation
import Testing

/// A trait registry entry made as the operator makes it (the adminToken):
/// the thing type, its firmware version, trait version 1 of `trait` with
/// `definition`, and `alias` bound to it.
func defineTraitEntry(
    _ e: HubAPIEnv, admin: String, thingType: String, firmwareVersion: String, alias: String, trait: String,
    definition: String
) async throws {
    let types = "\(e.api)/configuration/thing-types/\(thingType)"
    for (method, path, body, type) in [
        ("PUT", types, "{}", "application/vnd.kii.ThingTypeConfigurationRequest+json"),
        ("PUT", "\(types)/firmware-versions/\(firmwareVersion)", "", "text/plain"),
        ("POST", "\(e.thingIF)/traits/\(trait)/versions", definition, "application/vnd.kii.TraitCreationRequest+json"),
        (
            "PUT",
            "\(e.thingIF)/configuration/thing-types/\(thingType)/firmware-versions/\(firmwareVersion)/aliases/\(alias)",
            #"{"trait":"\#(trait)","traitVersion":1}"#, "application/vnd.kii.TraitAliasCreationRequest+json"
        )
    ] {
        let r = try await e.call(method, path, token: admin, body: Data(body.utf8), contentType: type)
        try #require((200..<300).contains(r.status), "\(path): \(r.status) \(r.text)")
    }
}

/// A thing onboarded by its owner with a thing type and firmware version: its ID and token.
func onboardTyped(
    _ e: HubAPIEnv, _ vendorThingID: String, uid: String, token: String, thingType: String, firmwareVersion: String
) async throws -> (id: String, token: String) {
    let r = try await e.call(
        "POST", "\(e.thingIF)/onboardings", token: token,
        json: [
            "vendorThingID": vendorThingID, "thingPassword": "pw", "owner": "user:\(uid)", "thingType": thingType,
            "firmwareVersion": firmwareVersion
        ], contentType: "application/vnd.kii.OnboardingWithVendorThingIDByOwner+json")
    try #require(r.status == 200, "\(r.status) \(r.text)")
    return (try #require(r.string("thingID")), try #require(r.string("accessToken")))
}
