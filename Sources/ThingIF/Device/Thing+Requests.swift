import CThingIF

/// Requests to the framework: the persisted outbox, what is due to be (re)sent, state and
/// firmware-version uploads.
extension Thing {
    // MARK: requests to the framework

    /// Persists a request in the outbox and sends it at once when connected;
    /// otherwise it goes out after the next connection. It stays in the
    /// outbox, and is sent again after each reconnect or request timeout,
    /// until the framework answers it.
    func sendRequest(
        method: String, path: String, contentType: String?, body: [UInt8], what: String,
        kind: Outbox.Kind, commandID: String? = nil
    ) -> Int32 {
        var notes: [String] = []
        let outcome = shared.withLock { s -> Result<(Outbox.Item, MqttClient, Identity)?, StatusError> in
            guard let id = s.identity else { return .failure(StatusError(THINGIF_ERR_NOT_ONBOARDED.code)) }
            let item = Outbox.Item(
                id: newRequestID(&s), method: method, path: path, contentType: contentType,
                body: body, what: what, kind: kind, commandID: commandID)
            switch s.outbox.add(item) {
            case nil:
                notes.append(str("cannot write the outbox in \(storage.directory); \(what) not sent"))
                return .failure(StatusError(THINGIF_ERR_STORAGE.code))
            case .full?:
                notes.append(
                    str("outbox full (\(s.outbox.capacity) requests waiting for the framework); \(what) refused"))
                return .failure(StatusError(THINGIF_ERR_FULL.code))
            case .added(let dropped, let superseded)?:
                for old in dropped {
                    s.sentAt[ByteKey(old.id)] = nil
                    if !superseded { notes.append(str("outbox full: dropped the oldest state upload, \(old.what)")) }
                }
            }
            guard s.connected, let c = s.client else { return .success(nil) }
            s.sentAt[ByteKey(item.id)] = Platform.nowMs()
            return .success((item, c, id))
        }
        for n in notes { logger.warning(Text(n)) }
        switch outcome {
        case .failure(let e): return e.code
        case .success(let ready):
            if let (item, client, identity) = ready { publish(item, on: client, identity: identity) }
            return OK
        }
    }

    func newRequestID(_ s: inout Shared) -> String {
        s.requestCounter += 1
        return str("\(requestPrefix)-\(s.requestCounter)")
    }

    func publish(_ item: Outbox.Item, on client: MqttClient, identity: Identity) {
        var headers: [(name: String, value: String)] = [("Authorization", str("Bearer \(identity.accessToken)"))]
        if let ct = item.contentType { headers.append(("Content-Type", ct)) }
        headers.append((KiiFraming.requestIDHeader, item.id))
        let payload = KiiRequest(method: item.method, headers: headers, body: item.body).encode()
        let rc = client.publish(
            topic: Topics.request(clientID: client.clientID, appID: appID, path: item.path),
            payload: payload, qos: 1, responseTopic: Topics.response(clientID: client.clientID),
            correlationData: Array(item.id.utf8))
        if rc == MOSQ_ERR_SUCCESS.rawValue {
            logger.debug("sent \(item.what) (request \(item.id))")
        } else {
            // sentAt stays set: the next try comes after the request timeout,
            // and the items behind this one are not held up.
            logger.warning("could not send \(item.what) now (\(MqttClient.describe(rc))); it stays in the outbox")
        }
    }

    /// Sends every outbox item not sent on this connection, or sent longer
    /// ago than the request timeout without an answer.
    func sendDue() {
        let now = Platform.nowMs()
        var late: [String] = []
        let batch = shared.withLock { s -> ([Outbox.Item], MqttClient, Identity)? in
            guard s.connected, let c = s.client, let id = s.identity else { return nil }
            let timeout = Int64(s.config.requestTimeoutMs)
            var due: [Outbox.Item] = []
            for item in s.outbox.items where due.count < Thing.sendBatch {
                if let sent = s.sentAt[ByteKey(item.id)] {
                    guard now - sent >= timeout else { continue }
                    late.append(item.what)
                }
                s.sentAt[ByteKey(item.id)] = now
                due.append(item)
            }
            return (due, c, id)
        }
        for w in late { logger.warning("no answer from the framework to \(w); sending it again") }
        guard let (items, client, identity) = batch else { return }
        for item in items { publish(item, on: client, identity: identity) }
    }

    func updateState(_ state: JSON, partial: Bool) -> Int32 {
        guard let tid = shared.withLock({ $0.identity?.thingID }) else { return THINGIF_ERR_NOT_ONBOARDED.code }
        return sendRequest(
            method: partial ? "PATCH" : "PUT", path: str("targets/thing:\(tid)/states"),
            contentType: MediaType.json, body: state.dumpBytes(),
            what: partial ? "partial state" : "state", kind: .state)
    }

    func updateFirmwareVersion(_ version: String) -> Int32 {
        guard let tid = shared.withLock({ $0.identity?.thingID }) else { return THINGIF_ERR_NOT_ONBOARDED.code }
        let body = JSON.object()
        body.set("firmwareVersion", string: version)
        return sendRequest(
            method: "PUT", path: str("things/\(tid)/firmware-version"),
            contentType: "application/vnd.kii.ThingFirmwareVersionUpdateRequest+json",
            body: body.dumpBytes(), what: str("firmware version \(version)"), kind: .other)
    }
}
