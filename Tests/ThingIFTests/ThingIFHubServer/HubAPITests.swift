// SPDX-License-Identifier: Apache-2.0

import CThingIF
import CThingIFTestSupport
import Foundation
#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif
import Testing
import ThingIF
import ThingIFHub
@testable import ThingIFHubServer

/// The REST API of thingif-hub end to end: a real broker, the hub's HTTP
/// server in-process on a free port, and the C appliance.
@Suite("HubAPI: the REST API", .serialized, .offPool)
struct HubAPITests {
    @Test("One command limit: a body the REST API takes but the thing could not gets 413; just under it runs to DONE")
    func commandPayloadLimit() async throws {
        try await withHubAPI { e in
            let (uid, token) = try await e.user()
            let (tid, thingToken) = try await e.onboard("AC-LIMIT-1", owner: "user:\(uid)", token: token)
            _ = try await e.appliance(thingID: tid, token: thingToken)
            // Four padded turnPower actions (the handler ignores the pad): a body
            // of exactly `size` bytes.
            func body(_ size: Int) throws -> Data {
                func make(_ pad: Int) throws -> Data {
                    let action: [String: Any] = [
                        "turnPower": ["power": true, "pad": String(repeating: "p", count: pad)]
                    ]
                    return try JSONSerialization.data(withJSONObject: [
                        "schema": Aircon.schema, "schemaVersion": 1, "issuer": "user:\(uid)",
                        "actions": [action, action, action, action]
                    ])
                }
                let base = try make(0).count
                let each = (size - base) / 4
                var d = try make(each)
                // The remainder goes into the title.
                var o = try #require(try JSONSerialization.jsonObject(with: d) as? [String: Any])
                let rest = size - d.count
                if rest > 0 {
                    o["title"] = ""
                    let withTitle = try JSONSerialization.data(withJSONObject: o).count
                    o["title"] = String(repeating: "t", count: max(0, size - withTitle))
                    d = try JSONSerialization.data(withJSONObject: o)
                }
                return d
            }
            let commands = "\(e.target(tid))/commands"
            // Within the REST body limit (65,536) but, with the commandID the hub
            // adds, over what the thing takes (WireLimits.maxPayload): refused.
            let near = try body(65_450)
            #expect(near.count <= 65_536)
            let refused = try await e.call("POST", commands, token: token, body: near)
            #expect(
                refused.status == 413 && refused.errorCode == "REQUEST_TOO_LARGE", "\(refused.status) \(refused.text)")
            let listed = try await e.get(commands, token: token)
            #expect((listed.json["commands"] as? [Any])?.isEmpty == true, "nothing stored on a 413")
            // Well under it: stored, delivered and run by the real thing.
            let ok = try await e.call("POST", commands, token: token, body: try body(60_000))
            try #require(ok.status == 201, "\(ok.status) \(ok.text)")
            let cid = try #require(ok.string("commandID"))
            let c = try await e.waitForFinished(tid, cid, token: token)
            #expect(c["commandState"] as? String == "DONE")
        }
    }

    @Test("REST end to end: pseudo user, onboard by owner, handed-over identity, command to DONE, state and history")
    func restEndToEnd() async throws {
        try await withHubAPI { e in
            let events = HubLines()
            e.hub.onEvent = events.sink
            let (uid, token) = try await e.user()
            let (tid, thingToken) = try await e.onboard("AC-REST-1", owner: "user:\(uid)", token: token)
            #expect(e.hub.thing(tid)?.owners == ["user:\(uid)"])
            _ = try await e.appliance(thingID: tid, token: thingToken) { t in
                #expect(ct_behave_upload_state(t.ct, "setFanSpeed", 1) == 0)
            }
            let before = Platform.epochMs()
            let cid = try await e.postCommand(
                tid, token: token, userID: uid,
                extra: [
                    "title": "Cool down", "description": "Before I get home",
                    "metadata": ["origin": "test"]
                ])
            let c = try await e.waitForFinished(tid, cid, token: token)
            #expect(c["commandState"] as? String == "DONE")
            #expect(c["commandID"] as? String == cid)
            #expect(c["target"] as? String == "thing:\(tid)")
            #expect(c["issuer"] as? String == "user:\(uid)")
            #expect(c["schema"] as? String == Aircon.schema)
            #expect(c["schemaVersion"] as? Int == 1)
            #expect(c["title"] as? String == "Cool down")
            #expect(c["description"] as? String == "Before I get home")
            #expect((c["metadata"] as? [String: Any])?["origin"] as? String == "test")
            #expect((c["actions"] as? [Any])?.count == 3)
            let results = try #require(c["actionResults"] as? [[String: Any]])
            #expect(results.map { $0.keys.first ?? "" } == ["turnPower", "setPresetTemperature", "setFanSpeed"])
            #expect(results.allSatisfy { (($0.values.first as? [String: Any])?["succeeded"] as? Bool) == true })
            let created = try #require(c["createdAt"] as? Int)
            let modified = try #require(c["modifiedAt"] as? Int)
            #expect(created >= Int(before) && modified >= created)

            // State: the appliance PUTs its state after setFanSpeed; the hub
            // reports it once it is stored (before: Kii's empty state, 200 {}).
            #expect(await offPool { events.wait { $0.hasPrefix("state of \(tid): ") } }, "\(events.all)")
            let r = try await e.get("\(e.target(tid))/states", token: token)
            try #require(r.status == 200, "\(r.status) \(r.text)")
            let state = r.json
            #expect(state["power"] as? Bool == true)
            #expect(state["presetTemperature"] as? Int == 25)
            #expect(state["fanSpeed"] as? Int == 5)

            let h = try await e.get(
                "\(e.target(tid))/states/history?from=\(before - 1)&to=\(Platform.epochMs() + 1)", token: token)
            #expect(h.status == 200)
            let groups = try #require(h.json["groupedResults"] as? [[String: Any]])
            #expect(!groups.isEmpty)
            for g in groups {
                let range = try #require(g["range"] as? [String: Any])
                let from = try #require(range["from"] as? Int), to = try #require(range["to"] as? Int)
                #expect(to - from == 60_000, "1_MINUTE groups")
                #expect(from % 60_000 == 0)
                let objects = try #require(g["objects"] as? [[String: Any]])
                #expect(!objects.isEmpty)
                for o in objects {
                    let at = try #require(o["_created"] as? Int)
                    #expect(at >= from && at < to)
                }
            }
            let last = try #require((groups.last?["objects"] as? [[String: Any]])?.last)
            #expect(last["fanSpeed"] as? Int == 5)
            // An empty range: no groups.
            let empty = try await e.get("\(e.target(tid))/states/history?from=1&to=2", token: token)
            #expect(empty.status == 200 && (empty.json["groupedResults"] as? [Any])?.isEmpty == true)
        }
    }

    @Test("Pagination: 30 commands read as three pages of 10, ascending, no key after the last page")
    func pagination() async throws {
        try await withHubAPI { e in
            let (uid, token) = try await e.user()
            let (tid, _) = try await e.onboard("AC-PAGE-1", owner: "user:\(uid)", token: token)
            var posted: [String] = []
            for i in 0..<30 {
                posted.append(
                    try await e.postCommand(
                        tid, token: token, userID: uid,
                        actions: [["setFanSpeed": ["fanSpeed": i % 10]]]))
            }
            var seen: [String] = []
            var key: String?
            var pages = 0
            repeat {
                let q = "bestEffortLimit=10" + (key.map { "&paginationKey=\($0)" } ?? "")
                let r = try await e.get("\(e.target(tid))/commands?\(q)", token: token)
                try #require(r.status == 200, "\(r.status) \(r.text)")
                let commands = try #require(r.json["commands"] as? [[String: Any]])
                #expect(commands.count == 10)
                seen += commands.compactMap { $0["commandID"] as? String }
                key = r.string("nextPaginationKey")
                pages += 1
                #expect(pages < 3 ? key != nil : key == nil, "page \(pages)")
            } while key != nil && pages < 5
            #expect(pages == 3)
            #expect(seen == posted)
            // Without bestEffortLimit a page holds 10 as well; a bad key is refused.
            let first = try await e.get("\(e.target(tid))/commands", token: token)
            #expect((first.json["commands"] as? [Any])?.count == 10)
            let bad = try await e.get("\(e.target(tid))/commands?paginationKey=nope", token: token)
            #expect(bad.status == 400 && bad.isErrorBody)
            let zero = try await e.get("\(e.target(tid))/commands?bestEffortLimit=0", token: token)
            #expect(zero.status == 400 && zero.errorCode == "INVALID_INPUT_DATA")
        }
    }

    @Test("Notifications on MQTT, SSE and WEBHOOK for a normal user: every installation is told")
    func notificationsAllChannels() async throws {
        let hook = try WebhookReceiver()
        defer { hook.stop() }
        // The receiver is on loopback: only the operator's allow-list lets a webhook reach it.
        try await withHubAPI(options: { $0.webhooks = WebhookGuard(allow: ["127.0.0.1:\(hook.port)"]) }) { e in
            let (uid, token) = try await e.user(loginName: "alice")
            let (tid, thingToken) = try await e.onboard("AC-NOTE-1", owner: "user:\(uid)", token: token)
            _ = try await e.appliance(thingID: tid, token: thingToken)
            let mqtt = try await e.installation("MQTT", token: token)
            let topic = try #require(mqtt.topic)
            #expect(topic == "n/\(mqtt.id)")
            let sse = try await e.installation("SSE", token: token)
            let webhook = try await e.installation("WEBHOOK", token: token, webhookURL: hook.url)

            // The app reads its topic with the credentials the hub made for it.
            let (user, pass) = (try #require(mqtt.username), try #require(mqtt.password))
            let listener = try await offPool {
                Result {
                    try TopicListener(
                        port: e.env.broker.port, topics: [topic], username: user, password: pass, clientID: user)
                }
            }.get()
            defer { listener.stop() }
            let stream = try RawStream(port: e.port, path: "\(e.api)/installations/\(sse.id)/events", token: token)
            #expect(await offPool { stream.waitFor(": connected") }, "stream: \(stream.text)")
            #expect(stream.text.hasPrefix("HTTP/1.1 200"))
            #expect(stream.text.lowercased().contains("content-type: text/event-stream"))
            #expect(e.server.openEventStreams(sse.id) == 1)

            let cid = try await e.postCommand(tid, token: token, userID: uid)
            _ = try await e.waitForFinished(tid, cid, token: token)

            #expect(await offPool { stream.waitFor("\"commandID\":\"\(cid)\"") }, "stream: \(stream.text)")
            #expect(stream.text.contains("event: command\ndata: {"))
            #expect(await offPool { poll(timeoutMs: 30_000) { !listener.payloads(on: topic).isEmpty } })
            let m = try #require(parseObject(listener.payloads(on: topic).first))
            #expect(m["commandID"] as? String == cid)
            #expect(m["thingID"] as? String == tid)
            #expect(m["commandState"] as? String == "DONE")
            #expect(await offPool { poll(timeoutMs: 30_000) { !hook.bodies.withLock { $0.isEmpty } } })
            let w = try #require(parseObject(hook.bodies.withLock { $0.first }))
            #expect(w["commandID"] as? String == cid)
            #expect(w["commandState"] as? String == "DONE")
            _ = webhook
            // The hub marks it notified with its next delivery tick: no sweep
            // (here: any time after the grace period) claims it.
            let store = e.hub.store
            #expect(
                await offPool {
                    poll(timeoutMs: 30_000) {
                        store.claimUnnotified(now: Platform.epochMs() + 60_000, leaseMs: 1, limit: 10).isEmpty
                    }
                })
            #expect(store.command(id: cid)?.state == .done)

            // Uninstalling ends the stream and stops the notifications there.
            let del = try await e.call("DELETE", "\(e.api)/installations/\(sse.id)", token: token)
            #expect(del.status == 204)
            #expect(await offPool { poll(timeoutMs: 30_000) { e.server.openEventStreams(sse.id) == 0 } })
            let again = try await e.call("DELETE", "\(e.api)/installations/\(sse.id)", token: token)
            #expect(again.status == 404 && again.errorCode == "INSTALLATION_NOT_FOUND")
        }
    }

    @Test("A pseudo user is told only on the issuing installation; a normal user on all of its installations")
    func pseudoUserRule() async throws {
        try await withHubAPI { e in
            let events = HubLines()
            e.hub.onEvent = events.sink
            let (pid, ptoken) = try await e.user()
            let (nid, ntoken) = try await e.user(loginName: "bob")
            let (tid, thingToken) = try await e.onboard("AC-NOTE-2", owner: "user:\(pid)", token: ptoken)
            _ = try await e.onboard("AC-NOTE-2", owner: "user:\(nid)", token: ntoken)
            _ = try await e.appliance(thingID: tid, token: thingToken)
            let pa = try await e.installation("MQTT", token: ptoken)
            let pb = try await e.installation("MQTT", token: ptoken)
            let na = try await e.installation("MQTT", token: ntoken)
            let nb = try await e.installation("MQTT", token: ntoken)
            let topics = [pa, pb, na, nb].compactMap(\.topic)
            #expect(topics.count == 4)
            let listener = try await offPool { Result { try TopicListener(port: e.env.broker.port, topics: topics) } }
                .get()
            defer { listener.stop() }

            let pcid = try await e.postCommand(tid, token: ptoken, userID: pid, installationID: pa.id)
            let ncid = try await e.postCommand(tid, token: ntoken, userID: nid)
            _ = try await e.waitForFinished(tid, pcid, token: ptoken)
            _ = try await e.waitForFinished(tid, ncid, token: ntoken)
            let all = [pa.topic!, na.topic!, nb.topic!]
            #expect(await offPool { poll(timeoutMs: 30_000) { all.allSatisfy { !listener.payloads(on: $0).isEmpty } } })
            // No stray notification on pb: both commands' notifications were
            // published before the hub reports them told, and a marker the hub
            // publishes on pb after that arrives after any of them.
            #expect(
                await offPool {
                    [pcid, ncid].allSatisfy { cid in events.wait { $0.hasPrefix("notified of the end of \(cid)") } }
                }, "\(events.all)")
            let marker = "marker-\(Platform.randomHex(bytes: 4))"
            #expect(e.hub.publishRaw(topic: pb.topic!, payload: Array(marker.utf8)))
            #expect(await offPool { poll(timeoutMs: 30_000) { listener.payloads(on: pb.topic!).contains(marker) } })
            #expect(listener.payloads(on: pb.topic!) == [marker])
            #expect(listener.payloads(on: pa.topic!).count == 1)
            #expect(listener.payloads(on: pa.topic!).first?.contains(pcid) == true)
            #expect(listener.payloads(on: na.topic!).map { $0.contains(ncid) } == [true])
            #expect(listener.payloads(on: nb.topic!).map { $0.contains(ncid) } == [true])

            // Another user's installation cannot be named as the issuing one.
            let r = try await e.call(
                "POST", "\(e.target(tid))/commands", token: ptoken,
                json: [
                    "schema": Aircon.schema, "schemaVersion": 1, "issuer": "user:\(pid)",
                    "actions": HubAPIEnv.threeActions
                ],
                headers: ["X-Thingif-Installation-ID": na.id])
            #expect(r.status == 400 && r.isErrorBody)
        }
    }

    @Test("Security: a second owner cannot read the first owner's thing; group members can; a thing's token is no user")
    func security() async throws {
        try await withHubAPI { e in
            let (a, atoken) = try await e.user(loginName: "owner-a")
            let (_, btoken) = try await e.user(loginName: "owner-b")
            let (c, ctoken) = try await e.user(loginName: "member-c")
            let (tid, thingToken) = try await e.onboard("AC-SEC-1", owner: "user:\(a)", token: atoken)
            let cid = try await e.postCommand(tid, token: atoken, userID: a)
            for path in [
                "\(e.target(tid))/commands", "\(e.target(tid))/commands/\(cid)",
                "\(e.target(tid))/states", "\(e.target(tid))/states/history"
            ] {
                let r = try await e.get(path, token: btoken)
                #expect(r.status == 404 && r.errorCode == "TARGET_NOT_FOUND", "\(path): \(r.status) \(r.text)")
                let t = try await e.get(path, token: thingToken)
                #expect(t.status == 403 && t.errorCode == "WRONG_TOKEN", "\(path) with the thing's token: \(t.status)")
            }
            let post = try await e.call(
                "POST", "\(e.target(tid))/commands", token: btoken,
                json: ["schema": "s", "schemaVersion": 1, "issuer": "user:x", "actions": [["a": [:]]]])
            #expect(post.status == 404)
            // B cannot bind A's thing to A, nor issue as A.
            let steal = try await e.call(
                "POST", "\(e.thingIF)/onboardings", token: btoken,
                json: ["vendorThingID": "AC-SEC-1", "thingPassword": "pw", "owner": "user:\(a)"])
            #expect(steal.status == 403 && steal.errorCode == "FORBIDDEN")
            #expect(e.hub.thing(tid)?.owners == ["user:\(a)"])

            // A group of A with member C owns a second thing: C sees it, B does not.
            let g = try await e.call("POST", "\(e.api)/groups", token: atoken, json: ["name": "home", "members": [c]])
            #expect(g.status == 201)
            let gid = try #require(g.string("groupID"))
            let (gtid, _) = try await e.onboard("AC-SEC-2", owner: "group:\(gid)", token: atoken)
            let gcid = try await e.postCommand(gtid, token: atoken, userID: a)
            let seenByC = try await e.get("\(e.target(gtid))/commands/\(gcid)", token: ctoken)
            #expect(seenByC.status == 200 && seenByC.string("commandID") == gcid)
            let listByC = try await e.get("\(e.target(gtid))/commands", token: ctoken)
            #expect((listByC.json["commands"] as? [Any])?.count == 1)
            let byGroup = try await e.call(
                "POST", "\(e.target(gtid))/commands", token: ctoken,
                json: [
                    "schema": Aircon.schema, "schemaVersion": 1, "issuer": "group:\(gid)",
                    "actions": [["turnPower": ["power": false]]]
                ])
            #expect(byGroup.status == 201)
            let seenByB = try await e.get("\(e.target(gtid))/commands/\(gcid)", token: btoken)
            #expect(seenByB.status == 404)
            // C's view of A's own thing: none.
            #expect(try await e.get("\(e.target(tid))/commands", token: ctoken).status == 404)
        }
    }

    @Test("Every endpoint given bad input answers 4xx with {errorCode,message} and stores nothing")
    func badInput() async throws {
        try await withHubAPI { e in
            let (uid, token) = try await e.user()
            let (tid, thingToken) = try await e.onboard("AC-BAD-1", owner: "user:\(uid)", token: token)
            let cid = try await e.postCommand(tid, token: token, userID: uid)
            let store = e.hub.store
            func snapshot() -> [Int] {
                [
                    store.commands(thingID: tid, afterSeq: 0, limit: 1000).count,
                    store.appInstallations(userID: uid).count,
                    store.groups(ofUser: uid).count,
                    store.thing(id: tid)?.owners.count ?? -1,
                    store.thing(vendorThingID: "AC-BAD-NEW") == nil ? 0 : 1,
                    store.user(loginName: "baduser") == nil ? 0 : 1
                ]
            }
            let before = snapshot()
            let big = Data(repeating: UInt8(ascii: " "), count: HubLimits.defaultMaxBody + 1)
            let goodCommand: [String: Any] = [
                "schema": Aircon.schema, "schemaVersion": 1, "issuer": "user:\(uid)",
                "actions": HubAPIEnv.threeActions
            ]
            func command(_ change: (inout [String: Any]) -> Void) -> Data {
                var c = goodCommand
                change(&c)
                return try! JSONSerialization.data(withJSONObject: c)
            }
            func data(_ o: Any) -> Data { try! JSONSerialization.data(withJSONObject: o) }
            let onboard: [String: Any] = ["vendorThingID": "AC-BAD-NEW", "thingPassword": "pw", "owner": "user:\(uid)"]
            func onboardWith(_ change: (inout [String: Any]) -> Void) -> Data {
                var o = onboard
                change(&o)
                return data(o)
            }
            let commands = "\(e.target(tid))/commands"
            let malformed = Data("{\"schema\":".utf8)

            struct Case {
                var name: String
                var method: String
                var path: String
                var token: String?
                var body: Data?
                var contentType: String? = "application/json"
                var status: Int
                var code: String?
            }
            var cases: [Case] = []
            // Users and login.
            let users = "\(e.api)/users"
            cases += [
                Case(
                    name: "user: malformed", method: "POST", path: users, body: malformed, status: 400,
                    code: "INVALID_INPUT_DATA"),
                Case(
                    name: "user: array", method: "POST", path: users, body: data([1]), status: 400,
                    code: "INVALID_INPUT_DATA"),
                Case(
                    name: "user: loginName type", method: "POST", path: users,
                    body: data(["loginName": 5, "password": "pwpw"]), status: 400, code: "INVALID_INPUT_DATA"),
                Case(
                    name: "user: short loginName", method: "POST", path: users,
                    body: data(["loginName": "x", "password": "pwpw"]), status: 400, code: "INVALID_INPUT_DATA"),
                Case(
                    name: "user: no password", method: "POST", path: users, body: data(["loginName": "baduser"]),
                    status: 400, code: "INVALID_INPUT_DATA"),
                Case(
                    name: "user: text/plain", method: "POST", path: users,
                    body: data(["loginName": "baduser", "password": "pwpw"]), contentType: "text/plain", status: 415,
                    code: "UNSUPPORTED_MEDIA_TYPE"),
                Case(
                    name: "user: no content type", method: "POST", path: users,
                    body: data(["loginName": "baduser", "password": "pwpw"]), contentType: nil, status: 415,
                    code: "UNSUPPORTED_MEDIA_TYPE"),
                Case(
                    name: "user: oversized", method: "POST", path: users, body: big, status: 413,
                    code: "REQUEST_TOO_LARGE"),
                Case(
                    name: "user: unknown app", method: "POST", path: "/api/apps/nope/users",
                    body: data([:] as [String: Any]), status: 404, code: "APP_NOT_FOUND"),
                Case(
                    name: "token: missing password", method: "POST", path: "\(e.api)/oauth2/token",
                    body: data(["username": "nobody"]), status: 400, code: "INVALID_INPUT_DATA"),
                Case(
                    name: "token: wrong password", method: "POST", path: "\(e.api)/oauth2/token",
                    body: data(["username": "nobody", "password": "x"]), status: 400, code: "invalid_grant")
            ]
            // Groups.
            let groups = "\(e.api)/groups"
            cases += [
                Case(
                    name: "group: no token", method: "POST", path: groups, body: data(["name": "g"]), status: 401,
                    code: nil),
                Case(
                    name: "group: wrong token", method: "POST", path: groups, token: "nope", body: data(["name": "g"]),
                    status: 403, code: "WRONG_TOKEN"),
                Case(
                    name: "group: thing token", method: "POST", path: groups, token: thingToken,
                    body: data(["name": "g"]), status: 403, code: "WRONG_TOKEN"),
                Case(
                    name: "group: malformed", method: "POST", path: groups, token: token, body: malformed, status: 400,
                    code: "INVALID_INPUT_DATA"),
                Case(
                    name: "group: no name", method: "POST", path: groups, token: token, body: data(["members": []]),
                    status: 400, code: "INVALID_INPUT_DATA"),
                Case(
                    name: "group: members type", method: "POST", path: groups, token: token,
                    body: data(["name": "g", "members": "u"]), status: 400, code: "INVALID_INPUT_DATA"),
                Case(
                    name: "group: unknown member", method: "POST", path: groups, token: token,
                    body: data(["name": "g", "members": ["u.nobody"]]), status: 400, code: "INVALID_INPUT_DATA"),
                Case(
                    name: "group: oversized", method: "POST", path: groups, token: token, body: big, status: 413,
                    code: "REQUEST_TOO_LARGE")
            ]
            // Onboarding.
            let onboardings = "\(e.thingIF)/onboardings"
            cases += [
                Case(
                    name: "onboard: no token", method: "POST", path: onboardings, body: data(onboard), status: 401,
                    code: nil),
                Case(
                    name: "onboard: thing token", method: "POST", path: onboardings, token: thingToken,
                    body: data(onboard), status: 403, code: "WRONG_TOKEN"),
                Case(
                    name: "onboard: malformed", method: "POST", path: onboardings, token: token, body: malformed,
                    status: 400, code: "INVALID_INPUT_DATA"),
                Case(
                    name: "onboard: missing owner", method: "POST", path: onboardings, token: token,
                    body: onboardWith { $0["owner"] = nil }, status: 400, code: "INVALID_INPUT_DATA"),
                Case(
                    name: "onboard: password type", method: "POST", path: onboardings, token: token,
                    body: onboardWith { $0["thingPassword"] = 1 }, status: 400, code: "INVALID_INPUT_DATA"),
                Case(
                    name: "onboard: bad interval", method: "POST", path: onboardings, token: token,
                    body: onboardWith { $0["dataGroupingInterval"] = "2_MINUTES" }, status: 400,
                    code: "INVALID_INPUT_DATA"),
                Case(
                    name: "onboard: untyped owner", method: "POST", path: onboardings, token: token,
                    body: onboardWith { $0["owner"] = uid }, status: 400, code: "INVALID_INPUT_DATA"),
                Case(
                    name: "onboard: someone else", method: "POST", path: onboardings, token: token,
                    body: onboardWith { $0["owner"] = "user:u.other" }, status: 403, code: "FORBIDDEN"),
                Case(
                    name: "onboard: wrong password", method: "POST", path: onboardings, token: token,
                    body: onboardWith {
                        $0["vendorThingID"] = "AC-BAD-1"; $0["thingPassword"] = "wrong"
                    }, status: 403, code: "WRONG_PASSWORD"),
                Case(
                    name: "onboard: xml", method: "POST", path: onboardings, token: token, body: data(onboard),
                    contentType: "application/xml", status: 415, code: "UNSUPPORTED_MEDIA_TYPE"),
                Case(
                    name: "onboard: oversized", method: "POST", path: onboardings, token: token, body: big, status: 413,
                    code: "REQUEST_TOO_LARGE")
            ]
            // Commands.
            cases += [
                Case(
                    name: "command: no token", method: "POST", path: commands, body: command { _ in }, status: 401,
                    code: nil),
                Case(
                    name: "command: wrong token", method: "POST", path: commands, token: "0123", body: command { _ in },
                    status: 403, code: "WRONG_TOKEN"),
                Case(
                    name: "command: thing token", method: "POST", path: commands, token: thingToken,
                    body: command { _ in }, status: 403, code: "WRONG_TOKEN"),
                Case(
                    name: "command: malformed", method: "POST", path: commands, token: token, body: malformed,
                    status: 400, code: "INVALID_INPUT_DATA"),
                Case(
                    name: "command: not an object", method: "POST", path: commands, token: token,
                    body: Data("\"x\"".utf8), status: 400, code: "INVALID_INPUT_DATA"),
                Case(
                    name: "command: no schema", method: "POST", path: commands, token: token,
                    body: command { $0["schema"] = nil }, status: 400, code: "WRONG_COMMAND"),
                Case(
                    name: "command: schemaVersion string", method: "POST", path: commands, token: token,
                    body: command { $0["schemaVersion"] = "1" }, status: 400, code: "WRONG_COMMAND"),
                Case(
                    name: "command: actions object", method: "POST", path: commands, token: token,
                    body: command { $0["actions"] = ["turnPower": true] }, status: 400, code: "WRONG_COMMAND"),
                Case(
                    name: "command: empty actions", method: "POST", path: commands, token: token,
                    body: command { $0["actions"] = [Any]() }, status: 400, code: "WRONG_COMMAND"),
                Case(
                    name: "command: two-key action", method: "POST", path: commands, token: token,
                    body: command { $0["actions"] = [["a": 1, "b": 2]] }, status: 400, code: "WRONG_COMMAND"),
                Case(
                    name: "command: no issuer", method: "POST", path: commands, token: token,
                    body: command { $0["issuer"] = nil }, status: 400, code: "WRONG_COMMAND"),
                Case(
                    name: "command: foreign issuer", method: "POST", path: commands, token: token,
                    body: command { $0["issuer"] = "user:u.other" }, status: 403, code: "FORBIDDEN"),
                Case(
                    name: "command: long title", method: "POST", path: commands, token: token,
                    body: command { $0["title"] = String(repeating: "t", count: 51) }, status: 400,
                    code: "WRONG_COMMAND"),
                Case(
                    name: "command: metadata array", method: "POST", path: commands, token: token,
                    body: command { $0["metadata"] = [1] }, status: 400, code: "WRONG_COMMAND"),
                Case(
                    name: "command: unknown thing", method: "POST", path: "\(e.target("th.nope"))/commands",
                    token: token, body: command { _ in }, status: 404, code: "TARGET_NOT_FOUND"),
                Case(
                    name: "command: not a thing target", method: "POST",
                    path: "\(e.thingIF)/targets/user:\(uid)/commands", token: token, body: command { _ in },
                    status: 404, code: "TARGET_NOT_FOUND"),
                Case(
                    name: "command: form-encoded", method: "POST", path: commands, token: token,
                    body: Data("schema=x".utf8), contentType: "application/x-www-form-urlencoded", status: 415,
                    code: "UNSUPPORTED_MEDIA_TYPE"),
                Case(
                    name: "command: oversized", method: "POST", path: commands, token: token, body: big, status: 413,
                    code: "REQUEST_TOO_LARGE"),
                Case(
                    name: "command: unknown app", method: "POST",
                    path: "/thing-if/apps/nope/targets/thing:\(tid)/commands", token: token, body: command { _ in },
                    status: 404, code: "APP_NOT_FOUND"),
                Case(
                    name: "get command: unknown", method: "GET", path: "\(commands)/cmd-nope", token: token,
                    status: 404, code: "COMMAND_NOT_FOUND"),
                Case(name: "get command: no token", method: "GET", path: "\(commands)/\(cid)", status: 401, code: nil),
                Case(
                    name: "list: bad limit", method: "GET", path: "\(commands)?bestEffortLimit=ten", token: token,
                    status: 400, code: "INVALID_INPUT_DATA"),
                Case(
                    name: "list: unknown thing", method: "GET", path: "\(e.target("th.nope"))/commands", token: token,
                    status: 404, code: "TARGET_NOT_FOUND")
            ]
            // State.
            cases += [
                Case(
                    name: "state of an alias: none yet", method: "GET", path: "\(e.target(tid))/states/aliases/A",
                    token: token, status: 404, code: "STATE_NOT_FOUND"),
                Case(
                    name: "state: unknown thing", method: "GET", path: "\(e.target("th.nope"))/states", token: token,
                    status: 404, code: "TARGET_NOT_FOUND"),
                Case(
                    name: "history: bad from", method: "GET", path: "\(e.target(tid))/states/history?from=yesterday",
                    token: token, status: 400, code: "INVALID_INPUT_DATA"),
                Case(
                    name: "history: from after to", method: "GET", path: "\(e.target(tid))/states/history?from=10&to=5",
                    token: token, status: 400, code: "INVALID_INPUT_DATA"),
                Case(
                    name: "history: thing token", method: "GET", path: "\(e.target(tid))/states/history",
                    token: thingToken, status: 403, code: "WRONG_TOKEN")
            ]
            // Installations.
            let installations = "\(e.api)/installations"
            cases += [
                Case(
                    name: "installation: no token", method: "POST", path: installations,
                    body: data(["deviceType": "MQTT"]), status: 401, code: nil),
                Case(
                    name: "installation: bad type", method: "POST", path: installations, token: token,
                    body: data(["deviceType": "APNS"]), status: 400, code: "INVALID_INPUT_DATA"),
                Case(
                    name: "installation: type number", method: "POST", path: installations, token: token,
                    body: data(["deviceType": 1]), status: 400, code: "INVALID_INPUT_DATA"),
                Case(
                    name: "installation: webhook without URL", method: "POST", path: installations, token: token,
                    body: data(["deviceType": "WEBHOOK"]), status: 400, code: "INVALID_INPUT_DATA"),
                Case(
                    name: "installation: webhook ftp", method: "POST", path: installations, token: token,
                    body: data(["deviceType": "WEBHOOK", "webhookURL": "ftp://x"]), status: 400,
                    code: "INVALID_INPUT_DATA"),
                Case(
                    name: "installation: malformed", method: "POST", path: installations, token: token, body: malformed,
                    status: 400, code: "INVALID_INPUT_DATA"),
                Case(
                    name: "installation: oversized", method: "POST", path: installations, token: token, body: big,
                    status: 413, code: "REQUEST_TOO_LARGE"),
                Case(
                    name: "uninstall: unknown", method: "DELETE", path: "\(installations)/inst-nope", token: token,
                    status: 404, code: "INSTALLATION_NOT_FOUND"),
                Case(
                    name: "events: unknown", method: "GET", path: "\(installations)/inst-nope/events", token: token,
                    status: 404, code: "INSTALLATION_NOT_FOUND"),
                Case(
                    name: "events: no token", method: "GET", path: "\(installations)/inst-nope/events", status: 401,
                    code: nil),
                Case(
                    name: "no such path", method: "GET", path: "/thing-if/nothing", token: token, status: 404,
                    code: "NOT_FOUND")
            ]
            for c in cases {
                let r = try await e.call(c.method, c.path, token: c.token, body: c.body, contentType: c.contentType)
                #expect(r.status == c.status, "\(c.name): \(r.status) \(r.text)")
                #expect(r.isErrorBody, "\(c.name): \(r.text)")
                #expect(r.contentType?.hasPrefix("application/json") == true, "\(c.name)")
                if let code = c.code { #expect(r.errorCode == code, "\(c.name): \(r.text)") }
            }
            #expect(snapshot() == before, "nothing stored on a 4xx")
            // An MQTT installation is not an event stream.
            let mqtt = try await e.installation("MQTT", token: token)
            let notSSE = try await e.get("\(installations)/\(mqtt.id)/events", token: token)
            #expect(notSSE.status == 400 && notSSE.isErrorBody)
        }
    }

    @Test("GET /health and GET /openapi.yaml (the committed docs/openapi.yaml)")
    func healthAndOpenAPI() async throws {
        try await withHubAPI { e in
            let h = try await e.get("/health", token: nil)
            #expect(h.status == 200 && h.string("status") == "ok")
            let doc = try await e.get("/openapi.yaml", token: nil)
            #expect(doc.status == 200)
            let root = URL(fileURLWithPath: BrokerSecrets.repoRoot)
            let file = try String(contentsOf: root.appendingPathComponent("docs/openapi.yaml"), encoding: .utf8)
            #expect(doc.text == file, "GET /openapi.yaml serves docs/openapi.yaml (a SwiftPM resource)")
            #expect(doc.text.hasPrefix("openapi: 3.0"))
        }
    }
}
