// SPDX-License-Identifier: Apache-2.0

// The owner's onboarding body of POST …/onboardings (Kii's
// OnboardingWithVendorThingIDByOwner and OnboardingWithThingIDByOwner), as
// the hub checks it before it asks the store (OnboardingForm.parse, the
// function the REST route calls). The input's first byte picks the media
// type (odd: …WithThingIDByOwner), the rest is the body.
//
// Properties, beyond "no crash":
//  1. An accepted form names the thing by a 1 to 200 character ID, has a
//     1 to 200 character password, an owner that is a typed ID (user: or
//     group:), a known grouping interval or none, and a thingType and
//     firmware version within 200 bytes.
//  2. An accepted form is a fixed point: its encoding parses to the same form.
//  3. A refused form gives a 4xx with an errorCode and a message, and its
//     body is JSON.
//  4. jansson's memory returns to its baseline after each input.
import CThingIF
@testable import ThingIF

func fuzzCheck(_ input: [UInt8]) {
    guard let first = input.first, case .success(let body) = JSON.parse(Array(input.dropFirst())) else { return }
    let byThingID = first & 1 == 1
    switch OnboardingForm.parse(body, byThingID: byThingID) {
    case .failure(let e):
        if !(400..<500).contains(e.status) || e.code.isEmpty || e.message.isEmpty {
            fuzzFail("a refusal that is not a 4xx with a code and a message: \(e.status) \(e.code)", input)
        }
        guard case .success = JSON.parse(e.body.dumpBytes()) else { fuzzFail("the error body is not JSON", input) }
    case .success(let form):
        let id: String
        switch form.thing {
        case .thingID(let v): id = v
        case .vendorThingID(let v):
            if byThingID { fuzzFail("a vendorThingID read from a body sent as OnboardingWithThingIDByOwner", input) }
            id = v
        }
        let fits = { (s: String) in !s.isEmpty && s.count <= OnboardingForm.maxField }
        if !fits(id) || !fits(form.password) { fuzzFail("an accepted ID or password outside 1 to 200", input) }
        if !form.owner.hasPrefix("user:") && !form.owner.hasPrefix("group:") {
            fuzzFail("an accepted owner that is not a typed ID", input)
        }
        if let i = form.dataGroupingInterval, AppLimits.groupingIntervals[i] == nil {
            fuzzFail("an accepted unknown grouping interval", input)
        }
        for v in [form.thingType, form.firmwareVersion] {
            if let v, v.utf8.count > OnboardingForm.maxField { fuzzFail("an accepted field over 200 bytes", input) }
        }
        guard case .success(let again) = OnboardingForm.parse(form.encode(), byThingID: byThingID), again == form
        else { fuzzFail("an accepted form is not a fixed point", input) }
    }
}
