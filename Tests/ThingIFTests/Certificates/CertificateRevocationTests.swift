// SPDX-License-Identifier: Apache-2.0

import CThingIF
import CThingIFTestSupport
import Foundation
import Testing
import ThingIF
@testable import ThingIFHub
import ThingIFHubServer

/// What the revocation tests share: OpenSSL's reading of a CRL and of a
/// certificate's serial, and an onboarding put straight to a hub's router.
enum RevocationSupport {
    /// The revoked serials of the CRL file (uppercase hex, as OpenSSL
    /// prints them), checked against the things CA, with its text.
    static func crl(_ pki: TestPKI, _ file: String, caFile: String = BrokerSecrets.thingsCAFile) throws -> (
        serials: [String], text: String
    ) {
        let text = try pki.run(["crl", "-in", file, "-noout", "-text"])
        let verified = try pki.openssl(["crl", "-in", file, "-CAfile", caFile, "-noout"])
        #expect(verified.status == 0 && verified.output.contains("verify OK"), "\(verified.output)")
        let serials = text.split(separator: "\n").compactMap { line -> String? in
            let l = line.trimmingCharacters(in: .whitespaces)
            return l.hasPrefix("Serial Number: ") ? String(l.dropFirst("Serial Number: ".count)).uppercased() : nil
        }
        return (serials.sorted(), text)
    }

    /// The CRL file's serials once they are `expected` (the hub writes at
    /// most one CRL a second: one right after another comes with the next
    /// tick), or what they are after 30 s (a loaded machine can put that
    /// tick off for seconds; a pass never waits out the budget).
    static func waitForCRL(_ pki: TestPKI, _ file: String, _ expected: [String]) -> [String] {
        var got: [String] = []
        poll {
            got = (try? crl(pki, file).serials) ?? []
            return got == expected
        }
        return got
    }

    /// A certificate file's serial (uppercase hex).
    static func serial(_ pki: TestPKI, certFile: String) throws -> String {
        let out = try pki.run(["x509", "-in", certFile, "-noout", "-serial"])
        return String(out.trimmingCharacters(in: .whitespacesAndNewlines).dropFirst("serial=".count)).uppercased()
    }

    /// A PEM certificate's serial (uppercase hex).
    static func serial(_ pki: TestPKI, pem: String) throws -> String {
        let file = pki.path("cert-\(randomHexString(4)).pem")
        try pem.write(toFile: file, atomically: true, encoding: .utf8)
        return try serial(pki, certFile: file)
    }

    /// Onboarding by the thing with a CSR, straight to the hub's router (as
    /// the bootstrap client would send it): thingID, mqttTopic and the PEM
    /// certificate of the answer.
    static func onboard(_ hub: FrameworkSide, _ vendorThingID: String, csr: String) throws -> (
        thingID: String, topic: String, certificate: String
    ) {
        let body: [String: Any] = [
            "vendorThingID": vendorThingID, "thingPassword": "password-1", "thingType": "AirConditioner",
            "certificateSigningRequest": csr
        ]
        let req = KiiRequest(
            method: "POST", headers: [("Content-Type", MediaType.onboardingByThing)],
            body: Array(try JSONSerialization.data(withJSONObject: body)))
        let r = hub.thingRequests.route(
            req, api: .thingIF, path: "onboardings", clientID: "thingif-bootstrap-revocation")
        let json = parseObject(r.bodyText) ?? [:]
        try #require(r.status == 200, "\(r.status) \(json)")
        let ep = try #require(json["mqttEndpoint"] as? [String: Any])
        return (
            try #require(json["thingID"] as? String), try #require(ep["mqttTopic"] as? String),
            try #require(ep["clientCertificate"] as? String)
        )
    }

    /// Whether `cert`/`key` open a session on the broker's certificate
    /// listener (a client ID of its own: the thing's session stays).
    static func connects(_ broker: Broker, cert: String, key: String) throws -> Bool {
        let probe = try MqttProbe(
            port: broker.certPort, clientID: "probe-" + randomHexString(6), username: nil, password: nil,
            tls: (ca: broker.caFile, cert: cert, key: key))
        defer { probe.stop() }
        return probe.isConnected
    }

    static func mode(_ path: String) -> Int {
        var st = stat()
        return stat(path, &st) == 0 ? Int(st.st_mode & 0o777) : -1
    }
}

/// Revoking a deleted thing's certificate: the hub records the
/// serial of every certificate it signs, moves a deleted thing's to the
/// revoked list in the store, writes the things' CRL and tells the broker,
/// whose certificate listener then refuses the certificate.
@Suite("CertificateRevocationTests", .offPool)
struct CertificateRevocationTests {
    @Test(
        "A deleted thing's certificate opens no session on the certificate listener; another thing's still does"
    )
    func deletedThingIsRefused() throws {
        try withEnv { env in
            let pki = try TestPKI()
            let a = try CertificateModeTests.certThing(env, storage: "a")
            try #require(
                ct_onboard(a.ct, "AC-REVOKED", "password-1", "AirConditioner", "1.0.0", nil) == RC.ok,
                "logs:\n\(a.logs)\nbroker:\n\(tail(env.broker.log))")
            let b = try CertificateModeTests.certThing(env, storage: "b")
            try #require(
                ct_onboard(b.ct, "AC-KEPT", "password-1", "AirConditioner", "1.0.0", nil) == RC.ok, "\(b.logs)")
            let tidA = try #require(a.thingID)
            let tidB = try #require(b.thingID)
            #expect(ct_start(a.ct) == RC.ok)
            #expect(ct_start(b.ct) == RC.ok)
            #expect(env.hub.waitForOnline(tidA, timeoutMs: 30_000), "logs:\n\(a.logs)")
            #expect(env.hub.waitForOnline(tidB, timeoutMs: 30_000), "logs:\n\(b.logs)")
            try env.expectAlive(tidA)
            let certA = env.storage("a") + "/thing-cert.pem"
            let keyA = env.storage("a") + "/thing-key.pem"
            let certB = env.storage("b") + "/thing-cert.pem"
            let keyB = env.storage("b") + "/thing-key.pem"
            // The control: A's own files open a session before the deletion.
            #expect(try RevocationSupport.connects(env.broker, cert: certA, key: keyA))
            #expect(try RevocationSupport.crl(pki, env.broker.crlFile).serials.isEmpty)

            // The owner deletes A.
            let owner = try #require(env.hub.store.createUser(loginName: "owner", passwordHash: nil))
            #expect(env.hub.store.addOwner(thingID: tidA, owner: "user:\(owner.userID)"))
            if case .failure(let e) = env.hub.app.deleteThing(user: owner, thingID: tidA) {
                Issue.record("deletion refused: \(e.message)")
            }
            a.destroy()
            let serialA = try RevocationSupport.serial(pki, certFile: certA)
            #expect(RevocationSupport.waitForCRL(pki, env.broker.crlFile, [serialA]) == [serialA])
            #expect(RevocationSupport.mode(env.broker.crlFile) == 0o644)
            // The broker reads the CRL on the hub's SIGHUP: A's certificate
            // and key no longer open a session.
            let refused = poll(timeoutMs: 30_000) {
                !((try? RevocationSupport.connects(env.broker, cert: certA, key: keyA)) ?? true)
            }
            #expect(refused, "A's certificate still connects; broker:\n\(tail(env.broker.log))")
            // B's certificate still does, and B still takes commands.
            #expect(try RevocationSupport.connects(env.broker, cert: certB, key: keyB))
            try env.expectAlive(tidB)
        }
    }

    @Test(
        "The CRL lists exactly the deleted thing's serials (each onboarding's), signed by the things CA; a second hub on the same store writes the same set; a stale CRL is signed again"
    )
    func crlFromTheStore() throws {
        let broker = try Broker.start()
        let pki = try TestPKI()
        let dir = try makeTempDirectory(prefix: "thingif-revocation")
        defer {
            broker.stop()
            broker.removeFiles()
            try? FileManager.default.removeItem(atPath: dir)
        }
        let options = Env.hubOptions(appID: Env.appID, appKey: Env.appKey, broker: broker)
        let first = try #require(FrameworkSide(options, store: try makeHubStore(dir + "/hub.sqlite")))
        try #require(first.start(timeoutMs: 30_000), "\(first.startProblem ?? "")")
        let gone = try RevocationSupport.onboard(first, "AC-GONE", csr: try pki.makeCSR("gone"))
        // Onboarding again: the same topic, a new certificate, a second serial.
        let again = try RevocationSupport.onboard(first, "AC-GONE", csr: try pki.makeCSR("gone2"))
        #expect(again.thingID == gone.thingID && again.topic == gone.topic)
        let kept = try RevocationSupport.onboard(first, "AC-STAYS", csr: try pki.makeCSR("kept"))
        let expected = [
            try RevocationSupport.serial(pki, pem: gone.certificate),
            try RevocationSupport.serial(pki, pem: again.certificate)
        ].sorted()
        #expect(expected[0] != expected[1])
        let thing = try #require(first.store.thing(id: gone.thingID))
        if case .failure(let e) = first.removal.remove(thing) { Issue.record("deletion refused: \(e.message)") }
        #expect(RevocationSupport.waitForCRL(pki, broker.crlFile, expected) == expected)
        let (serials, text) = try RevocationSupport.crl(pki, broker.crlFile)
        #expect(serials == expected, "\(text)")
        #expect(!serials.contains(try RevocationSupport.serial(pki, pem: kept.certificate)))
        #expect(text.contains("Version 2"), "\(text)")
        #expect(text.contains("CN = thingif things CA"), "\(text)")
        #expect(text.contains("Authority Key Identifier"), "\(text)")
        #expect(text.contains("CRL Number"), "\(text)")
        // Valid 7 days from 5 minutes back (a broker's clock a little behind).
        let dates = try Self.dates(text)
        #expect(dates.next.timeIntervalSince(dates.last) == Double(ThingCRL.validitySeconds), "\(text)")
        #expect(abs(Date().timeIntervalSince(dates.last) - Double(ThingCRL.backdatingSeconds)) < 5, "\(text)")
        first.stop()

        // Another hub on the same store writes the same set at its start.
        try FileManager.default.removeItem(atPath: broker.crlFile)
        let second = try #require(FrameworkSide(options, store: try makeHubStore(dir + "/hub.sqlite")))
        try #require(second.start(timeoutMs: 30_000), "\(second.startProblem ?? "")")
        defer { second.stop() }
        #expect(try RevocationSupport.crl(pki, broker.crlFile).serials == expected)
        // One that has come to the end of its day is signed again by the
        // delivery worker, with a later thisUpdate.
        let before = try Self.dates(try RevocationSupport.crl(pki, broker.crlFile).text).last
        second.authority.crlState.withLock {
            $0.writtenMs -= ThingCRL.resignAfterMs
            $0.nextCheckMs = 0
        }
        let resigned = poll(timeoutMs: 30_000) {
            guard let t = try? RevocationSupport.crl(pki, broker.crlFile).text, let d = try? Self.dates(t) else {
                return false
            }
            return d.last > before
        }
        #expect(resigned)
        #expect(try RevocationSupport.crl(pki, broker.crlFile).serials == expected)
    }

    /// The CRL's Last Update and Next Update.
    static func dates(_ text: String) throws -> (last: Date, next: Date) {
        let f = DateFormatter()
        f.locale = Locale(identifier: "en_US_POSIX")
        f.timeZone = TimeZone(identifier: "GMT")
        f.dateFormat = "MMM d HH:mm:ss yyyy 'GMT'"
        func field(_ name: String) throws -> Date {
            let line = try #require(text.split(separator: "\n").first { $0.contains(name + ":") })
            let value = line.split(separator: ":", maxSplits: 1)[1].trimmingCharacters(in: .whitespaces)
            let squeezed = value.split(separator: " ", omittingEmptySubsequences: true).joined(separator: " ")
            return try #require(f.date(from: squeezed), "\(value)")
        }
        return (try field("Last Update"), try field("Next Update"))
    }

    @Test("A retired MQTT installation's certificate is revoked too; the thing's others are not")
    func retiredInstallation() throws {
        try withEnv { env in
            let pki = try TestPKI()
            let old = try RevocationSupport.onboard(env.hub, "AC-RETIRE", csr: try pki.makeCSR("old"))
            let t = try #require(env.hub.store.thing(id: old.thingID))
            _ = try #require(env.hub.installations.newInstallation(for: t))
            #expect(env.hub.installations.retire(of: try #require(env.hub.store.thing(id: old.thingID)), keeping: 1))
            #expect(env.hub.store.thing(id: old.thingID)?.installations.values.contains(old.topic) == false)
            let serial = try RevocationSupport.serial(pki, pem: old.certificate)
            #expect(RevocationSupport.waitForCRL(pki, env.broker.crlFile, [serial]) == [serial])
        }
    }

    @Test(
        "Options: --thing-crl without the CA, --broker-pid-file without --thing-crl, an unwritable CRL: the hub refuses to start, with the reason"
    )
    func options() throws {
        let load = ThingCertificateTests.load
        let ca = ["--thing-ca-cert", "/ca.crt", "--thing-ca-key", "/ca.key", "--advertised-cert-port", "8884"]
        let c = try load(ca + ["--thing-crl", "/var/lib/thingif/things-crl.pem", "--broker-pid-file", "/run/m.pid"])
        var o = FrameworkSide.Options(appID: "a", appKey: "k", brokerPort: 1)
        c.applyThingCertificates(to: &o)
        #expect(o.thingCRL == "/var/lib/thingif/things-crl.pem" && o.brokerPidFile == "/run/m.pid")
        let env = try HubConfig.load(
            arguments: ca, environment: ["THINGIF_HUB_THING_CRL": "/crl.pem"], readFile: { _ in nil })
        guard case .run(let fromEnv) = env else { throw HarnessError("help") }
        #expect(fromEnv.thingCRL == "/crl.pem")
        for (bad, reason) in [
            (["--thing-crl", "/crl.pem"], "thingCRL needs thingCACert"),
            (ca + ["--broker-pid-file", "/run/m.pid"], "brokerPidFile needs thingCRL"),
            (["--broker-acl", "/etc/mosquitto/acl"], "brokerACL needs thingCACert")
        ] {
            let error = #expect(throws: HubConfig.ConfigError.self, "\(bad)") { try load(bad) }
            #expect(error.map { "\($0)".contains(reason) } == true, "\(String(describing: error))")
        }
        #expect(
            HubConfig.usage.contains("--thing-crl") && HubConfig.usage.contains("--broker-pid-file")
                && HubConfig.usage.contains("--broker-acl"))

        // The hub itself, as the tests and embedders start it.
        let pki = try TestPKI()
        let files = try pki.makeCA("ca")
        let cases: [(String, FrameworkSide.ThingCAFiles?, String?, String?, String)] = [
            ("CRL without a CA", nil, pki.path("crl.pem"), nil, "--thing-crl needs the things' CA"),
            (
                "pid file without a CRL", .init(certFile: files.cert, keyFile: files.key), nil, pki.path("m.pid"),
                "--broker-pid-file needs --thing-crl"
            ),
            (
                "CRL in a missing folder", .init(certFile: files.cert, keyFile: files.key),
                pki.path("missing/crl.pem"), nil, "cannot write the things' CRL"
            )
        ]
        for (name, ca, crl, pid, reason) in cases {
            var o = FrameworkSide.Options(appID: Env.appID, appKey: Env.appKey, brokerPort: 1)
            o.thingCA = ca
            o.advertisedCertPort = ca == nil ? nil : 8884
            o.thingCRL = crl
            o.brokerPidFile = pid
            let hub = try #require(FrameworkSide(o, store: MemoryStore(secrets: .fastForTests)))
            #expect(!hub.start(timeoutMs: 500), "\(name): the hub started")
            #expect(hub.startProblem?.contains(reason) == true, "\(name): \(hub.startProblem ?? "")")
        }
        #expect(!FileManager.default.fileExists(atPath: pki.path("crl.pem")))
    }

    @Test("A pid file that names no mosquitto gets no signal")
    func pidFileChecked() throws {
        let pki = try TestPKI()
        let file = pki.path("other.pid")
        // This test process: SIGHUP would end it.
        try String(getpid()).write(toFile: file, atomically: true, encoding: .utf8)
        #expect(ThingCRL.reloadBroker(pidFile: file)?.contains("not a running mosquitto") == true)
        try "not a number".write(toFile: file, atomically: true, encoding: .utf8)
        #expect(ThingCRL.reloadBroker(pidFile: file)?.contains("no process ID") == true)
        #expect(ThingCRL.reloadBroker(pidFile: pki.path("missing.pid"))?.contains("cannot read") == true)
    }
}

/// The store's record of certificates and their revocation, on every store.
@Suite("CertificateRevocationTests: the store", .offPool)
struct RevocationStoreTests {
    @Test(
        "Certificates: recorded per installation; a retired installation's and a deleted thing's are revoked, expired ones pruned",
        arguments: StoreFactory.all)
    func revocation(_ factory: StoreFactory) throws {
        let (s, cleanup) = try factory.make(.fastForTests, StateRetention())
        defer { cleanup() }
        func thing(_ vendor: String) throws -> ThingRecord {
            try s.registerThing(
                vendorThingID: vendor, password: "pw", thingType: "AirConditioner", firmwareVersion: nil,
                dataGroupingInterval: nil, layoutPosition: nil
            ).get()
        }
        let a = try thing("AC-A")
        let b = try thing("AC-B")
        let later = Platform.epochMs() + 86_400_000
        #expect(s.addInstallation(thingID: a.thingID, installationID: "i1", mqttTopic: "ta1"))
        #expect(s.addInstallation(thingID: a.thingID, installationID: "i2", mqttTopic: "ta2"))
        #expect(s.addInstallation(thingID: b.thingID, installationID: "i3", mqttTopic: "tb"))
        #expect(s.recordCertificate(thingID: a.thingID, installationID: "i1", serial: "0a01", notAfter: later))
        // The same installation onboarding again: another serial.
        #expect(s.recordCertificate(thingID: a.thingID, installationID: "i1", serial: "0a02", notAfter: later + 1))
        #expect(s.recordCertificate(thingID: a.thingID, installationID: "i2", serial: "0a03", notAfter: later))
        // Already expired: never listed.
        #expect(s.recordCertificate(thingID: a.thingID, installationID: "i2", serial: "0a04", notAfter: 1))
        #expect(s.recordCertificate(thingID: b.thingID, installationID: "i3", serial: "0b01", notAfter: later))
        #expect(!s.recordCertificate(thingID: "th.unknown", installationID: "i9", serial: "0c01", notAfter: later))
        #expect(!s.recordCertificate(thingID: b.thingID, installationID: "i3", serial: "0b01", notAfter: later))
        #expect(s.revokedCertificates(now: Platform.epochMs()) == [])

        // Retiring i1 revokes its two certificates only.
        let t0 = Platform.epochMs()
        #expect(s.removeInstallation(thingID: a.thingID, installationID: "i1"))
        let afterRetire = try #require(s.revokedCertificates(now: Platform.epochMs()))
        #expect(afterRetire.map(\.serial) == ["0a01", "0a02"])
        #expect(afterRetire.map(\.notAfter) == [later, later + 1])
        #expect(afterRetire.allSatisfy { $0.revokedAt >= t0 && $0.revokedAt <= Platform.epochMs() })

        // Deleting A revokes the rest of its certificates (not the expired one), not B's.
        #expect(s.deleteThing(id: a.thingID))
        #expect(try #require(s.revokedCertificates(now: Platform.epochMs())).map(\.serial) == ["0a01", "0a02", "0a03"])
        // Past their notAfter, revoked entries are pruned; B's record too.
        #expect(try #require(s.revokedCertificates(now: later)).map(\.serial) == ["0a02"])
        #expect(try #require(s.revokedCertificates(now: later + 1)) == [])
        #expect(s.deleteThing(id: b.thingID))
        #expect(s.revokedCertificates(now: Platform.epochMs()) == [])
    }

    @Test(
        "Gateway installations with a certificate are listed for the broker's rights; a standalone thing's, one without a certificate, a retired one and a deleted gateway's are not",
        arguments: StoreFactory.all)
    func gatewayCertificateTopics(_ factory: StoreFactory) throws {
        let (s, cleanup) = try factory.make(.fastForTests, StateRetention())
        defer { cleanup() }
        func thing(_ vendor: String, _ layout: LayoutPosition?) throws -> ThingRecord {
            try s.registerThing(
                vendorThingID: vendor, password: "pw", thingType: "Gateway", firmwareVersion: nil,
                dataGroupingInterval: nil, layoutPosition: layout
            ).get()
        }
        let later = Platform.epochMs() + 86_400_000
        let g = try thing("GW-1", .gateway)
        let h = try thing("GW-2", .gateway)
        let a = try thing("AC-1", nil)
        for (t, iid, topic) in [
            (g, "g1", "tg1"), (g, "g2", "tg2"), (g, "g3", "tg3"), (h, "h1", "th1"), (a, "a1", "ta1")
        ] {
            #expect(s.addInstallation(thingID: t.thingID, installationID: iid, mqttTopic: topic))
        }
        // g3 has a password (no certificate); g1 two certificates.
        for (t, iid, serial) in [(g, "g1", "01"), (g, "g1", "02"), (g, "g2", "03"), (h, "h1", "04"), (a, "a1", "05")] {
            #expect(s.recordCertificate(thingID: t.thingID, installationID: iid, serial: serial, notAfter: later))
        }
        #expect(s.gatewayCertificateTopics() == ["tg1", "tg2", "th1"])
        #expect(s.removeInstallation(thingID: g.thingID, installationID: "g2"))
        #expect(s.gatewayCertificateTopics() == ["tg1", "th1"])
        #expect(s.deleteThing(id: h.thingID))
        #expect(s.gatewayCertificateTopics() == ["tg1"])
    }
}
