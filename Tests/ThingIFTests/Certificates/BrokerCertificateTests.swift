// SPDX-License-Identifier: Apache-2.0

import Foundation
import Testing
import ThingIF

/// The broker's listener for things with certificates, on its
/// own: deploy/make-broker-config.sh's pattern rules give a client exactly
/// the topics of its certificate's CN, with no record in the broker, and
/// only certificates of the things CA that are in date get in.
@Suite("Broker: things with certificates", .offPool)
struct BrokerCertificateTests {
    /// A probe on the certificate listener with `cert`/`key`.
    static func thing(_ broker: Broker, cn: String, cert: String, key: String) throws -> MqttProbe {
        try MqttProbe(
            port: broker.certPort, clientID: cn, username: nil, password: nil,
            tls: (ca: broker.caFile, cert: cert, key: key))
    }

    @Test("A certificate's CN is its only topic: it reads its commands, not another's, and writes only under p/CN/")
    func ownTopicsOnly() throws {
        let broker = try Broker.start()
        let pki = try TestPKI()
        defer {
            broker.stop()
            broker.removeFiles()
        }
        let mine = "t" + randomHexString(8)
        let other = "t" + randomHexString(8)
        let (cert, key) = try pki.clientCertificate(
            cn: mine, ca: BrokerSecrets.thingsCAFile, caKey: BrokerSecrets.thingsCAKey)
        let hub = try MqttProbe(
            port: broker.port, clientID: "hub-" + randomHexString(4), username: broker.adminUsername,
            password: broker.adminPassword)
        defer { hub.stop() }
        #expect(hub.isConnected)
        #expect(hub.subscribe("p/#").map { $0 < 0x80 } == true)
        let probe = try Self.thing(broker, cn: mine, cert: cert, key: key)
        defer { probe.stop() }
        #expect(probe.isConnected, "broker:\n\(tail(broker.log))")
        _ = probe.subscribe(mine)
        _ = probe.subscribe(other)
        _ = probe.subscribe(Topics.response(clientID: other))
        // Commands to both topics and a reply to the other: only its own arrives.
        hub.publish(other, Array("for-other".utf8))
        hub.publish(Topics.response(clientID: other), Array("reply-for-other".utf8))
        hub.publish(mine, Array("for-me".utf8))
        #expect(probe.waitForMessage(on: mine)?.payload == Array("for-me".utf8))
        // Its own status reaches the hub; one in another's name does not.
        probe.publish(Topics.status(clientID: other), Array("forged".utf8))
        probe.publish(Topics.status(clientID: mine), Array("mine".utf8))
        #expect(hub.waitForMessage(on: Topics.status(clientID: mine))?.payload == Array("mine".utf8))
        // Must not happen: another topic delivered; room for it to show.
        usleep(300_000)
        #expect(probe.messages(on: other).isEmpty)
        #expect(probe.messages(on: Topics.response(clientID: other)).isEmpty)
        #expect(hub.messages(on: Topics.status(clientID: other)).isEmpty)
    }

    @Test("No certificate, one of another CA, the broker's own CA's, or an expired one: no session")
    func refused() throws {
        let broker = try Broker.start()
        let pki = try TestPKI()
        defer {
            broker.stop()
            broker.removeFiles()
        }
        let cn = "t" + randomHexString(8)
        // The control: an in-date certificate of the things CA gets in.
        let good = try pki.clientCertificate(cn: cn, ca: BrokerSecrets.thingsCAFile, caKey: BrokerSecrets.thingsCAKey)
        let control = try Self.thing(broker, cn: cn, cert: good.cert, key: good.key)
        #expect(control.isConnected, "broker:\n\(tail(broker.log))")
        control.stop()

        let none = try MqttProbe(
            port: broker.certPort, clientID: cn, username: cn, password: nil, tls: (ca: broker.caFile, nil, nil))
        #expect(!none.isConnected)
        none.stop()
        let (otherCA, otherKey) = try pki.makeCA("other")
        let foreign = try pki.clientCertificate(cn: cn, ca: otherCA, caKey: otherKey)
        let a = try Self.thing(broker, cn: cn, cert: foreign.cert, key: foreign.key)
        #expect(!a.isConnected)
        a.stop()
        // The CA of the broker's other listeners signs no thing.
        let serverCA = try pki.clientCertificate(
            cn: cn, ca: broker.caFile, caKey: BrokerSecrets.pkiDirectory + "/ca.key")
        let b = try Self.thing(broker, cn: cn, cert: serverCA.cert, key: serverCA.key)
        #expect(!b.isConnected)
        b.stop()
        let expired = try pki.clientCertificate(
            cn: cn, ca: BrokerSecrets.thingsCAFile, caKey: BrokerSecrets.thingsCAKey, days: -1)
        let c = try Self.thing(broker, cn: cn, cert: expired.cert, key: expired.key)
        #expect(!c.isConnected)
        c.stop()
    }
}
