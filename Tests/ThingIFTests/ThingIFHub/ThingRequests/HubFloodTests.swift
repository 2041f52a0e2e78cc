// SPDX-License-Identifier: Apache-2.0

import Foundation
#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif
import Testing
import ThingIF
import ThingIFHub
import ThingIFHubServer
#if canImport(Glibc)
    import Glibc
#endif

/// The hub's defences against floods (docs/SECURITY.md, "Floods"): costly
/// work on a bounded pool of its own, budgets spent after authorisation and
/// per source address, the bootstrap identity's global budget, HTTP
/// timeouts, creation caps and enrollment. Each against the real broker and
/// hub; no test depends on fine timing (bounds are generous).
@Suite("Hub floods: costly work apart, budgets, timeouts, caps", .serialized, .offPool)
struct HubFloodTests {
    /// A job that holds a costly-work thread until released.
    final class Gate: @unchecked Sendable {
        private let sem = DispatchSemaphore(value: 0)
        func hold() { sem.wait() }
        func release(_ n: Int) { for _ in 0..<n { sem.signal() } }
    }

    @Test("Costly work: at most its threads run, at most its queue waits; one more is refused at once")
    func costlyPool() {
        let pool = CostlyWork(threads: 1, queueLimit: 2)
        defer { pool.close() }
        let gate = Gate()
        let ran = Locked(0)
        let job = {
            gate.hold()
            ran.withLock { $0 += 1 }
        }
        #expect(pool.trySubmit(job))
        #expect(poll(timeoutMs: 30_000) { pool.running == 1 })
        #expect(pool.trySubmit(job) && pool.trySubmit(job))
        // One runs, two wait: the next is refused.
        #expect(pool.running == 1 && pool.waiting == 2)
        #expect(!pool.trySubmit {})
        #expect(pool.refused == 1)
        #expect(pool.retryAfterSeconds >= 1)
        gate.release(3)
        #expect(poll(timeoutMs: 30_000) { ran.withLock { $0 } == 3 })
        #expect(pool.runAndWait { 42 } == 42)
    }

    @Test(
        "A full costly-work queue: sign-up and login answer 503 with Retry-After at once, MQTT onboardings are dropped and counted; commands and results still flow"
    )
    func fullPool() async throws {
        try await withHubAPI(options: { o in
            o.costlyThreads = 1
            o.costlyQueue = 1
        }) { e in
            let (uid, token) = try await e.user()
            let (tid, thingToken) = try await e.onboard("AC-FLOOD-1", owner: "user:\(uid)", token: token)
            let ac = try await e.appliance(thingID: tid, token: thingToken)
            defer { ac.destroy() }
            // Fill the pool: one job runs, one waits.
            let gate = Gate()
            #expect(e.hub.costly.trySubmit { gate.hold() })
            #expect(poll(timeoutMs: 30_000) { e.hub.costly.running == 1 })
            #expect(e.hub.costly.trySubmit { gate.hold() })
            #expect(poll(timeoutMs: 30_000) { e.hub.costly.running == 1 && e.hub.costly.waiting == 1 })
            let start = Date()
            let signUp = try await e.call(
                "POST", "\(e.api)/users", json: ["loginName": "floody", "password": "pw-floody"])
            #expect(signUp.status == 503 && signUp.errorCode == "SERVICE_BUSY" && signUp.isErrorBody, "\(signUp.text)")
            #expect(Int(signUp.retryAfter ?? "") ?? 0 >= 1, "Retry-After: \(signUp.retryAfter ?? "none")")
            let login = try await e.call(
                "POST", "\(e.api)/oauth2/token", json: ["username": "nobody", "password": "pw"])
            #expect(login.status == 503, "\(login.text)")
            // At once: not after the jobs in the pool (which never end here).
            #expect(Date().timeIntervalSince(start) < 20)
            // A bootstrap request over MQTT is dropped and counted.
            let boot = try MqttProbe.bootstrap(port: e.env.broker.port)
            let bootID = boot.client.clientID
            defer { boot.stop() }
            #expect(boot.subscribe(Topics.response(clientID: bootID)) == 1)
            boot.publish(
                Topics.request(clientID: bootID, appID: Env.appID, path: "onboardings"),
                kiiRequest(
                    "POST", token: nil, contentType: MediaType.onboardingByThing, requestID: "b1",
                    body: #"{"vendorThingID":"AC-NEW","thingPassword":"pw"}"#), correlation: "b1")
            #expect(
                await offPool {
                    poll(timeoutMs: 30_000) {
                        String(decoding: e.hub.metrics.exposition(), as: UTF8.self).contains(
                            #"thingif_hub_bootstrap_dropped_total{reason="busy"} 1"#)
                    }
                })
            // The command path never waits on the pool.
            let cid = try await e.postCommand(tid, token: token, userID: uid)
            let done = try await e.waitForFinished(tid, cid, token: token, timeoutMs: 30_000)
            #expect(done["commandState"] as? String == "DONE")
            #expect(boot.messages(on: Topics.response(clientID: bootID)).isEmpty)
            gate.release(2)
            #expect(poll(timeoutMs: 30_000) { e.hub.costly.running == 0 && e.hub.costly.waiting == 0 })
            let again = try await e.call(
                "POST", "\(e.api)/users", json: ["loginName": "floody", "password": "pw-floody"])
            #expect(again.status == 201, "\(again.text)")
            let metrics = String(decoding: e.hub.metrics.exposition(), as: UTF8.self)
            #expect(metrics.contains(#"thingif_hub_refused_total{defence="costly_busy"} 2"#), "\(metrics)")
        }
    }

    @Test(
        "Budgets are spent after authorisation: a non-owner's refused reads spend its own budget, never the thing's; the owner is not locked out"
    )
    func budgetAfterAuthorisation() async throws {
        // Slow refill: a loaded machine earns no token back during the test.
        let limiter = RateLimiter(ratePerSecond: 0.05, burst: 4)
        try await withHubAPI(security: .init(rateLimiter: limiter)) { e in
            let (alice, aliceToken) = try await e.user()
            let (_, mallory) = try await e.user()
            let (tid, _) = try await e.onboard("AC-BUDGET", owner: "user:\(alice)", token: aliceToken)
            var statuses: [Int] = []
            for _ in 0..<8 { statuses.append(try await e.get("\(e.target(tid))/commands", token: mallory).status) }
            // Mallory's own budget (4) answers: 404 while it lasts, then 429.
            #expect(
                statuses.prefix(4).allSatisfy { $0 == 404 } && statuses.suffix(4).allSatisfy { $0 == 429 },
                "\(statuses)")
            // The thing's budget is whole: its owner's reads pass (3 more of
            // alice's 4 after the onboarding spent one).
            for _ in 0..<3 {
                let r = try await e.get("\(e.target(tid))/commands", token: aliceToken)
                #expect(r.status == 200, "\(r.status) \(r.text)")
            }
        }
    }

    @Test(
        "Client address: IPv4 /32, IPv6 /64, X-Forwarded-For only from a trusted proxy, its right-most untrusted entry")
    func clientAddress() {
        #expect(ClientAddress.key(peer: "198.51.100.7", forwardedFor: nil, trusted: []) == "v4:198.51.100.7")
        #expect(
            ClientAddress.key(peer: "2001:db8:1:2:aaaa::1", forwardedFor: nil, trusted: [])
                == ClientAddress.key(peer: "2001:db8:1:2:ffff::9", forwardedFor: nil, trusted: []))
        #expect(
            ClientAddress.key(peer: "2001:db8:1:2::1", forwardedFor: nil, trusted: [])
                != ClientAddress.key(peer: "2001:db8:1:3::1", forwardedFor: nil, trusted: []))
        #expect(ClientAddress.key(peer: "::ffff:198.51.100.7", forwardedFor: nil, trusted: []) == "v4:198.51.100.7")
        // Untrusted peer: its X-Forwarded-For is ignored.
        #expect(ClientAddress.key(peer: "198.51.100.7", forwardedFor: "203.0.113.1", trusted: []) == "v4:198.51.100.7")
        // Trusted: the right-most entry that is not a trusted proxy.
        #expect(
            ClientAddress.key(
                peer: "10.0.0.2", forwardedFor: "1.2.3.4, 203.0.113.9, 10.0.0.3", trusted: ["10.0.0.0/8"])
                == "v4:203.0.113.9")
        // A garbled entry stops the walk at the last good one.
        #expect(ClientAddress.key(peer: "10.0.0.2", forwardedFor: "nonsense", trusted: ["10.0.0.2"]) == "v4:10.0.0.2")
        #expect(ClientAddress.isTrusted("fd00::5", ["fd00::/8"]) && !ClientAddress.isTrusted("fe80::5", ["fd00::/8"]))
        #expect(ClientAddress.isValidNetwork("10.0.0.0/8") && !ClientAddress.isValidNetwork("10.0.0.0/33"))
    }

    @Test(
        "Per-address budget on sign-up, login and onboarding by the thing over HTTP: X-Forwarded-For counts only from a trusted proxy; the app-wide budget holds too"
    )
    func addressBudget() async throws {
        var security = HubServer.Security()
        security.addressLimiter = RateLimiter(ratePerSecond: 0.01, burst: 3)
        try await withHubAPI(security: security) { e in
            // The first of three sign-ups, kept for an authenticated call below.
            let (_, token) = try await e.user()
            var statuses: [Int] = []
            for _ in 0..<2 { statuses.append(try await e.call("POST", "\(e.api)/users", json: [:]).status) }
            // Spoofing X-Forwarded-For from an untrusted peer changes nothing.
            let spoofed = try await e.call(
                "POST", "\(e.api)/oauth2/token", json: ["username": "x", "password": "y"],
                headers: ["X-Forwarded-For": "203.0.113.9"])
            #expect(statuses == [201, 201], "\(statuses)")
            #expect(spoofed.status == 429 && spoofed.retryAfter != nil, "\(spoofed.status) \(spoofed.text)")
            let onboarding = try await e.call(
                "POST", "\(e.thingIF)/onboardings", json: ["vendorThingID": "AC-ADDR", "thingPassword": "pw"],
                contentType: MediaType.onboardingByThing)
            #expect(onboarding.status == 429, "\(onboarding.text)")
            // An authenticated call is not on this budget.
            #expect(try await e.call("POST", "\(e.api)/groups", token: token, json: ["name": "g"]).status == 201)
            let metrics = String(decoding: e.hub.metrics.exposition(), as: UTF8.self)
            #expect(metrics.contains(#"thingif_hub_refused_total{defence="address_budget"} 2"#), "\(metrics)")
        }
        var proxied = HubServer.Security()
        proxied.addressLimiter = RateLimiter(ratePerSecond: 0.01, burst: 1)
        proxied.trustedProxies = ["127.0.0.1"]
        proxied.appLimiter = RateLimiter(ratePerSecond: 0.01, burst: 3)
        try await withHubAPI(security: proxied) { e in
            // Behind a trusted proxy each client has its own budget ...
            for i in 1...3 {
                let r = try await e.call(
                    "POST", "\(e.api)/users", json: [:], headers: ["X-Forwarded-For": "203.0.113.\(i)"])
                #expect(r.status == 201, "\(r.text)")
            }
            let again = try await e.call(
                "POST", "\(e.api)/users", json: [:], headers: ["X-Forwarded-For": "203.0.113.1"])
            #expect(again.status == 429, "\(again.text)")
            // ... and the app's budget (3) is spent whoever asks.
            let fresh = try await e.call(
                "POST", "\(e.api)/users", json: [:], headers: ["X-Forwarded-For": "198.51.100.99"])
            #expect(fresh.status == 429, "\(fresh.text)")
        }
    }

    /// Opens a raw connection, sends `bytes`, and returns the seconds until
    /// the server closed it (nil: still open after `limit` s), counted from
    /// the send or, with `fromReply`, from the last bytes the server sent:
    /// the idle probe then starts when the hub has surely accepted and
    /// served the connection, however busy the machine is.
    static func secondsUntilClosed(port: Int, sending bytes: String, limit: Double, fromReply: Bool = false) -> Double?
    {
        guard let fd = connectLoopback(port: port, receiveTimeoutMs: 200) else { return 0 }
        defer { close(fd) }
        _ = bytes.withCString { send(fd, $0, strlen($0), Int32(MSG_NOSIGNAL)) }
        var since = Date()
        var buf = [UInt8](repeating: 0, count: 1024)
        while Date().timeIntervalSince(since) < limit {
            let n = recv(fd, &buf, buf.count, 0)
            if n > 0 {
                if fromReply { since = Date() }
            } else if n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK) {
                return Date().timeIntervalSince(since)
            }
        }
        return nil
    }

    @Test(
        "HTTP: a request head or body sent too slowly is cut off, an idle keep-alive connection is closed; a normal request is served"
    )
    func slowClients() async throws {
        var security = HubServer.Security()
        security.connections = HTTPConnectionLimits(
            headerTimeoutSeconds: 1, bodyTimeoutSeconds: 1, idleTimeoutSeconds: 2, maxConnections: 100)
        try await withHubAPI(security: security) { e in
            let port = e.port
            let (head, body, idle) = await offPool {
                (
                    Self.secondsUntilClosed(
                        port: port, sending: "GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n", limit: 30),
                    Self.secondsUntilClosed(
                        port: port,
                        sending:
                            "POST /api/apps/\(Env.appID)/users HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{",
                        limit: 30),
                    // A keep-alive connection served once, then left idle.
                    Self.secondsUntilClosed(
                        port: port, sending: "GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", limit: 30,
                        fromReply: true)
                )
            }
            #expect(head != nil && head! >= 0.5, "half-sent head: \(head.map { "\($0) s" } ?? "still open")")
            #expect(body != nil && body! >= 0.5, "half-sent body: \(body.map { "\($0) s" } ?? "still open")")
            #expect(idle != nil && idle! >= 1, "idle: \(idle.map { "\($0) s" } ?? "still open")")
            let health = try await e.get("/health", token: nil)
            #expect(health.status == 200)
            let metrics = String(decoding: e.hub.metrics.exposition(), as: UTF8.self)
            #expect(metrics.contains(#"thingif_hub_refused_total{defence="header_timeout"} 1"#), "\(metrics)")
            #expect(metrics.contains(#"thingif_hub_refused_total{defence="body_timeout"} 1"#), "\(metrics)")
        }
    }

    @Test(
        "Bootstrap over MQTT: beyond the global budget requests are dropped without a reply, whatever client ID the topic names; things' commands still run"
    )
    func bootstrapBudget() throws {
        let env = try Env { o in
            o.bootstrapRatePerSecond = 0.001
            o.bootstrapBurst = 4
        }
        defer { env.close() }
        // One of the four: the aircon's own onboarding.
        let (_, tid) = try env.onlineAircon(vendorThingID: "AC-BOOT", storage: "boot")
        let boot = try MqttProbe.bootstrap(port: env.broker.port)
        defer { boot.stop() }
        let ids = (0..<8).map { _ in "thingif-bootstrap-" + randomHexString(8) }
        for id in ids { #expect(boot.subscribe(Topics.response(clientID: id)) == 1) }
        for (i, id) in ids.enumerated() {
            boot.publish(
                Topics.request(clientID: id, appID: Env.appID, path: "onboardings"),
                kiiRequest(
                    "POST", token: nil, contentType: MediaType.onboardingByThing, requestID: "r\(i)",
                    body: #"{"vendorThingID":"AC-GUESS-\#(i)","thingPassword":"pw"}"#), correlation: "r\(i)")
        }
        #expect(
            poll(timeoutMs: 30_000) {
                String(decoding: env.hub.metrics.exposition(), as: UTF8.self).contains(
                    #"thingif_hub_bootstrap_dropped_total{reason="budget"} 5"#)
            })
        #expect(poll(timeoutMs: 30_000) { boot.messages().count == 3 })
        // Things' own topics are not on that budget.
        try env.expectAlive(tid)
        #expect(boot.messages().count == 3)
    }

    @Test(
        "Creation caps: things created by onboarding by the thing per hour app-wide; MQTT installations per user and per app"
    )
    func creationCaps() async throws {
        try await withHubAPI(options: { o in
            o.thingsCreatedPerHour = 2
            o.mqttInstallationsPerUser = 2
            o.mqttInstallationsPerApp = 3
        }) { e in
            func onboard(_ v: String, _ pw: String = "pw") async throws -> HTTPReply {
                try await e.call(
                    "POST", "\(e.thingIF)/onboardings", json: ["vendorThingID": v, "thingPassword": pw],
                    contentType: MediaType.onboardingByThing)
            }
            #expect(try await onboard("AC-CAP-1").status == 200)
            #expect(try await onboard("AC-CAP-2").status == 200)
            let third = try await onboard("AC-CAP-3")
            #expect(third.status == 429 && third.errorCode == "TOO_MANY_REQUESTS", "\(third.text)")
            // A known thing onboards again: no creation.
            #expect(try await onboard("AC-CAP-1").status == 200)
            // MQTT installations: 2 per user, 3 per app.
            let (_, alice) = try await e.user()
            let (_, bob) = try await e.user()
            _ = try await e.installation("MQTT", token: alice)
            _ = try await e.installation("MQTT", token: alice)
            let aliceThird = try await e.call(
                "POST", "\(e.api)/installations", token: alice, json: ["deviceType": "MQTT"])
            #expect(aliceThird.status == 409 && aliceThird.errorCode == "TOO_MANY_INSTALLATIONS", "\(aliceThird.text)")
            _ = try await e.installation("MQTT", token: bob)
            let bobSecond = try await e.call("POST", "\(e.api)/installations", token: bob, json: ["deviceType": "MQTT"])
            #expect(bobSecond.status == 409, "\(bobSecond.text)")
            // Other kinds are not capped.
            _ = try await e.installation("SSE", token: alice)
        }
    }

    @Test(
        "Enrollment: onboarding by the thing accepts only imported vendorThingIDs with their passwords; the import route needs the admin token"
    )
    func enrollment() async throws {
        var security = HubServer.Security()
        security.adminToken = "operator-secret"
        try await withHubAPI(security: security, options: { $0.enrollmentOnly = true }) { e in
            let rows: [String: Any] = [
                "things": [
                    ["vendorThingID": "AC-ENR-1", "thingPassword": "pw-1", "thingType": "AirConditioner"],
                    ["vendorThingID": "AC-ENR-2", "thingPassword": "pw-2"]
                ]
            ]
            let noToken = try await e.call("POST", "\(e.api)/things/import", json: rows)
            #expect(noToken.status == 403, "\(noToken.text)")
            let (_, userToken) = try await e.user()
            #expect(try await e.call("POST", "\(e.api)/things/import", token: userToken, json: rows).status == 403)
            let imported = try await e.call("POST", "\(e.api)/things/import", token: "operator-secret", json: rows)
            #expect(imported.status == 200 && imported.json["imported"] as? Int == 2, "\(imported.text)")
            let again = try await e.call("POST", "\(e.api)/things/import", token: "operator-secret", json: rows)
            #expect(again.json["existing"] as? Int == 2, "\(again.text)")
            func onboard(_ v: String, _ pw: String) async throws -> HTTPReply {
                try await e.call(
                    "POST", "\(e.thingIF)/onboardings", json: ["vendorThingID": v, "thingPassword": pw],
                    contentType: MediaType.onboardingByThing)
            }
            let unknown = try await onboard("AC-STRANGER", "pw")
            #expect(unknown.status == 403 && unknown.errorCode == "THING_NOT_ENROLLED", "\(unknown.text)")
            #expect(try await onboard("AC-ENR-1", "wrong").status == 403)
            let good = try await onboard("AC-ENR-1", "pw-1")
            #expect(good.status == 200 && good.string("thingID") != nil, "\(good.text)")
        }
    }

    @Test(
        "HTTP thing requests: a budget per token; tokenless onboardings spend the address's and app's budgets only, not one key every device shares"
    )
    func httpThingBudgets() throws {
        var o = FrameworkSide.Options(appID: Env.appID, appKey: Env.appKey, brokerPort: 1)
        o.requestRatePerSecond = 0.001
        o.requestBurst = 5
        let hub = try #require(FrameworkSide(o, store: MemoryStore(secrets: .fastForTests)))
        var token = ""
        var thingID = ""
        for n in 0..<20 {
            let body = #"{"vendorThingID":"AC-HTTP-\#(n)","thingPassword":"pw-1"}"#
            let r = hub.thingRequests.overHTTP(
                KiiRequest(
                    method: "POST", headers: [("Content-Type", MediaType.onboardingByThing)], body: Array(body.utf8)),
                route: .onboarding, path: "onboardings")
            #expect(r.status == 200, "onboarding \(n): \(r.status) \(r.bodyText)")
            if n == 0, let j = parseObject(r.bodyText) {
                token = j["accessToken"] as? String ?? ""
                thingID = j["thingID"] as? String ?? ""
            }
        }
        // One thing's token keeps its own budget: 5, then 429.
        try #require(!token.isEmpty && !thingID.isEmpty)
        var statuses: [Int] = []
        for _ in 0..<8 {
            let r = hub.thingRequests.overHTTP(
                KiiRequest(
                    method: "PUT",
                    headers: [("Authorization", "Bearer \(token)"), ("Content-Type", "application/json")],
                    body: Array(#"{"power":true}"#.utf8)),
                route: .states(target: "thing:\(thingID)"), path: "targets/thing:\(thingID)/states")
            statuses.append(r.status)
        }
        #expect(statuses.filter { $0 == 429 }.count == 3, "\(statuses)")
        #expect(statuses.prefix(5).allSatisfy { $0 != 429 }, "\(statuses)")
    }

    @Test("Configuration: the flood settings from flags, environment and file; defaults and bad values")
    func floodSettings() throws {
        func load(_ args: [String], env: [String: String] = [:], file: String? = nil) throws -> HubConfig {
            try HubConfig.forTest(args, env: env, file: file)
        }
        let d = try load([])
        #expect(d.costlyThreads == 0 && d.costlyQueue == 32 && d.bootstrapRate == 20 && d.addressRate == 2)
        #expect(d.thingRate == 200 && d.thingBurst == 2000)
        #expect(d.onboarding == "open" && d.adminToken == nil && d.httpMaxConnections == 1000)
        var o = FrameworkSide.Options(appID: "a", appKey: "k", brokerPort: 1)
        d.applyFloodSettings(to: &o)
        #expect(o.costlyThreads == CostlyWork.defaultThreads && !o.enrollmentOnly && o.thingsCreatedPerHour == 3600)
        // The defaults are FrameworkSide's own.
        let plain = FrameworkSide.Options(appID: "a", appKey: "k", brokerPort: 1)
        #expect(o.requestRatePerSecond == plain.requestRatePerSecond && o.requestBurst == plain.requestBurst)
        let c = try load(
            [
                "--costly-threads", "3", "--address-rate", "0", "--http-header-timeout", "5", "--onboarding",
                "enrolled", "--trusted-proxies", "10.0.0.0/8, 192.0.2.1", "--thing-rate", "5000"
            ],
            env: ["THINGIF_HUB_BOOTSTRAP_RATE": "7", "THINGIF_HUB_ADMIN_TOKEN": "t"],
            file:
                #"{"mqttInstallationsPerUser": 4, "trustedProxies": ["fd00::/8"], "thingsCreatedPerHour": 10, "thingBurst": 9}"#
        )
        #expect(c.costlyThreads == 3 && c.addressRate == 0 && c.httpHeaderTimeout == 5 && c.onboarding == "enrolled")
        #expect(c.trustedProxies == ["10.0.0.0/8", "192.0.2.1"] && c.bootstrapRate == 7 && c.adminToken == "t")
        #expect(c.mqttInstallationsPerUser == 4 && c.thingsCreatedPerHour == 10)
        c.applyFloodSettings(to: &o)
        #expect(o.costlyThreads == 3 && o.enrollmentOnly && o.bootstrapRatePerSecond == 7)
        #expect(o.requestRatePerSecond == 5000 && o.requestBurst == 9)
        #expect(c.connections.headerTimeoutSeconds == 5)
        #expect(throws: HubConfig.ConfigError.self) { try load(["--onboarding", "closed"]) }
        #expect(throws: HubConfig.ConfigError.self) { try load(["--trusted-proxies", "10.0.0.0/40"]) }
        #expect(throws: HubConfig.ConfigError.self) { try load(["--costly-queue", "0"]) }
        #expect(throws: HubConfig.ConfigError.self) { try load(["--thing-rate", "0"]) }
        for flag in [
            "--costly-threads", "--bootstrap-rate", "--address-rate", "--trusted-proxies", "--onboarding",
            "--http-max-connections", "--things-created-per-hour", "--mqtt-installations-per-app", "--admin-token",
            "--thing-rate", "--thing-burst"
        ] {
            #expect(HubConfig.usage.contains(flag), "usage lacks \(flag)")
        }
    }
}
