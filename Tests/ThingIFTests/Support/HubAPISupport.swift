// SPDX-License-Identifier: Apache-2.0

import CThingIF
import CThingIFTestSupport
import Foundation
#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif
import ServiceLifecycle
import Logging
import Testing
import ThingIF
import ThingIFHub
import ThingIFHubServer
#if canImport(Glibc)
    import Glibc
#endif

struct HTTPReply {
    let status: Int
    let data: Data
    let contentType: String?
    var retryAfter: String? = nil
    var text: String { String(decoding: data, as: UTF8.self) }
    var json: [String: Any] { ((try? JSONSerialization.jsonObject(with: data)) as? [String: Any]) ?? [:] }
    func string(_ key: String) -> String? { json[key] as? String }
    var errorCode: String? { string("errorCode") }
    /// A Thing-IF error body: {"errorCode","message"}, both strings, and
    /// nothing else but Kii's invalidFields (an object of strings) on a 400
    /// INVALID_INPUT_DATA or WRONG_COMMAND (a trait command the registry refuses).
    var isErrorBody: Bool {
        var j = json
        if let fields = j.removeValue(forKey: "invalidFields") {
            // Kii's validation errors, and a trait command refused by its field (WRONG_COMMAND).
            guard ["INVALID_INPUT_DATA", "WRONG_COMMAND"].contains(j["errorCode"] as? String ?? ""),
                let f = fields as? [String: String], !f.isEmpty
            else { return false }
        }
        return j.count == 2 && j["errorCode"] is String && j["message"] is String
    }
}

/// A test's world for the REST API: the harness's broker and framework side,
/// the HTTP server in-process on a free port, and a URLSession client.
final class HubAPIEnv {
    let env: Env
    let server: HubServer
    let port: Int
    let base: String
    private let group: ServiceGroup
    private let task: Task<Void, Error>
    private let session: URLSession
    let logs: Locked<[String]>

    var hub: FrameworkSide { env.hub }
    var appID: String { Env.appID }

    private init(
        env: Env, server: HubServer, port: Int, group: ServiceGroup, task: Task<Void, Error>,
        logs: Locked<[String]>
    ) {
        self.env = env
        self.logs = logs
        self.server = server
        self.port = port
        self.base = "http://127.0.0.1:\(port)"
        self.group = group
        self.task = task
        // Generous: under ThreadSanitizer on a 2-core CI machine the whole
        // suite once stalled every in-process server for over 10 s at once.
        let config = URLSessionConfiguration.ephemeral
        config.timeoutIntervalForRequest = 60
        config.timeoutIntervalForResource = 90
        session = URLSession(configuration: config)
    }

    /// With `filesOnlyBroker`, a broker without the plugin and a hub with
    /// `--broker-admin none` (Env's).
    /// `store`: the hub's store (default a fresh MemoryStore); the caller closes it.
    static func start(
        security: HubServer.Security = HubServer.Security(), filesOnlyBroker: Bool = false, store: HubStore? = nil,
        options: @escaping @Sendable (inout FrameworkSide.Options) -> Void = { _ in }
    ) async throws -> HubAPIEnv {
        let env = try await offPool {
            Result { try Env(filesOnlyBroker: filesOnlyBroker, store: store, configure: options) }
        }.get()
        let logs = Locked<[String]>([])
        env.hub.onLog = { line in logs.withLock { $0.append(line) } }
        let server = HubServer(
            hub: env.hub, host: "127.0.0.1", port: 0, security: security,
            log: { line in logs.withLock { $0.append(line) } })
        var logger = Logger(label: "hub-api-test")
        logger.logLevel = .error
        let group = ServiceGroup(configuration: .init(services: [server], logger: logger))
        let task = Task(executorPreference: HubExecutor.shared) { try await group.run() }
        guard let port = await server.waitUntilListening(timeoutMs: 60_000) else {
            await group.triggerGracefulShutdown()
            env.close()
            throw HarnessError("the HTTP server did not listen")
        }
        return HubAPIEnv(env: env, server: server, port: port, group: group, task: task, logs: logs)
    }

    func close() async {
        await group.triggerGracefulShutdown()
        // Bounded: a server that does not stop fails the test, not the run.
        let stopped = await withTaskGroup(of: Bool.self) { g in
            g.addTask {
                _ = try? await self.task.value; return true
            }
            g.addTask {
                try? await Task.sleep(nanoseconds: 30_000_000_000); return false
            }
            let first = await g.next() ?? false
            g.cancelAll()
            return first
        }
        if !stopped { task.cancel() }
        #expect(stopped, "the HTTP server did not stop within 30 s")
        session.finishTasksAndInvalidate()
        await offPool { self.env.close() }
    }

    // MARK: HTTP

    func call(
        _ method: String, _ path: String, token: String? = nil, body: Data? = nil,
        contentType: String? = "application/json", headers: [String: String] = [:]
    ) async throws -> HTTPReply {
        var request = URLRequest(url: URL(string: base + path)!, timeoutInterval: 60)
        request.httpMethod = method
        if let token { request.setValue("Bearer \(token)", forHTTPHeaderField: "Authorization") }
        if let body {
            request.httpBody = body
            if let contentType { request.setValue(contentType, forHTTPHeaderField: "Content-Type") }
        }
        for (k, v) in headers { request.setValue(v, forHTTPHeaderField: k) }
        return try await withCheckedThrowingContinuation { c in
            session.dataTask(with: request) { data, response, error in
                if let error { return c.resume(throwing: error) }
                guard let http = response as? HTTPURLResponse else {
                    return c.resume(throwing: HarnessError("no HTTP response"))
                }
                c.resume(
                    returning: HTTPReply(
                        status: http.statusCode, data: data ?? Data(),
                        contentType: http.value(forHTTPHeaderField: "Content-Type"),
                        retryAfter: http.value(forHTTPHeaderField: "Retry-After")))
            }.resume()
        }
    }

    func call(
        _ method: String, _ path: String, token: String? = nil, json: Any,
        contentType: String = "application/json", headers: [String: String] = [:]
    ) async throws -> HTTPReply {
        let data = try JSONSerialization.data(withJSONObject: json)
        return try await call(method, path, token: token, body: data, contentType: contentType, headers: headers)
    }

    func get(_ path: String, token: String?) async throws -> HTTPReply { try await call("GET", path, token: token) }

    // MARK: the seeds' steps

    var api: String { "/api/apps/\(appID)" }
    var thingIF: String { "/thing-if/apps/\(appID)" }
    func target(_ tid: String) -> String { "\(thingIF)/targets/thing:\(tid)" }

    /// A pseudo user (no loginName) or a normal one: (userID, token).
    func user(loginName: String? = nil) async throws -> (id: String, token: String) {
        let body: [String: Any] = loginName.map { ["loginName": $0, "password": "pw-\($0)"] } ?? [:]
        let r = try await call("POST", "\(api)/users", json: body)
        try #require(r.status == 201, "create user: \(r.status) \(r.text)")
        return (try #require(r.string("userID")), try #require(r.string("accessToken")))
    }

    /// Onboarding by the owner: (thingID, the thing's token).
    func onboard(_ vendorThingID: String, owner: String, token: String, interval: String? = "1_MINUTE") async throws
        -> (id: String, token: String)
    {
        let r = try await onboardReply(vendorThingID, owner: owner, token: token, interval: interval)
        return (try #require(r.string("thingID")), try #require(r.string("accessToken")))
    }

    private func onboardReply(_ vendorThingID: String, owner: String, token: String, interval: String?) async throws
        -> HTTPReply
    {
        var body: [String: Any] = [
            "vendorThingID": vendorThingID, "thingPassword": "pw", "owner": owner,
            "thingType": "AirConditioner", "firmwareVersion": "1.0.0"
        ]
        if let interval { body["dataGroupingInterval"] = interval }
        let r = try await call(
            "POST", "\(thingIF)/onboardings", token: token, json: body,
            contentType: "application/vnd.kii.OnboardingWithVendorThingIDByOwner+json")
        try #require(r.status == 200, "onboard: \(r.status) \(r.text)")
        return r
    }

    /// A thing of Kii's SDKs (no status, never answers), onboarded by its
    /// owner: its thingID, and the MQTT installation the onboarding handed
    /// out, which nobody reads until `silentDevice` subscribes with it.
    struct Installation {
        let thingID: String
        /// The thing's access token.
        let token: String
        let topic: String
        let username: String
        let password: String
    }

    func onboardSilent(_ vendorThingID: String, owner: String, token: String) async throws -> Installation {
        let r = try await onboardReply(vendorThingID, owner: owner, token: token, interval: nil)
        let ep = try #require(r.json["mqttEndpoint"] as? [String: Any])
        return Installation(
            thingID: try #require(r.string("thingID")), token: try #require(r.string("accessToken")),
            topic: try #require(ep["mqttTopic"] as? String),
            username: try #require(ep["username"] as? String), password: try #require(ep["password"] as? String))
    }

    /// The device of `onboardSilent` subscribed to its command topic, as
    /// Kii's SDKs do (no status topic). Stop it.
    func silentDevice(_ i: Installation) async throws -> TopicListener {
        let port = env.broker.port
        return try await offPool {
            Result {
                try TopicListener(
                    port: port, topics: [i.topic], username: i.username, password: i.password, clientID: i.topic)
            }
        }.get()
    }

    /// The C appliance on the handed-over identity, loop running, online.
    func appliance(
        thingID: String, token: String, storage: String = "ac",
        configure: @escaping (TestThing) -> Void = { _ in }
    ) async throws -> TestThing {
        let env = self.env
        return try await offPool { () -> Result<TestThing, Error> in
            Result {
                let t = try env.newThing(storage: storage)
                guard ct_register_aircon_handlers(t.ct, Aircon.schema, Aircon.version) == RC.ok else {
                    throw HarnessError("handlers")
                }
                configure(t)
                let rc = ct_use_onboarded(t.ct, thingID, token)
                guard rc == RC.ok else { throw HarnessError("use_onboarded: \(rc)\n\(t.logs)") }
                guard ct_start(t.ct) == RC.ok, env.hub.waitForOnline(thingID, timeoutMs: 30_000) else {
                    throw HarnessError("\(thingID) did not come online\n\(t.logs)")
                }
                return t
            }
        }.get()
    }

    static let threeActions: [[String: Any]] = [
        ["turnPower": ["power": true]], ["setPresetTemperature": ["presetTemperature": 25]],
        ["setFanSpeed": ["fanSpeed": 5]]
    ]

    func postCommand(
        _ tid: String, token: String, userID: String, actions: [[String: Any]] = HubAPIEnv.threeActions,
        extra: [String: Any] = [:], installationID: String? = nil
    ) async throws -> String {
        var body: [String: Any] = [
            "schema": Aircon.schema, "schemaVersion": 1, "issuer": "user:\(userID)", "actions": actions
        ]
        for (k, v) in extra { body[k] = v }
        let r = try await call(
            "POST", "\(target(tid))/commands", token: token, json: body,
            headers: installationID.map { ["X-Thingif-Installation-ID": $0] } ?? [:])
        try #require(r.status == 201, "post command: \(r.status) \(r.text)")
        return try #require(r.string("commandID"))
    }

    /// GETs the command until its state is final (bounded).
    func waitForFinished(_ tid: String, _ cid: String, token: String, timeoutMs: Int = 30_000) async throws -> [String:
        Any]
    {
        let deadline = Date().addingTimeInterval(Double(timeoutMs) / 1000)
        var last: [String: Any] = [:]
        while Date() < deadline {
            let r = try await get("\(target(tid))/commands/\(cid)", token: token)
            try #require(r.status == 200, "get command: \(r.status) \(r.text)")
            last = r.json
            if let s = last["commandState"] as? String, s == "DONE" || s == "INCOMPLETE" { return last }
            try await Task.sleep(nanoseconds: 50_000_000)
        }
        throw HarnessError("command \(cid) did not finish within \(timeoutMs) ms: \(last)")
    }

    /// An app installation; for MQTT, with the broker credentials the hub
    /// made for it (mqttEndpoint).
    func installation(
        _ deviceType: String, token: String,
        webhookURL: String? = nil
    ) async throws -> (id: String, topic: String?, username: String?, password: String?) {
        var body: [String: Any] = ["deviceType": deviceType]
        if let webhookURL { body["webhookURL"] = webhookURL }
        let r = try await call("POST", "\(api)/installations", token: token, json: body)
        try #require(r.status == 201, "installation: \(r.status) \(r.text)")
        let ep = r.json["mqttEndpoint"] as? [String: Any]
        return (
            try #require(r.string("installationID")), r.string("mqttTopic"), ep?["username"] as? String,
            ep?["password"] as? String
        )
    }
}

/// Runs `body` with a fresh HubAPIEnv and always tears it down.
func withHubAPI(
    security: HubServer.Security = HubServer.Security(), filesOnlyBroker: Bool = false, store: HubStore? = nil,
    options: @escaping @Sendable (inout FrameworkSide.Options) -> Void = { _ in },
    _ body: (HubAPIEnv) async throws -> Void
) async throws {
    let e = try await HubAPIEnv.start(
        security: security, filesOnlyBroker: filesOnlyBroker, store: store, options: options)
    do {
        try await body(e)
    } catch {
        await e.close()
        throw error
    }
    await e.close()
}

// MARK: raw sockets

private func loopbackAddress(port: Int) -> sockaddr_in {
    var addr = sockaddr_in()
    addr.sin_family = sa_family_t(AF_INET)
    addr.sin_port = UInt16(port).bigEndian
    addr.sin_addr.s_addr = inet_addr("127.0.0.1")
    return addr
}

private func setReceiveTimeout(_ fd: Int32, ms: Int) {
    var tv = timeval(tv_sec: ms / 1000, tv_usec: Int((ms % 1000) * 1000))
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
}

/// An HTTP GET over a raw socket whose response is read as it streams (SSE).
final class RawStream: @unchecked Sendable {
    private let fd: Int32
    private var received: [UInt8] = []

    init(port: Int, path: String, token: String?) throws {
        fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw HarnessError("socket") }
        var addr = loopbackAddress(port: port)
        let rc = withUnsafePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard rc == 0 else {
            close(fd)
            throw HarnessError("connect to \(port)")
        }
        setReceiveTimeout(fd, ms: 100)
        let authorization = token.map { "Authorization: Bearer \($0)\r\n" } ?? ""
        let request =
            "GET \(path) HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\n\(authorization)Accept: text/event-stream\r\n\r\n"
        _ = request.withCString { send(fd, $0, strlen($0), Int32(MSG_NOSIGNAL)) }
    }

    deinit { close(fd) }

    var text: String { String(decoding: received, as: UTF8.self) }

    /// Reads until the text received so far contains `s` (bounded).
    func waitFor(_ s: String, timeoutMs: Int = 30_000) -> Bool {
        let deadline = Date().addingTimeInterval(Double(timeoutMs) / 1000)
        var buf = [UInt8](repeating: 0, count: 4096)
        while !text.contains(s) {
            if Date() > deadline { return false }
            let n = recv(fd, &buf, buf.count, 0)
            if n > 0 { received += buf[0..<n] } else if n == 0 { return text.contains(s) }
        }
        return true
    }
}

/// A tiny HTTP server on 127.0.0.1 that keeps the bodies POSTed to it (the
/// webhook receiver).
final class WebhookReceiver: @unchecked Sendable {
    let port: Int
    private let fd: Int32
    let bodies = Locked<[String]>([])
    private let stopFlag = Locked(false)
    private let done = DispatchSemaphore(value: 0)
    /// When set, every POST is answered 302 with this Location.
    private let redirectTo: String?

    init(redirectTo: String? = nil) throws {
        self.redirectTo = redirectTo
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw HarnessError("socket") }
        var one: Int32 = 1
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
        var addr = loopbackAddress(port: 0)
        let bound = withUnsafePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        var len = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &len) }
        }
        guard bound == 0, listen(fd, 8) == 0 else {
            close(fd)
            throw HarnessError("webhook receiver cannot listen")
        }
        self.fd = fd
        port = Int(UInt16(bigEndian: addr.sin_port))
        setReceiveTimeout(fd, ms: 100)  // accept() wakes up to check stopFlag
        let t = Thread { [self] in self.serve() }
        t.start()
    }

    var url: String { "http://127.0.0.1:\(port)/hook" }

    private func serve() {
        defer { done.signal() }
        while !stopFlag.withLock({ $0 }) {
            let c = accept(fd, nil, nil)
            guard c >= 0 else { continue }
            setReceiveTimeout(c, ms: 2000)
            var data: [UInt8] = []
            var buf = [UInt8](repeating: 0, count: 4096)
            var body: String?
            while body == nil {
                let n = recv(c, &buf, buf.count, 0)
                if n <= 0 { break }
                data += buf[0..<n]
                let text = String(decoding: data, as: UTF8.self)
                if let r = text.range(of: "\r\n\r\n") {
                    let head = text[..<r.lowerBound].lowercased()
                    let length =
                        head.split(separator: "\r\n").first { $0.hasPrefix("content-length:") }
                        .flatMap { Int($0.dropFirst("content-length:".count).trimmingCharacters(in: .whitespaces)) }
                        ?? 0
                    let rest = Array(text[r.upperBound...].utf8)
                    if rest.count >= length { body = String(decoding: rest.prefix(length), as: UTF8.self) }
                }
            }
            let reply =
                redirectTo.map {
                    "HTTP/1.1 302 Found\r\nLocation: \($0)\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
                }
                ?? "HTTP/1.1 204 No Content\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
            _ = reply.withCString { send(c, $0, strlen($0), Int32(MSG_NOSIGNAL)) }
            close(c)
            if let body { bodies.withLock { $0.append(body) } }
        }
    }

    func stop() {
        stopFlag.withLock { $0 = true }
        _ = done.wait(timeout: .now() + 3)
        close(fd)
    }
}

/// A raw MQTT subscriber (the app side of MQTT notifications).
final class TopicListener: @unchecked Sendable {
    let client: MqttClient
    let messages = Locked<[(topic: String, payload: String)]>([])
    private let subscribed = Locked(Set<Int32>())

    /// Listens as `username` (default: the hub's admin identity, which may
    /// read every topic) with `clientID` (default: a fresh one).
    init(
        port: Int, topics: [String], username: String = BrokerSecrets.adminUsername,
        password: String = BrokerSecrets.adminPassword, clientID: String? = nil
    ) throws {
        client = try #require(
            MqttClient(clientID: clientID ?? "test-listener-\(Platform.randomHex(bytes: 4))", cleanStart: true))
        _ = client.setCredentials(username: username, password: password)
        let connected = Locked(false)
        client.onConnect = { rc in connected.withLock { $0 = rc == 0 } }
        client.onSubscribe = { [subscribed] mid in subscribed.withLock { _ = $0.insert(mid) } }
        client.onMessage = { [messages] m in
            messages.withLock { $0.append((m.topic, String(decoding: m.payload, as: UTF8.self))) }
        }
        guard client.connect(host: "127.0.0.1", port: port, keepalive: 30) == 0, client.startThread() == 0,
            poll(timeoutMs: 30_000, { connected.withLock { $0 } })
        else {
            throw HarnessError("the listener did not connect")
        }
        var mids: Set<Int32> = []
        for t in topics { mids.insert(client.subscribe(t, qos: 1).mid) }
        guard poll(timeoutMs: 30_000, { mids.isSubset(of: subscribed.withLock { $0 }) }) else {
            throw HarnessError("the listener did not subscribe")
        }
    }

    func payloads(on topic: String) -> [String] { messages.withLock { $0.filter { $0.topic == topic }.map(\.payload) } }

    func stop() {
        client.disconnect()
        _ = client.stopThread(force: false)
    }
}
