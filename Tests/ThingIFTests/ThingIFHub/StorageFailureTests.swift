// SPDX-License-Identifier: Apache-2.0

import Foundation
import Testing
import ThingIF
@testable import ThingIFHub

/// A thing's action results when the store fails (on a real PostgreSQL,
/// made to fail): the hub answers 500, which libthingif sends again after
/// its request timeout, never a 4xx (which it drops) nor a 204 (which would
/// acknowledge results nobody stored).
@Suite("Storage failures: a thing's results are answered 500, never dropped", .offPool)
struct StorageFailureTests {
    @Test(
        "Results (and any request) whose read or write fails get a 500 and are stored when sent again",
        .enabled(if: PostgresServer.enabled))
    func resultsOnStorageFailure() throws {
        let server = try PostgresServer.get()
        let (name, url) = try server.createDatabase()
        defer { server.dropDatabase(name) }
        let store = try PostgresStore(url: url, secrets: .fastForTests, connections: 1)
        defer { store.close() }
        let hub = try #require(FrameworkSide(.init(appID: "a", appKey: "k", brokerPort: 1), store: store))
        guard
            case .success(let t) = store.registerThing(
                vendorThingID: "AC-STORE-FAIL", password: "pw", thingType: nil, firmwareVersion: nil,
                dataGroupingInterval: nil, layoutPosition: nil)
        else {
            Issue.record("registration failed")
            return
        }
        #expect(store.addInstallation(thingID: t.thingID, installationID: "i1", mqttTopic: "tstorefail"))
        let cid = "cmd-store-fail"
        _ = try #require(
            store.insertCommand(
                CommandRecord(
                    commandID: cid, thingID: t.thingID, issuer: nil, issuingInstallationID: nil,
                    payload: #"{"schema":"AC","schemaVersion":1,"actions":[{"turnPower":{"power":true}}]}"#,
                    createdAt: 1, modifiedAt: 1)))
        let results = KiiRequest(
            method: "PUT", headers: [("Authorization", "Bearer \(t.accessToken)")],
            body: Array(#"{"actionResults":[{"turnPower":{"succeeded":true}}]}"#.utf8))
        func post() -> Int {
            hub.thingRequests.route(
                results, api: .thingIF, path: "targets/thing:\(t.thingID)/commands/\(cid)/action-results",
                clientID: "tstorefail"
            ).status
        }

        // The read fails (its table is gone for a moment): 500, not the 401 of an unknown token.
        try server.psql("ALTER TABLE tokens RENAME TO tokens_away", database: name)
        #expect(post() == 500)
        try server.psql("ALTER TABLE tokens_away RENAME TO tokens", database: name)
        #expect(store.command(id: cid)?.results == nil)

        // The write fails (the database refuses the UPDATE): 500, not 204.
        try server.psql(
            """
            CREATE FUNCTION refuse_update() RETURNS trigger LANGUAGE plpgsql AS $$
            BEGIN RAISE EXCEPTION 'refused by the test'; END $$;
            CREATE TRIGGER refuse_update BEFORE UPDATE ON commands FOR EACH ROW EXECUTE FUNCTION refuse_update();
            """, database: name)
        #expect(post() == 500)
        #expect(store.command(id: cid)?.results == nil)
        try server.psql("DROP TRIGGER refuse_update ON commands", database: name)

        // Sent again, they are stored; a repeat is a 204 that changes nothing.
        #expect(poll(timeoutMs: 30_000) { post() == 204 })
        let stored = try #require(store.command(id: cid))
        #expect(stored.results?.contains("succeeded") == true && stored.state == .done)
        #expect(post() == 204)
        // Any request of the thing whose authorisation read fails, a state
        // upload here: 500, not the 401 of an unknown token.
        let state = KiiRequest(
            method: "PUT", headers: [("Authorization", "Bearer \(t.accessToken)")], body: Array(#"{"power":true}"#.utf8)
        )
        func upload() -> Int {
            hub.thingRequests.route(
                state, api: .thingIF, path: "targets/thing:\(t.thingID)/states", clientID: "tstorefail"
            ).status
        }
        try server.psql("ALTER TABLE tokens RENAME TO tokens_away", database: name)
        #expect(upload() == 500)
        try server.psql("ALTER TABLE tokens_away RENAME TO tokens", database: name)
        #expect(poll(timeoutMs: 30_000) { upload() == 204 })
        #expect(store.thing(id: t.thingID)?.state?.contains("power") == true)
        // An unknown token is still a 401 (dropped by the thing, as it should be).
        var stranger = results
        stranger.headers = [("Authorization", "Bearer not-a-token")]
        #expect(
            hub.thingRequests.route(
                stranger, api: .thingIF, path: "targets/thing:\(t.thingID)/commands/\(cid)/action-results",
                clientID: "tstorefail"
            ).status == 401)
    }
}
