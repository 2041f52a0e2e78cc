// SPDX-License-Identifier: Apache-2.0

import CThingIF
import CThingIFTestSupport
import Foundation
import Testing
import ThingIF
import ThingIFHub
#if canImport(Glibc)
    import Glibc
#endif

/// The attack suite of docs/SECURITY.md, on the production broker
/// configuration (deploy/make-broker-config.sh): each attack is made and
/// must fail, and the legitimate path still works in the same test.
@Suite("Security: attacks on the broker and the hub's MQTT side", .offPool)
struct SecurityTests {
    static let refused: ClosedRange<Int32> = 0x80...0xFF

    /// Two onboarded things: A (the victim, online) and B (the attacker's own
    /// thing, with its broker credentials read from its storage).
    func twoThings(_ env: Env, startVictim: Bool = true) throws -> (
        a: TestThing, aid: StoredIdentity, b: StoredIdentity
    ) {
        let (a, _) = try env.onlineAircon(vendorThingID: "AC-VICTIM", storage: "victim", start: startVictim)
        let (bThing, _) = try env.onlineAircon(vendorThingID: "AC-ATTACKER", storage: "attacker", start: false)
        bThing.destroy()
        return (
            a, try StoredIdentity(storage: env.storage("victim")), try StoredIdentity(storage: env.storage("attacker"))
        )
    }

    /// Connects as the thing `id`, subscribed to its reply topic; returns the
    /// client, that topic and the topic of the thing's state uploads.
    func thingClient(_ env: Env, _ id: StoredIdentity, receiveMaximum: Int32? = nil) throws -> (
        probe: MqttProbe, replies: String, states: String
    ) {
        let probe = try MqttProbe(
            port: env.broker.port, clientID: id.topic, username: id.username, password: id.password,
            receiveMaximum: receiveMaximum)
        let replies = Topics.response(clientID: id.topic)
        #expect(probe.subscribe(replies) == 1)
        return (
            probe, replies,
            Topics.request(clientID: id.topic, appID: Env.appID, path: "targets/thing:\(id.thingID)/states")
        )
    }

    @Test(
        "Nobody connects anonymously or with a wrong password; a thing's credentials work only with its own client ID")
    func authentication() throws {
        try withEnv { env in
            let (a, aid, b) = try twoThings(env)
            let anonymous = try MqttProbe(
                port: env.broker.port, clientID: "anon-" + randomHexString(4), username: nil, password: nil)
            defer { anonymous.stop() }
            #expect(
                anonymous.connackCode.map { $0 != 0 } ?? true, "anonymous: \(String(describing: anonymous.connackCode))"
            )
            let wrong = try MqttProbe(
                port: env.broker.port, clientID: aid.topic, username: aid.username, password: "guess")
            defer { wrong.stop() }
            #expect(!wrong.isConnected)
            // Session takeover: B's valid credentials with A's client ID.
            let takeover = try MqttProbe(
                port: env.broker.port, clientID: aid.topic, username: b.username, password: b.password)
            defer { takeover.stop() }
            #expect(!takeover.isConnected, "B took A's client ID")
            // The app's bootstrap credentials cannot publish as A either (see the injection test); A is still there.
            #expect(a.isConnected)
            try env.expectAlive(aid.thingID)
            // The legitimate path: B's credentials with B's own client ID.
            let own = try MqttProbe(
                port: env.broker.port, clientID: b.topic, username: b.username, password: b.password)
            defer { own.stop() }
            #expect(own.isConnected)
        }
    }

    @Test("Token harvest: bootstrap and thing identities cannot subscribe beyond their own reply topics")
    func tokenHarvest() throws {
        try withEnv { env in
            let (_, aid, b) = try twoThings(env)
            let boot = try MqttProbe.bootstrap(port: env.broker.port)
            let bootID = boot.client.clientID
            defer { boot.stop() }
            try #require(boot.isConnected)
            for filter in [
                "#", "p/#", "p/+/resp", "p/+/+", "+/+/resp", "p/+/thing-if/apps/#", "p/+/status",
                "$share/x/p/+/resp", "$share/x/#", aid.topic, "p/\(aid.topic)/config", "n/#"
            ] {
                let code = try #require(boot.subscribe(filter), "no SUBACK for \(filter)")
                #expect(Self.refused.contains(code), "bootstrap identity subscribed to \(filter): \(code)")
            }
            #expect(boot.subscribe("p/\(bootID)/resp") == 1, "its own reply topic")
            let thingB = try MqttProbe(
                port: env.broker.port, clientID: b.topic, username: b.username, password: b.password)
            defer { thingB.stop() }
            try #require(thingB.isConnected)
            for filter in [
                "#", "p/+/resp", "p/\(aid.topic)/resp", aid.topic, "p/+/thing-if/apps/#", "p/\(aid.topic)/config"
            ] {
                let code = try #require(thingB.subscribe(filter), "no SUBACK for \(filter)")
                #expect(Self.refused.contains(code), "thing B subscribed to \(filter): \(code)")
            }
            #expect(thingB.subscribe(b.topic) == 1)

            // A new thing onboards (its token and broker password cross the
            // broker) while both attackers listen where they could.
            let (c, _) = try env.onlineAircon(vendorThingID: "AC-NEW", storage: "newcomer")
            #expect(c.isConnected)
            let cid = try StoredIdentity(storage: env.storage("newcomer"))
            let seen = (boot.messages() + thingB.messages()).map { String(decoding: $0.payload, as: UTF8.self) }
            #expect(!seen.contains { $0.contains(cid.token) || $0.contains(cid.password) }, "harvested: \(seen)")
        }
    }

    @Test("Command injection and a retained configuration: only the hub writes a thing's command and config topics")
    func injection() throws {
        try withEnv { env in
            let (a, aid, b) = try twoThings(env)
            let boot = try MqttProbe.bootstrap(port: env.broker.port)
            defer { boot.stop() }
            let thingB = try MqttProbe(
                port: env.broker.port, clientID: b.topic, username: b.username, password: b.password)
            defer { thingB.stop() }
            try #require(boot.isConnected && thingB.isConnected)
            let before = a.records.count
            for (n, probe) in [boot, thingB].enumerated() {
                let command =
                    #"{"commandID":"evil-\#(n)","schema":"AirConditioner-Demo","schemaVersion":1,"issuer":"user:x","actions":[{"turnPower":{"power":false}}]}"#
                probe.publish(aid.topic, Array(command.utf8))
                let config =
                    #"{"version":999999,"actionSets":[{"name":"evil","actions":[{"turnPower":{"power":false}}]}],"timers":[]}"#
                probe.publish(Topics.config(clientID: aid.topic), Array(config.utf8), retain: true)
            }
            // Must not happen: an injected command or configuration applied.
            usleep(1_000_000)
            #expect(a.records.count == before, "an injected command ran: \(a.records.map { $0.commandID ?? "" })")
            #expect(!a.logContains("applied remote configuration"))
            #expect(env.hub.results(of: "evil-0") == nil && env.hub.results(of: "evil-1") == nil)
            try env.expectAlive(aid.thingID)
        }
    }

    @Test(
        "Results for another thing's command, or from a stolen token on another client ID, are refused; the real results count"
    )
    func crossThingResults() throws {
        try withEnv { env in
            let (a, aid, b) = try twoThings(env, startVictim: false)
            // A command for A, stored while A is offline.
            let cid = try #require(
                env.hub.sendCommand(
                    to: aid.thingID, schema: Aircon.schema, schemaVersion: 1,
                    actions: Aircon.powerOn))
            let thingB = try MqttProbe(
                port: env.broker.port, clientID: b.topic, username: b.username, password: b.password)
            defer { thingB.stop() }
            try #require(thingB.isConnected)
            #expect(thingB.subscribe(Topics.response(clientID: b.topic)) == 1)
            let forged = #"{"actionResults":[{"turnPower":{"succeeded":false,"errorMessage":"forged"}}]}"#
            let attempts: [(target: String, token: String, expected: Int)] = [
                (b.thingID, b.token, 404),  // B's own target, A's command
                (aid.thingID, b.token, 403),  // A's target with B's token
                (aid.thingID, aid.token, 403)  // A's stolen token, from B's client ID
            ]
            for (i, at) in attempts.enumerated() {
                let topic = Topics.request(
                    clientID: b.topic, appID: Env.appID,
                    path: "targets/thing:\(at.target)/commands/\(cid)/action-results")
                thingB.publish(
                    topic, kiiRequest("PUT", token: at.token, requestID: "forge-\(i)", body: forged),
                    correlation: "forge-\(i)")
            }
            #expect(poll { thingB.messages(on: Topics.response(clientID: b.topic)).count == attempts.count })
            let statuses = thingB.messages(on: Topics.response(clientID: b.topic)).compactMap {
                KiiResponse.decode($0.payload)
            }
            .sorted { ($0.requestID ?? "") < ($1.requestID ?? "") }.map(\.status)
            #expect(statuses == attempts.map(\.expected))
            #expect(env.hub.results(of: cid) == nil)
            // A comes online and runs it: its real results are the ones kept.
            #expect(ct_start(a.ct) == RC.ok)
            let results = try env.results(of: cid, timeoutMs: 30_000)
            #expect(results.map(\.succeeded) == [true])
        }
    }

    @Test("Replies go to the requester's own reply topic, never to a Response Topic it names")
    func chosenResponseTopic() throws {
        try withEnv { env in
            let (_, aid, b) = try twoThings(env)
            let watcher = try MqttProbe(
                port: env.broker.port, clientID: "watch-" + randomHexString(4),
                username: env.broker.adminUsername, password: env.broker.adminPassword)
            defer { watcher.stop() }
            #expect(watcher.subscribe("p/\(aid.topic)/resp") == 1)
            #expect(watcher.subscribe("evil/#") == 1)
            let (thingB, _, topic) = try thingClient(env, b)
            defer { thingB.stop() }
            for (i, rt) in ["p/\(aid.topic)/resp", "evil/topic"].enumerated() {
                thingB.publish(
                    topic, kiiRequest("PUT", token: b.token, requestID: "rt-\(i)", body: #"{"power":true}"#),
                    responseTopic: rt, correlation: "rt-\(i)")
            }
            #expect(poll { thingB.messages(on: Topics.response(clientID: b.topic)).count == 2 })
            let replies = thingB.messages(on: Topics.response(clientID: b.topic))
            // The thing's first upload is Kii's 201, the next 204.
            #expect(
                replies.compactMap { KiiResponse.decode($0.payload) }.sorted {
                    ($0.requestID ?? "") < ($1.requestID ?? "")
                }
                .map(\.status) == [201, 204])
            #expect(
                Set(replies.compactMap { $0.correlationData.map { String(decoding: $0, as: UTF8.self) } }) == [
                    "rt-0", "rt-1"
                ])
            // Must not happen: a publish on a chosen topic; room for it to show.
            usleep(300_000)
            #expect(watcher.messages().isEmpty, "published on a chosen topic: \(watcher.messages().map(\.topic))")
        }
    }

    @Test(
        "A burst of 2,000 state uploads from one thing is answered in full: the hub's own queue loses none, and the broker's queue for the hub (mosquitto's default 1000) drops few"
    )
    func stateBurst() throws {
        try withEnv { env in
            let (_, _, b) = try twoThings(env)
            // The probe takes its 2,000 answers with MQTT's largest Receive
            // Maximum: with libmosquitto's 20 the broker would queue its
            // answers too, and drop past 1,000 while its thread waited for a
            // core (a thing on libthingif has a handful of requests out at
            // once, not 2,000).
            let (thingB, replies, topic) = try thingClient(env, b, receiveMaximum: 65_535)
            defer { thingB.stop() }
            let n = 2000
            func upload(_ i: Int) {
                thingB.publish(
                    topic, kiiRequest("PUT", token: b.token, requestID: "s\(i)", body: #"{"power":true,"t":\#(i)}"#),
                    responseTopic: replies, correlation: "s\(i)")
            }
            func answered() -> Set<String> {
                Set(
                    thingB.messages(on: replies).compactMap {
                        $0.correlationData.map { String(decoding: $0, as: UTF8.self) }
                    })
            }
            // A read on the thing's own lane after the uploads: its answer
            // comes after theirs, for every one that reached the hub. One
            // the broker dropped too is asked again, under a new ID.
            let read = Topics.request(clientID: b.topic, appID: Env.appID, path: "things/\(b.thingID)/firmware-version")
            var syncs = 0
            func sync() -> Bool {
                for _ in 0..<5 {
                    syncs += 1
                    let id = "sync-\(syncs)"
                    thingB.publish(read, kiiRequest("GET", token: b.token, requestID: id, body: ""), correlation: id)
                    // 180 s: on CI's 2 cores beside the other suites the hub
                    // answered about 32 uploads a second at worst.
                    if poll(timeoutMs: 180_000, { answered().contains(id) }) { return true }
                }
                return false
            }
            for i in 0..<n { upload(i) }
            var last = n - 1
            var resent = 0
            var missing: [Int] = []
            // What the broker dropped (its queue for the hub holds 1,000
            // past libmosquitto's 20 in flight; a CI run lost 33 of the
            // 2,000 while the hub's network thread waited for a core) is
            // sent again under the same request ID, as a thing's outbox
            // does, at most twice. The hub's own queue loses nothing, so
            // few are sent again: before the request lanes, 832 were lost.
            for round in 0..<3 {
                try #require(sync(), "no answer to the lane's read")
                missing = (0..<n).filter { !answered().contains("s\($0)") }
                guard !missing.isEmpty, round < 2 else { break }
                resent += missing.count
                for i in missing { upload(i) }
                last = missing[missing.count - 1]
            }
            #expect(missing.isEmpty, "\(missing.count) of \(n) never answered")
            // What the broker drops depends on how long the hub's network
            // thread waits for a core: alone 0, in a clean-clone CI run
            // beside the other suites 215 of 2,000 (2026-12-03). A quarter
            // still tells the request lanes from the queue before them,
            // which lost 832.
            #expect(resent <= n / 4, "\(resent) of \(n) sent again")
            let statuses = thingB.messages(on: replies).filter {
                $0.correlationData.map { String(decoding: $0, as: UTF8.self) }.map { Int($0.dropFirst()) != nil }
                    ?? false
            }.compactMap { KiiResponse.decode($0.payload)?.status }
            // The first the hub took is Kii's 201 (the thing's first upload), the rest 204.
            #expect(
                statuses.count == n && statuses.filter { $0 == 201 }.count == 1
                    && statuses.allSatisfy { $0 == 201 || $0 == 204 }, "\(Set(statuses)) of \(statuses.count)")
            // The last upload sent is the state the hub holds: the lane kept their order.
            #expect(parseObject(env.hub.store.thing(id: b.thingID)?.state)?["t"] as? Int == last)
        }
    }

    @Test("An oversized body gets 413 and a flood gets 429; a normal upload still passes")
    func limits() throws {
        try withEnv { env in
            let (_, _, b) = try twoThings(env)
            // A hub of its own with a small burst, on the same broker.
            env.hub.stop()
            var options = Env.hubOptions(appID: Env.appID, appKey: Env.appKey, broker: env.broker)
            options.requestRatePerSecond = 1
            options.requestBurst = 20
            let hub = try #require(FrameworkSide(options, store: env.hub.store))
            try #require(hub.start(timeoutMs: 30_000), "\(hub.startProblem ?? "")")
            defer { hub.stop() }
            let (thingB, replies, topic) = try thingClient(env, b)
            defer { thingB.stop() }
            let big = #"{"pad":""# + String(repeating: "x", count: HubLimits.defaultMaxStateBody) + #""}"#
            thingB.publish(topic, kiiRequest("PUT", token: b.token, requestID: "big", body: big), correlation: "big")
            thingB.publish(
                topic, kiiRequest("PUT", token: b.token, requestID: "ok", body: #"{"power":true}"#), correlation: "ok")
            #expect(poll { thingB.messages(on: replies).count == 2 })
            let first = thingB.messages(on: replies).compactMap { KiiResponse.decode($0.payload) }
            #expect(first.first { $0.requestID == "big" }?.status == 413)
            #expect(first.first { $0.requestID == "ok" }?.status == 201, "the thing's first upload")
            for i in 0..<40 {
                thingB.publish(
                    topic, kiiRequest("PATCH", token: b.token, requestID: "f\(i)", body: #"{"n":\#(i)}"#),
                    correlation: "f\(i)")
            }
            #expect(poll { thingB.messages(on: replies).count == 42 })
            let statuses = thingB.messages(on: replies).compactMap { KiiResponse.decode($0.payload)?.status }
            #expect(statuses.filter { $0 == 429 }.count >= 15, "\(statuses)")
            #expect(statuses.filter { $0 == 204 }.count >= 18, "\(statuses)")
        }
    }

    @Test("Password guessing over the bootstrap identity: wrong passwords are refused, then throttled with 429")
    func passwordGuessing() throws {
        try withEnv { env in
            let (t, _) = try env.onlineAircon(vendorThingID: "AC-GUESS", storage: "guessed", start: false)
            t.destroy()
            let boot = try MqttProbe.bootstrap(port: env.broker.port)
            let bootID = boot.client.clientID
            defer { boot.stop() }
            #expect(boot.subscribe(Topics.response(clientID: bootID)) == 1)
            let topic = Topics.request(clientID: bootID, appID: Env.appID, path: "onboardings")
            for i in 0..<12 {
                let body = #"{"vendorThingID":"AC-GUESS","thingPassword":"guess-\#(i)"}"#
                boot.publish(
                    topic,
                    kiiRequest(
                        "POST", token: nil, contentType: MediaType.onboardingByThing,
                        requestID: "g\(i)", body: body), correlation: "g\(i)")
            }
            let replies = Topics.response(clientID: bootID)
            #expect(poll { boot.messages(on: replies).count == 12 })
            let statuses = boot.messages(on: replies).compactMap { KiiResponse.decode($0.payload)?.status }
            #expect(statuses.filter { $0 == 403 }.count >= 8, "\(statuses)")
            // The last ones refused (three when no token came back meanwhile);
            // with more than one costly-work thread the replies may come out
            // of order, so they are counted.
            #expect(statuses.filter { $0 == 429 }.count >= 2, "\(statuses)")
            // Another thing onboards meanwhile.
            let (other, _) = try env.onlineAircon(vendorThingID: "AC-NOT-GUESSED", storage: "other", start: false)
            #expect(other.thingID != nil)
        }
    }

    @Test("Re-onboarding rotates the thing's broker password: the old one is refused, the new one works")
    func passwordRotation() throws {
        try withEnv { env in
            let (t1, _) = try env.onlineAircon(vendorThingID: "AC-ROT", storage: "first", start: false)
            let first = try StoredIdentity(storage: env.storage("first"))
            t1.destroy()
            let (_, _) = try env.onlineAircon(vendorThingID: "AC-ROT", storage: "second", start: false)
            let second = try StoredIdentity(storage: env.storage("second"))
            #expect(first.topic == second.topic)
            #expect(first.password != second.password)
            let old = try MqttProbe(
                port: env.broker.port, clientID: first.topic, username: first.username, password: first.password)
            defer { old.stop() }
            #expect(!old.isConnected)
            let new = try MqttProbe(
                port: env.broker.port, clientID: second.topic, username: second.username, password: second.password)
            defer { new.stop() }
            #expect(new.isConnected)
        }
    }

    @Test("The hub reaches the broker over TLS; a CA that does not match fails, never falling back to plain text")
    func hubTLS() throws {
        let broker = try Broker.start()
        defer {
            broker.stop()
            broker.removeFiles()
        }
        var options = Env.hubOptions(appID: Env.appID, appKey: Env.appKey, broker: broker)
        options.brokerPort = broker.tlsPort
        options.brokerTLS = FrameworkSide.TLSFiles(caFile: broker.caFile)
        let hub = try #require(FrameworkSide(options))
        #expect(hub.start(timeoutMs: 30_000), "\(hub.startProblem ?? "")")
        hub.stop()
        // Mutual TLS: with the client certificate on the listener that requires one.
        options.brokerPort = broker.mtlsPort
        options.brokerTLS = FrameworkSide.TLSFiles(
            caFile: broker.caFile, certFile: BrokerSecrets.clientCert,
            keyFile: BrokerSecrets.clientKey)
        let mutual = try #require(FrameworkSide(options))
        #expect(mutual.start(timeoutMs: 30_000), "\(mutual.startProblem ?? "")")
        mutual.stop()
        // The server's own certificate as the CA: verification fails.
        options.brokerPort = broker.tlsPort
        options.brokerTLS = FrameworkSide.TLSFiles(caFile: BrokerSecrets.pkiDirectory + "/server.crt")
        let wrongCA = try #require(FrameworkSide(options))
        #expect(!wrongCA.start(timeoutMs: 3000))
        wrongCA.stop()
        // TLS against the plain listener: no session at all.
        options.brokerPort = broker.port
        options.brokerTLS = FrameworkSide.TLSFiles(caFile: broker.caFile)
        let plain = try #require(FrameworkSide(options))
        #expect(!plain.start(timeoutMs: 3000))
        plain.stop()
        // A missing CA file is refused before connecting.
        options.brokerTLS = FrameworkSide.TLSFiles(caFile: "/nonexistent/ca.crt")
        let missing = try #require(FrameworkSide(options))
        #expect(!missing.start(timeoutMs: 3000))
        #expect(missing.startProblem?.contains("TLS") == true)
    }
}
