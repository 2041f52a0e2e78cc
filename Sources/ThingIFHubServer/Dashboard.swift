// SPDX-License-Identifier: Apache-2.0

import Foundation
import HTTPTypes
import Hummingbird
import NIOCore
import ThingIF
import ThingIFHub

/// Short-lived, single-use tickets for an event stream. A browser's
/// EventSource cannot send an Authorization header, and a long-lived token
/// must never sit in a URL (logs, history, Referer); so the dashboard POSTs
/// with its bearer token for a ticket bound to one user and one SSE
/// installation, and opens `…/events?ticket=…` with it. A ticket is random
/// (128 bits), lives `lifetimeMs` (at most 60 s), and is spent by the first
/// request that shows it, whatever that request's outcome. Tickets live in
/// this hub's memory: behind several hubs, the dashboard asks again when a
/// stream is refused.
final class EventTickets: @unchecked Sendable {
    struct Ticket {
        var userID: String
        var installationID: String
        var expiresAt: Int64
    }

    /// Outstanding tickets at most; the oldest go first beyond it.
    static let maxOutstanding = 10_000
    static let maxLifetimeMs: Int64 = 60_000

    let lifetimeMs: Int64
    private let tickets = Locked<[String: Ticket]>([:])

    init(lifetimeMs: Int64) {
        self.lifetimeMs = min(max(lifetimeMs, 1), Self.maxLifetimeMs)
    }

    /// A new ticket for `userID`'s installation.
    func issue(userID: String, installationID: String, now: Int64 = Platform.epochMs()) -> String {
        let ticket = "tk." + Platform.randomHex(bytes: 16)
        tickets.withLock { t in
            t = t.filter { $0.value.expiresAt > now }
            if t.count >= Self.maxOutstanding {
                let oldest = t.sorted { $0.value.expiresAt < $1.value.expiresAt }.prefix(
                    t.count - Self.maxOutstanding + 1)
                for (k, _) in oldest { t[k] = nil }
            }
            t[ticket] = Ticket(userID: userID, installationID: installationID, expiresAt: now + lifetimeMs)
        }
        return ticket
    }

    /// Spends a ticket: the ticket when it was outstanding and has not
    /// expired; nil otherwise. Either way it cannot be shown again.
    func redeem(_ ticket: String, now: Int64 = Platform.epochMs()) -> Ticket? {
        guard let t = tickets.withLock({ $0.removeValue(forKey: ticket) }), t.expiresAt > now else { return nil }
        return t
    }

    var outstanding: Int { tickets.withLock { $0.count } }
}

/// The web dashboard's files (Sources/ThingIFHubServer/dashboard, a SwiftPM
/// resource), read once at start and served under /dashboard/ with a strict
/// Content-Security-Policy. Static files need no token; every data call the
/// page makes carries the user's.
enum DashboardFiles {
    static let securityHeaders: [(HTTPField.Name, String)] = [
        (
            HTTPField.Name("Content-Security-Policy")!,
            "default-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'; object-src 'none'"
        ),
        (HTTPField.Name("X-Content-Type-Options")!, "nosniff"),
        (HTTPField.Name("X-Frame-Options")!, "DENY"),
        (HTTPField.Name("Referrer-Policy")!, "no-referrer"),
        (.cacheControl, "no-cache")
    ]

    static func contentType(_ name: String) -> String? {
        if name.hasSuffix(".html") { return "text/html; charset=utf-8" }
        if name.hasSuffix(".js") { return "text/javascript; charset=utf-8" }
        if name.hasSuffix(".css") { return "text/css; charset=utf-8" }
        if name.hasSuffix(".svg") { return "image/svg+xml" }
        return nil
    }

    /// name -> bytes of every servable file; empty when the resource bundle
    /// is not beside the executable (the hub then answers 404 there).
    static func load() -> [String: [UInt8]] {
        let exe = URL(fileURLWithPath: CommandLine.arguments.first ?? "").resolvingSymlinksInPath()
        var candidates = [Bundle.main.bundleURL, exe.deletingLastPathComponent()]
        candidates += Bundle.allBundles.map { $0.bundleURL.deletingLastPathComponent() }
        for dir in candidates {
            let folder = dir.appendingPathComponent(OpenAPIDocument.resourceBundleName)
                .appendingPathComponent("dashboard")
            guard let names = try? FileManager.default.contentsOfDirectory(atPath: folder.path) else { continue }
            var files: [String: [UInt8]] = [:]
            for n in names where contentType(n) != nil {
                if let d = FileManager.default.contents(atPath: folder.appendingPathComponent(n).path) {
                    files[n] = Array(d)
                }
            }
            if !files.isEmpty { return files }
        }
        return [:]
    }

    static func config(appID: String) -> Response {
        var headers = HTTPFields()
        for (k, v) in securityHeaders { headers[k] = v }
        headers[.contentType] = "application/json"
        let text = Reply.object([("appID", appID)]).dump()
        return Response(status: .ok, headers: headers, body: .init(byteBuffer: ByteBuffer(string: text)))
    }

    static func response(_ files: [String: [UInt8]], name: String) -> Response {
        var headers = HTTPFields()
        for (k, v) in securityHeaders { headers[k] = v }
        guard let bytes = files[name], let type = contentType(name) else {
            headers[.contentType] = "text/plain; charset=utf-8"
            let text =
                files.isEmpty ? "the dashboard's files are not installed beside thingif-hub\n" : "not found\n"
            return Response(status: .notFound, headers: headers, body: .init(byteBuffer: ByteBuffer(string: text)))
        }
        headers[.contentType] = type
        return Response(status: .ok, headers: headers, body: .init(byteBuffer: ByteBuffer(bytes: bytes)))
    }
}

extension API {
    // MARK: the dashboard's calls

    /// GET …/users/me: who the token belongs to.
    func me(_ request: Request, _ context: APIContext) async throws -> Response {
        let user = try user(request, context)
        let o = Reply.object([("userID", user.userID)])
        if let l = user.loginName { o.set("loginName", string: l) }
        return Reply.json(200, o)
    }

    /// GET …/users/me/things: the things the caller owns (directly or
    /// through a group), with what the hub knows of them now: an end
    /// node's `online` is its presence behind its gateway, and it names
    /// its gateway.
    func myThings(_ request: Request, _ context: APIContext) async throws -> Response {
        let user = try user(request, context)
        let list = JSON.array()
        for t in hub.app.ownedThings(user: user) {
            let o = Reply.object([("thingID", t.thingID)])
            if let v = t.vendorThingID { o.set("vendorThingID", string: v) }
            if let v = t.thingType { o.set("thingType", string: v) }
            if let v = t.firmwareVersion { o.set("firmwareVersion", string: v) }
            if let v = t.dataGroupingInterval { o.set("dataGroupingInterval", string: v) }
            o.set(LayoutPosition.field, string: t.layoutPosition.rawValue)
            // The dashboard nests an end node under its gateway by it.
            if t.layoutPosition == .endNode, let g = t.gatewayThingID { o.set("gatewayThingID", string: g) }
            o.set("online", .bool(hub.presence.isOnline(t.thingID)))
            o.set("createdAt", .int(Int(t.createdAt)))
            list.append(o)
        }
        let o = JSON.object()
        o.set("things", list)
        return Reply.json(200, o)
    }

    /// The caller's own SSE installation named in the path (404 for another's).
    func sseInstallation(_ user: UserRecord, _ context: APIContext) throws -> AppInstallation {
        let id = try param(context, "installationID")
        let i = try value(hub.app.appInstallation(user: user, id: id))
        guard i.kind == .sse else { throw HubError.invalid("installation \(id) is \(i.kind.rawValue), not SSE") }
        return i
    }

    /// POST …/installations/{installationID}/events/tickets (bearer): a
    /// single-use ticket for …/events?ticket=…, valid for a few seconds.
    func eventTicket(_ request: Request, _ context: APIContext) async throws -> Response {
        let user = try user(request, context)
        let i = try sseInstallation(user, context)
        let ticket = tickets.issue(userID: user.userID, installationID: i.installationID)
        let o = Reply.object([("ticket", ticket)])
        o.set("expiresIn", .int(Int(tickets.lifetimeMs / 1000)))
        return Reply.json(201, o)
    }

    /// The user of an events request: its bearer token or, for a browser's
    /// EventSource, a ticket for exactly this installation (401 for an
    /// unknown, spent or expired one; 403 for one of another installation).
    func eventsUser(_ request: Request, _ context: APIContext) throws -> UserRecord {
        guard let ticket = request.uri.queryParameters.get("ticket") else { return try user(request, context) }
        try checkApp(context)
        guard let t = tickets.redeem(String(ticket)) else {
            throw HubError.unauthorized("the ticket is unknown, already used or expired: ask for a new one")
        }
        guard t.installationID == (try param(context, "installationID")) else {
            throw HubError.forbidden("the ticket is for another installation")
        }
        guard let u = hub.app.user(id: t.userID) else { throw HubError.invalidToken }
        try spend("user:" + u.userID)
        return u
    }
}
