// SPDX-License-Identifier: Apache-2.0

import Foundation
import Testing
import ThingIF

/// A raw MQTT 5 client for the attack tests: connects with any identity,
/// reports the CONNACK and each SUBACK's codes, and keeps what it receives.
extension MqttProbe {
    /// A bootstrap connection as a device makes one before onboarding: the
    /// app's credentials and a client ID of its own ("thingif-bootstrap-…").
    static func bootstrap(port: Int) throws -> MqttProbe {
        try MqttProbe(
            port: port, clientID: "thingif-bootstrap-" + randomHexString(8), username: Env.appID,
            password: Env.appKey)
    }
}

extension MqttProbe {
    /// The hub's broker identity subscribed to `filter`: what the broker lets through.
    static func watcher(_ broker: Broker, _ filter: String) throws -> MqttProbe {
        let w = try MqttProbe(
            port: broker.port, clientID: "watch-" + randomHexString(4), username: broker.adminUsername,
            password: broker.adminPassword)
        try #require(w.isConnected)
        try #require(w.subscribe(filter) == 1)
        return w
    }

    /// What the broker holds retained under `filter` now: a new client of
    /// the hub's identity subscribes to it and to a marker topic of its
    /// own, then publishes on the marker; the broker hands over the
    /// retained messages at the subscription, before the marker comes back
    /// on the same connection. Empty ones (cleared) are not counted.
    static func retained(_ broker: Broker, _ filter: String) throws -> [MqttClient.Message] {
        let w = try watcher(broker, filter)
        defer { w.stop() }
        let marker = "watch/marker-" + randomHexString(4)
        try #require(w.subscribe(marker) == 1)
        try #require(w.publish(marker, Array("end".utf8)))
        try #require(w.waitForMessage(on: marker) != nil)
        let all = w.messages()
        let end = all.firstIndex { $0.topic == marker } ?? all.count
        return all[..<end].filter { $0.retain && !$0.payload.isEmpty }
    }

    /// Whether an empty message came on `topic`: a retained one cleared
    /// (what the hub publishes to clear a status it refuses or forgets).
    func sawCleared(_ topic: String) -> Bool {
        messages(on: topic).contains { $0.payload.isEmpty }
    }
}

final class MqttProbe: @unchecked Sendable {
    let client: MqttClient
    private let lock = NSLock()
    private var connack: Int32?
    private var granted: [Int32: [Int32]] = [:]
    private var received: [MqttClient.Message] = []
    private var acked: [Int32: Int32] = [:]
    private let gate = NSCondition()
    private var held = false
    private var disconnects = 0

    /// Connects (bounded wait) and returns the probe; `connackCode` tells
    /// whether the broker took it (0) or refused it (e.g. 0x87, 0x86).
    init(
        port: Int, clientID: String, username: String?, password: String?,
        tls: (ca: String, cert: String?, key: String?)? = nil, will: (topic: String, payload: String)? = nil,
        receiveMaximum: Int32? = nil
    ) throws {
        client = try #require(MqttClient(clientID: clientID, cleanStart: true, receiveMaximum: receiveMaximum))
        if username != nil { _ = client.setCredentials(username: username, password: password) }
        if let will { _ = client.setWill(topic: will.topic, payload: Array(will.payload.utf8)) }
        if let tls { _ = client.setTLS(cafile: tls.ca, certfile: tls.cert, keyfile: tls.key) }
        client.onConnect = { [unowned self] rc in self.lock.withLock { self.connack = rc } }
        client.onDisconnect = { [unowned self] _ in self.lock.withLock { self.disconnects += 1 } }
        client.onSubscribeGranted = { [unowned self] mid, codes in self.lock.withLock { self.granted[mid] = codes } }
        client.onMessage = { [unowned self] m in
            self.gate.lock()
            while self.held { self.gate.wait() }
            self.gate.unlock()
            self.lock.withLock { self.received.append(m) }
        }
        client.onPublished = { [unowned self] mid, code in self.lock.withLock { self.acked[mid] = code } }
        let rc = client.connect(host: "127.0.0.1", port: port, keepalive: 30)
        if rc == 0 {
            _ = client.startThread()
            poll(timeoutMs: 30_000) { self.lock.withLock { self.connack != nil || self.disconnects > 0 } }
        }
    }

    /// Holds the probe's network thread in its next message callback until
    /// `release()`: a client whose thread waits for a core, reading nothing
    /// and acknowledging nothing meanwhile.
    func hold() {
        gate.lock()
        held = true
        gate.unlock()
    }

    func release() {
        gate.lock()
        held = false
        gate.broadcast()
        gate.unlock()
    }

    /// The CONNACK's reason code; nil when none came (TLS refused, socket closed).
    var connackCode: Int32? { lock.withLock { connack } }
    var isConnected: Bool { lock.withLock { connack == 0 && disconnects == 0 } }
    var disconnectCount: Int { lock.withLock { disconnects } }

    /// Subscribes and returns the SUBACK's code (a QoS, or ≥ 0x80 when refused); nil without a SUBACK.
    func subscribe(_ topic: String) -> Int32? {
        let mid = client.subscribe(topic, qos: 1).mid
        var code: Int32?
        poll(timeoutMs: 30_000) {
            code = self.lock.withLock { self.granted[mid]?.first }
            return code != nil
        }
        return code
    }

    @discardableResult
    func publish(
        _ topic: String, _ payload: [UInt8], retain: Bool = false, responseTopic: String? = nil,
        correlation: String? = nil
    ) -> Bool {
        client.publish(
            topic: topic, payload: payload, qos: 1, retain: retain, responseTopic: responseTopic,
            correlationData: correlation.map { Array($0.utf8) }) == 0
    }

    /// Publishes at QoS 1 and returns the PUBACK's reason code: 0, or 0x10
    /// when nobody subscribes, for a message the broker took; 0x87 when its
    /// rules refused it. nil when none came.
    func publishAcked(_ topic: String, _ payload: [UInt8]) -> Int32? {
        let (rc, mid) = client.publishTracked(topic: topic, payload: payload)
        guard rc == 0 else { return nil }
        var code: Int32?
        poll(timeoutMs: 30_000) {
            code = self.lock.withLock { self.acked[mid] }
            return code != nil
        }
        return code
    }

    func messages(on topic: String? = nil) -> [MqttClient.Message] {
        lock.withLock { received.filter { topic == nil || $0.topic == topic } }
    }

    /// Waits for a message on `topic` and returns it.
    func waitForMessage(on topic: String, timeoutMs: Int = 30_000) -> MqttClient.Message? {
        var m: MqttClient.Message?
        poll(timeoutMs: timeoutMs) {
            m = self.messages(on: topic).first
            return m != nil
        }
        return m
    }

    /// Waits for a message on `topic` with `payload`; true when it came.
    func waitForMessage(on topic: String, payload: String, timeoutMs: Int) -> Bool {
        let bytes = Array(payload.utf8)
        return poll(timeoutMs: timeoutMs) { self.messages(on: topic).contains { $0.payload == bytes } }
    }

    func stop() {
        client.disconnect()
        _ = client.stopThread(force: false)
    }
}

/// A Kii MQTT request as a thing sends it (CRLF framing).
func kiiRequest(
    _ method: String, token: String?, contentType: String? = "application/json", requestID: String,
    body: String, extraHeaders: [(name: String, value: String)] = []
) -> [UInt8] {
    var headers: [(name: String, value: String)] = []
    if let token { headers.append(("Authorization", "Bearer \(token)")) }
    if let contentType { headers.append(("Content-Type", contentType)) }
    headers.append((KiiFraming.requestIDHeader, requestID))
    headers += extraHeaders
    return KiiRequest(method: method, headers: headers, body: Array(body.utf8)).encode()
}

/// The identity a thing stored in its storage folder (identity.json).
struct StoredIdentity {
    let thingID: String
    let token: String
    let topic: String
    let username: String
    let password: String

    init(storage: String) throws {
        let data = try Data(contentsOf: URL(fileURLWithPath: storage + "/identity.json"))
        let j = try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
        let ep = try #require(j["mqttEndpoint"] as? [String: Any], "identity: \(j.keys)")
        thingID = try #require(j["thingID"] as? String)
        token = try #require(j["accessToken"] as? String)
        topic = try #require(ep["mqttTopic"] as? String)
        username = try #require(ep["username"] as? String)
        password = try #require(ep["password"] as? String)
    }
}
