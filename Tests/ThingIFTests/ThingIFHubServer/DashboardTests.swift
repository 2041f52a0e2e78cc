// SPDX-License-Identifier: Apache-2.0

import Foundation
#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif
import Testing
import ThingIFHubServer

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
                ("/dashboard/app.js", "text/javascript"), ("/dashboard/style.css", "text/css")
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
}
