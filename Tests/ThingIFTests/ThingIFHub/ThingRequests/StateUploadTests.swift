// SPDX-License-Identifier: Apache-2.0

import Foundation
import Testing
import ThingIF
@testable import ThingIFHub

/// A thing's state upload through the hub's router: over MQTT on
/// PostgreSQL a whole state is authorised and written in one statement
/// (`HubStore.putState`), and whatever that does not write takes the usual
/// path; the answers are the same on every store.
@Suite("State uploads", .offPool)
struct StateUploadTests {
    /// Every answer of the router to a thing's uploads, on `store`.
    func answers(on store: HubStore) throws {
        let hub = try #require(FrameworkSide(.init(appID: "a", appKey: "k", brokerPort: 1), store: store))
        func register(_ v: String) throws -> ThingRecord { try OneCommitTests.registered(v, in: store) }
        let t = try register("AC-STATE-\(randomHexString(3))")
        let other = try register("AC-OTHER-\(randomHexString(3))")
        #expect(store.addInstallation(thingID: t.thingID, installationID: "inst-1", mqttTopic: "topic-1"))
        func upload(
            method: String = "PUT", token: String? = nil, target: String? = nil, client: String? = "topic-1",
            _ body: String
        ) -> (Int, String) {
            let req = KiiRequest(
                method: method, headers: [("Authorization", "Bearer \(token ?? t.accessToken)")],
                body: Array(body.utf8))
            let r = hub.thingRequests.route(
                req, api: .thingIF, path: "targets/thing:\(target ?? t.thingID)/states", clientID: client)
            return (r.status, r.bodyText)
        }
        func stored() -> String? { store.thing(id: t.thingID)?.state }

        // Stored, over MQTT and over HTTP, whole and partial.
        #expect(upload(#"{"power":true}"#).0 == 201, "Kii's answer to a thing's first upload")
        #expect(stored() == #"{"power":true}"#)
        #expect(upload(client: nil, #"{"power":false}"#).0 == 204)
        #expect(stored() == #"{"power":false}"#)
        #expect(upload(method: "PATCH", #"{"fanSpeed":3}"#).0 == 204)
        #expect(stored() == #"{"power":false,"fanSpeed":3}"#)
        let samples = store.stateHistory(thingID: t.thingID, from: 0, to: .max).count
        #expect(samples == 3)

        // Refused, and nothing stored: the token is checked before the body.
        let refused: [(String, (Int, String), Int, String)] = [
            ("an unknown token over MQTT", upload(token: "nope", #"{"x":1}"#), 401, "INVALID_ACCESS_TOKEN"),
            ("an unknown token over HTTP", upload(token: "nope", client: nil, #"{"x":1}"#), 403, "WRONG_TOKEN"),
            ("another thing's token", upload(token: other.accessToken, #"{"x":1}"#), 403, "FORBIDDEN"),
            ("another thing's target", upload(target: other.thingID, #"{"x":1}"#), 403, "FORBIDDEN"),
            ("a client not the thing's", upload(client: "topic-2", #"{"x":1}"#), 403, "FORBIDDEN"),
            ("an unknown token and no object", upload(token: "nope", "[1]"), 401, "INVALID_ACCESS_TOKEN"),
            ("an array", upload("[1]"), 400, "INVALID_INPUT_DATA"),
            ("malformed JSON", upload(#"{"x":"#), 400, "INVALID_INPUT_DATA"),
            ("not UTF-8", upload(String(decoding: [0x7B, 0xFF, 0x7D], as: UTF8.self)), 400, "INVALID_INPUT_DATA")
        ]
        for (what, (status, body), want, code) in refused {
            #expect(status == want && body.contains(code), "\(what): \(status) \(body)")
        }
        #expect(stored() == #"{"power":false,"fanSpeed":3}"#)
        #expect(store.thing(id: other.thingID)?.state == nil)
        #expect(store.stateHistory(thingID: t.thingID, from: 0, to: .max).count == samples)
    }

    @Test("In memory: stored, and refused before the body is read")
    func memory() throws { try answers(on: MemoryStore()) }

    @Test(
        "On PostgreSQL (one statement for a whole state over MQTT): the same answers",
        .enabled(if: PostgresServer.enabled, "PostgreSQL is not installed (CI=true requires it)"))
    func postgres() throws {
        let (store, _, done) = try OneCommitTests.postgresStore()
        defer { done() }
        try answers(on: store)
    }
}
