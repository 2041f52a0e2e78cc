// SPDX-License-Identifier: Apache-2.0

import CThingIF
import CThingIFTestSupport
import Foundation
import Testing
import ThingIF
#if canImport(Glibc)
    import Glibc
#endif

/// The thing's own client certificate (device side): with TLS
/// and no certificate of the user's own, onboarding sends a CSR for a key
/// the thing keeps in storage_dir/thing-key.pem; a certificate in the
/// answer (or in a stored identity.json) goes to storage_dir/thing-cert.pem
/// and the thing's connection authenticates with it, never with a password.
@Suite("Device certificate", .offPool)
struct DeviceCertificateTests {
    static let tls = Int32(THINGIF_ERR_TLS.rawValue)

    // MARK: 1. the CSR, against the in-process hub (which has no CA)

    @Test(
        "With TLS and no client certificate, onboarding sends a CSR (verifies, CN = vendorThingID, EC P-256, SHA-256) for thing-key.pem (0600), reused by the next onboarding; a hub without a CA hands out a password"
    )
    func csrWithTLS() throws {
        try withEnv(configure: Env.withoutThingCA) { env in
            let t = try tlsThing(env, storage: "csr")
            try #require(
                ct_onboard(t.ct, "AC-CSR-1", "password-1", "AirConditioner", "1.0.0", nil) == RC.ok, "logs:\n\(t.logs)")
            let dir = env.storage("csr")
            let keyPath = dir + "/" + "thing-key.pem"
            #expect(fileMode(keyPath) == 0o600)
            let key = try String(contentsOfFile: keyPath, encoding: .utf8)
            #expect(key.hasPrefix("-----BEGIN PRIVATE KEY-----"), "\(key.prefix(40))")

            let csr = try #require(onboardingCSR(env, vendorThingID: "AC-CSR-1"), "no CSR reached the hub")
            let pki = env.storage("openssl")
            try FileManager.default.createDirectory(atPath: pki, withIntermediateDirectories: true)
            let csrPath = pki + "/first.csr"
            try csr.write(toFile: csrPath, atomically: true, encoding: .utf8)
            let verified = try openssl(["req", "-verify", "-noout", "-in", csrPath], in: pki)
            #expect(verified.contains("verify OK"), "\(verified)")
            let subject = try openssl(["req", "-noout", "-subject", "-nameopt", "RFC2253", "-in", csrPath], in: pki)
            #expect(subject.contains("subject=CN=AC-CSR-1"), "\(subject)")
            let text = try openssl(["req", "-noout", "-text", "-in", csrPath], in: pki)
            #expect(text.contains("id-ecPublicKey") && text.contains("NIST CURVE: P-256"), "\(text)")
            #expect(text.contains("ecdsa-with-SHA256"), "\(text)")
            // The CSR is for thing-key.pem's key.
            let keyPublic = try openssl(["pkey", "-in", keyPath, "-pubout"], in: pki)
            let csrPublic = try openssl(["req", "-in", csrPath, "-noout", "-pubkey"], in: pki)
            #expect(keyPublic == csrPublic, "\(keyPublic)\n\(csrPublic)")

            // A hub without a CA ignores the CSR: a password, no certificate,
            // and the thing connects with the password over TLS.
            let stored = try StoredIdentity(storage: dir)
            #expect(!stored.password.isEmpty)
            #expect(!FileManager.default.fileExists(atPath: dir + "/thing-cert.pem"))
            #expect(t.logContains("the framework signed no client certificate"), "logs:\n\(t.logs)")
            let tid = try #require(t.thingID)
            #expect(ct_start(t.ct) == RC.ok)
            #expect(env.hub.waitForOnline(tid, timeoutMs: 30_000), "logs:\n\(t.logs)")
            t.destroy()

            // Another onboarding on the same storage dir reuses the key.
            let u = try tlsThing(env, storage: "csr")
            try #require(
                ct_onboard(u.ct, "AC-CSR-2", "password-1", "AirConditioner", "1.0.0", nil) == RC.ok, "logs:\n\(u.logs)")
            #expect(try String(contentsOfFile: keyPath, encoding: .utf8) == key, "thing-key.pem was replaced")
            #expect(fileMode(keyPath) == 0o600)
            let second = try #require(onboardingCSR(env, vendorThingID: "AC-CSR-2"), "no second CSR")
            try second.write(toFile: pki + "/second.csr", atomically: true, encoding: .utf8)
            #expect(try openssl(["req", "-in", pki + "/second.csr", "-noout", "-pubkey"], in: pki) == keyPublic)
            #expect(second != csr)  // another CN
        }
    }

    @Test("Without TLS, or with a client certificate of the user's own, onboarding sends no CSR and makes no key")
    func noCSRWithoutTLSOrWithOwnCertificate() throws {
        try withEnv { env in
            let (plain, _) = try env.onlineAircon(vendorThingID: "AC-PLAIN", storage: "plain", start: false)
            let request = try #require(onboardingRequest(env, vendorThingID: "AC-PLAIN"))
            #expect(request["certificateSigningRequest"] == nil, "\(request)")
            #expect(!FileManager.default.fileExists(atPath: env.storage("plain") + "/thing-key.pem"))
            plain.destroy()

            let own = try env.newThing(storage: "own")
            #expect(ct_register_aircon_handlers(own.ct, Aircon.schema, Aircon.version) == RC.ok)
            #expect(ct_set_broker(own.ct, "127.0.0.1", Int32(env.broker.mtlsPort)) == RC.ok)
            #expect(
                ct_set_tls(own.ct, env.broker.caFile, BrokerSecrets.clientCert, BrokerSecrets.clientKey) == RC.ok)
            try #require(
                ct_onboard(own.ct, "AC-OWN", "password-1", "AirConditioner", "1.0.0", nil) == RC.ok,
                "logs:\n\(own.logs)")
            let ownRequest = try #require(onboardingRequest(env, vendorThingID: "AC-OWN"))
            #expect(ownRequest["certificateSigningRequest"] == nil, "\(ownRequest)")
            #expect(!FileManager.default.fileExists(atPath: env.storage("own") + "/thing-key.pem"))

            // The same hub did get a CSR from a thing with TLS and no
            // certificate of its own (so the checks above can fail).
            let t = try tlsThing(env, storage: "tls")
            try #require(ct_onboard(t.ct, "AC-TLS", "password-1", nil, nil, nil) == RC.ok, "logs:\n\(t.logs)")
            #expect(onboardingCSR(env, vendorThingID: "AC-TLS") != nil)
        }
    }

    // MARK: 2. a certificate from the framework: a signing responder

    @Test(
        "A signed certificate in the answer: thing-cert.pem (0600) and identity.json keep it, and the thing connects with it to portSSL, its CN as the broker's username"
    )
    func signedCertificateConnects() throws {
        let scene = try CertificateScene()
        defer { scene.end() }
        let topic = "thing-topic-e2e"
        // The framework side, by hand: answers the onboarding on the TLS
        // listener with a certificate signed for the CSR, CN = the topic.
        let responder = try MqttProbe(
            port: scene.broker.tlsPort, clientID: "responder", username: nil, password: nil,
            tls: (scene.pki.caFile, nil, nil))
        defer { responder.stop() }
        #expect(responder.isConnected)
        #expect(responder.subscribe("p/+/thing-if/apps/\(Env.appID)/onboardings") == 1)

        let t = try scene.thing(storage: "e2e")
        // thingif_onboard blocks until the answer: on another thread.
        let done = DispatchSemaphore(value: 0)
        let status = Locked<Int32>(-1)
        let handle = Int(bitPattern: t.ct)  // a pointer is not Sendable
        DispatchQueue.global().async {
            let rc = ct_onboard(
                OpaquePointer(bitPattern: handle), "AC-E2E", "password-1", "AirConditioner", "1.0.0", nil)
            status.withLock { $0 = rc }
            done.signal()
        }
        var request: MqttClient.Message?
        poll(timeoutMs: 30_000) {
            request = responder.messages().first { $0.topic.hasSuffix("/onboardings") }
            return request != nil
        }
        let m = try #require(request, "no onboarding request; logs:\n\(t.logs)")
        let kii = try #require(KiiRequest.decode(m.payload))
        let body = try #require(parseObject(String(decoding: kii.body, as: UTF8.self)))
        let csr = try #require(body["certificateSigningRequest"] as? String, "\(body)")
        let certificate = try scene.pki.sign(csr: csr, commonName: topic)
        let endpoint: [String: Any] = [
            "installationID": "inst-e2e", "host": "127.0.0.1", "portTCP": 0, "portSSL": scene.broker.certPort,
            "username": "", "password": "", "mqttTopic": topic, "ttl": 3600,
            "clientCertificate": certificate
        ]
        let answer: [String: Any] = ["thingID": "th.e2e", "accessToken": "token-e2e", "mqttEndpoint": endpoint]
        let reply = KiiResponse(
            status: 200, headers: [(KiiFraming.requestIDHeader, kii.requestID ?? "")],
            body: Array(try JSONSerialization.data(withJSONObject: answer)))
        #expect(
            responder.publish(
                try #require(m.responseTopic), reply.encode(),
                correlation: m.correlationData.map { String(decoding: $0, as: UTF8.self) }))
        try #require(done.wait(timeout: .now() + 15) == .success, "onboarding did not return")
        let rc = status.withLock { $0 }
        try #require(rc == RC.ok, "onboarding: \(rc); logs:\n\(t.logs)")

        let dir = scene.storage("e2e")
        #expect(fileMode(dir + "/thing-cert.pem") == 0o600)
        #expect(try String(contentsOfFile: dir + "/thing-cert.pem", encoding: .utf8) == certificate)
        let identity = try #require(
            parseObject(try String(contentsOfFile: dir + "/identity.json", encoding: .utf8)))
        #expect((identity["mqttEndpoint"] as? [String: Any])?["clientCertificate"] as? String == certificate)

        #expect(ct_start(t.ct) == RC.ok)
        #expect(poll(timeoutMs: 30_000) { t.isConnected }, "logs:\n\(t.logs)\nbroker:\n\(scene.broker.log)")
        #expect(t.logContains("authenticates with the client certificate \(dir)/thing-cert.pem"), "logs:\n\(t.logs)")
        t.destroy()
        scene.broker.stop()
        let log = scene.broker.log
        // The certificate listener took the certificate's CN as the username.
        #expect(log.contains("as \(topic) (p5, c0, k60, u'\(topic)')"), "broker:\n\(log)")
        #expect(
            DeviceSecurityTests.sessionPorts(log, clientPrefix: topic) == [scene.broker.certPort], "broker:\n\(log)")
    }

    // MARK: 3. a stored identity with a certificate

    @Test(
        "A stored identity with a client certificate: thing-cert.pem is written (0600) when missing or different, and the connection uses it"
    )
    func storedCertificateIdentity() throws {
        let scene = try CertificateScene()
        defer { scene.end() }
        let topic = "thing-topic-stored"
        let dir = try scene.storedIdentity(storage: "stored", topic: topic)
        let certificate = try #require(
            (parseObject(try String(contentsOfFile: dir + "/identity.json", encoding: .utf8))?["mqttEndpoint"]
                as? [String: Any])?["clientCertificate"] as? String)
        #expect(!FileManager.default.fileExists(atPath: dir + "/thing-cert.pem"))

        // Missing: written before the connection uses it.
        var t = try scene.thing(storage: "stored")
        try #require(ct_onboard(t.ct, "AC-STORED", "password-1", nil, nil, nil) == RC.ok, "logs:\n\(t.logs)")
        #expect(try String(contentsOfFile: dir + "/thing-cert.pem", encoding: .utf8) == certificate)
        #expect(fileMode(dir + "/thing-cert.pem") == 0o600)
        #expect(ct_start(t.ct) == RC.ok)
        #expect(poll(timeoutMs: 30_000) { t.isConnected }, "logs:\n\(t.logs)\nbroker:\n\(scene.broker.log)")
        #expect(t.destroy() == RC.ok)

        // Different (and readable by others): replaced, 0600 again.
        try "stale\n".write(toFile: dir + "/thing-cert.pem", atomically: true, encoding: .utf8)
        chmod(dir + "/thing-cert.pem", 0o644)
        t = try scene.thing(storage: "stored")
        try #require(ct_onboard(t.ct, "AC-STORED", "password-1", nil, nil, nil) == RC.ok, "logs:\n\(t.logs)")
        #expect(try String(contentsOfFile: dir + "/thing-cert.pem", encoding: .utf8) == certificate)
        #expect(fileMode(dir + "/thing-cert.pem") == 0o600)
        #expect(ct_start(t.ct) == RC.ok)
        #expect(poll(timeoutMs: 30_000) { t.isConnected }, "logs:\n\(t.logs)\nbroker:\n\(scene.broker.log)")
        t.destroy()
        scene.broker.stop()
        let log = scene.broker.log
        #expect(
            DeviceSecurityTests.sessionPorts(log, clientPrefix: topic) == [
                scene.broker.certPort, scene.broker.certPort
            ],
            "broker:\n\(log)")
        #expect(log.contains("u'\(topic)'"), "broker:\n\(log)")
    }

    @Test(
        "A stored certificate whose key is gone or another: THINGIF_ERR_TLS with a log line saying how to onboard again; no connection, never a password"
    )
    func certificateWithoutItsKey() throws {
        let scene = try CertificateScene()
        defer { scene.end() }
        let topic = "thing-topic-nokey"
        let dir = try scene.storedIdentity(storage: "nokey", topic: topic)
        let keyPath = dir + "/thing-key.pem"
        let key = try String(contentsOfFile: keyPath, encoding: .utf8)

        // Gone: onboarding from storage fails, saying how to recover.
        unlink(keyPath)
        let t = try scene.thing(storage: "nokey")
        #expect(ct_onboard(t.ct, "AC-STORED", "password-1", nil, nil, nil) == Self.tls, "logs:\n\(t.logs)")
        #expect(
            t.logContains(
                "ERROR the onboarding in \(dir)/identity.json has a client certificate, but \(keyPath) is missing"),
            "logs:\n\(t.logs)")
        #expect(t.logContains("Delete \(dir)/identity.json and onboard again"), "logs:\n\(t.logs)")
        #expect(t.thingID == nil)
        #expect(ct_start(t.ct) == RC.notOnboarded)

        // Another key: the certificate is not for it.
        _ = try openssl(
            ["genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", keyPath], in: dir)
        #expect(ct_onboard(t.ct, "AC-STORED", "password-1", nil, nil, nil) == Self.tls, "logs:\n\(t.logs)")
        #expect(t.logContains("is not for the key in \(keyPath)"), "logs:\n\(t.logs)")

        // Gone while the thing runs: the loop reports it and never connects.
        try key.write(toFile: keyPath, atomically: true, encoding: .utf8)
        try #require(ct_onboard(t.ct, "AC-STORED", "password-1", nil, nil, nil) == RC.ok, "logs:\n\(t.logs)")
        unlink(keyPath)
        #expect(ct_set_option(t.ct, Int32(THINGIF_OPT_RECONNECT_MIN_MS.rawValue), 50) == RC.ok)
        #expect(ct_set_option(t.ct, Int32(THINGIF_OPT_RECONNECT_MAX_MS.rawValue), 100) == RC.ok)
        #expect(ct_start(t.ct) == RC.ok)
        #expect(t.waitForLog("is missing or holds no EC P-256 key: the thing cannot connect"), "logs:\n\(t.logs)")
        // Must not happen: a connection after the refusal; room for it to show.
        usleep(500_000)
        #expect(!t.isConnected)
        t.destroy()
        scene.broker.stop()
        let log = scene.broker.log
        #expect(DeviceSecurityTests.sessionPorts(log, clientPrefix: topic).isEmpty, "broker:\n\(log)")
        #expect(!log.contains("New connection from"), "the thing connected somewhere; broker:\n\(log)")
    }

    // MARK: helpers

    /// A thing on the hub's broker, bootstrap on its TLS listener, TLS set
    /// without a client certificate.
    func tlsThing(_ env: Env, storage: String) throws -> TestThing {
        let t = try env.newThing(storage: storage, logLevel: LogLevel.debug)
        #expect(ct_register_aircon_handlers(t.ct, Aircon.schema, Aircon.version) == RC.ok)
        #expect(ct_set_broker(t.ct, "127.0.0.1", Int32(env.broker.tlsPort)) == RC.ok)
        #expect(ct_set_tls(t.ct, env.broker.caFile, nil, nil) == RC.ok)
        return t
    }

    /// The body of the newest onboarding of `vendorThingID` the hub logged.
    func onboardingRequest(_ env: Env, vendorThingID: String) -> [String: Any]? {
        env.hub.requests.filter { $0.path == "onboardings" }.compactMap { parseObject($0.body) }
            .last { $0["vendorThingID"] as? String == vendorThingID }
    }

    func onboardingCSR(_ env: Env, vendorThingID: String) -> String? {
        onboardingRequest(env, vendorThingID: vendorThingID)?["certificateSigningRequest"] as? String
    }
}

// MARK: - support

private func fileMode(_ path: String) -> mode_t? {
    var st = stat()
    guard stat(path, &st) == 0 else { return nil }
    return st.st_mode & 0o777
}

/// Runs openssl in `dir` and returns what it printed; throws unless it exits 0.
@discardableResult
private func openssl(_ args: [String], in dir: String) throws -> String {
    let log = dir + "/openssl-\(randomHexString(4)).log"
    defer { unlink(log) }
    let rc = try runChild("/usr/bin/openssl", args, logPath: log)
    let out = readText(log)
    guard rc == 0 else { throw HarnessError("openssl \(args.joined(separator: " ")): \(rc)\n\(out)") }
    return out
}

/// A CA, a server certificate for 127.0.0.1 and thing certificates, made
/// with the openssl CLI (EC P-256).
private struct SceneCA {
    let dir: String
    var caFile: String { dir + "/ca.crt" }

    init(dir: String) throws {
        self.dir = dir
        try openssl(
            [
                "req", "-x509", "-new", "-nodes", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-keyout",
                dir + "/ca.key", "-out", caFile, "-days", "2", "-subj", "/CN=thingif things CA", "-addext",
                "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign,cRLSign"
            ], in: dir)
        try openssl(
            [
                "req", "-new", "-nodes", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-keyout",
                dir + "/server.key", "-out", dir + "/server.csr", "-subj", "/CN=localhost"
            ], in: dir)
        try "subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n".write(
            toFile: dir + "/server.ext", atomically: true, encoding: .utf8)
        try openssl(
            [
                "x509", "-req", "-in", dir + "/server.csr", "-CA", caFile, "-CAkey", dir + "/ca.key",
                "-set_serial", "1", "-days", "2", "-extfile", dir + "/server.ext", "-out", dir + "/server.crt"
            ], in: dir)
        try "extendedKeyUsage=clientAuth\n".write(toFile: dir + "/client.ext", atomically: true, encoding: .utf8)
    }

    /// A client certificate (PEM) for the CSR, subject CN = commonName.
    func sign(csr: String, commonName: String) throws -> String {
        let name = randomHexString(4)
        try csr.write(toFile: dir + "/\(name).csr", atomically: true, encoding: .utf8)
        try openssl(
            [
                "x509", "-req", "-in", dir + "/\(name).csr", "-CA", caFile, "-CAkey", dir + "/ca.key",
                "-set_serial", String(Int.random(in: 2...1_000_000)), "-days", "1", "-subj", "/CN=\(commonName)",
                "-extfile", dir + "/client.ext", "-out", dir + "/\(name).crt"
            ], in: dir)
        return try String(contentsOfFile: dir + "/\(name).crt", encoding: .utf8)
    }
}

/// A mosquitto as docs/DECISIONS.md plans it for things with certificates
/// (#31): per-listener settings; a TLS listener open to any client (the
/// bootstrap connection and the test's responder), and a certificate
/// listener with require_certificate, use_identity_as_username (the CN is
/// the username, a sent username or password is ignored) and pattern ACLs.
private final class CertificateBroker {
    let tlsPort: Int
    let certPort: Int
    let logPath: String
    private let pid: pid_t
    private var stopped = false

    init(dir: String, pki: SceneCA) throws {
        guard let exe = Broker.executable() else { throw HarnessError("mosquitto not found") }
        guard let ports = Broker.freePorts() else { throw HarnessError("no free port") }
        tlsPort = ports.0
        certPort = ports.1
        logPath = dir + "/mosquitto.log"
        try "pattern readwrite %u\npattern readwrite p/%u/#\n".write(
            toFile: dir + "/acl", atomically: true, encoding: .utf8)
        var conf = "per_listener_settings true\n"
        if getuid() == 0 { conf += "user root\n" }
        conf += "persistence false\nlog_dest stdout\nlog_type all\n"
        conf += "listener \(tlsPort) 127.0.0.1\nallow_anonymous true\n"
        conf += "cafile \(pki.caFile)\ncertfile \(pki.dir)/server.crt\nkeyfile \(pki.dir)/server.key\n"
        conf += "listener \(certPort) 127.0.0.1\nallow_anonymous false\nacl_file \(dir)/acl\n"
        conf += "cafile \(pki.caFile)\ncertfile \(pki.dir)/server.crt\nkeyfile \(pki.dir)/server.key\n"
        conf += "require_certificate true\nuse_identity_as_username true\n"
        try conf.write(toFile: dir + "/mosquitto.conf", atomically: true, encoding: .utf8)
        pid = try spawnChild(exe, ["-c", dir + "/mosquitto.conf"], logPath: logPath)
        let child = pid
        guard
            poll(
                timeoutMs: 30_000,
                { Broker.listens(pid: child, port: ports.0) && Broker.listens(pid: child, port: ports.1) })
        else {
            stop()
            throw HarnessError("mosquitto did not listen: \(readText(logPath))")
        }
    }

    /// Its log, complete once stopped.
    var log: String { readText(logPath) }

    func stop() {
        guard !stopped else { return }
        stopped = true
        endChild(pid)
    }

    deinit { stop() }
}

/// One test's certificate world: a PKI, a CertificateBroker and a storage root.
private final class CertificateScene {
    let root: String
    let pki: SceneCA
    let broker: CertificateBroker
    private var things: [TestThing] = []

    init() throws {
        root = try makeTempDirectory(prefix: "thingif-cert")
        do {
            try FileManager.default.createDirectory(atPath: root + "/pki", withIntermediateDirectories: true)
            pki = try SceneCA(dir: root + "/pki")
            broker = try CertificateBroker(dir: root, pki: pki)
        } catch {
            try? FileManager.default.removeItem(atPath: root)
            throw error
        }
    }

    func storage(_ name: String) -> String { root + "/" + name }

    /// A handle on `storage` whose bootstrap broker is the TLS listener,
    /// TLS set with the CA and no certificate of its own; debug log lines.
    func thing(storage name: String) throws -> TestThing {
        guard let ct = ct_new(Env.appID, Env.appKey, storage(name), Int32(broker.tlsPort), LogLevel.debug) else {
            throw HarnessError("ct_new failed")
        }
        let t = TestThing(ct: ct)
        things.append(t)
        #expect(ct_set_option(ct, Int32(THINGIF_OPT_REQUEST_TIMEOUT_MS.rawValue), 5000) == RC.ok)
        #expect(ct_register_aircon_handlers(ct, Aircon.schema, Aircon.version) == RC.ok)
        #expect(ct_set_tls(ct, pki.caFile, nil, nil) == RC.ok)
        return t
    }

    /// A storage dir as an earlier onboarding with a signed certificate left
    /// it, made by hand: thing-key.pem (openssl genpkey, 0600), identity.json
    /// (vendorThingID AC-STORED) whose endpoint holds a certificate for that
    /// key (CN = topic) and the certificate listener as portSSL, and no
    /// thing-cert.pem. Returns the directory.
    func storedIdentity(storage name: String, topic: String) throws -> String {
        let dir = storage(name)
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        let keyPath = dir + "/thing-key.pem"
        try openssl(["genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", keyPath], in: dir)
        chmod(keyPath, 0o600)
        try openssl(["req", "-new", "-key", keyPath, "-subj", "/CN=AC-STORED", "-out", dir + "/stored.csr"], in: dir)
        let certificate = try pki.sign(
            csr: try String(contentsOfFile: dir + "/stored.csr", encoding: .utf8), commonName: topic)
        unlink(dir + "/stored.csr")
        let identity: [String: Any] = [
            "appID": Env.appID, "vendorThingID": "AC-STORED", "thingID": "th.stored", "accessToken": "token-stored",
            "mqttEndpoint": [
                "installationID": "inst-stored", "host": "127.0.0.1", "portTCP": 0, "portSSL": broker.certPort,
                "username": "", "password": "", "mqttTopic": topic, "ttl": 3600,
                "clientCertificate": certificate
            ] as [String: Any]
        ]
        try JSONSerialization.data(withJSONObject: identity).write(to: URL(fileURLWithPath: dir + "/identity.json"))
        chmod(dir + "/identity.json", 0o600)
        return dir
    }

    func end() {
        for t in things { t.destroy() }
        broker.stop()
        try? FileManager.default.removeItem(atPath: root)
    }
}
