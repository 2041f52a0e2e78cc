import CThingIF

/// Inbound messages: the bounded inbox, its dispatch to commands, replies and the remote
/// configuration, and the periodic state provider.
extension Thing {
    // MARK: inbound

    /// A message from libmosquitto (loop thread, inside client.loop). One
    /// over THINGIF_OPT_MAX_PAYLOAD is dropped here, whatever its topic,
    /// before anything parses it. When the inbox reaches its bound, the
    /// loop handles messages now, before libmosquitto reads the next packet:
    /// the inbox never holds more than config.inboxMax, nothing is dropped,
    /// and while a slow handler runs the socket is not read, so the broker
    /// (and TCP) hold what follows.
    func received(_ m: MqttClient.Message) {
        let outcome = shared.withLock { s -> (oversize: Int?, full: Bool) in
            if m.payload.count > s.config.maxPayload {
                // A command whose commandID its first bytes give is reported
                // as dropped, so that it gets an outcome.
                if let id = s.identity, m.topic.equals(id.endpoint.mqttTopic),
                    s.droppedCommands.count < s.config.inboxMax,
                    let commandID = Command.recoverID(m.payload)
                {
                    s.droppedCommands.append(
                        (
                            commandID,
                            str(
                                "dropped a command of \(m.payload.count) bytes: over the limit of \(s.config.maxPayload) bytes (THINGIF_OPT_MAX_PAYLOAD)"
                            )
                        ))
                }
                return (s.config.maxPayload, false)
            }
            s.inbox.append(m)
            s.inboxHighWater = max(s.inboxHighWater, s.inbox.count)
            return (nil, s.inbox.count >= s.config.inboxMax)
        }
        if let limit = outcome.oversize {
            logger.error(
                "dropped a message of \(m.payload.count) bytes on \(m.topic): over the limit of \(limit) bytes (THINGIF_OPT_MAX_PAYLOAD)"
            )
            return
        }
        if outcome.full { processInbox() }
    }

    /// Handles what the inbox holds, batch by batch (see `runBatch`).
    /// `canRead` (the loop's own call, not one from inside libmosquitto's
    /// callback): after a batch whose results wait for their sync, the
    /// socket is read once more without waiting, so that the commands
    /// already there share that sync with the results (one sync per batch
    /// under load).
    func processInbox(canRead: Bool = false) {
        let drops = shared.withLock { s -> ([(id: String, reason: String)], String?) in
            defer { s.droppedCommands.removeAll() }
            return (s.droppedCommands, s.identity?.thingID)
        }
        if let thingID = drops.1 {
            for d in drops.0 { reportDropped(d.id, reason: d.reason, thingID: thingID) }
        }
        var owed: [Held] = []
        while true {
            let taken = shared.withLock { s -> ([MqttClient.Message], Identity, Int)? in
                guard let id = s.identity else { return nil }
                // Results are never dropped: while they fill the outbox, new
                // commands wait here until the framework answers. The replies
                // behind them are taken, since they are what empties it. A
                // full inbox runs its commands anyway (results may exceed the
                // outbox's capacity): otherwise the socket would stay unread
                // and the replies that empty the outbox would never come.
                // So with the outbox full of results, only the oldest
                // commands that bring the inbox below its bound are taken.
                var commandsTaken =
                    s.outbox.resultCount >= s.outbox.capacity ? max(0, s.inbox.count - s.config.inboxMax + 1) : Int.max
                var batch: [MqttClient.Message] = []
                var waiting: [MqttClient.Message] = []
                for m in s.inbox {
                    if !m.topic.equals(id.endpoint.mqttTopic) {
                        batch.append(m)
                    } else if commandsTaken > 0 {
                        batch.append(m)
                        commandsTaken -= 1
                    } else {
                        waiting.append(m)
                    }
                }
                guard !batch.isEmpty else { return nil }
                s.inbox = waiting
                s.batching = true
                return (batch, id, s.config.maxPayload)
            }
            guard let (batch, identity, maxPayload) = taken else { break }
            runBatch(batch, identity: identity, maxPayload: maxPayload, publishing: owed)
            owed = shared.withLock { s in
                defer { s.heldResults.removeAll() }
                return s.heldResults
            }
            if !owed.isEmpty, canRead, let client = shared.withLock({ $0.client }) {
                readAvailable(client)
            }
        }
        owed += shared.withLock { s in
            s.batching = false
            defer { s.heldResults.removeAll() }
            return s.heldResults
        }
        publishDurably(owed)
    }

    /// Reads what the socket already holds, without waiting, up to the
    /// inbox bound. libmosquitto reads one packet per loop call when no
    /// QoS 2 flow is open, so without this a pass would hold one command
    /// and a batch (and its sync) would serve one command under load.
    func readAvailable(_ client: MqttClient) {
        // Bounded: acknowledgements of our own publishes do not fill the inbox.
        for _ in 0..<1024 {
            guard client.hasInput, shared.withLock({ $0.inbox.count < $0.config.inboxMax }),
                client.loop(timeoutMs: 0) == MOSQ_ERR_SUCCESS.rawValue
            else { return }
        }
    }

    typealias Held = (commandID: String, thingID: String, body: [UInt8])

    /// One sync for every results record so far, then the results go out.
    func publishDurably(_ held: [Held]) {
        guard !held.isEmpty else { return }
        if !shared.withLock({ $0.ledger.flush() }) {
            logger.error("cannot sync the results in \(storage.path(CommandLedger.fileName))")
        }
        for h in held { _ = sendResults(h.body, commandID: h.commandID, thingID: h.thingID) }
    }

    /// Handles the messages of one loop pass, in order, with group commit:
    /// every new command is recorded as started, then one sync (which also
    /// makes durable the results of the batch before, `previous`, published
    /// right after it), then they run. The results they finish are recorded
    /// and wait in `heldResults` for the next sync. So a pass costs one or
    /// two syncs however many commands it holds (one at a time: two per
    /// command, the floor of at-most-once with nothing lost). A crash
    /// within a pass reports its commands that had not run as interrupted
    /// (docs/FAILURE_MODEL.md).
    func runBatch(_ batch: [MqttClient.Message], identity: Identity, maxPayload: Int, publishing previous: [Held]) {
        let topic = identity.endpoint.mqttTopic
        var admitted: [Admission?] = []
        admitted.reserveCapacity(batch.count)
        for m in batch {
            admitted.append(
                m.topic.equals(topic) ? admit(m.payload, identity: identity, maxPayload: maxPayload, sync: false) : nil)
        }
        let newCommands = admitted.contains { $0?.isNew == true }
        if newCommands || !previous.isEmpty, !shared.withLock({ $0.ledger.flush() }) {
            logger.error(
                "cannot sync \(storage.path(CommandLedger.fileName)); running commands without the at-most-once guard")
        }
        for h in previous { _ = sendResults(h.body, commandID: h.commandID, thingID: h.thingID) }
        for (m, a) in zip(batch, admitted) {
            if let a {
                execute(a, identity: identity)
            } else if m.topic.equals(Topics.response(clientID: topic)) {
                handleReply(m)
            } else if m.topic.equals(Topics.config(clientID: topic)) {
                applyRemoteConfig(m.payload)
            } else {
                logger.debug("ignored a message on \(m.topic)")
            }
        }
    }

    func handleReply(_ m: MqttClient.Message) {
        guard let reply = KiiResponse.decode(m.payload) else {
            logger.warning("ignored a malformed reply of \(m.payload.count) bytes")
            return
        }
        let rid = m.correlationData.map { String(decoding: $0, as: UTF8.self) } ?? reply.requestID ?? ""
        // 2xx: done. 4xx: the request itself is wrong and sending it again
        // cannot help. 5xx: keep it; it goes out again after the timeout.
        let retry = reply.status >= 500
        let item = shared.withLock { s -> Outbox.Item? in
            guard let item = s.outbox.item(rid) else { return nil }
            if !retry {
                if let cid = s.outbox.ack(rid)?.commandID { s.ledger.acknowledge(cid) }
                s.sentAt[ByteKey(rid)] = nil
            }
            return item
        }
        guard let item else {
            logger.debug("ignored a reply to unknown request \(rid)")
            return
        }
        if reply.isSuccess {
            logger.debug("framework accepted \(item.what): \(reply.status)")
        } else if retry {
            logger.warning("framework failed on \(item.what): \(reply.status) \(reply.bodyText); it will be sent again")
        } else {
            logger.error("framework rejected \(item.what): \(reply.status) \(reply.bodyText)")
        }
    }

    func runStateProvider() {
        let now = Platform.nowMs()
        let due = shared.withLock { s -> StateProvider? in
            guard s.connected, var p = s.provider, p.nextAt <= now else { return nil }
            p.nextAt = now + Int64(p.intervalMs)
            s.provider = p
            return p
        }
        guard let p = due else { return }
        let handle = OpaquePointer(Unmanaged.passUnretained(self).toOpaque())
        guard let state = p.callback(handle, p.userdata) else { return }
        let j = JSON(owning: state)
        guard j.isObject else {
            logger.error("the state provider returned \(j.typeName), not an object; skipped")
            return
        }
        _ = updateState(j, partial: false)
    }
}
