// SPDX-License-Identifier: Apache-2.0

import CThingIF

/// A short MQTT connection on the app's credentials, used before the thing
/// has its own: onboarding, or creating its MQTT installation. Requests are
/// answered on p/{clientID}/resp, matched by Correlation Data.
final class BootstrapSession {
    // unowned(unsafe) (Embedded Swift has no unowned refcounting): the thing
    // creates the session inside one of its calls and drops it before returning.
    private unowned(unsafe) let thing: Thing
    private let config: Thing.Config
    private var client: MqttClient?
    private var connack: Int32?
    private var subscribed = false
    private var subscribeMid: Int32 = -1
    private var replies: [MqttClient.Message] = []
    private var counter = 0
    /// The error that ended the connection inside pump, if any.
    private var lostWith: Int32?
    /// One deadline for the whole session: connect, subscribe and every request.
    let deadline: Int64

    /// Whether the session authenticates with the claim certificate, when
    /// one is set (onboarding only); its requests then go to `claimTopic`.
    private let claimMode: Bool
    private var claimTopic: String?
    private var replyTopic = ""

    init(thing: Thing, budgetMs: Int, claim: Bool = false) {
        self.thing = thing
        self.config = thing.config
        claimMode = claim
        deadline = Platform.nowMs() + Int64(budgetMs)
    }

    private var clientID: String { client?.clientID ?? "" }

    /// Connects and subscribes to the reply topic.
    func open() -> Int32 {
        // A client ID of its own: two clients with one ID throw each other out.
        guard let c = MqttClient(clientID: str("thingif-bootstrap-\(Platform.randomHex(bytes: 8))"), cleanStart: true)
        else {
            return THINGIF_ERR_NOMEM.code
        }
        client = c
        let claim = claimMode ? config.claim : nil
        if let claim {
            guard config.tls != nil else {
                thing.logger.error("a claim certificate needs TLS (thingif_set_tls)")
                return THINGIF_ERR_TLS.code
            }
            claimTopic = Topics.claimRequest(name: claim.name, clientID: c.clientID)
            replyTopic = Topics.claimResponse(name: claim.name, clientID: c.clientID)
        } else {
            _ = c.setCredentials(username: thing.appID, password: thing.appKey)
            replyTopic = Topics.response(clientID: c.clientID)
        }
        if let tls = config.tls {
            // Never plain text once TLS is set. A claim certificate replaces
            // the app's credentials (the broker takes its CN as the username).
            let rc = c.setTLS(
                cafile: tls.cafile, certfile: claim?.certfile ?? tls.certfile, keyfile: claim?.keyfile ?? tls.keyfile)
            guard rc == MOSQ_ERR_SUCCESS.rawValue else {
                thing.logger.error("TLS setup failed (\(MqttClient.describe(rc))); not connecting without TLS")
                return THINGIF_ERR_TLS.code
            }
        }
        // unowned(unsafe): the session owns the client, and its callbacks run only
        // inside pump(), i.e. while a method of this session is on the stack.
        c.onConnect = { [unowned(unsafe) self] rc in self.connack = rc }
        c.onSubscribe = { [unowned(unsafe) self] mid in if mid == self.subscribeMid { self.subscribed = true } }
        c.onMessage = { [unowned(unsafe) self] m in self.replies.append(m) }
        c.onLog = { [unowned(unsafe) self] line in self.thing.logger.debug("bootstrap mqtt: \(line)") }
        let tlsNote = config.tls != nil ? " (TLS)" : ""
        let rc = c.connect(host: config.host, port: config.port, keepalive: config.keepaliveS)
        guard rc == MOSQ_ERR_SUCCESS.rawValue else {
            thing.logger.error("cannot connect to \(config.host):\(config.port)\(tlsNote): \(MqttClient.describe(rc))")
            return rc == MOSQ_ERR_TLS.rawValue ? THINGIF_ERR_TLS.code : THINGIF_ERR_CONNECT.code
        }
        guard pump(until: { self.connack != nil }) else {
            thing.logger.error("no CONNACK from \(config.host):\(config.port)\(tlsNote)")
            // A TLS handshake that fails in the loop (a wrong CA, a refused
            // client certificate) is a TLS error too.
            return lostWith == MOSQ_ERR_TLS.rawValue ? THINGIF_ERR_TLS.code : THINGIF_ERR_CONNECT.code
        }
        guard connack == 0 else {
            thing.logger.error("the broker refused the bootstrap connection: \(MqttClient.describeConnack(connack!))")
            return THINGIF_ERR_CONNECT.code
        }
        subscribeMid = c.subscribe(replyTopic, qos: 1).mid
        guard pump(until: { self.subscribed }) else {
            thing.logger.error("no SUBACK on the bootstrap connection")
            return THINGIF_ERR_TIMEOUT.code
        }
        return OK
    }

    /// Loops until `done` holds or the session's deadline passes; false on
    /// timeout or a lost connection.
    private func pump(until done: () -> Bool) -> Bool {
        guard let c = client else { return false }
        while !done() {
            if Platform.nowMs() >= deadline { return false }
            let rc = c.loop(timeoutMs: 50)
            if rc != MOSQ_ERR_SUCCESS.rawValue {
                lostWith = rc
                thing.logger.error("bootstrap connection lost: \(MqttClient.describe(rc))")
                return false
            }
        }
        return true
    }

    func request(
        api: Topics.API, path: String, method: String, token: String?, contentType: String?,
        body: [UInt8]
    ) -> Result<KiiResponse, StatusError> {
        guard let c = client else { return .failure(StatusError(THINGIF_ERR_NO_CONN.code)) }
        counter += 1
        let rid = str("\(c.clientID)-\(counter)")
        var headers: [(name: String, value: String)] = []
        if let token { headers.append(("Authorization", str("Bearer \(token)"))) }
        if let contentType { headers.append(("Content-Type", contentType)) }
        headers.append((KiiFraming.requestIDHeader, rid))
        let payload = KiiRequest(method: method, headers: headers, body: body).encode()
        let topic = claimTopic ?? Topics.request(clientID: c.clientID, api: api, appID: thing.appID, path: path)
        let rc = c.publish(
            topic: topic, payload: payload, qos: 1, responseTopic: replyTopic, correlationData: Array(rid.utf8))
        guard rc == MOSQ_ERR_SUCCESS.rawValue else {
            thing.logger.error("cannot send \(method) \(path): \(MqttClient.describe(rc))")
            return .failure(StatusError(THINGIF_ERR_MQTT.code))
        }
        var answer: KiiResponse?
        let got = pump(until: {
            while let m = self.replies.first {
                self.replies.removeFirst()
                guard let r = KiiResponse.decode(m.payload) else { continue }
                let id = m.correlationData.map { String(decoding: $0, as: UTF8.self) } ?? r.requestID
                if id.equals(rid) { answer = r; return true }
            }
            return false
        })
        guard got, let answer else {
            thing.logger.error("no answer to \(method) \(path) in time")
            return .failure(StatusError(THINGIF_ERR_TIMEOUT.code))
        }
        return .success(answer)
    }

    func close() {
        guard let c = client else { return }
        c.disconnect()
        _ = c.loop(timeoutMs: 10)
        client = nil
    }
}
