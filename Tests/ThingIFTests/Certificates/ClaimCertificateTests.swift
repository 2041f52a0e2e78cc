// SPDX-License-Identifier: Apache-2.0

import CThingIF
import CThingIFTestSupport
import Foundation
import Testing
@testable import ThingIF
@testable import ThingIFHub
import ThingIFHubServer

/// Fleet provisioning by claim: a claim certificate of the
/// claims CA (CN claim.APPID.BATCH, made by `thingif-hub claim-certificate`)
/// lets a device onboard without the app key. Real broker (the claim
/// listener, which trusts the claims CA only, and the pattern rules), real
/// hub, real library.
@Suite("ClaimCertificateTests", .offPool)
struct ClaimCertificateTests {
    static let batch = "batch-1"
    static var claimName: String { "claim.\(Env.appID).\(batch)" }

    /// A claim certificate and key made by the hub's command with the test
    /// broker's claims CA (or, `signedByThingsCA`, the things CA: the old
    /// way), in a fresh directory.
    static func claimPair(
        _ env: Env, app: String = Env.appID, batch: String = batch, signedByThingsCA: Bool = false
    ) throws -> ClaimPair {
        let dir = env.storage("claim-\(app)-\(batch)" + (signedByThingsCA ? "-things" : ""))
        let ca =
            signedByThingsCA
            ? (BrokerSecrets.thingsCAFile, BrokerSecrets.thingsCAKey)
            : (BrokerSecrets.claimsCAFile, BrokerSecrets.claimsCAKey)
        try ClaimCertificateCommand.run([
            "--claim-ca-cert", ca.0, "--claim-ca-key", ca.1, "--app", app, "--name", batch, "--out", dir
        ])
        return ClaimPair(cert: dir + "/claim.crt", key: dir + "/claim.key")
    }

    /// A device with the aircon handlers, no app key (NULL), TLS with the
    /// broker's CA, bootstrap on the broker's claim listener, and the claim
    /// certificate. The caller destroys it.
    static func claimDevice(_ env: Env, storage: String, pair: ClaimPair) throws -> TestThing {
        let ct = try #require(ct_new(Env.appID, nil, env.storage(storage), Int32(env.broker.claimPort), LogLevel.info))
        let t = TestThing(ct: ct)
        #expect(ct_set_option(ct, Int32(THINGIF_OPT_REQUEST_TIMEOUT_MS.rawValue), 5000) == RC.ok)
        #expect(ct_register_aircon_handlers(ct, Aircon.schema, Aircon.version) == RC.ok)
        #expect(ct_set_tls(ct, env.broker.caFile, nil, nil) == RC.ok)
        let rc = ct_set_claim_certificate(ct, pair.cert, pair.key)
        #expect(rc == RC.ok, "\(t.logs)")
        return t
    }

    /// A raw client on the claim listener with the claim pair.
    static func claimProbe(_ env: Env, _ pair: ClaimPair, clientID: String) throws -> MqttProbe {
        let p = try certProbe(env, port: env.broker.claimPort, cert: pair.cert, key: pair.key, clientID: clientID)
        try #require(p.isConnected, "broker:\n\(tail(env.broker.log))")
        return p
    }

    /// A raw client with a certificate on `port`, connected or not.
    static func certProbe(_ env: Env, port: Int, cert: String, key: String, clientID: String) throws -> MqttProbe {
        try MqttProbe(
            port: port, clientID: clientID, username: nil, password: nil,
            tls: (ca: env.broker.caFile, cert: cert, key: key))
    }

    /// An onboarding by the thing as Kii frames it, with a CSR unless `csr` is nil.
    static func onboarding(_ vendorThingID: String, csr: String?, requestID: String) -> [UInt8] {
        let body = OnboardingRequest(
            vendorThingID: vendorThingID, thingPassword: "password-1", thingType: "AirConditioner",
            certificateSigningRequest: csr
        ).encode().dump()
        return kiiRequest(
            "POST", token: nil, contentType: MediaType.onboardingByThing, requestID: requestID, body: body)
    }

    /// The status and body of a framework answer.
    static func answer(_ m: MqttClient.Message?) -> (status: Int, body: String)? {
        guard let m, let r = KiiResponse.decode(m.payload) else { return nil }
        return (r.status, r.bodyText)
    }

    @Test("A device with only a claim certificate (no app key) onboards, gets its own certificate and takes a command")
    func claimOnboards() throws {
        try withEnv { env in
            let pair = try Self.claimPair(env)
            let t = try Self.claimDevice(env, storage: "claim", pair: pair)
            defer { t.destroy() }
            let rc = ct_onboard(t.ct, "AC-CLAIM", "password-1", "AirConditioner", "1.0.0", nil)
            try #require(rc == RC.ok, "logs:\n\(t.logs)\nbroker:\n\(tail(env.broker.log))")
            let tid = try #require(t.thingID)
            // Its own certificate, for its own topic, not the claim's.
            let id = try CertificateModeTests.identity(env, storage: "claim")
            let ep = try #require(id["mqttEndpoint"] as? [String: Any])
            let topic = try #require(ep["mqttTopic"] as? String)
            #expect(ep["clientCertificate"] as? String != nil, "\(ep)")
            // Bootstrapped on the claim listener; its own connection goes to the things' one.
            #expect(ep["portSSL"] as? Int == env.broker.certPort, "\(ep)")
            let pki = try TestPKI()
            let subject = try pki.run(["x509", "-in", env.storage("claim") + "/thing-cert.pem", "-noout", "-subject"])
            #expect(subject.contains(topic) && !subject.contains("claim."), "\(subject)")
            // The request came on the claim topic, from a random client ID.
            let logged = try #require(env.hub.requests.first { $0.path == "claim " + Self.claimName })
            #expect(logged.status == 200 && logged.clientID.hasPrefix("thingif-bootstrap-"), "\(logged)")
            #expect(ct_start(t.ct) == RC.ok)
            #expect(env.hub.waitForOnline(tid, timeoutMs: 30_000), "logs:\n\(t.logs)\nbroker:\n\(tail(env.broker.log))")
            try env.expectAlive(tid)
        }
    }

    @Test(
        "Two clients sharing a claim certificate read no answer of the other's; a claim identity reads no thing's topics and writes only its own onboarding"
    )
    func claimTopicsAreNarrow() throws {
        try withEnv { env in
            let pair = try Self.claimPair(env)
            let name = Self.claimName
            let (_, tid) = try env.onlineAircon(vendorThingID: "AC-VICTIM", storage: "victim")
            let victimTopic = try StoredIdentity(storage: env.storage("victim")).topic
            // The hub's own identity sees what the broker lets through.
            let watcher = try MqttProbe.watcher(env.broker, "#")
            defer { watcher.stop() }

            let a = try Self.claimProbe(env, pair, clientID: "claim-a-" + randomHexString(6))
            defer { a.stop() }
            let b = try Self.claimProbe(env, pair, clientID: "claim-b-" + randomHexString(6))
            defer { b.stop() }
            let bResp = Topics.claimResponse(name: name, clientID: b.client.clientID)
            // A tries every way to read B's answer and the things' topics;
            // subscriptions may be granted (the broker checks reads at
            // delivery), but nothing may arrive.
            for filter in [bResp, "c/\(name)/+/resp", "c/#", "#", "p/#", victimTopic, "p/\(victimTopic)/resp"] {
                _ = a.subscribe(filter)
            }
            // Client IDs with / or + widen nothing: mosquitto applies no
            // pattern rule to a client ID with + or #, and one with / gives
            // topics of more levels than any answer's.
            let slash = try Self.claimProbe(env, pair, clientID: b.client.clientID + "/x")
            defer { slash.stop() }
            let plus = try Self.claimProbe(env, pair, clientID: "ev+il-" + randomHexString(4))
            defer { plus.stop() }
            for probe in [slash, plus] {
                for filter in [bResp, "c/#", "#"] { _ = probe.subscribe(filter) }
            }
            #expect(b.subscribe(bResp) == 1)
            let pki = try TestPKI()
            let (_, csrFile) = try pki.keyAndCSR(cn: "AC-B")
            let csr = try String(contentsOfFile: csrFile, encoding: .utf8)
            #expect(
                b.publish(
                    Topics.claimRequest(name: name, clientID: b.client.clientID),
                    Self.onboarding("AC-B", csr: csr, requestID: "b-1"), responseTopic: bResp, correlation: "b-1"))
            let got = Self.answer(b.waitForMessage(on: bResp, timeoutMs: 30_000))
            #expect(got?.status == 200, "\(String(describing: got)); hub: \(env.hub.requests.suffix(3))")
            #expect(got?.body.contains("accessToken") == true)
            // The victim's commands still flow while A listens.
            try env.expectAlive(tid)

            // A writes nowhere but its own onboarding topic.
            let forbidden = [
                Topics.claimRequest(name: name, clientID: b.client.clientID),
                Topics.claimRequest(name: "claim.\(Env.appID).other", clientID: a.client.clientID),
                victimTopic, "p/\(victimTopic)/thing-if/apps/\(Env.appID)/onboardings", "p/\(victimTopic)/status",
                "c/\(name)/\(a.client.clientID)/resp", "p/\(victimTopic)/resp", "anything"
            ]
            let marker = Array("forbidden-\(randomHexString(6))".utf8)
            for topic in forbidden { _ = a.publish(topic, marker) }
            let own = Topics.claimRequest(name: name, clientID: a.client.clientID)
            _ = a.publish(own, Array("not a request".utf8))
            #expect(watcher.waitForMessage(on: own) != nil, "the positive control did not pass")
            // A reads its own answer (to its malformed request: 400) through
            // its wildcard subscriptions, and nothing else.
            let ownResp = Topics.claimResponse(name: name, clientID: a.client.clientID)
            let aAnswer = Self.answer(a.waitForMessage(on: ownResp))
            #expect(aAnswer?.status == 400, "\(String(describing: aAnswer))")
            // Must not happen: the marker leaked; room for it to show.
            usleep(300_000)
            let leaked = watcher.messages().filter { $0.payload == marker }.map(\.topic)
            #expect(leaked.isEmpty, "A published on \(leaked)")
            let read = a.messages().filter { $0.topic != ownResp }.map(\.topic)
            #expect(read.isEmpty, "A read \(read)")
            #expect(
                slash.messages().isEmpty && plus.messages().isEmpty,
                "\(slash.messages().map(\.topic)) \(plus.messages().map(\.topic))")
        }
    }

    @Test(
        "endNodeClaimIgnored: a claim certificate cannot write p/{its CN}/end-nodes/X/status (no pattern gives end-node rights); the hub would drop it anyway"
    )
    func endNodeClaimIgnored() throws {
        try withEnv { env in
            let pair = try Self.claimPair(env)
            let watcher = try MqttProbe.watcher(env.broker, "p/+/end-nodes/#")
            defer { watcher.stop() }
            let claim = try Self.claimProbe(env, pair, clientID: "claim-en-" + randomHexString(6))
            defer { claim.stop() }
            let topic = Topics.endNodeStatus(clientID: Self.claimName, endNode: "th.any")
            // Its CN matches the things' p/%u/… patterns, which carry no end-node rule.
            #expect(claim.publishAcked(topic, Array("online".utf8)) == 0x87)
            // What the hub makes of one that got there (a broker configured by
            // hand with the old pattern): dropped, counted and cleared.
            #expect(watcher.publish(topic, Array("online".utf8), retain: true))
            #expect(
                poll { watcher.sawCleared(topic) },
                "not cleared: \(watcher.messages(on: topic).map(\.payload))")
            let counted = #"thingif_hub_refused_total{defence="end_node_status"} 1"#
            #expect(poll { String(decoding: env.hub.metrics.exposition(), as: UTF8.self).contains(counted) })
            #expect(!env.hub.presence.isOnline("th.any"))
        }
    }

    @Test(
        "Devices sharing a claim certificate onboard at once and one after another, each with its own client ID, and none reads another's answer"
    )
    func claimDevicesShareACertificate() throws {
        try withEnv { env in
            let pair = try Self.claimPair(env)
            let name = Self.claimName
            // A third holder of the claim, connected throughout, listens for
            // every answer; on a listener that made the CN the client ID
            // the devices' connections would also close its session.
            let spy = try Self.claimProbe(env, pair, clientID: "claim-spy-" + randomHexString(6))
            defer { spy.stop() }
            for filter in ["c/\(name)/+/resp", "c/#", "#"] { _ = spy.subscribe(filter) }
            let devices = try (0..<3).map { i in try Self.claimDevice(env, storage: "shared-\(i)", pair: pair) }
            defer { devices.forEach { $0.destroy() } }
            var rcs = [Int32](repeating: -1, count: 3)
            let lock = NSLock()
            // Two at once, then the third.
            DispatchQueue.concurrentPerform(iterations: 2) { i in
                let rc = ct_onboard(devices[i].ct, "AC-SHARED-\(i)", "password-1", "AirConditioner", "1.0.0", nil)
                lock.withLock { rcs[i] = rc }
            }
            rcs[2] = ct_onboard(devices[2].ct, "AC-SHARED-2", "password-1", "AirConditioner", "1.0.0", nil)
            #expect(
                rcs == [RC.ok, RC.ok, RC.ok],
                "\(rcs)\n\(devices.map(\.logs).joined(separator: "\n---\n"))\nbroker:\n\(tail(env.broker.log))")
            let tids = devices.compactMap(\.thingID)
            #expect(Set(tids).count == 3, "\(tids)")
            // Each request came from a client ID of its own.
            let claims = env.hub.requests.filter { $0.path == "claim " + name && $0.status == 200 }
            let ids = Set(claims.map(\.clientID))
            #expect(claims.count == 3 && ids.count == 3, "\(claims)")
            #expect(ids.allSatisfy { $0.hasPrefix("thingif-bootstrap-") }, "\(ids)")
            // The spy read nothing and kept its session.
            usleep(300_000)
            #expect(spy.messages().isEmpty, "the spy read \(spy.messages().map(\.topic))")
            #expect(spy.isConnected && spy.disconnectCount == 0, "broker:\n\(tail(env.broker.log))")
            // Each device has its own identity, and takes commands.
            let tokens = try (0..<3).map { try StoredIdentity(storage: env.storage("shared-\($0)")).token }
            #expect(Set(tokens).count == 3)
            #expect(ct_start(devices[0].ct) == RC.ok)
            #expect(env.hub.waitForOnline(tids[0], timeoutMs: 30_000), "logs:\n\(devices[0].logs)")
            try env.expectAlive(tids[0])
        }
    }

    @Test(
        "A thing's certificate opens no session on the claim listener (not even with another thing's client ID), and a claim certificate none on the things' listener"
    )
    func listenersTrustTheirOwnCA() throws {
        try withEnv { env in
            let b = try CertificateModeTests.certThing(env, storage: "b")
            try #require(ct_onboard(b.ct, "AC-B", "password-1", "AirConditioner", "1.0.0", nil) == RC.ok, "\(b.logs)")
            defer { b.destroy() }
            let tidB = try #require(b.thingID)
            #expect(ct_start(b.ct) == RC.ok)
            #expect(env.hub.waitForOnline(tidB, timeoutMs: 30_000), "logs:\n\(b.logs)")
            let topicB = try StoredIdentity(storage: env.storage("b")).topic
            let a = try CertificateModeTests.certThing(env, storage: "a")
            try #require(ct_onboard(a.ct, "AC-A", "password-1", "AirConditioner", "1.0.0", nil) == RC.ok, "\(a.logs)")
            a.destroy()
            let dirA = env.storage("a")
            let (certA, keyA) = (dirA + "/thing-cert.pem", dirA + "/thing-key.pem")
            // A's certificate on the claim listener, asking for B's client
            // ID (there no use_username_as_clientid would stop it).
            let intruder = try Self.certProbe(
                env, port: env.broker.claimPort, cert: certA, key: keyA, clientID: topicB)
            defer { intruder.stop() }
            #expect(!intruder.isConnected && intruder.connackCode == nil, "\(String(describing: intruder.connackCode))")
            // Must not happen: the intruder getting in late; room for it to show.
            usleep(300_000)
            try env.expectAlive(tidB)
            // The same certificate on its own listener: connected (the control).
            let own = try Self.certProbe(env, port: env.broker.certPort, cert: certA, key: keyA, clientID: "any")
            defer { own.stop() }
            #expect(own.isConnected, "broker:\n\(tail(env.broker.log))")

            // A claim certificate on the things' listener, and on its own (the control).
            let pair = try Self.claimPair(env)
            let claimOnThings = try Self.certProbe(
                env, port: env.broker.certPort, cert: pair.cert, key: pair.key, clientID: topicB)
            defer { claimOnThings.stop() }
            #expect(
                !claimOnThings.isConnected && claimOnThings.connackCode == nil,
                "\(String(describing: claimOnThings.connackCode))")
            let claimOnClaims = try Self.claimProbe(env, pair, clientID: "claim-ok-" + randomHexString(4))
            defer { claimOnClaims.stop() }
            try env.expectAlive(tidB)

            // What is left (docs/SECURITY.md, residual risks): a claim holder
            // chooses its client ID on the claim listener, B's included (one
            // namespace per broker), and knocks B off until B reconnects; it
            // reads none of B's topics by it.
            let knock = try Self.claimProbe(env, pair, clientID: topicB)
            for filter in [topicB, "p/\(topicB)/resp", "p/\(topicB)/config", "#"] { _ = knock.subscribe(filter) }
            // Must not happen: a subscription granted; room for a delivery to show.
            usleep(300_000)
            knock.stop()
            try env.expectAlive(tidB)
            #expect(knock.messages().isEmpty, "the claim read \(knock.messages().map(\.topic))")
            env.broker.stop()  // flushes its log
            #expect(
                env.broker.log.contains("Client \(topicB) already connected"), "broker:\n\(tail(env.broker.log))")
        }
    }

    @Test("A claim certificate signed by the things CA (the old way) is refused on the claim listener")
    func claimOfTheThingsCARefused() throws {
        try withEnv { env in
            let old = try Self.claimPair(env, signedByThingsCA: true)
            let p = try Self.certProbe(
                env, port: env.broker.claimPort, cert: old.cert, key: old.key,
                clientID: "claim-old-" + randomHexString(4))
            defer { p.stop() }
            #expect(!p.isConnected && p.connackCode == nil, "\(String(describing: p.connackCode))")
            // A device with it does not onboard; one with the claims CA's does (the control).
            let t = try Self.claimDevice(env, storage: "old", pair: old)
            defer { t.destroy() }
            #expect(ct_onboard(t.ct, "AC-OLD", "password-1", "AirConditioner", "1.0.0", nil) != RC.ok)
            #expect(env.hub.thing(vendorThingID: "AC-OLD") == nil)
            let good = try Self.claimDevice(env, storage: "new", pair: try Self.claimPair(env))
            defer { good.destroy() }
            #expect(
                ct_onboard(good.ct, "AC-NEW", "password-1", "AirConditioner", "1.0.0", nil) == RC.ok,
                "logs:\n\(good.logs)")
        }
    }

    @Test(
        "A claim of another app, a retired batch, a thing certificate on the claim topic, a claim without a CSR, and a claim identity on p/ are refused"
    )
    func claimRefusals() throws {
        try withEnv(configure: { $0.refusedClaims = ["retired"] }) { env in
            // Another app's claim: the device is told why.
            let other = try Self.claimPair(env, app: "otherApp")
            let t = try Self.claimDevice(env, storage: "other", pair: other)
            defer { t.destroy() }
            #expect(ct_onboard(t.ct, "AC-OTHER", "password-1", "AirConditioner", "1.0.0", nil) == RC.rejected)
            #expect(t.logContains("CLAIM_REFUSED"), "\(t.logs)")
            // A batch the operator retired (--refused-claims).
            let retired = try Self.claimPair(env, batch: "retired")
            let r = try Self.claimDevice(env, storage: "retired", pair: retired)
            defer { r.destroy() }
            #expect(ct_onboard(r.ct, "AC-RETIRED", "password-1", "AirConditioner", "1.0.0", nil) == RC.rejected)
            #expect(r.logContains("CLAIM_REFUSED") && r.logContains("retired"), "\(r.logs)")
            #expect(
                env.hub.thing(vendorThingID: "AC-OTHER") == nil && env.hub.thing(vendorThingID: "AC-RETIRED") == nil)

            // A thing's certificate matches the claim patterns too (its CN is
            // its topic, and on the things' listener its client ID): the hub
            // refuses a CN that is no claim of its app.
            let thing = try CertificateModeTests.certThing(env, storage: "cert")
            try #require(ct_onboard(thing.ct, "AC-CERT", "password-1", "AirConditioner", "1.0.0", nil) == RC.ok)
            let topic = try StoredIdentity(storage: env.storage("cert")).topic
            let dir = env.storage("cert")
            let pki = try TestPKI()
            let csr = try String(contentsOfFile: try pki.keyAndCSR(cn: "AC-X").csr, encoding: .utf8)
            let tp = try Self.certProbe(
                env, port: env.broker.certPort, cert: dir + "/thing-cert.pem", key: dir + "/thing-key.pem",
                clientID: topic)
            defer { tp.stop() }
            try #require(tp.isConnected, "broker:\n\(tail(env.broker.log))")
            let tResp = Topics.claimResponse(name: topic, clientID: topic)
            #expect(tp.subscribe(tResp) == 1)
            _ = tp.publish(
                Topics.claimRequest(name: topic, clientID: topic),
                Self.onboarding("AC-X", csr: csr, requestID: "x"))
            let refused = Self.answer(tp.waitForMessage(on: tResp))
            #expect(
                refused?.status == 403 && refused?.body.contains("CLAIM_REFUSED") == true,
                "\(String(describing: refused))")
            #expect(env.hub.thing(vendorThingID: "AC-X") == nil)

            // A claim onboarding without a CSR.
            let pair = try Self.claimPair(env)
            let p = try Self.claimProbe(env, pair, clientID: "claim-nocsr-" + randomHexString(4))
            defer { p.stop() }
            let pResp = Topics.claimResponse(name: Self.claimName, clientID: p.client.clientID)
            #expect(p.subscribe(pResp) == 1)
            _ = p.publish(
                Topics.claimRequest(name: Self.claimName, clientID: p.client.clientID),
                Self.onboarding("AC-NOCSR", csr: nil, requestID: "n"))
            let noCSR = Self.answer(p.waitForMessage(on: pResp))
            #expect(
                noCSR?.status == 400 && noCSR?.body.contains("CERTIFICATE_SIGNING_REQUEST_REQUIRED") == true,
                "\(String(describing: noCSR))")
            #expect(env.hub.thing(vendorThingID: "AC-NOCSR") == nil)

            // The same identity on the things' pattern p/{CN}/…: no answer, no thing.
            let pTopic = Topics.response(clientID: Self.claimName)
            _ = p.subscribe(pTopic)
            _ = p.publish(
                Topics.request(clientID: Self.claimName, appID: Env.appID, path: "onboardings"),
                Self.onboarding("AC-PPATH", csr: csr, requestID: "pp"))
            // Must not happen: an answer or a thing made; room for them to show.
            usleep(800_000)
            #expect(p.messages(on: pTopic).isEmpty)
            #expect(env.hub.thing(vendorThingID: "AC-PPATH") == nil)
        }
    }

    @Test(
        "Claim onboardings spend the global bootstrap budget: beyond it they are dropped without a reply; commands still run"
    )
    func claimBudget() throws {
        let env = try Env { o in
            o.bootstrapRatePerSecond = 0.001
            o.bootstrapBurst = 4
        }
        defer { env.close() }
        // One of the four: the aircon's own onboarding.
        let (_, tid) = try env.onlineAircon(vendorThingID: "AC-BUDGET", storage: "budget")
        let pair = try Self.claimPair(env)
        let p = try Self.claimProbe(env, pair, clientID: "claim-flood-" + randomHexString(4))
        defer { p.stop() }
        let resp = Topics.claimResponse(name: Self.claimName, clientID: p.client.clientID)
        #expect(p.subscribe(resp) == 1)
        for i in 0..<8 {
            // Without a CSR: refused (400) when handled, so each answer is cheap.
            _ = p.publish(
                Topics.claimRequest(name: Self.claimName, clientID: p.client.clientID),
                Self.onboarding("AC-FLOOD-\(i)", csr: nil, requestID: "f\(i)"))
        }
        #expect(
            poll(timeoutMs: 30_000) {
                String(decoding: env.hub.metrics.exposition(), as: UTF8.self).contains(
                    #"thingif_hub_bootstrap_dropped_total{reason="budget"} 5"#)
            })
        #expect(poll(timeoutMs: 30_000) { p.messages(on: resp).count == 3 })
        try env.expectAlive(tid)
        #expect(p.messages(on: resp).count == 3)
    }

    @Test(
        "--claims-only: the hub removes the bootstrap identity an earlier start made; the app key opens nothing, a claim still onboards"
    )
    func claimsOnlyRetiresTheBootstrapIdentity() throws {
        try withEnv { env in
            // The Env's hub made the bootstrap identity (app ID + app key).
            let before = try MqttProbe.bootstrap(port: env.broker.port)
            #expect(before.isConnected)
            before.stop()
            #expect(CertificateModeTests.pluginClients(env.broker).contains(Env.appID))
            env.hub.stop()
            var options = Env.hubOptions(appID: Env.appID, appKey: Env.appKey, broker: env.broker)
            options.claimsOnly = true
            let hub = try #require(FrameworkSide(options, store: MemoryStore(secrets: .fastForTests)))
            defer { hub.stop() }
            try #require(hub.start(timeoutMs: 30_000), "\(hub.startProblem ?? "")")
            #expect(!CertificateModeTests.pluginClients(env.broker).contains(Env.appID))
            let after = try MqttProbe.bootstrap(port: env.broker.port)
            defer { after.stop() }
            #expect(!after.isConnected, "the app key still opens the broker")
            // A device with a claim certificate onboards all the same.
            let t = try Self.claimDevice(env, storage: "claim", pair: try Self.claimPair(env))
            defer { t.destroy() }
            let rc = ct_onboard(t.ct, "AC-CLAIMS-ONLY", "password-1", "AirConditioner", "1.0.0", nil)
            #expect(rc == RC.ok, "logs:\n\(t.logs)\nbroker:\n\(tail(env.broker.log))")
        }
    }

    @Test("claim-certificate writes a usable pair (0600 key, clientAuth, the claim CN) and refuses bad options")
    func claimCommand() throws {
        // The claims CA is made with the first broker.
        _ = try Broker.start()
        let pki = try TestPKI()
        let base = ["--claim-ca-cert", BrokerSecrets.claimsCAFile, "--claim-ca-key", BrokerSecrets.claimsCAKey]
        let out = pki.path("out")
        let written = try ClaimCertificateCommand.run(
            base + ["--app", "myApp", "--name", "line_7", "--days", "30", "--out", out])
        #expect(written == [out + "/claim.key", out + "/claim.crt"])
        #expect(CertificateModeTests.mode(out + "/claim.key") == 0o600)
        let inspected = try pki.inspect(
            try String(contentsOfFile: out + "/claim.crt", encoding: .utf8), caFile: BrokerSecrets.claimsCAFile)
        #expect(inspected.verified, "\(inspected.verifyOutput)")
        // Of the claims CA, not the things CA (the things' listener trusts that one).
        let asThing = try pki.inspect(
            try String(contentsOfFile: out + "/claim.crt", encoding: .utf8), caFile: BrokerSecrets.thingsCAFile)
        #expect(!asThing.verified, "\(asThing.verifyOutput)")
        #expect(inspected.text.contains("claim.myApp.line_7"), "\(inspected.text)")
        #expect(inspected.text.contains("TLS Web Client Authentication") && inspected.text.contains("CA:FALSE"))
        let modulus = try pki.run(["x509", "-in", out + "/claim.crt", "-noout", "-pubkey"])
        let keyPub = try pki.run(["pkey", "-in", out + "/claim.key", "-pubout"])
        #expect(modulus == keyPub)
        // The files are not overwritten.
        #expect(throws: ClaimCertificateCommand.Failure.self) {
            try ClaimCertificateCommand.run(base + ["--app", "myApp", "--name", "line_7", "--out", out])
        }
        // With a CSR: the certificate only, for that key.
        let (_, csr) = try pki.keyAndCSR(cn: "whatever")
        let out2 = pki.path("out2")
        #expect(
            try ClaimCertificateCommand.run(base + ["--app", "myApp", "--name", "b2", "--csr", csr, "--out", out2])
                == [out2 + "/claim.crt"])
        // Bad options: usage errors (2) and failures (1).
        let bad: [([String], Int32)] = [
            (base + ["--name", "b", "--out", out2], 2),  // no --app
            (base + ["--app", "myApp", "--name", "a.b", "--out", out2], 2),
            (base + ["--app", "myApp", "--name", "a/b", "--out", out2], 2),
            (base + ["--app", "my+App", "--name", "b", "--out", out2], 2),
            (base + ["--app", String(repeating: "x", count: 60), "--name", "b", "--out", out2], 2),
            (base + ["--app", "myApp", "--name", "b", "--days", "0", "--out", out2], 2),
            (base + ["--app", "myApp", "--name", "b", "--out", out2, "--what"], 2),
            // The old flags: the claims CA is not the things CA.
            (
                [
                    "--thing-ca-cert", BrokerSecrets.thingsCAFile, "--thing-ca-key", BrokerSecrets.thingsCAKey,
                    "--app", "myApp", "--name", "b", "--out", pki.path("out5")
                ], 2
            ),
            (Array(base.prefix(2)) + ["--app", "myApp", "--name", "b", "--out", pki.path("out5")], 2),
            (
                [
                    "--claim-ca-cert", BrokerSecrets.claimsCAFile, "--claim-ca-key", BrokerSecrets.clientKey,
                    "--app", "myApp", "--name", "b", "--out", pki.path("out3")
                ], 1
            ),  // another key
            (base + ["--app", "myApp", "--name", "b", "--csr", pki.path("none.csr"), "--out", pki.path("out4")], 1)
        ]
        for (args, status) in bad {
            do {
                try ClaimCertificateCommand.run(args)
                Issue.record("accepted: \(args)")
            } catch let f as ClaimCertificateCommand.Failure {
                #expect(f.status == status, "\(args): \(f)")
            }
        }
        #expect(!FileManager.default.fileExists(atPath: pki.path("out3") + "/claim.key"))
        // The hub's option that retires a batch takes batch names only.
        #expect(throws: HubConfig.ConfigError.self) {
            try HubConfig.load(arguments: ["--refused-claims", "a.b"], environment: [:], readFile: { _ in nil })
        }
        if case .run(let c) = try HubConfig.load(
            arguments: ["--refused-claims", "b1,b2"], environment: [:], readFile: { _ in nil })
        {
            var o = FrameworkSide.Options(appID: "a", appKey: "k", brokerPort: 1)
            c.applyThingCertificates(to: &o)
            #expect(o.refusedClaims == ["b1", "b2"])
        } else {
            Issue.record("no configuration")
        }
    }

    @Test("Claim names and topics: the CN's form, and topics of one level each")
    func claimNames() {
        #expect(Topics.claimParts("claim.app.b-1").map { [$0.appID, $0.batch] } == ["app", "b-1"])
        #expect(Topics.claimParts("claim.my.app.b_1").map { [$0.appID, $0.batch] } == ["my.app", "b_1"])
        let longest = "claim." + String(repeating: "a", count: 56) + ".b"
        #expect(longest.utf8.count == 64 && Topics.isClaimName(longest))
        for bad in [
            "claim.app", "claim..b", "claim.app.", "claim.app.a b", "claim.app.b.", "tabc", "claim.a/b.c", "claim.a+.c",
            "claim.a#.c", "Claim.app.b", "claim.app." + String(repeating: "b", count: 33),
            "claim." + String(repeating: "a", count: 57) + ".b"
        ] {
            #expect(Topics.claimParts(bad) == nil, "\(bad)")
        }
        #expect(
            Topics.parseClaimRequest("c/claim.a.b/cid/onboardings").map { [$0.name, $0.clientID] } == [
                "claim.a.b", "cid"
            ])
        for bad in [
            "c/claim.a.b/cid/x/onboardings", "c/claim.a.b//onboardings", "c//cid/onboardings", "c/claim.a.b/cid/resp",
            "p/claim.a.b/cid/onboardings"
        ] {
            #expect(Topics.parseClaimRequest(bad) == nil, "\(bad)")
        }
    }
}

/// A claim certificate and its key (files).
struct ClaimPair {
    let cert: String
    let key: String
}
