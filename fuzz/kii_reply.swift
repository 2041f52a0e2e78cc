// SPDX-License-Identifier: Apache-2.0

// The thing's reply parser: what arrives on p/{mqttTopic}/resp and on the
// bootstrap connection's reply topic (KiiResponse.decode, Kii's framing with
// a status line), then the bodies the thing reads out of replies during
// onboarding (OnboardingResponse, the installation's MQTTEndpoint) and the
// identity it stores.
//
// Properties, beyond "no crash":
//  1. A decoded reply re-encodes and decodes to the same status, headers
//     and body.
//  2. No topic from unchecked input: every name a reply hands the thing
//     (thingID, mqttTopic, which become its client ID and its
//     subscriptions) is a safe topic level, and the topics built from them
//     have exactly the levels the protocol names.
//  3. A stored identity reads back equal (Identity encode/decode).
//  4. jansson's memory returns to its baseline after each input.
import CThingIF
@testable import ThingIF

private func levels(_ topic: String) -> Int {
    topic.utf8.split(separator: 0x2F, omittingEmptySubsequences: false).count
}

func fuzzCheck(_ input: [UInt8]) {
    // The reply body alone, too: libFuzzer mutates the JSON directly.
    checkBody(input, input)
    guard let reply = KiiResponse.decode(input) else { return }
    if !(100...599).contains(reply.status) { fuzzFail("a reply with status \(reply.status)", input) }
    guard let again = KiiResponse.decode(reply.encode()) else {
        fuzzFail("a decoded reply does not decode again", input)
    }
    if again.status != reply.status || again.body != reply.body || again.headers.count != reply.headers.count {
        fuzzFail("a reply changed in the round trip", input)
    }
    for (h1, h2) in zip(reply.headers, again.headers) where !(h1.name.equals(h2.name) && h1.value.equals(h2.value)) {
        fuzzFail("a reply header changed in the round trip", input)
    }
    checkBody(reply.body, input)
}

private func checkBody(_ body: [UInt8], _ input: [UInt8]) {
    guard case .success(let j) = JSON.parse(body) else { return }
    if let ep = MQTTEndpoint.decode(j) { checkEndpoint(ep, input) }
    if let r = OnboardingResponse.decode(j) {
        if !Topics.isSafeLevel(r.thingID) { fuzzFail("an onboarding answer with an unsafe thingID", input) }
        checkEndpoint(r.mqttEndpoint, input)
        let id = Identity(
            appID: "app", vendorThingID: "v", thingID: r.thingID, accessToken: r.accessToken, endpoint: r.mqttEndpoint)
        guard let back = Identity.decode(id.encode()), back == id else {
            fuzzFail("a stored identity does not read back equal", input)
        }
    }
}

private func checkEndpoint(_ ep: MQTTEndpoint, _ input: [UInt8]) {
    if !Topics.isSafeLevel(ep.mqttTopic) { fuzzFail("an endpoint with an unsafe mqttTopic", input) }
    if levels(Topics.response(clientID: ep.mqttTopic)) != 3 || levels(Topics.config(clientID: ep.mqttTopic)) != 3 {
        fuzzFail("a reply or config topic from mqttTopic does not have 3 levels", input)
    }
    let req = Topics.request(clientID: ep.mqttTopic, appID: "app", path: "onboardings")
    guard let p = Topics.parseRequest(req), p.clientID.equals(ep.mqttTopic), p.path.equals("onboardings") else {
        fuzzFail("a request topic built from mqttTopic does not parse back", input)
    }
    if !(0...65535).contains(ep.portTCP) { fuzzFail("an endpoint with port \(ep.portTCP)", input) }
}
