// SPDX-License-Identifier: Apache-2.0

import Foundation
#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif
import Testing
import ThingIFHubServer
#if canImport(Glibc)
    import Glibc
#endif

/// A GET's status and headers (the dashboard's security headers).
private func head(_ url: String) async throws -> (status: Int, headers: [String: String], body: String) {
    let (data, response) = try await URLSession.shared.data(from: URL(string: url)!)
    let http = try #require(response as? HTTPURLResponse)
    var headers: [String: String] = [:]
    for (k, v) in http.allHeaderFields { headers[String(describing: k).lowercased()] = String(describing: v) }
    return (http.statusCode, headers, String(decoding: data, as: UTF8.self))
}

@Suite("Dashboard: the web dashboard's files, its calls and event stream tickets", .serialized, .offPool)
struct DashboardTests {
    @Test("The files are served with a strict Content-Security-Policy; the page's config names the app")
    func files() async throws {
        try await withHubAPI { e in
            for (path, type) in [
                ("/dashboard", "text/html"), ("/dashboard/", "text/html"), ("/dashboard/index.html", "text/html"),
                ("/dashboard/app.js", "text/javascript"), ("/dashboard/traits.js", "text/javascript"),
                ("/dashboard/style.css", "text/css")
            ] {
                let r = try await head(e.base + path)
                #expect(r.status == 200, "\(path)")
                #expect(r.headers["content-type"]?.hasPrefix(type) == true, "\(path): \(r.headers)")
                #expect(r.headers["content-security-policy"]?.hasPrefix("default-src 'self';") == true)
                #expect(r.headers["x-content-type-options"] == "nosniff")
            }
            let page = try await head(e.base + "/dashboard/")
            // No inline script or style: the policy would block them anyway.
            #expect(!page.body.contains("<script>") && !page.body.contains("style="))
            #expect(page.body.contains("<script src=\"/dashboard/app.js\" defer></script>"))
            let config = try await e.get("/dashboard/config.json", token: nil)
            #expect(config.status == 200 && config.string("appID") == e.appID)
            // The hub's root sends a browser to the dashboard (302, followed here).
            let (rootBody, rootResponse) = try await URLSession.shared.data(from: URL(string: e.base + "/")!)
            let landed = rootResponse.url?.absoluteString ?? ""
            #expect(landed.hasPrefix(e.base + "/dashboard"), "\(landed)")
            #expect(String(decoding: rootBody, as: UTF8.self).contains("<title>thingif dashboard</title>"))
            for missing in ["/dashboard/nope.js", "/dashboard/..%2FPackage.swift", "/dashboard/openapi.yaml"] {
                #expect(try await head(e.base + missing).status == 404, "\(missing)")
            }
        }
    }

    @Test("users/me and users/me/things: the caller and the things it owns, with online and firmware")
    func meAndThings() async throws {
        try await withHubAPI { e in
            let (uid, token) = try await e.user(loginName: "dash-alice")
            let (_, bobToken) = try await e.user(loginName: "dash-bob")
            let (tid, thingToken) = try await e.onboard("AC-DASH-1", owner: "user:\(uid)", token: token)
            let me = try await e.get("\(e.api)/users/me", token: token)
            #expect(me.status == 200 && me.string("userID") == uid && me.string("loginName") == "dash-alice")
            #expect(try await e.get("\(e.api)/users/me", token: nil).status == 401)
            // An unknown token: Kii's 403 WRONG_TOKEN.
            #expect(try await e.get("\(e.api)/users/me/things", token: "nope").errorCode == "WRONG_TOKEN")

            func things(_ token: String) async throws -> [[String: Any]] {
                let r = try await e.get("\(e.api)/users/me/things", token: token)
                try #require(r.status == 200, "\(r.status) \(r.text)")
                return try #require(r.json["things"] as? [[String: Any]])
            }
            var mine = try await things(token)
            #expect(mine.count == 1)
            #expect(mine.first?["thingID"] as? String == tid)
            #expect(mine.first?["thingType"] as? String == "AirConditioner")
            #expect(mine.first?["firmwareVersion"] as? String == "1.0.0")
            #expect(mine.first?["online"] as? Bool == false)
            #expect(try await things(bobToken).isEmpty)

            _ = try await e.appliance(thingID: tid, token: thingToken)
            mine = try await things(token)
            #expect(mine.first?["online"] as? Bool == true)
        }
    }

    @Test("Event stream tickets: single-use, short-lived, for one installation; tokens in URLs are refused")
    func tickets() async throws {
        try await withHubAPI(security: .init(eventTicketLifetimeMs: 400)) { e in
            let (uid, token) = try await e.user(loginName: "tk-alice")
            let (_, bobToken) = try await e.user(loginName: "tk-bob")
            let (tid, thingToken) = try await e.onboard("AC-TICKET-1", owner: "user:\(uid)", token: token)
            _ = try await e.appliance(thingID: tid, token: thingToken)
            let sse = try await e.installation("SSE", token: token)
            let bobSSE = try await e.installation("SSE", token: bobToken)
            let mqtt = try await e.installation("MQTT", token: token)
            func ticketFor(_ installation: String, token: String?) async throws -> HTTPReply {
                try await e.call("POST", "\(e.api)/installations/\(installation)/events/tickets", token: token)
            }
            func events(_ installation: String, _ query: String) async throws -> HTTPReply {
                try await e.get("\(e.api)/installations/\(installation)/events?\(query)", token: nil)
            }

            // Issuing: the caller's own SSE installation, with a bearer token.
            #expect(try await ticketFor(sse.id, token: nil).status == 401)
            #expect(try await ticketFor(sse.id, token: "nope").errorCode == "WRONG_TOKEN")
            #expect(try await ticketFor(bobSSE.id, token: token).errorCode == "INSTALLATION_NOT_FOUND")
            #expect(try await ticketFor(mqtt.id, token: token).status == 400)
            let issued = try await ticketFor(sse.id, token: token)
            #expect(issued.status == 201)
            #expect((issued.json["expiresIn"] as? Int).map { $0 <= 60 } == true)
            let ticket = try #require(issued.string("ticket"))

            // A ticket opens the stream without any Authorization header.
            let stream = try RawStream(
                port: e.port, path: "\(e.api)/installations/\(sse.id)/events?ticket=\(ticket)", token: nil)
            #expect(await offPool { stream.waitFor(": connected") }, "stream: \(stream.text)")
            #expect(stream.text.hasPrefix("HTTP/1.1 200"))
            let cid = try await e.postCommand(tid, token: token, userID: uid, installationID: sse.id)
            #expect(await offPool { stream.waitFor("\"commandID\":\"\(cid)\"") }, "stream: \(stream.text)")

            // Used once: refused the second time.
            let reused = try await events(sse.id, "ticket=\(ticket)")
            #expect(reused.status == 401 && reused.isErrorBody)
            // Unknown.
            #expect(try await events(sse.id, "ticket=tk.0123456789abcdef0123456789abcdef").status == 401)
            // Another user's installation: Alice's ticket does not open Bob's stream (and is spent).
            let other = try #require(try await ticketFor(sse.id, token: token).string("ticket"))
            #expect(try await events(bobSSE.id, "ticket=\(other)").status == 403)
            #expect(try await events(sse.id, "ticket=\(other)").status == 401)
            // Expired.
            let late = try #require(try await ticketFor(sse.id, token: token).string("ticket"))
            // Past the ticket lifetime; a longer stall only expires it more surely.
            try await Task.sleep(nanoseconds: 900_000_000)
            #expect(try await events(sse.id, "ticket=\(late)").status == 401)
            // A long-lived token is never accepted in the URL.
            #expect(try await events(sse.id, "access_token=\(token)").status == 401)
            #expect(try await events(sse.id, "token=\(token)").status == 401)
            #expect(e.server.outstandingEventTickets == 0)
            // Bearer clients keep working beside the ticket.
            let bearer = try RawStream(port: e.port, path: "\(e.api)/installations/\(sse.id)/events", token: token)
            #expect(await offPool { bearer.waitFor(": connected") }, "stream: \(bearer.text)")
        }
    }

    /// A gateway and its end nodes as the dashboard gets them and shows
    /// them: users/me/things names each end node's gateway and gives its
    /// presence, and the page (in headless Chromium, through chromedriver's
    /// WebDriver protocol) nests the end nodes under their gateway with
    /// their status, and opens one like any thing, its state and commands.
    @Test(
        "A gateway's end nodes: named by gatewayThingID, nested under it in a real browser, with their status; one opens like a thing",
        .enabled(if: WebDriver.available, "needs chromium and chromedriver (apt: chromium chromium-driver)"),
        .timeLimit(.minutes(3)))
    func endNodesNested() async throws {
        try await withHubAPI { e in
            let (uid, token) = try await e.user(loginName: "dash-gw")
            // The gateway with its owner's form and its layout; its token reports its end nodes.
            let g = try await e.call(
                "POST", "\(e.thingIF)/onboardings", token: token,
                json: [
                    "vendorThingID": "GW-DASH-1", "thingPassword": "pw", "owner": "user:\(uid)",
                    "layoutPosition": "GATEWAY", "thingType": "LampGateway"
                ], contentType: "application/vnd.kii.OnboardingWithVendorThingIDByOwner+json")
            try #require(g.status == 200, "\(g.status) \(g.text)")
            let gw = try #require(g.string("thingID")), gwToken = try #require(g.string("accessToken"))
            let (standalone, _) = try await e.onboard("AC-DASH-GW", owner: "user:\(uid)", token: token)
            let lamp1 = try await EndNodeOwnerTests.endNode(e, gateway: gw, "LAMP-DASH-1", uid: uid, token: token).id
            let lamp2 = try await EndNodeOwnerTests.endNode(e, gateway: gw, "LAMP-DASH-2", uid: uid, token: token).id
            func connection(_ endNode: String, _ online: Bool) async throws {
                try await EndNodeOwnerTests.connection(e, gateway: gw, token: gwToken, endNode, online: online)
            }
            try await connection(lamp1, true)
            // The gateway uploads lamp1's state; the owner sends it a command.
            let state = try await e.call(
                "PUT", "\(e.target(lamp1))/states", token: gwToken, json: ["power": true, "brightness": 40])
            try #require(state.status == 201, "the lamp's first upload: \(state.status) \(state.text)")
            let cid = try await e.postCommand(
                lamp1, token: token, userID: uid, actions: [["turnPower": ["power": false]]])

            // The API: each end node names its gateway; presence as the end-node list gives it.
            let r = try await e.get("\(e.api)/users/me/things", token: token)
            try #require(r.status == 200, "\(r.status) \(r.text)")
            let things = try #require(r.json["things"] as? [[String: Any]])
            func thing(_ id: String) -> [String: Any]? { things.first { $0["thingID"] as? String == id } }
            #expect(things.count == 4)
            #expect(thing(gw)?["layoutPosition"] as? String == "GATEWAY" && thing(gw)?["gatewayThingID"] == nil)
            #expect(thing(standalone)?["gatewayThingID"] == nil)
            for (id, online) in [(lamp1, true), (lamp2, false)] {
                #expect(thing(id)?["layoutPosition"] as? String == "ENDNODE", "\(id)")
                #expect(thing(id)?["gatewayThingID"] as? String == gw, "\(id)")
                #expect(thing(id)?["online"] as? Bool == online, "\(id)")
            }

            // The page, signed in with the token.
            let browser = try await offPool { Result { try WebDriver.start() } }.get()
            do {
                try await Self.checkPage(
                    e, browser, token: token, gw: gw, standalone: standalone, lamps: (lamp1, lamp2), cid: cid,
                    connection: connection)
            } catch {
                await offPool { browser.quit() }
                throw error
            }
            await offPool { browser.quit() }
        }
    }

    /// The page's part of endNodesNested.
    static func checkPage(
        _ e: HubAPIEnv, _ browser: WebDriver, token: String, gw: String, standalone: String,
        lamps: (String, String), cid: String, connection: (String, Bool) async throws -> Void
    ) async throws {
        let (lamp1, lamp2) = lamps
        do {
            try await offPool {
                Result {
                    try browser.signIn(e.base, token: token)
                }
            }.get()
            /// The Things table's rows: [thingID, its gateway or "", end-node class, status, first cell's text].
            let rowsScript = """
                return [...document.querySelectorAll('#things tbody tr')].map(r => [r.dataset.thing,
                  r.dataset.gateway || '', r.classList.contains('end-node') ? 'nested' : 'top',
                  r.cells[1].textContent, r.cells[0].textContent]);
                """
            func rowsNow() -> [[String]] { (try? browser.script(rowsScript, [])) as? [[String]] ?? [] }
            func rows() async -> [[String]] { await offPool { rowsNow() } }
            // Ordered by thingID, each end node right under its gateway.
            var tops = [gw, standalone].sorted()
            let gwAt = tops.firstIndex(of: gw)!
            tops.insert(contentsOf: [lamp1, lamp2].sorted(), at: gwAt + 1)
            let expectedOrder = tops
            let ordered = await offPool { poll { rowsNow().map { $0[0] } == expectedOrder } }
            let shown = await rows()
            #expect(ordered, "\(shown)")
            for row in shown where row.count == 5 {
                switch row[0] {
                case lamp1: #expect(row[1] == gw && row[2] == "nested" && row[3] == "online", "\(row)")
                case lamp2: #expect(row[1] == gw && row[2] == "nested" && row[3] == "offline", "\(row)")
                case gw:
                    #expect(row[1] == "" && row[2] == "top", "\(row)")
                    #expect(row[4].contains("gateway · 2 end nodes"), "\(row)")
                default: #expect(row[1] == "" && row[2] == "top" && !row[4].contains("gateway"), "\(row)")
                }
            }

            // The gateway says lamp2 is reachable: the page's next refresh shows it.
            try await connection(lamp2, true)
            let lamp2Online = await offPool { poll { rowsNow().first { $0.first == lamp2 }?[3] == "online" } }
            let refreshed = await rows()
            #expect(lamp2Online, "\(refreshed)")

            // An end node opens like any thing: its title, state and commands.
            _ = try await offPool {
                Result {
                    try browser.script(
                        "document.querySelector(`tr[data-thing=\"${arguments[0]}\"]`).click(); return true;", [lamp1])
                }
            }.get()
            let panelScript = """
                return [document.getElementById('thing').classList.contains('hidden') ? 'hidden' : 'shown',
                  document.getElementById('thing-title').textContent, document.getElementById('state').textContent,
                  String(document.querySelectorAll(`#commands tr.command[data-command="${arguments[0]}"]`).length)];
                """
            func panelNow() -> [String] { (try? browser.script(panelScript, [cid])) as? [String] ?? [] }
            func panel() async -> [String] { await offPool { panelNow() } }
            let opened = await offPool {
                poll {
                    let p = panelNow()
                    return p.count == 4 && p[0] == "shown" && p[1].hasPrefix("LAMP-DASH-1 — online")
                        && p[1].contains("end node of GW-DASH-1") && p[2].contains("\"brightness\": 40") && p[3] == "1"
                }
            }
            let shownPanel = await panel()
            #expect(opened, "\(shownPanel)")
        }
    }
}

/// Headless Chromium through chromedriver's W3C WebDriver protocol (JSON
/// over HTTP), as python/tests/test_dashboard.py drives it with selenium:
/// one session, blocking calls (run them off the pool).
final class WebDriver: @unchecked Sendable {
    static let chromium = ["/usr/bin/chromium", "/usr/bin/chromium-browser"].first {
        FileManager.default.isExecutableFile(atPath: $0)
    }
    static let driver = ["/usr/bin/chromedriver"].first { FileManager.default.isExecutableFile(atPath: $0) }
    static var available: Bool { chromium != nil && driver != nil }

    let pid: pid_t
    let base: String
    let session: String
    let root: String

    private init(pid: pid_t, base: String, session: String, root: String) {
        self.pid = pid
        self.base = base
        self.session = session
        self.root = root
    }

    static func start() throws -> WebDriver {
        guard let chromium, let driver, let port = Broker.freePort() else {
            throw HarnessError("no chromium, chromedriver or free port")
        }
        let root = try makeTempDirectory(prefix: "thingif-webdriver")
        let pid = try spawnChild(driver, ["--port=\(port)"], logPath: root + "/chromedriver.log")
        let base = "http://127.0.0.1:\(port)"
        var problem = "no answer"
        let ready = poll(timeoutMs: 20_000) {
            do {
                return try request("GET", base + "/status", nil) != nil
            } catch {
                problem = "\(error)"
                return false
            }
        }
        guard ready else {
            endChild(pid)
            throw HarnessError("chromedriver did not start (\(problem)): \(readText(root + "/chromedriver.log"))")
        }
        let caps: [String: Any] = [
            "capabilities": [
                "alwaysMatch": [
                    "goog:chromeOptions": [
                        "binary": chromium,
                        "args": [
                            "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                            "--no-first-run", "--disable-extensions", "--window-size=1280,900",
                            "--user-data-dir=\(root)/profile"
                        ]
                    ]
                ]
            ]
        ]
        do {
            let answer = try request("POST", base + "/session", caps)
            guard let id = (answer as? [String: Any])?["sessionId"] as? String else {
                throw HarnessError("no session: \(String(describing: answer))")
            }
            return WebDriver(pid: pid, base: base, session: id, root: root)
        } catch {
            endChild(pid)
            throw error
        }
    }

    func navigate(_ url: String) throws { _ = try Self.request("POST", "\(base)/session/\(session)/url", ["url": url]) }

    /// Opens the hub's dashboard and signs in with an access token.
    func signIn(_ hub: String, token: String) throws {
        try navigate(hub + "/dashboard/")
        _ = try script(
            "document.getElementById('token').value = arguments[0];"
                + "document.querySelector('#token-form button').click(); return true;", [token])
    }

    /// Runs a script in the page (WebDriver's own channel: the page's CSP does not apply to it); its value.
    func script(_ source: String, _ args: [Any]) throws -> Any? {
        try Self.request("POST", "\(base)/session/\(session)/execute/sync", ["script": source, "args": args])
    }

    func quit() {
        _ = try? Self.request("DELETE", "\(base)/session/\(session)", nil)
        endChild(pid)
        try? FileManager.default.removeItem(atPath: root)
    }

    /// One WebDriver call: its `value`, or an error with WebDriver's message.
    /// Over a plain socket: chromedriver writes its headers without a space
    /// after the colon ("Content-Length:250"), which FoundationNetworking's
    /// URLSession refuses ("Failed writing header").
    static func request(_ method: String, _ url: String, _ body: Any?) throws -> Any? {
        guard let u = URLComponents(string: url), let port = u.port else { throw HarnessError("bad URL \(url)") }
        let payload = try body.map { try JSONSerialization.data(withJSONObject: $0) } ?? Data()
        var head = "\(method) \(u.percentEncodedPath) HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\nConnection: close\r\n"
        if body != nil { head += "Content-Type: application/json\r\n" }
        head += "Content-Length: \(payload.count)\r\n\r\n"
        let raw = try exchange(port: port, Data(head.utf8) + payload)
        guard let split = raw.range(of: Data("\r\n\r\n".utf8)) else {
            throw HarnessError("WebDriver \(method) \(url): no HTTP answer")
        }
        let statusLine = String(decoding: raw[..<split.lowerBound], as: UTF8.self).split(separator: "\r\n").first ?? ""
        let status = statusLine.split(separator: " ").dropFirst().first.flatMap { Int($0) } ?? 0
        let json = try? JSONSerialization.jsonObject(with: raw[split.upperBound...], options: [.fragmentsAllowed])
        let value = (json as? [String: Any])?["value"]
        guard (200..<300).contains(status) else {
            throw HarnessError("WebDriver \(method) \(url): \(status) \(String(describing: value))")
        }
        return value is NSNull ? nil : value
    }

    /// Sends a request on a new connection to 127.0.0.1:port and reads the answer to its end (60 s at most).
    private static func exchange(port: Int, _ request: Data) throws -> Data {
        guard let fd = connectLoopback(port: port, receiveTimeoutMs: 60_000) else {
            throw HarnessError("connect to \(port): \(errno)")
        }
        defer { close(fd) }
        try request.withUnsafeBytes { (b: UnsafeRawBufferPointer) in
            var sent = 0
            while sent < b.count {
                let n = send(fd, b.baseAddress! + sent, b.count - sent, Int32(MSG_NOSIGNAL))
                guard n > 0 else { throw HarnessError("send: \(errno)") }
                sent += n
            }
        }
        // Read to the end of the body its Content-Length gives (chromedriver
        // keeps the connection open whatever the request says), or to EOF.
        var answer = Data()
        var buf = [UInt8](repeating: 0, count: 65536)
        while !complete(answer) {
            let n = recv(fd, &buf, buf.count, 0)
            if n == 0 { break }
            guard n > 0 else { throw HarnessError("recv: \(errno)") }
            answer.append(contentsOf: buf[0..<n])
        }
        return answer
    }

    /// True when `answer` holds its headers and the whole body they announce.
    private static func complete(_ answer: Data) -> Bool {
        guard let split = answer.range(of: Data("\r\n\r\n".utf8)) else { return false }
        let head = String(decoding: answer[..<split.lowerBound], as: UTF8.self)
        for line in head.split(separator: "\r\n") {
            let parts = line.split(separator: ":", maxSplits: 1)
            if parts.count == 2, parts[0].lowercased() == "content-length",
                let n = Int(parts[1].trimmingCharacters(in: .whitespaces))
            {
                return answer.count - split.upperBound >= n
            }
        }
        return false
    }
}
