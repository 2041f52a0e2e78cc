// SPDX-License-Identifier: Apache-2.0

import Testing
@testable import ThingIF
@testable import ThingIFHub

@Suite("Request lanes")
struct RequestLanesTests {
    @Test("A client's requests and status share one lane; other topics go to lane 0; clients spread over the lanes")
    func lanes() {
        let n = 4
        for id in ["c1", "thingif-abc", "x", "\u{351}a"] {
            let lane = RequestLanes.lane(of: Topics.request(clientID: id, appID: "app", path: "onboardings"), count: n)
            #expect(RequestLanes.lane(of: Topics.status(clientID: id), count: n) == lane)
            #expect(RequestLanes.lane(of: "p/\(id)/api/apps/app/installations", count: n) == lane)
            #expect((0..<n).contains(lane))
        }
        #expect(RequestLanes.lane(of: "homeassistant/status", count: n) == 0)
        #expect(RequestLanes.lane(of: "px/c1/status", count: n) == 0)
        #expect(RequestLanes.lane(of: "p", count: n) == 0)
        #expect(RequestLanes.lane(of: "", count: n) == 0)
        #expect(RequestLanes.lane(of: "p/c1/status", count: 1) == 0)
        let used = Set((0..<64).map { RequestLanes.lane(of: Topics.status(clientID: "client-\($0)"), count: n) })
        #expect(used == Set(0..<n), "64 clients use every lane")
    }

    @Test("A gateway's requests for all its end nodes take its one lane, as they spend its one budget")
    func oneLanePerGateway() {
        let n = 8
        let gateway = "thingif-gw-1"
        let lane = RequestLanes.lane(of: Topics.status(clientID: gateway), count: n)
        for e in (0..<32).map({ "th.en\($0)" }) {
            for path in [
                "targets/thing:\(e)/states", "targets/thing:\(e)/commands/c1/action-results",
                "things/\(e)/firmware-version", "things/gw/end-nodes/\(e)/connection"
            ] {
                #expect(
                    RequestLanes.lane(of: Topics.request(clientID: gateway, appID: "app", path: path), count: n) == lane
                )
            }
        }
        #expect(
            RequestLanes.lane(
                of: Topics.request(clientID: gateway, appID: "app", path: "things/gw/end-nodes?bestEffortLimit=2"),
                count: n)
                == lane)
        // The run that shares a commit is per target: an end node's uploads are one target each.
        #expect(
            ThingRequests.sharedCommitTarget(
                Inbound(
                    MqttClient.Message(
                        topic: Topics.request(clientID: gateway, appID: "app", path: "targets/thing:th.en1/states"),
                        payload: [], qos: 1, retain: false)))
                == "thing:th.en1")
    }

    @Test("Each client's messages are handled in arrival order, whichever lane they share")
    func order() {
        let lanes = RequestLanes(count: 3, capacity: 10_000, maxBytes: 1 << 20)
        let seen = Locked<[String: [Int]]>([:])
        let largest = Locked(0)
        #expect(
            lanes.start(batch: 8) { ms in
                largest.withLock { $0 = max($0, ms.count) }
                for m in ms {
                    let n = Int(String(decoding: m.message.payload, as: UTF8.self)) ?? -1
                    seen.withLock { $0[m.message.topic, default: []].append(n) }
                }
            })
        let clients = (0..<12).map { Topics.status(clientID: "c\($0)") }
        for i in 0..<300 {
            for t in clients {
                lanes.push(Inbound(MqttClient.Message(topic: t, payload: Array(String(i).utf8), qos: 1, retain: false)))
            }
        }
        lanes.close()
        let s = seen.withLock { $0 }
        #expect(s.count == clients.count)
        for t in clients { #expect(s[t] == Array(0..<300), "\(t) in order") }
        // What waits is handed over together, never more than asked for.
        #expect((1...8).contains(largest.withLock { $0 }))
    }
}
