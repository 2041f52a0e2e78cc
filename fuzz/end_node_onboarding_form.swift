// SPDX-License-Identifier: Apache-2.0

// An end node's onboarding body of POST …/onboardings (Kii's
// OnboardingEndNodeWithGatewayThingID and …WithGatewayVendorThingID), as the
// hub checks it before it asks the store (EndNodeOnboardingForm.parse, the
// function the REST route calls). The input's first byte picks the media
// type (odd: …WithGatewayVendorThingID), the rest is the body.
//
// Properties, beyond "no crash":
//  1. An accepted form names the gateway (by the field its media type
//     reads) with a 1 to 200 character ID, has a 1 to 200 character
//     vendorThingID and password, an owner that is none or a typed ID whose
//     type is "user" or "group" in lower case, a thingType and firmware
//     version within 200 bytes, and properties that are a JSON object or none.
//  2. An accepted form is a fixed point: its encoding parses to the same form.
//  3. A refused form gives a 4xx with an errorCode and a message, and its
//     body is JSON.
//  4. jansson's memory returns to its baseline after each input.
import CThingIF
@testable import ThingIF

func fuzzCheck(_ input: [UInt8]) {
    guard let first = input.first, case .success(let body) = JSON.parse(Array(input.dropFirst())) else { return }
    let byVendor = first & 1 == 1
    switch EndNodeOnboardingForm.parse(body, byGatewayVendorThingID: byVendor) {
    case .failure(let e):
        if !(400..<500).contains(e.status) || e.code.isEmpty || e.message.isEmpty {
            fuzzFail("a refusal that is not a 4xx with a code and a message: \(e.status) \(e.code)", input)
        }
        guard case .success = JSON.parse(e.body.dumpBytes()) else { fuzzFail("the error body is not JSON", input) }
    case .success(let form):
        let gateway: String
        switch form.gateway {
        case .thingID(let v):
            if byVendor { fuzzFail("a gatewayThingID read from a body sent as …WithGatewayVendorThingID", input) }
            gateway = v
        case .vendorThingID(let v):
            if !byVendor { fuzzFail("a gatewayVendorThingID read from a body sent as …WithGatewayThingID", input) }
            gateway = v
        }
        let fits = { (s: String) in !s.isEmpty && s.count <= EndNodeOnboardingForm.maxField }
        if !fits(gateway) || !fits(form.vendorThingID) || !fits(form.password) {
            fuzzFail("an accepted ID or password outside 1 to 200", input)
        }
        if let owner = form.owner, !owner.hasPrefix("user:") && !owner.hasPrefix("group:") {
            fuzzFail("an accepted owner that is not a lower-case typed ID", input)
        }
        for v in [form.thingType, form.firmwareVersion] {
            if let v, v.utf8.count > EndNodeOnboardingForm.maxField {
                fuzzFail("an accepted field over 200 bytes", input)
            }
        }
        if let p = form.thingProperties {
            guard case .success(let o) = JSON.parse(p), o.isObject else {
                fuzzFail("accepted properties that are not a JSON object", input)
            }
        }
        guard case .success(let again) = EndNodeOnboardingForm.parse(form.encode(), byGatewayVendorThingID: byVendor),
            again == form
        else { fuzzFail("an accepted form is not a fixed point", input) }
    }
}
