// SPDX-License-Identifier: Apache-2.0

import CThingIF

/// The gateway's requests in the outbox, by the tag it gives them
/// (Outbox.Item.tag): an onboarding and a removal, whose answers change the
/// registry, journaled; and the list read after each connect, in memory
/// only (made again at each connect). The outbox reads none of this. The
/// names are what journals hold ("k"), from before tags too: never renamed.
enum EndNodeRequest: String, CaseIterable {
    case onboarding = "endNodeOnboarding"
    case removal = "endNodeRemoval"
    case sync = "endNodeSync"

    /// The request `item` is, nil for anything not the gateway's.
    init?(_ item: Outbox.Item) {
        guard let tag = item.tag else { return nil }
        self.init(named: tag)
    }

    /// Whether it is written to the outbox's journal.
    var journaled: Bool { self != .sync }
}

/// A gateway's requests and answers on the pipeline (docs/GATEWAYS.md §2,
/// §4, §5): the firmware's calls about its end nodes, the hub's membership
/// events, the answers to the gateway's onboardings, removals and list
/// reads, and the end nodes' statuses. Whom a command is for and the
/// registry's changes are the target resolver's (GatewayTargets, in the
/// pipeline's state behind its lock); this is the glue to the outbox and
/// the transport. The firmware hears of each change through the owner's
/// `notify` (PipelineOwner), on the loop thread, with no lock held.
extension CommandPipeline {
    // MARK: whom each message of a batch is for

    /// A message on the events topic of a gateway's end node (GATEWAYS.md
    /// §4.2): taken now, while the batch is classified, so that a command
    /// behind an endNodeAdded in the same batch finds its end node. True
    /// for every message of that topic (one malformed or about another end
    /// node is dropped with a warning); false for any other topic, where
    /// nothing is ever taken for an event.
    func takeMembership(_ m: TransportMessage, identity: Identity, gateway: Bool) -> Bool {
        guard Gateways.built,
            let endNode = GatewayTargets.eventsEndNode(of: m.topic, identity: identity, gateway: gateway)
        else { return false }
        if let event = EndNodeEvent.decode(m.payload, endNode: endNode) {
            endNodeEvent(event)
        } else {
            logger.warning("dropped a malformed or foreign end-node event on \(m.topic)")
        }
        return true
    }

    /// runBatch's targets, after the batch's membership events: each
    /// command's and cancel's (nil: neither, or held for the list read). A
    /// thing on its own gets its one shared target for each.
    func resolveTargets(_ batch: [TransportMessage], _ inbound: [MessageKind], identity: Identity) -> [CommandTarget?] {
        // Whom each command or cancel is for, resolved after the events. An
        // end node unknown while the list read runs waits for its end
        // (GatewayTargets.holdForList).
        var targets: [CommandTarget?] = []
        targets.reserveCapacity(batch.count)
        state.withLock { s in
            for i in inbound.indices {
                guard let to = inbound[i].addressee else {
                    targets.append(nil)
                    continue
                }
                let target = s.targets.target(for: to, identity: identity)
                if Gateways.built, case .endNode = to,
                    s.targets.holdForList(batch[i], target: target, bound: s.limits.inboxMax)
                {
                    targets.append(nil)
                } else {
                    targets.append(target)
                }
            }
        }
        return targets
    }

    // MARK: the owner's calls

    /// One of the gateway's requests through the outbox, tagged as `request`
    /// (kind other; journaled unless it is the list read).
    func sendRequest(
        method: String, path: String, contentType: String?, body: [UInt8], what: String, request: EndNodeRequest
    ) -> Int32 {
        sendRequest(
            method: method, path: path, contentType: contentType, body: body, what: what, kind: .other,
            tag: request.rawValue, journaled: request.journaled)
    }

    /// thingif_set_layout_position: whether end-node topics are this handle's.
    func setGateway(_ gateway: Bool) { state.withLock { $0.targets.isGateway = gateway } }
    var isGateway: Bool { Gateways.built && state.withLock { $0.targets.isGateway } }
    func setMaxEndNodes(_ n: Int) { state.withLock { $0.targets.registry.max = n } }

    /// thingif_end_node_add: registers `request`'s end node (synced) and
    /// puts its onboarding in the outbox. The end node is online from now.
    /// Kii's body goes to POST things/{gw}/end-nodes, not …/onboardings:
    /// only the gateway's own role may publish there, so the hub serves it
    /// on the gateway's lane within its own budget, whatever others send on
    /// …/onboardings (docs/GATEWAYS.md §4.1).
    func addEndNode(_ request: EndNodeOnboardingRequest) -> Int32 {
        let v = request.vendorThingID
        var gw = ""
        let registered = state.withLock { s -> Int32 in
            guard s.targets.gateway else { return THINGIF_ERR_STATE.code }
            guard let id = s.identity else { return THINGIF_ERR_NOT_ONBOARDED.code }
            gw = id.thingID
            return s.targets.register(v, storage: storage)
        }
        guard registered == OK else {
            if registered == THINGIF_ERR_STORAGE.code {
                logger.error("cannot write \(storage.path(EndNodeRegistry.fileName)); end node \(v) not added")
            }
            return registered
        }
        let rc = sendRequest(
            method: "POST", path: EndNodeOnboardingRequest.path(gateway: gw), contentType: request.mediaType,
            body: request.encode().dumpBytes(),
            what: str("onboarding of end node \(v)"), request: .onboarding)
        if rc != OK {
            // Not in the outbox: not registered either.
            state.withLock { $0.targets.unregister(v, storage: storage) }
        }
        return rc
    }

    /// thingif_end_node_remove: one with a thingID is marked removing
    /// (its commands are refused) and DELETE things/{gw}/end-nodes/{E}
    /// goes through the outbox; one still waiting for its onboarding is
    /// forgotten at once, its onboarding withdrawn.
    func removeEndNode(_ v: String) -> Int32 {
        let step = state.withLock { s -> EndNodeRemovalStep in
            guard let id = s.identity else { return .failed(THINGIF_ERR_NOT_ONBOARDED.code) }
            let step = s.targets.removal(v, gateway: id.thingID, storage: storage)
            if case .forgotten = step {
                for old in s.outbox.withdraw(where: { Self.onboards($0, vendorThingID: v) }) {
                    s.sentAt[ByteKey(old.id)] = nil
                }
            }
            return step
        }
        switch step {
        case .failed(let rc):
            if rc == THINGIF_ERR_STORAGE.code {
                logger.error("cannot write \(storage.path(EndNodeRegistry.fileName)); end node \(v) not removed")
            }
            return rc
        case .forgotten:
            logger.info("end node \(v) forgotten before the framework onboarded it; its onboarding withdrawn")
            return OK
        case .delete(let path):
            let rc = sendRequest(
                method: "DELETE", path: path, contentType: nil, body: [], what: str("removal of end node \(v)"),
                request: .removal)
            if rc != OK {
                state.withLock { $0.targets.removalFailed(v, storage: storage) }
            }
            return rc
        }
    }

    /// thingif_end_node_set_online: kept, and published retained when the
    /// end node has a thingID and the thing is connected (else after the
    /// next connect's birth message).
    func setEndNodeOnline(_ v: String, online: Bool) -> Int32 {
        let publish = state.withLock { s -> (Int32, (T, String)?) in
            guard let i = s.targets.registry.index(vendorThingID: v) else { return (THINGIF_ERR_NOT_FOUND.code, nil) }
            s.targets.registry.update(i) { $0.online = online }
            guard let t = s.transport, let e = s.targets.registry.entries[i].thingID else { return (OK, nil) }
            return (OK, (t, e))
        }
        if let (transport, endNode) = publish.1 { publishStatus(endNode, online: online, on: transport) }
        return publish.0
    }

    /// The thingID of the end node `v` (nil: unknown, or not added yet).
    func endNodeThingID(_ v: String) -> Result<String?, StatusError> {
        state.withLock { s in
            guard let e = s.targets.registry.entry(vendorThingID: v) else {
                return .failure(StatusError(THINGIF_ERR_NOT_FOUND.code))
            }
            return .success(e.thingID)
        }
    }

    /// The registry as it is now (a copy).
    var endNodeEntries: [EndNodeRegistry.Entry] { state.withLock { $0.targets.registry.entries } }

    // MARK: statuses

    private func publishStatus(_ endNode: String, online: Bool, on transport: T) {
        let rc = transport.publish(
            topic: Topics.endNodeStatus(clientID: transport.clientID, endNode: endNode),
            payload: Array((online ? "online" : "offline").utf8), qos: 1, retain: true, responseTopic: nil,
            correlationData: nil)
        if rc != 0 { logger.warning("could not publish end node \(endNode)'s status now (\(T.describe(rc)))") }
    }

    /// After the thing's birth message: every end node's status, so that
    /// what the broker retains is this run's (all offline at creation).
    func publishEndNodeStatuses() {
        guard Gateways.built else { return }
        let work = state.withLock { s -> (T, [(String, Bool)])? in
            guard s.targets.gateway, let t = s.transport else { return nil }
            return (t, s.targets.registry.entries.compactMap { e in e.thingID.map { ($0, e.online) } })
        }
        guard let (transport, list) = work else { return }
        for (endNode, online) in list { publishStatus(endNode, online: online, on: transport) }
    }

    // MARK: the list read after each connect

    /// After CONNACK: reads the hub's list of this gateway's end nodes
    /// (page by page); the hub's list is the truth (GATEWAYS.md §2). A read
    /// still waiting from the last connection is replaced.
    func syncEndNodes() {
        guard Gateways.built else { return }
        let ready = state.withLock { s -> Bool in
            guard s.targets.gateway, s.identity != nil else { return false }
            for old in s.outbox.withdraw(where: { EndNodeRequest($0) == .sync }) { s.sentAt[ByteKey(old.id)] = nil }
            s.targets.syncStarted()
            return true
        }
        if ready { requestEndNodePage(after: nil) }
    }

    static var listPageSize: Int { 100 }

    private func requestEndNodePage(after key: String?) {
        guard let gw = state.withLock({ $0.identity?.thingID }) else { return }
        var path = str("things/\(gw)/end-nodes?bestEffortLimit=\(Self.listPageSize)")
        if let key { path += "&paginationKey=" + Self.percentEncoded(key) }
        let rc = sendRequest(
            method: "GET", path: path, contentType: nil, body: [], what: "the list of end nodes", request: .sync)
        if rc != OK { logger.warning("cannot read the framework's list of end nodes now (status \(rc))") }
    }

    /// A query value with every byte but A-Z a-z 0-9 - . _ ~ percent-encoded.
    static func percentEncoded(_ s: String) -> String {
        let hex = Array("0123456789ABCDEF".utf8)
        var out: [UInt8] = []
        for b in s.utf8 {
            switch b {
            case 0x41...0x5A, 0x61...0x7A, 0x30...0x39, 0x2D, 0x2E, 0x5F, 0x7E: out.append(b)
            default: out += [0x25, hex[Int(b >> 4)], hex[Int(b & 0x0F)]]
            }
        }
        return String(decoding: out, as: UTF8.self)
    }

    // MARK: events and answers

    static func onboards(_ item: Outbox.Item, vendorThingID v: String) -> Bool {
        guard EndNodeRequest(item) == .onboarding, case .success(let j) = JSON.parse(item.body) else { return false }
        return j[EndNodeOnboardingRequest.vendorThingIDField]?.stringValue.equals(v) ?? false
    }

    /// A membership event from the hub (GATEWAYS.md §4.2).
    func endNodeEvent(_ event: EndNodeEvent) {
        switch event {
        case .added(let id, let v, _): learned(thingID: id, vendorThingID: v, why: "an owner onboarded it")
        case .removed(let id): forget(thingID: id, why: "removed at the framework")
        case .changed(let id, let v): learned(thingID: id, vendorThingID: v, why: "an owner changed it")
        }
    }

    /// The hub says end node `id` is `v` (GatewayTargets.learn); the
    /// firmware and the broker are told after the lock.
    private func learned(thingID id: String, vendorThingID v: String, why: String) {
        let (notices, status) = state.withLock { s -> ([EndNodeNotice], (T, Bool)?) in
            let learned = s.targets.learn(thingID: id, vendorThingID: v, storage: storage, logger: logger)
            guard let online = learned.status, let t = s.transport else { return (learned.notices, nil) }
            return (learned.notices, (t, online))
        }
        for n in notices { logger.info("end node \(n.vendorThingID) is thing \(id) (\(why))") }
        if let (transport, online) = status { publishStatus(id, online: online, on: transport) }
        for n in notices { owner.notify(n) }
    }

    /// End node `id` is gone at the hub.
    private func forget(thingID id: String, why: String) {
        guard let e = state.withLock({ $0.targets.forget(thingID: id, storage: storage, logger: logger) }) else {
            return
        }
        logger.info("end node \(e.vendorThingID) (thing \(id)) \(why)")
        owner.notify(.init(event: .removed, vendorThingID: e.vendorThingID, thingID: id))
    }

    /// The hub's answer to an onboarding, a removal or a list read (after
    /// the outbox took it out, or kept it for a retry): every tagged item's
    /// answer comes here (CommandPipeline.handleReply); a tag that is none
    /// of the gateway's (EndNodeRequest) is left alone.
    func endNodeReplied(_ item: Outbox.Item, _ reply: KiiResponse, retry: Bool) {
        guard Gateways.built, !retry, let request = EndNodeRequest(item) else { return }
        switch request {
        case .onboarding:
            guard case .success(let j) = JSON.parse(item.body),
                let v = j[EndNodeOnboardingRequest.vendorThingIDField]?.stringValue
            else { return }
            if reply.isSuccess, let id = EndNodeOnboardingRequest.thingID(inAnswer: reply.body) {
                learned(thingID: id, vendorThingID: v, why: "onboarded by this gateway")
                return
            }
            let detail =
                reply.isSuccess ? "a malformed answer: \(reply.bodyText)" : str("\(reply.status) \(reply.bodyText)")
            guard state.withLock({ $0.targets.refused(v, storage: storage) }) else { return }
            logger.error("the framework refused end node \(v): \(detail)")
            owner.notify(.init(event: .refused, vendorThingID: v, thingID: nil, detail: detail))
        case .removal:
            // 204, or 404: gone either way. A 403 says it is not this
            // gateway's any more: forgotten too.
            let id = Topics.levels(item.path).last ?? ""
            if !reply.isSuccess { logger.info("removal of end node \(id): \(reply.status) \(reply.bodyText)") }
            forget(thingID: id, why: "removed by this gateway")
        case .sync:
            guard reply.isSuccess, let page = EndNodeListPage.decode(reply.body) else {
                logger.warning("cannot read the framework's list of end nodes: \(reply.status) \(reply.bodyText)")
                state.withLock { $0.targets.syncSeen = nil }
                return
            }
            // A page may predate a removal the hub told meanwhile.
            let forgotten = state.withLock { $0.targets.syncForgotten }
            for e in page.entries where !forgotten.contains(ByteKey(e.thingID)) {
                learned(thingID: e.thingID, vendorThingID: e.vendorThingID, why: "in the framework's list")
            }
            if let next = page.nextPaginationKey {
                requestEndNodePage(after: next)
                return
            }
            // The whole list is read: an end node with a thingID that it
            // does not name is gone (an onboarding still waiting has none).
            let gone = state.withLock { $0.targets.syncEnded() }
            for id in gone { forget(thingID: id, why: "not in the framework's list") }
        }
    }
}
