// SPDX-License-Identifier: Apache-2.0

import CThingIF
import CThingIFTestSupport
import Foundation
import Testing
import ThingIF
import ThingIFHub
import ThingIFHubServer

@Suite("Deleting a thing: its data, token, broker login and retained topics", .serialized, .offPool)
struct ThingDeletionTests {
    @Test(
        "Deleting a thing: 204; its data, token, broker login and retained topics are gone, Home Assistant's config is emptied; refusals delete nothing"
    )
    func deleteThing() async throws {
        try await withHubAPI { e in
            let events = HubLines()
            e.hub.onEvent = events.sink
            _ = try await HomeAssistantTests.homeAssistantOn(e)

            let (uid, token) = try await e.user()
            let (tid, thingToken) = try await e.onboard("AC-DEL-1", owner: "user:\(uid)", token: token)
            _ = try await e.appliance(thingID: tid, token: thingToken) { t in
                #expect(ct_behave_upload_state(t.ct, "setPresetTemperature", 1) == 0)
            }
            let identity = try StoredIdentity(storage: e.env.storage("ac"))
            #expect(identity.thingID == tid)
            // Something of everything: a command with results and a state
            // upload, an action set (the retained automation config), a trigger.
            let cid = try await e.postCommand(tid, token: token, userID: uid)
            _ = try await e.waitForFinished(tid, cid, token: token)
            let action: [String: Any] = [
                "schema": Aircon.schema, "schemaVersion": 1, "action": "turnPower", "params": ["power": true]
            ]
            let put = try await e.call(
                "PUT", "\(e.target(tid))/action-sets/morning", token: token, json: ["actions": [action]])
            #expect(put.status == 204, "\(put.text)")
            let trigger = try await e.call(
                "POST", "\(e.target(tid))/triggers", token: token,
                json: [
                    "predicate": ["eventSource": "SCHEDULE_ONCE", "scheduleAt": Platform.epochMs() + 3_600_000],
                    "command": [
                        "schema": Aircon.schema, "schemaVersion": 1, "issuer": "user:\(uid)",
                        "actions": [["turnPower": ["power": false]]]
                    ]
                ])
            #expect(trigger.status == 201, "\(trigger.text)")

            // The retained messages of the thing, each there now.
            let retained = [
                "homeassistant/climate/thingif_\(tid.replacingOccurrences(of: ".", with: "_"))/config",
                "thingif/\(tid)/state", "thingif/\(tid)/availability",
                Topics.config(clientID: identity.topic), Topics.status(clientID: identity.topic)
            ]
            let watcher = try await offPool { Result { try TopicListener(port: e.env.broker.port, topics: retained) } }
                .get()
            defer { watcher.stop() }
            let present = await offPool {
                poll(timeoutMs: 30_000) { retained.allSatisfy { watcher.payloads(on: $0).contains { !$0.isEmpty } } }
            }
            #expect(present, "retained: \(retained.map { ($0, watcher.payloads(on: $0)) })")

            // Refusals delete nothing: no token, another user's, a target
            // that is not a thing, another app, an unknown thing.
            let path = "\(e.api)/targets/thing:\(tid)"
            let (_, otherToken) = try await e.user()
            #expect(try await e.call("DELETE", path).status == 401)
            let foreign = try await e.call("DELETE", path, token: otherToken)
            #expect(foreign.status == 404 && foreign.errorCode == "TARGET_NOT_FOUND", "\(foreign.text)")
            #expect(try await e.call("DELETE", "\(e.api)/targets/group:\(tid)", token: token).status == 404)
            let app = try await e.call("DELETE", "/api/apps/otherApp/targets/thing:\(tid)", token: token)
            #expect(app.status == 404 && app.errorCode == "APP_NOT_FOUND", "\(app.text)")
            #expect(try await e.call("DELETE", "\(e.api)/targets/thing:th.nope", token: token).status == 404)
            #expect(try await e.get("\(e.target(tid))/commands", token: token).status == 200)
            #expect(e.hub.presence.isOnline(tid))
            // A second hub on the same store and broker (as two hubs share
            // PostgreSQL) learns the thing's status from the broker too.
            let other = try #require(
                FrameworkSide(
                    Env.hubOptions(appID: Env.appID, appKey: Env.appKey, broker: e.env.broker), store: e.hub.store))
            let otherEvents = Locked<[String]>([])
            other.onEvent = { line in otherEvents.withLock { $0.append(line) } }
            #expect(await offPool { other.start(timeoutMs: 30_000) }, "\(other.startProblem ?? "")")
            defer { other.stop() }
            #expect(await offPool { other.waitForOnline(tid, timeoutMs: 30_000) })

            let deleted = try await e.call("DELETE", path, token: token)
            #expect(deleted.status == 204 && deleted.data.isEmpty, "\(deleted.status) \(deleted.text)")

            // Its data is gone for its owner.
            let commands = try await e.get("\(e.target(tid))/commands", token: token)
            #expect(commands.status == 404 && commands.errorCode == "TARGET_NOT_FOUND", "\(commands.text)")
            let mine = try await e.get("\(e.api)/users/me/things", token: token)
            #expect(mine.status == 200 && !mine.text.contains(tid), "\(mine.text)")
            #expect(e.hub.store.command(id: cid) == nil && e.hub.store.automation(thingID: tid) == nil)
            #expect(e.hub.store.triggers(thingID: tid).isEmpty && e.hub.store.allTriggers().isEmpty)
            // Its token is unknown now: the thing's own calls over HTTP get
            // Kii's 403 WRONG_TOKEN (over MQTT, 401).
            let upload = try await e.call("PUT", "\(e.target(tid))/states", token: thingToken, json: ["power": true])
            #expect(upload.status == 403 && upload.errorCode == "WRONG_TOKEN", "\(upload.status) \(upload.text)")
            // Its broker login no longer connects.
            let login = try await offPool {
                Result {
                    try MqttProbe(
                        port: e.env.broker.port, clientID: identity.topic, username: identity.username,
                        password: identity.password)
                }
            }.get()
            defer { login.stop() }
            #expect(!login.isConnected && login.connackCode != 0, "connack \(String(describing: login.connackCode))")
            // Each retained topic was emptied (what makes Home Assistant
            // remove the entity), and a new subscriber finds none of them.
            let emptied = await offPool {
                poll(timeoutMs: 30_000) { retained.allSatisfy { watcher.payloads(on: $0).last == "" } }
            }
            #expect(emptied, "last payloads: \(retained.map { ($0, watcher.payloads(on: $0).last ?? "-") })")
            let late = try await offPool { Result { try TopicListener(port: e.env.broker.port, topics: retained) } }
                .get()
            defer { late.stop() }
            // A marker published after the subscription arrives after any
            // retained message, which the broker sends at the subscription:
            // whatever came before it was retained.
            let marker = "marker-\(Platform.randomHex(bytes: 4))"
            _ = late.client.publish(topic: retained[0], payload: Array(marker.utf8), qos: 1)
            let marked = await offPool {
                poll(timeoutMs: 30_000) { late.messages.withLock { $0.contains { $0.payload == marker } } }
            }
            #expect(marked, "the marker did not come back")
            let stale = late.messages.withLock { $0.filter { $0.payload != marker } }
            #expect(stale.isEmpty, "still retained: \(stale)")
            late.messages.withLock { $0.removeAll() }
            #expect(!e.hub.presence.isOnline(tid))
            #expect(try await e.metrics(token: nil).value("thingif_hub_things_online") == 0)
            // The other hub forgets it when the cleared status reaches it.
            let forgotten = await offPool {
                poll(timeoutMs: 30_000) { otherEvents.withLock { $0.contains("\(tid) was deleted by another hub") } }
            }
            #expect(forgotten, "\(otherEvents.withLock { $0 })")
            #expect(!other.presence.isOnline(tid))
            let otherMetrics = try Exposition(String(decoding: other.metrics.exposition(), as: UTF8.self))
            #expect(otherMetrics.value("thingif_hub_things_online") == 0)
            // Home Assistant's birth message publishes no config for it again.
            // Its first: a round of every config, which the hub reports once
            // it handed them to its connection. A marker the hub publishes on
            // that connection after it reaches `late` after any of them.
            _ = watcher.client.publish(topic: "homeassistant/status", payload: Array("online".utf8), qos: 1)
            let round = await offPool { events.first(containing: "homeassistant: Home Assistant is online") }
            #expect(round?.contains("published") == true, "\(round ?? "not reported")")
            let after = "marker-\(Platform.randomHex(bytes: 4))"
            #expect(e.hub.publishRaw(topic: retained[0], payload: Array(after.utf8)))
            let arrived = await offPool {
                poll(timeoutMs: 30_000) { late.messages.withLock { $0.contains { $0.payload == after } } }
            }
            #expect(arrived, "the marker did not come back")
            let republished = late.messages.withLock { $0.filter { $0.payload != after } }
            #expect(republished.isEmpty, "published again: \(republished)")

            // A second delete finds nothing.
            let again = try await e.call("DELETE", path, token: token)
            #expect(again.status == 404 && again.errorCode == "TARGET_NOT_FOUND")

            // Kii's path deletes too, and the vendorThingID onboards anew as a new thing.
            let (tid2, _) = try await e.onboard("AC-DEL-1", owner: "user:\(uid)", token: token)
            #expect(tid2 != tid)
            let kii = try await e.call("DELETE", "\(e.api)/things/\(tid2)", token: token)
            #expect(kii.status == 204, "\(kii.status) \(kii.text)")
            #expect(e.hub.store.thing(id: tid2) == nil)
        }
    }
}
