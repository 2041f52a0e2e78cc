// SPDX-License-Identifier: Apache-2.0

import Foundation
import Testing
import ThingIF

/// MqttClient's Receive Maximum against the production broker configuration:
/// what a burst costs a subscriber whose network thread waits (as the hub's
/// does when its process waits for a core), in the broker's own queue.
@Suite("Transport: a subscriber's Receive Maximum and the broker's queue", .offPool)
struct ReceiveMaximumTests {
    /// How many of `n` QoS 1 messages reach a subscriber with `receiveMaximum`
    /// that reads nothing while they are published.
    private func delivered(_ broker: Broker, receiveMaximum: Int32?, n: Int) throws -> Int {
        let topic = "rm/" + randomHexString(4)
        let sub = try MqttProbe(
            port: broker.port, clientID: "rm-sub-" + randomHexString(4), username: broker.adminUsername,
            password: broker.adminPassword, receiveMaximum: receiveMaximum)
        defer { sub.stop() }
        let pub = try MqttProbe(
            port: broker.port, clientID: "rm-pub-" + randomHexString(4), username: broker.adminUsername,
            password: broker.adminPassword)
        defer { pub.stop() }
        try #require(sub.subscribe(topic) == 1)
        sub.hold()
        for i in 0..<n { pub.publish(topic, Array("\(i)".utf8)) }
        // The broker acknowledges a publish once it has sent, queued or
        // dropped it for the subscriber, in order: after this one, all are.
        #expect(pub.publishAcked(topic, Array("published".utf8)) == 0)
        sub.release()
        // A marker behind whatever the broker kept; one that finds the queue
        // still full is dropped too, so another follows until one arrives.
        var arrived = false
        for k in 0..<20 where !arrived {
            #expect(pub.publishAcked(topic, Array("sync-\(k)".utf8)) == 0)
            arrived = sub.waitForMessage(on: topic, payload: "sync-\(k)", timeoutMs: 3_000)
        }
        #expect(arrived, "no marker reached the subscriber")
        return sub.messages(on: topic).filter { Int(String(decoding: $0.payload, as: UTF8.self)) != nil }.count
    }

    @Test(
        "With libmosquitto's Receive Maximum of 20, a waiting subscriber loses what passes the broker's 1,000 queued; with 65,535 nothing"
    )
    func burstWhileWaiting() throws {
        let broker = try Broker.start()
        defer { broker.stop() }
        let n = 1_500
        let small = try delivered(broker, receiveMaximum: nil, n: n)
        // 20 in flight and 1,000 queued (mosquitto's max_queued_messages).
        #expect(small < n, "the default window kept all \(n): the broker's queue did not fill")
        let large = try delivered(broker, receiveMaximum: 65_535, n: n)
        #expect(large == n, "\(large) of \(n) with a Receive Maximum of 65,535")
    }
}
