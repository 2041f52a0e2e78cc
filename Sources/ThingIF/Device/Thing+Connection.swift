// SPDX-License-Identifier: Apache-2.0

import CThingIF

/// The loop's turn and the connection state machine: connect with backoff, subscribe,
/// lose and reset the connection.
extension Thing {
    // MARK: the loop

    /// One turn of the loop on the calling thread.
    func loop(timeoutMs: Int) -> Int32 {
        let me = pthread_self()
        let entry = shared.withLock { s -> Int32 in
            if let t = s.loopThread {
                return pthread_equal(t, me) != 0 ? THINGIF_ERR_IN_CALLBACK.code : THINGIF_ERR_STATE.code
            }
            if let own = s.ownThread, pthread_equal(own, me) == 0 { return THINGIF_ERR_STATE.code }
            guard s.identity != nil else { return THINGIF_ERR_NOT_ONBOARDED.code }
            s.loopThread = me
            return OK
        }
        guard entry == OK else { return entry }
        defer { shared.withLock { $0.loopThread = nil } }
        return turn(timeoutMs: timeoutMs)
    }

    func turn(timeoutMs: Int) -> Int32 {
        // Timers and queued action sets run offline too: their reports wait
        // in the outbox.
        runAutomation()
        let now = Platform.nowMs()
        let (open, wait) = shared.withLock { s -> (Bool, Int64) in (s.socketOpen, s.nextConnectAt - now) }
        if !open {
            if wait > 0 {
                Platform.sleepMs(Int(min(Int64(timeoutMs), wait)))
                return THINGIF_ERR_NO_CONN.code
            }
            guard connect() else { return THINGIF_ERR_NO_CONN.code }
        }
        // At the inbox bound the socket is not read: the broker holds what
        // follows (received(_:) keeps this from happening in practice).
        let clientOpt = shared.withLock { $0.client }
        let inboxFull = pipeline.inboxIsFull
        if !inboxFull, let client = clientOpt {
            // libmosquitto's lines are debug lines: formatted only when kept.
            client.setLogging(logger.enabled(THINGIF_LOG_DEBUG))
            let rc = client.loop(timeoutMs: timeoutMs)
            if rc != MOSQ_ERR_SUCCESS.rawValue {
                // libmosquitto does the TLS handshake inside the loop: a
                // failure before CONNACK is a handshake that failed (wrong
                // CA, refused certificate). An error, then quiet retries.
                if rc == MOSQ_ERR_TLS.rawValue && !shared.withLock({ $0.connected }) {
                    connectionLost(
                        "TLS handshake with the broker failed (\(MqttClient.describe(rc))); retrying after the backoff, never without TLS",
                        handshake: true)
                } else {
                    connectionLost("connection to the broker lost: \(MqttClient.describe(rc))")
                }
            } else {
                pipeline.readAvailable(client)
            }
        }
        pipeline.reportInterrupted()
        pipeline.processInbox(canRead: true)
        tickUpdates()
        runStateProvider()
        sendDue()
        // Acknowledgement marks reach the file once a pass (never synced).
        pipeline.writeOut()
        return shared.withLock { $0.connected && $0.subscribed } ? OK : THINGIF_ERR_NO_CONN.code
    }

    func scheduleReconnect(_ s: inout Shared) {
        // Full jitter: a uniform wait in [min, min(max, min * 2^attempt)].
        let cap = min(s.config.reconnectMaxMs, s.config.reconnectMinMs << min(s.reconnectAttempt, 20))
        let waitMs = Int.random(in: s.config.reconnectMinMs...max(s.config.reconnectMinMs, cap))
        s.reconnectAttempt += 1
        s.nextConnectAt = Platform.nowMs() + Int64(waitMs)
    }

    func connectionLost(_ why: Text, handshake: Bool = false) {
        // Both the loop's error and libmosquitto's disconnect callback report
        // one loss; only the first counts for the backoff.
        let attempt = shared.withLock { s -> Int? in
            guard s.socketOpen else { return nil }
            s.socketOpen = false
            s.connected = false
            s.subscribed = false
            scheduleReconnect(&s)
            return s.reconnectAttempt
        }
        guard let attempt else { return }
        pipeline.detach()
        if !handshake {
            logger.warning(why)
        } else if attempt <= 1 {
            logger.error(why)
        } else {
            logger.debug(why)
        }
    }

    /// Opens the thing's connection. CONNACK arrives in a later loop call.
    func connect() -> Bool {
        let (identityOpt, config, existing) = shared.withLock { ($0.identity, $0.config, $0.client) }
        guard let identity = identityOpt else { return false }
        let ep = identity.endpoint
        let client: MqttClient
        if let existing {
            client = existing
        } else {
            // A client certificate from the framework replaces the password
            // (ClientCertificate.swift); one that cannot be used is retried
            // with the backoff, never replaced by a password.
            let ownCertificate = ep.clientCertificate != nil
            if ownCertificate {
                guard config.tls != nil else {
                    return retryLater("the onboarding has a client certificate, which needs TLS (thingif_set_tls)")
                }
                // An error line for the first failure in a row, as retryLater.
                let quiet = shared.withLock { $0.reconnectAttempt > 0 }
                guard prepareClientCertificate(ep, level: quiet ? THINGIF_LOG_DEBUG : THINGIF_LOG_ERROR) == OK else {
                    shared.withLock { scheduleReconnect(&$0) }
                    return false
                }
                logger.debug(
                    "the thing's connection authenticates with the client certificate \(storage.path(ClientCertificate.certificateFile)), no password"
                )
            }
            guard let c = MqttClient(clientID: ep.mqttTopic, cleanStart: false) else {
                logger.error("cannot create an MQTT client")
                shared.withLock { scheduleReconnect(&$0) }
                return false
            }
            client = c
            // With a certificate no password is sent; a broker that takes the
            // certificate's CN as the username (use_identity_as_username)
            // ignores the username too. (Two calls, not one with
            // `isEmpty || ownCertificate ? nil : password`: Swift 6.3's
            // Embedded runtime returns an untagged pointer from
            // swift_bridgeObjectRetain, which the aarch64 code for that
            // expression used as the String, and crashed; swiftlang/swift
            // #91151.)
            let username = ep.username.isEmpty ? nil : ep.username
            if ownCertificate {
                _ = client.setCredentials(username: username, password: nil)
            } else {
                _ = client.setCredentials(username: username, password: ep.password.isEmpty ? nil : ep.password)
            }
            if let tls = config.tls {
                // Never a plain-text connection once TLS is set: a TLS setup
                // that fails is retried with the backoff, like a refused one.
                let rc = client.setTLS(
                    cafile: tls.cafile,
                    certfile: ownCertificate ? storage.path(ClientCertificate.certificateFile) : tls.certfile,
                    keyfile: ownCertificate ? storage.path(ClientCertificate.keyFile) : tls.keyfile)
                if rc != MOSQ_ERR_SUCCESS.rawValue {
                    return retryLater("TLS setup failed (\(MqttClient.describe(rc))); not connecting without TLS")
                }
            }
            _ = client.setWill(topic: Topics.status(clientID: ep.mqttTopic), payload: Array("offline".utf8))
            // unowned(unsafe): the thing owns the client and the client calls these
            // only from its own loop(), which the thing runs while it is alive.
            client.onConnect = { [unowned(unsafe) self, unowned(unsafe) client] rc in self.connected(rc, client: client)
            }
            client.onDisconnect = { [unowned(unsafe) self] rc in
                self.connectionLost("disconnected from the broker: \(MqttClient.describeConnack(rc))")
            }
            client.onSubscribe = { [unowned(unsafe) self, unowned(unsafe) client] mid in
                let ready = self.shared.withLock { s -> Bool in
                    guard mid == s.subscribeMid else { return false }
                    s.subscribed = true
                    return true
                }
                // The birth message follows the last SUBACK, so "online" at the
                // framework means the thing's subscriptions are in place.
                if ready {
                    _ = client.publish(
                        topic: Topics.status(clientID: client.clientID), payload: Array("online".utf8),
                        qos: 1, retain: true)
                    // A gateway's end nodes: this run's word on each.
                    self.pipeline.publishEndNodeStatuses()
                }
            }
            client.onMessage = { [unowned(unsafe) self] m in self.received(m) }
            client.onLog = { [unowned(unsafe) self] line in self.logger.debug("mqtt: \(line)") }
            shared.withLock { $0.client = client }
        }
        let host = ep.host.isEmpty ? config.host : ep.host
        let port = Thing.port(of: ep, config: config)
        let rc = client.connect(
            host: host, port: port, keepalive: config.keepaliveS, sessionExpiry: Thing.sessionExpiryS)
        if rc == MOSQ_ERR_TLS.rawValue {
            // The handshake may finish inside connect (or in the loop:
            // see turn()); either way the same line.
            return retryLater(
                "TLS handshake with the broker failed (\(host):\(port): \(MqttClient.describe(rc))); retrying after the backoff, never without TLS"
            )
        }
        if rc != MOSQ_ERR_SUCCESS.rawValue {
            let tls = config.tls != nil ? " (TLS)" : ""
            return retryLater(
                "cannot connect to \(host):\(port)\(tls): \(MqttClient.describe(rc))", level: THINGIF_LOG_WARNING)
        }
        shared.withLock { $0.socketOpen = true }
        logger.debug("connecting to \(host):\(port) as \(ep.mqttTopic)")
        return true
    }

    /// A connection attempt that failed: the next one after the backoff.
    /// The first failure in a row logs `line` at `level`, the others at
    /// debug level. Returns false, connect()'s answer.
    func retryLater(_ line: Text, level: thingif_log_level = THINGIF_LOG_ERROR) -> Bool {
        let attempt = shared.withLock { s -> Int in
            scheduleReconnect(&s)
            return s.reconnectAttempt
        }
        logger.write(attempt <= 1 ? level : THINGIF_LOG_DEBUG, line)
        return false
    }

    /// The thing's port: with TLS, the endpoint's portSSL when it gives one,
    /// else thingif_set_broker's port, never portTCP; without TLS, portTCP
    /// when given, else thingif_set_broker's port.
    static func port(of ep: MQTTEndpoint, config: Config) -> Int {
        if config.tls != nil { return ep.portSSL > 0 ? ep.portSSL : config.port }
        return ep.portTCP > 0 ? ep.portTCP : config.port
    }

    /// Drops the connection, so that the next one is made with the current
    /// configuration (thingif_set_tls after onboarding). Not while a loop runs.
    func resetConnection() {
        let client = shared.withLock { Thing.detachClient(&$0) }
        pipeline.detach()
        client?.disconnect()
    }

    /// Forgets the connection (the caller disconnects the client returned
    /// and detaches the pipeline),
    /// so that the next loop turn connects anew at once.
    static func detachClient(_ s: inout Shared) -> MqttClient? {
        let c = s.client
        s.client = nil
        s.socketOpen = false
        s.connected = false
        s.subscribed = false
        s.nextConnectAt = 0
        return c
    }

    /// CONNACK (on the loop thread, inside libmosquitto's loop).
    func connected(_ rc: Int32, client: MqttClient) {
        guard rc == 0 else {
            // The socket closes next; connectionLost schedules the retry, and
            // the backoff keeps growing until a CONNACK succeeds.
            logger.error("the broker refused the connection: \(MqttClient.describeConnack(rc))")
            return
        }
        let topic = client.clientID
        _ = client.subscribe(topic, qos: 1)
        _ = client.subscribe(Topics.config(clientID: topic), qos: 1)
        if pipeline.isGateway {
            _ = client.subscribe(Topics.endNodeCommands(clientID: topic, endNode: "+"), qos: 1)
            _ = client.subscribe(Topics.endNodeEvents(clientID: topic, endNode: "+"), qos: 1)
        }
        let (_, mid) = client.subscribe(Topics.response(clientID: topic), qos: 1)
        shared.withLock { s in
            s.connected = true
            s.subscribeMid = mid
            s.reconnectAttempt = 0
        }
        pipeline.attach(client)
        logger.info("connected; commands arrive on \(topic)")
        pipeline.syncEndNodes()
        sendDue()
    }
}
