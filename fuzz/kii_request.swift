// SPDX-License-Identifier: Apache-2.0

// The hub's MQTT request parser: the topic a request arrives on
// (Topics.parseRequest, Topics.parseStatus) and its payload in Kii's framing
// (KiiRequest.decode), as FrameworkSide.handle reads them before routing.
// Input: the topic, a newline, then the payload.
//
// Properties, beyond "no crash":
//  1. The hub answers on p/{clientID}/resp only: for any topic it accepts
//     (parseRequest + isSafeLevel, as handle checks), that reply topic has
//     exactly 3 levels and no wildcard.
//  2. A decoded request re-encodes and decodes to an equal request (the
//     thing's encoder and the hub's decoder agree on every request the hub
//     accepts).
//  3. jansson's memory returns to its baseline (the framing allocates none;
//     checked for the bodies' sake all the same).
import CThingIF
@testable import ThingIF

func fuzzCheck(_ input: [UInt8]) {
    let nl = input.firstIndex(of: 10) ?? input.count
    let topic = String(decoding: input[..<nl], as: UTF8.self)
    let payload = nl < input.count ? Array(input[(nl + 1)...]) : []
    if let p = Topics.parseRequest(topic), Topics.isSafeLevel(p.clientID) {
        let resp = Topics.response(clientID: p.clientID)
        let parts = resp.utf8.split(separator: 0x2F, omittingEmptySubsequences: false)
        if parts.count != 3 || resp.utf8.contains(where: { $0 == 0x2B || $0 == 0x23 || $0 == 0 }) {
            fuzzFail("the hub would answer on \(resp)", input)
        }
        if p.path.isEmpty || p.appID.isEmpty { fuzzFail("a request topic with an empty path or appID", input) }
    }
    if let id = Topics.parseStatus(topic), id.isEmpty || id.utf8.contains(0x2F) {
        fuzzFail("a status topic with a bad clientID", input)
    }
    for bytes in [input, payload] {
        guard let req = KiiRequest.decode(bytes) else { continue }
        guard let again = KiiRequest.decode(req.encode()) else {
            fuzzFail("a decoded request does not decode after encode", input)
        }
        if again != req { fuzzFail("a request changed in the round trip", input) }
        _ = req.bearerToken
        _ = req.requestID
    }
}
