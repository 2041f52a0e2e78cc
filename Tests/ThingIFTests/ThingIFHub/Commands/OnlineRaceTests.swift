// SPDX-License-Identifier: Apache-2.0

import Foundation
import Testing
@testable import ThingIF
@testable import ThingIFHub

/// A thing's "online" and a new command for it, at the same moment. The
/// hub holds a command for a thing it believes offline (a persistent
/// session would otherwise queue it in the broker) and sends what is held
/// when the thing comes online; a command stored while that "online" is
/// handled must be published by one side or the other, never held until
/// the thing's next online. The hub's store is an SQLite file, so each
/// insert (a commit with its sync) is long enough for the status to land
/// inside it.
@Suite("Delivery: a thing comes online while its commands are stored", .offPool)
struct OnlineRaceTests {
    @Test("A command stored while the thing's online status is handled is published, never held")
    func onlineWhileStoring() throws {
        try Self.withRaceHub("thingif-online-race") { hub, _ in
            guard
                case .success(let thing) = hub.store.registerThing(
                    vendorThingID: "AC-ONLINE-RACE", password: "pw", thingType: nil, firmwareVersion: nil,
                    dataGroupingInterval: nil, layoutPosition: nil)
            else {
                Issue.record("registration failed")
                return
            }
            let topic = "tonlinerace" + randomHexString(4)
            #expect(hub.store.addInstallation(thingID: thing.thingID, installationID: "i-race", mqttTopic: topic))
            Self.race(hub, to: thing.thingID) { Self.deliver(hub, Topics.status(clientID: topic), up: $0) }
        }
    }

    @Test(
        "End nodes (docs/GATEWAYS.md §5): a command stored while the end node's online, or its gateway's, is handled is published, never held"
    )
    func endNodeOnlineWhileStoring() throws {
        try Self.withRaceHub("thingif-end-node-race") { hub, broker in
            guard
                case .success(let gateway) = hub.store.registerThing(
                    vendorThingID: "GW-ONLINE-RACE", password: "pw", thingType: nil, firmwareVersion: nil,
                    dataGroupingInterval: nil, layoutPosition: .gateway),
                case .onboarded(let node, _) = hub.store.onboardEndNode(
                    gatewayThingID: gateway.thingID, vendorThingID: "LAMP-ONLINE-RACE", password: "pw",
                    thingType: nil, firmwareVersion: nil, owners: [], maxEndNodes: 10)
            else {
                Issue.record("registration failed")
                return
            }
            let topic = "tgwrace" + randomHexString(4)
            #expect(hub.store.addInstallation(thingID: gateway.thingID, installationID: "i-gw-race", mqttTopic: topic))
            // A subscription takes every command (PUBACK 0x00), as the gateway's would.
            let watcher = try MqttProbe.watcher(broker, Topics.endNodeCommands(clientID: "+", endNode: "+"))
            defer { watcher.stop() }
            let gatewayStatus = Topics.status(clientID: topic)
            let nodeStatus = Topics.endNodeStatus(clientID: topic, endNode: node.thingID)
            // The end node's online, its gateway online throughout.
            Self.deliver(hub, gatewayStatus, up: true)
            Self.race(hub, to: node.thingID) { Self.deliver(hub, nodeStatus, up: $0) }
            // The gateway's online, the end node's status online throughout.
            Self.deliver(hub, nodeStatus, up: true)
            Self.race(hub, to: node.thingID) { Self.deliver(hub, gatewayStatus, up: $0) }
        }
    }

    /// A hub on an SQLite file and a broker, for `body`.
    static func withRaceHub(_ name: String, _ body: (FrameworkSide, Broker) throws -> Void) throws {
        let broker = try Broker.start()
        let dir = try makeTempDirectory(prefix: name)
        defer {
            broker.stop()
            broker.removeFiles()
            try? FileManager.default.removeItem(atPath: dir)
        }
        let options = Env.hubOptions(appID: Env.appID, appKey: Env.appKey, broker: broker)
        let hub = try #require(FrameworkSide(options, store: try makeHubStore(dir + "/hub.sqlite")))
        try #require(hub.start(timeoutMs: 30_000), "\(hub.startProblem ?? "")")
        defer { hub.stop() }
        try body(hub, broker)
    }

    /// A status message as the broker hands it to the hub (its request thread).
    static func deliver(_ hub: FrameworkSide, _ topic: String, up: Bool) {
        hub.thingRequests.handle(
            Inbound(
                MqttClient.Message(
                    topic: topic, payload: Array((up ? "online" : "offline").utf8), qos: 1, retain: true)))
    }

    /// 100 rounds: `flip(false)`, then four commands stored for `thingID`
    /// while `flip(true)` lands somewhere among them; none may stay held.
    static func race(_ hub: FrameworkSide, to thingID: String, flip: (Bool) -> Void) {
        var held: [String] = []
        for round in 0..<100 {
            flip(false)
            let ids = Locked<[String]>([])
            let sender = Thread {
                for i in 0..<4 {
                    let (command, _) = Self.command(round * 4 + i)
                    if hub.delivery.send(command, to: thingID) { ids.withLock { $0.append(command.id) } }
                }
            }
            sender.start()
            // Somewhere among the four inserts.
            usleep(UInt32.random(in: 0...3_000))
            flip(true)
            while !sender.isFinished { usleep(1_000) }
            let sent = ids.withLock { $0 }
            #expect(sent.count == 4, "round \(round): \(sent.count) of 4 stored")
            // Held now means held until the next online.
            held += sent.filter { hub.store.command(id: $0)?.state == .sending }
        }
        #expect(held.isEmpty, "held after coming online: \(held)")
    }

    static func command(_ i: Int) -> (Command, String) {
        let id = FrameworkSide.newCommandID()
        let doc =
            "{\"commandID\":\"\(id)\",\"schema\":\"AirConditioner-Demo\",\"schemaVersion\":1,"
            + "\"issuer\":\"user:race\",\"actions\":[{\"setFanSpeed\":{\"fanSpeed\":\(i % 11)}}]}"
        guard case .success(let j) = JSON.parse(doc), case .success(let c) = Command.decode(j) else {
            fatalError("bad test command \(doc)")
        }
        return (c, "setFanSpeed")
    }
}
