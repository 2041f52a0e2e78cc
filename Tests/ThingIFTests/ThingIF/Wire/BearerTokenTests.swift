// SPDX-License-Identifier: Apache-2.0

import Testing
import ThingIF

/// `BearerToken.parse`, the one reader of `Authorization: Bearer …` for the
/// REST routes, /metrics, the import and the thing's requests over MQTT.
@Suite("Bearer token")
struct FastBearerTokenTests {
    @Test("The scheme in any case, blanks around the token dropped (RFC 9110 §11.1)")
    func anyCase() {
        for value in [
            "Bearer tok-1", "bearer tok-1", "BEARER tok-1", "BeArEr tok-1", "Bearer  tok-1 ", "\tbearer\ttok-1"
        ] {
            #expect(BearerToken.parse(value) == "tok-1", "\(value)")
        }
    }

    @Test("No token: another scheme, the scheme alone, no blank after it, an empty value")
    func none() {
        for value in ["Basic abc", "Bearer", "Bearer ", "Bearer \t ", "Bearertok-1", "", " ", "Bear tok", "tok-1"] {
            #expect(BearerToken.parse(value) == nil, "\(value)")
        }
    }

    @Test("A request over MQTT reads its Authorization header name and scheme in any case")
    func kiiRequest() {
        // KiiThingSDK-Embedded (thing-if-ThingSDK) writes lower-case names and scheme.
        let r = KiiRequest(method: "POST", headers: [("authorization", "bearer tok-2")])
        #expect(r.bearerToken == "tok-2")
        #expect(KiiRequest(method: "POST", headers: [("AUTHORIZATION", "Bearer tok-3")]).bearerToken == "tok-3")
    }
}
