// SPDX-License-Identifier: Apache-2.0

import Foundation
#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif
import Testing
import ThingIF
import ThingIFHub
import ThingIFHubServer

/// The REST API's defences (docs/SECURITY.md): rate limits, body limits,
/// token revocation, webhook destinations, history pages, HTTPS.
@Suite("Hub security: the REST API's defences", .serialized, .offPool)
struct HubSecurityTests {
    @Test(
        "Rate limit: a burst beyond the budget gets 429 with Retry-After and a Kii error body; after a refill one passes; users are apart"
    )
    func rateLimit() async throws {
        // A slow refill (one token per 5 s), so that a loaded machine's slow
        // requests do not earn a token back before the burst is spent.
        let limiter = RateLimiter(ratePerSecond: 0.2, burst: 3)
        try await withHubAPI(security: .init(rateLimiter: limiter)) { e in
            let (_, alice) = try await e.user()
            let (_, bob) = try await e.user()
            let group = { (token: String) in
                try await e.call("POST", "\(e.api)/groups", token: token, json: ["name": "home"])
            }
            for _ in 0..<3 { #expect(try await group(alice).status == 201) }
            // The burst is spent: a 429 comes within a few more requests
            // (more than one only if the machine was slow enough to refill one).
            var sent = Date()
            var limited = try await group(alice)
            for _ in 0..<3 where limited.status != 429 {
                sent = Date()
                limited = try await group(alice)
            }
            #expect(
                limited.status == 429 && limited.errorCode == "TOO_MANY_REQUESTS" && limited.isErrorBody,
                "\(limited.text)")
            let wait = try #require(
                limited.retryAfter.flatMap { Int($0) }, "Retry-After: \(limited.retryAfter ?? "none")")
            #expect((1...5).contains(wait))
            // Another user's budget is untouched.
            #expect(try await group(bob).status == 201)
            // After Retry-After, one request's worth is back.
            try await Task.sleep(nanoseconds: UInt64(wait) * 1_000_000_000 + 300_000_000)
            #expect(try await group(alice).status == 201)
            // Only one: the next is refused while the bucket holds under two
            // tokens again. At the refusal it held 1 - m (m the missing part,
            // Retry-After = ceil(5 m) s), so the second token is back 5 + 5 m
            // > 4 + Retry-After seconds after the refusal; a machine stalled
            // longer than that (seen on CI) has refilled two.
            let next = try await group(alice)
            if Date().timeIntervalSince(sent) < Double(4 + wait) {
                #expect(next.status == 429, "\(next.text)")
            }
        }
    }

    @Test(
        "Rate limiter: buckets refill at the rate, never above the burst; idle buckets are dropped and the key count is bounded"
    )
    func rateLimiterUnit() {
        let l = RateLimiter(ratePerSecond: 10, burst: 2, maxKeys: 3)
        #expect(l.allow("a", now: 0) && l.allow("a", now: 0) && !l.allow("a", now: 0))
        #expect(l.retryAfterSeconds("a", now: 0) == 1)
        #expect(l.allow("a", now: 100) && !l.allow("a", now: 100))
        // A long pause refills to the burst, not beyond.
        #expect(l.allow("a", now: 100_000) && l.allow("a", now: 100_000) && !l.allow("a", now: 100_000))
        for k in ["b", "c", "d", "e"] { #expect(l.allow(k, now: 100_000)) }
        #expect(l.bucketCount <= 3)
        // Once every bucket would be full again, a sweep drops them.
        #expect(l.allow("f", now: 200_000))
        #expect(l.bucketCount == 1)
    }

    @Test("Body limits: the configured maxBody answers 413 (declared or streamed), a body under it is read")
    func bodyLimit() async throws {
        try await withHubAPI(security: .init(limits: HubLimits(maxBody: 2048))) { e in
            let (_, token) = try await e.user()
            let big = try JSONSerialization.data(withJSONObject: ["name": String(repeating: "x", count: 3000)])
            let r = try await e.call("POST", "\(e.api)/groups", token: token, body: big)
            #expect(r.status == 413 && r.errorCode == "REQUEST_TOO_LARGE" && r.text.contains("2048"), "\(r.text)")
            let small = try JSONSerialization.data(withJSONObject: ["name": String(repeating: "x", count: 1500)])
            // Read, then refused by the name rule (1 to 64 characters), not by size.
            let s = try await e.call("POST", "\(e.api)/groups", token: token, body: small)
            #expect(s.status == 400 && s.errorCode == "INVALID_INPUT_DATA", "\(s.text)")
        }
    }

    @Test(
        "Tokens over REST: login issues a new token; revoke by body or the current one; a revoked token gets 401; another's is refused"
    )
    func revokeRoute() async throws {
        try await withHubAPI { e in
            let (_, first) = try await e.user(loginName: "alice")
            let (_, bobToken) = try await e.user(loginName: "bob")
            let login = try await e.call(
                "POST", "\(e.api)/oauth2/token", json: ["username": "alice", "password": "pw-alice"])
            #expect(login.status == 200)
            let second = try #require(login.string("access_token"))
            #expect(second != first && (login.json["expires_in"] as? Int) == 30 * 86_400)
            let me = { (t: String) in try await e.call("POST", "\(e.api)/groups", token: t, json: ["name": "g"]) }
            #expect(try await me(first).status == 201)
            #expect(try await me(second).status == 201)
            // Someone else's token cannot be revoked by alice.
            let other = try await e.call("POST", "\(e.api)/oauth2/revoke", token: second, json: ["token": bobToken])
            #expect(other.status == 400 && other.isErrorBody)
            #expect(try await me(bobToken).status == 201)
            // The first token, named in the body.
            #expect(
                try await e.call("POST", "\(e.api)/oauth2/revoke", token: second, json: ["token": first]).status == 204)
            let revoked = try await me(first)
            #expect(revoked.status == 403 && revoked.errorCode == "WRONG_TOKEN")
            #expect(try await me(second).status == 201)
            // The current token, with an empty body.
            #expect(
                try await e.call("POST", "\(e.api)/oauth2/revoke", token: second, json: [String: Any]()).status == 204)
            #expect(try await me(second).status == 403)
            // A wrong password and an unknown user get the same answer.
            let wrong = try await e.call(
                "POST", "\(e.api)/oauth2/token", json: ["username": "alice", "password": "nope"])
            let unknown = try await e.call(
                "POST", "\(e.api)/oauth2/token", json: ["username": "carol", "password": "nope"])
            #expect(wrong.status == 400 && unknown.status == 400 && wrong.errorCode == unknown.errorCode)
        }
    }

    @Test(
        "Webhooks: literal loopback, private, link-local and IPv6 loopback URLs are refused at installation without the allow-list; allowed with it"
    )
    func webhookDestinations() async throws {
        try await withHubAPI(options: { $0.webhooks = WebhookGuard(allow: ["127.0.0.1:9", "[::1]:8080"]) }) { e in
            let (_, token) = try await e.user()
            func install(_ url: String) async throws -> HTTPReply {
                try await e.call(
                    "POST", "\(e.api)/installations", token: token,
                    json: ["deviceType": "WEBHOOK", "webhookURL": url])
            }
            for url in [
                "http://127.0.0.1:8080/hook", "http://10.1.2.3/hook", "http://169.254.169.254/latest",
                "http://[::1]:9/hook", "http://192.168.1.1/", "http://172.16.0.1/", "http://100.64.0.1/",
                "http://[fd00::1]/", "http://[fe80::1]/", "http://0.0.0.0/", "http://224.0.0.1/",
                "http://[::ffff:127.0.0.1]/", "http://[::ffff:10.0.0.1]/", "https://127.1.2.3:443/"
            ] {
                let r = try await install(url)
                #expect(
                    r.status == 400 && r.errorCode == "INVALID_INPUT_DATA" && r.text.contains("public"),
                    "\(url): \(r.text)")
            }
            // The operator's allow-list names these host:port pairs.
            #expect(try await install("http://127.0.0.1:9/hook").status == 201)
            #expect(try await install("http://[::1]:8080/hook").status == 201)
            // A public literal is fine (nothing is sent here: no command finishes).
            #expect(try await install("https://93.184.215.14/hook").status == 201)
        }
    }

    @Test(
        "Webhook delivery: a 302 is not followed; a name that resolves to loopback is skipped at delivery; a revoked thing token gets 401 on MQTT"
    )
    func webhookDeliveryAndThingTokens() async throws {
        let target = try WebhookReceiver()
        defer { target.stop() }
        let bouncer = try WebhookReceiver(redirectTo: target.url)
        defer { bouncer.stop() }
        let byName = try WebhookReceiver()
        defer { byName.stop() }
        // Both loopback receivers by address are allowed; the one by name is not.
        let allow = ["127.0.0.1:\(target.port)", "127.0.0.1:\(bouncer.port)"]
        try await withHubAPI(options: { $0.webhooks = WebhookGuard(allow: allow) }) { e in
            // Each webhook's outcome: an event when delivered, a log line when not.
            let outcomes = HubLines()
            e.hub.onEvent = outcomes.sink
            let log = e.hub.onLog
            e.hub.onLog = { line in
                log?(line)
                outcomes.append(line)
            }
            let (uid, token) = try await e.user(loginName: "alice")
            let (tid, thingToken) = try await e.onboard("AC-HOOKS", owner: "user:\(uid)", token: token)
            _ = try await e.appliance(thingID: tid, token: thingToken)
            _ = try await e.installation("WEBHOOK", token: token, webhookURL: bouncer.url)
            _ = try await e.installation(
                "WEBHOOK", token: token,
                webhookURL: "http://localhost:\(byName.port)/hook")
            let cid = try await e.postCommand(tid, token: token, userID: uid)
            _ = try await e.waitForFinished(tid, cid, token: token)
            #expect(await offPool { poll(timeoutMs: 30_000) { !bouncer.bodies.withLock { $0.isEmpty } } })
            #expect(
                await offPool {
                    poll(timeoutMs: 30_000) { e.logs.withLock { $0.contains { $0.contains("refused") } } }
                },
                "\(e.logs.withLock { $0 })")
            // Both webhooks are done: the one by name refused before any
            // request, the bounced one answered (a followed redirect would
            // have reached the target first). A marker posted to the target
            // after that arrives after anything the hub sent it.
            #expect(
                await offPool { outcomes.wait(count: 2) { $0.hasPrefix("webhook of") } }, "\(outcomes.all)")
            let marker = "marker-\(Platform.randomHex(bytes: 4))"
            #expect(try await postBody(marker, to: target.url) == 204)
            #expect(await offPool { poll(timeoutMs: 30_000) { target.bodies.withLock { $0.contains(marker) } } })
            #expect(target.bodies.withLock { $0 } == [marker], "the redirect was followed")
            #expect(byName.bodies.withLock { $0.isEmpty }, "a webhook reached a loopback address by name")

            // The thing's token revoked: its next request over MQTT gets 401.
            #expect(e.hub.store.revokeToken(thingToken))
            let before = e.hub.requests.count
            let cid2 = try await e.postCommand(tid, token: token, userID: uid)
            #expect(
                await offPool {
                    poll(timeoutMs: 30_000) { e.hub.requests.dropFirst(before).contains { $0.status == 401 } }
                }, "\(e.hub.requests.dropFirst(before).map { "\($0.method) \($0.path) \($0.status)" })")
            #expect(e.hub.store.command(id: cid2)?.results == nil)
        }
    }

    @Test(
        "Webhook guard: addresses classified; a name resolving to loopback is refused at delivery; the allow-list is per host and port"
    )
    func webhookGuardUnit() throws {
        let g = WebhookGuard()
        for host in [
            "127.0.0.1", "10.0.0.1", "172.31.255.255", "192.168.0.1", "100.127.0.1", "169.254.1.1", "0.0.0.0",
            "224.1.1.1", "255.255.255.255", "::1", "::", "fc00::1", "fdff::1", "fe80::1", "ff02::1",
            "::ffff:192.168.1.1", "::ffff:127.0.0.1", "64:ff9b::a00:1"
        ] {
            let bytes = try #require(WebhookGuard.literalAddress(host), "\(host)")
            #expect(WebhookGuard.nonPublic(bytes) != nil, "\(host) counted as public")
        }
        for host in ["93.184.215.14", "8.8.8.8", "172.32.0.1", "100.128.0.1", "2606:4700::1111", "::ffff:8.8.8.8"] {
            let bytes = try #require(WebhookGuard.literalAddress(host), "\(host)")
            #expect(WebhookGuard.nonPublic(bytes) == nil, "\(host) counted as non-public")
        }
        // "localhost" is a name: accepted at installation, refused once resolved.
        #expect(g.checkAtInstallation("http://localhost:8080/hook") == .allowed)
        #expect(g.checkAtDelivery(URL(string: "http://localhost:8080/hook")!) != .allowed)
        #expect(
            WebhookGuard(allow: ["localhost:8080"]).checkAtDelivery(URL(string: "http://localhost:8080/hook")!)
                == .allowed)
        #expect(
            WebhookGuard(allow: ["localhost:8080"]).checkAtDelivery(URL(string: "http://localhost:8081/hook")!)
                != .allowed)
        #expect(g.checkAtInstallation("ftp://example.com/") != .allowed)
    }

    @Test("State history over REST: bestEffortLimit pages with nextPaginationKey, capped by maxHistoryPage")
    func historyPages() async throws {
        try await withHubAPI(security: .init(limits: HubLimits(maxHistoryPage: 3))) { e in
            let (uid, token) = try await e.user()
            let (tid, _) = try await e.onboard("AC-PAGES", owner: "user:\(uid)", token: token, interval: nil)
            let base = Platform.epochMs() - 10_000
            for i in 0..<7 {
                _ = try #require(
                    e.hub.store.applyState(thingID: tid, method: "PUT", upload: #"{"i":\#(i)}"#, at: base + Int64(i)))
            }
            var seen: [Int] = []
            var key: String?
            var pages = 0
            repeat {
                var path = "\(e.target(tid))/states/history?bestEffortLimit=5"
                if let key { path += "&paginationKey=\(key)" }
                let r = try await e.get(path, token: token)
                #expect(r.status == 200, "\(r.text)")
                let groups = r.json["groupedResults"] as? [[String: Any]] ?? []
                let objects = groups.flatMap { $0["objects"] as? [[String: Any]] ?? [] }
                #expect(objects.count <= 3)
                seen += objects.compactMap { $0["i"] as? Int }
                key = r.string("nextPaginationKey")
                pages += 1
            } while key != nil && pages < 10
            #expect(seen == Array(0..<7) && pages == 3)
            let bad = try await e.get("\(e.target(tid))/states/history?bestEffortLimit=0", token: token)
            #expect(bad.status == 400 && bad.isErrorBody)
            let badKey = try await e.get("\(e.target(tid))/states/history?paginationKey=x", token: token)
            #expect(badKey.status == 400 && badKey.isErrorBody)
        }
    }

    @Test(
        "HTTPS: --tls-cert/--tls-key serve TLS; a client trusting the test CA succeeds, one without it fails, plain HTTP fails"
    )
    func https() async throws {
        let dir = try makeTempDirectory(prefix: "thingif-tls")
        defer { try? FileManager.default.removeItem(atPath: dir) }
        try makeTestCertificates(dir)
        let security = HubServer.Security(tlsCertFile: dir + "/server.pem", tlsKeyFile: dir + "/server.key")
        try await withHubAPI(security: security) { e in
            let url = "https://127.0.0.1:\(e.port)/health"
            let trusted = try await offPool {
                Result { try run("/usr/bin/curl", ["-sS", "--cacert", dir + "/ca.pem", url]) }
            }.get()
            #expect(trusted.status == 0 && trusted.output.contains(#""status":"ok""#), "\(trusted.output)")
            let untrusted = try await offPool { Result { try run("/usr/bin/curl", ["-sS", url]) } }.get()
            // 60: the peer's certificate cannot be verified.
            #expect(untrusted.status == 60, "curl without the CA: \(untrusted.status) \(untrusted.output)")
            let plain = try await offPool {
                Result { try run("/usr/bin/curl", ["-sS", "-m", "5", "http://127.0.0.1:\(e.port)/health"]) }
            }.get()
            #expect(plain.status != 0 && !plain.output.contains(#""status":"ok""#), "plain HTTP: \(plain.output)")
        }
    }

    @Test("HTTPS: a certificate that does not load stops the server; it never falls back to plain HTTP")
    func httpsNoFallback() async throws {
        let dir = try makeTempDirectory(prefix: "thingif-tls")
        defer { try? FileManager.default.removeItem(atPath: dir) }
        try "not a certificate".write(toFile: dir + "/bad.pem", atomically: true, encoding: .utf8)
        let hub = try #require(
            FrameworkSide(
                .init(appID: "a", appKey: "k", brokerPort: 1),
                store: MemoryStore(secrets: .fastForTests)))
        for (cert, key) in [(dir + "/missing.pem", dir + "/missing.key"), (dir + "/bad.pem", dir + "/bad.pem")] {
            let server = HubServer(
                hub: hub, host: "127.0.0.1", port: 0,
                security: .init(tlsCertFile: cert, tlsKeyFile: key))
            let failed: Bool
            do {
                try await server.run()
                failed = false
            } catch {
                failed = true
            }
            #expect(failed, "run() with \(cert) did not fail")
            #expect(server.listeningPort == nil, "the server listened without TLS")
        }
    }
}

/// A CA and a server certificate for IP 127.0.0.1 signed by it, made with the
/// openssl CLI: ca.pem, server.pem, server.key in `dir`.
private func makeTestCertificates(_ dir: String) throws {
    let steps: [[String]] = [
        [
            "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-keyout",
            dir + "/ca.key",
            "-out", dir + "/ca.pem", "-days", "1", "-subj", "/CN=thingif test CA",
            "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign,cRLSign"
        ],
        [
            "req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-keyout",
            dir + "/server.key",
            "-out", dir + "/server.csr", "-subj", "/CN=127.0.0.1"
        ],
        [
            "x509", "-req", "-in", dir + "/server.csr", "-CA", dir + "/ca.pem", "-CAkey", dir + "/ca.key",
            "-CAcreateserial",
            "-out", dir + "/server.pem", "-days", "1", "-extfile", dir + "/ext.cnf"
        ]
    ]
    try "subjectAltName=IP:127.0.0.1\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n"
        .write(toFile: dir + "/ext.cnf", atomically: true, encoding: .utf8)
    for args in steps {
        let r = try run("/usr/bin/openssl", args)
        guard r.status == 0 else { throw HarnessError("openssl \(args[0]) failed: \(r.output)") }
    }
}

/// Runs a program to its end; its exit status and its stdout and stderr together.
private func run(_ exe: String, _ args: [String]) throws -> (status: Int32, output: String) {
    let p = Process()
    p.executableURL = URL(fileURLWithPath: exe)
    p.arguments = args
    let pipe = Pipe()
    p.standardOutput = pipe
    p.standardError = pipe
    try p.run()
    let data = pipe.fileHandleForReading.readDataToEndOfFile()
    p.waitUntilExit()
    return (p.terminationStatus, String(decoding: data, as: UTF8.self))
}

/// POSTs `body` to `url` (a webhook receiver) and returns the status.
private func postBody(_ body: String, to url: String) async throws -> Int {
    var request = URLRequest(url: URL(string: url)!, timeoutInterval: 60)
    request.httpMethod = "POST"
    request.httpBody = Data(body.utf8)
    return try await withCheckedThrowingContinuation { c in
        URLSession.shared.dataTask(with: request) { _, response, error in
            if let error { return c.resume(throwing: error) }
            c.resume(returning: (response as? HTTPURLResponse)?.statusCode ?? 0)
        }.resume()
    }
}
