// SPDX-License-Identifier: Apache-2.0

import ThingIF

/// The things' certificate authority in the hub: the CA that signs the
/// certificates things ask for with a CSR (ThingCertificates), read at
/// start from `options.thingCA`, and the CRL it writes of the revoked ones
/// (ThingCRL). Given the options and the store, never the hub: the thing's
/// requests ask it for the CA, deletion and retirement ask it to publish the
/// CRL, and the scheduler ticks it.
final class ThingAuthority: @unchecked Sendable {
    let options: FrameworkSide.Options
    let store: any CertificateStore & ThingStore
    let events: HubEvents
    /// The things' CA, once `load()` has read options.thingCA.
    private let loaded = Locked<ThingCertificates?>(nil)
    /// The last CRL written; held while one is made.
    let crlState = Locked(ThingCRL.State())

    init(options: FrameworkSide.Options, store: any CertificateStore & ThingStore, events: HubEvents) {
        self.options = options
        self.store = store
        self.events = events
    }

    /// The CA, nil when the hub has none (a thing's CSR is then ignored).
    var ca: ThingCertificates? { loaded.withLock { $0 } }

    /// Reads and checks the things' CA (options.thingCA) and the options
    /// that go with it. A CA that cannot be used stops the start: never a
    /// hub that quietly hands out passwords instead. Returns the problem.
    func load() -> String? {
        if options.brokerAdmin == .none && options.thingCA == nil {
            return "--broker-admin none needs the things' CA (--thing-ca-cert and --thing-ca-key)"
        }
        if options.thingCRL != nil && options.thingCA == nil {
            return "--thing-crl needs the things' CA (--thing-ca-cert and --thing-ca-key), which signs the CRL"
        }
        if options.brokerPidFile != nil && options.thingCRL == nil && options.brokerACL == nil {
            return
                "--broker-pid-file needs --thing-crl or --broker-acl (the hub signals the broker only to read those again)"
        }
        if options.brokerACL != nil && options.thingCA == nil {
            return
                "--broker-acl needs the things' CA (--thing-ca-cert and --thing-ca-key): it gives gateways with certificates their rights"
        }
        guard let files = options.thingCA else {
            loaded.withLock { $0 = nil }
            return nil
        }
        guard let port = options.advertisedCertPort, (1...65535).contains(port) else {
            return "the things' CA needs --advertised-cert-port (the broker listener for things' certificates)"
        }
        guard (1...FrameworkSide.ThingCAFiles.maxDays).contains(options.thingCertDays) else {
            return "--thing-cert-days must be 1 to \(FrameworkSide.ThingCAFiles.maxDays), not \(options.thingCertDays)"
        }
        switch ThingCertificates.load(certFile: files.certFile, keyFile: files.keyFile) {
        case .failure(let p):
            return "the things' CA cannot be used: \(p.message)"
        case .success(let ca):
            loaded.withLock { $0 = ca }
            return nil
        }
    }

    /// Signs and writes the things' CRL (options.thingCRL) when the store's
    /// revoked list differs from the last one written, when the last one is
    /// `ThingCRL.resignAfterMs` old, or when `force`; then asks the broker
    /// to read it (options.brokerPidFile). Called at start (forced), after
    /// a deletion or a retirement, and by the scheduler's CRL job every
    /// `ThingCRL.checkEveryMs` (which learns of other hubs' revocations).
    /// At most one CRL a second: a change in the second of the last write
    /// is written by the next tick (State.pending), so a burst of deletions
    /// costs the broker one reload a second, not one each.
    /// Returns why the CRL could not be written (nil: written, or nothing
    /// to do); the reason is also an event line. A store that cannot be
    /// read writes nothing: never an empty CRL in place of a full one.
    @discardableResult
    func publishCRL(force: Bool = false) -> String? {
        guard let path = options.thingCRL, let ca = ca else { return nil }
        return crlState.withLock { state -> String? in
            let nowMs = Platform.nowMs()
            let epochMs = Platform.epochMs()
            state.nextCheckMs = nowMs + ThingCRL.checkEveryMs
            guard let revoked = store.revokedCertificates(now: epochMs) else {
                events.event("the things' CRL was not written: the store could not read the revoked certificates")
                return "the store could not read the revoked certificates"
            }
            let serials = revoked.map(\.serial)
            let stale = nowMs - state.writtenMs >= ThingCRL.resignAfterMs
            guard force || stale || state.serials != serials else { return nil }
            let thisUpdate = epochMs / 1000 - ThingCRL.backdatingSeconds
            guard thisUpdate > state.thisUpdate else {
                state.pending = true
                return nil
            }
            let pem: String
            switch ca.revocationList(
                revoked, thisUpdate: thisUpdate, nextUpdate: thisUpdate + ThingCRL.validitySeconds,
                number: thisUpdate)
            {
            case .failure(let p):
                events.event("the things' CRL was not written: \(p.message)")
                return p.message
            case .success(let text): pem = text
            }
            if let problem = ThingCRL.writeAtomically(Array(pem.utf8), to: path) {
                events.event("the things' CRL was not written: \(problem)")
                return problem
            }
            state.serials = serials
            state.writtenMs = nowMs
            state.thisUpdate = thisUpdate
            state.pending = false
            events.event("wrote the things' CRL \(path): \(serials.count) revoked certificate(s)")
            if let pidFile = options.brokerPidFile {
                if let problem = ThingCRL.reloadBroker(pidFile: pidFile) {
                    events.event("the broker was not told to read the things' CRL again: \(problem)")
                }
            }
            return nil
        }
    }

    /// The scheduler's CRL job: publishCRL once `ThingCRL.checkEveryMs`
    /// has passed since the last look, or when a change waits (`pending`);
    /// and the gateways' rights as often (another hub's gateways).
    func tick(nowMs: Int64) {
        if options.brokerACL != nil, rulesState.withLock({ nowMs >= $0.nextCheckMs }) { publishGatewayRules() }
        guard options.thingCRL != nil, crlState.withLock({ $0.pending || nowMs >= $0.nextCheckMs }) else { return }
        publishCRL()
    }

    /// The gateways' rights last written (GatewayRules).
    let rulesState = Locked(GatewayRules.State())

    /// Writes the end-node rights of every gateway installation with a
    /// certificate into the broker's acl_file (options.brokerACL, its
    /// section only, atomically) when the file does not hold them, or when
    /// `force`; then asks the broker to read it (options.brokerPidFile).
    /// Called at start (forced), when a gateway's installation gets a
    /// certificate (before its answer goes out, so that its first status
    /// finds the right), after a deletion or a retirement, and by the
    /// scheduler's job every `ThingCRL.checkEveryMs` (other hubs'
    /// gateways). Returns why it could not (also an event line); a store
    /// that cannot be read writes nothing.
    @discardableResult
    func publishGatewayRules(force: Bool = false) -> String? {
        guard let path = options.brokerACL else { return nil }
        return rulesState.withLock { state -> String? in
            state.nextCheckMs = Platform.nowMs() + ThingCRL.checkEveryMs
            guard let topics = store.gatewayCertificateTopics() else {
                events.event("the gateways' broker rights were not written: the store could not read them")
                return "the store could not read the gateways' certificates"
            }
            guard let file = ThingCRL.readSmall(path, max: GatewayRules.maxFileBytes) else {
                events.event("the gateways' broker rights were not written: cannot read \(path)")
                return "cannot read \(path) (at most \(GatewayRules.maxFileBytes) bytes)"
            }
            // The file itself is compared, not a memory of it: a broker
            // configuration made again gets its section back within a tick.
            let text = GatewayRules.replacing(in: file, with: GatewayRules.section(topics))
            guard force || text != file else { return nil }
            if let problem = ThingCRL.writeAtomically(Array(text.utf8), to: path) {
                events.event("the gateways' broker rights were not written: \(problem)")
                return problem
            }
            events.event(
                "wrote the broker rights of \(topics.count) gateway installation(s) with certificates to \(path)")
            if let pidFile = options.brokerPidFile, let problem = ThingCRL.reloadBroker(pidFile: pidFile) {
                events.event("the broker was not told to read \(path) again: \(problem)")
            }
            return nil
        }
    }
}
