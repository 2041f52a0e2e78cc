// SPDX-License-Identifier: Apache-2.0

import CThingIF
import ThingIF

/// A field of a thing that Kii serves at things/{thingID}/{rawValue}.
public enum ThingField: String, Sendable {
    case firmwareVersion = "firmware-version"
    case thingType = "thing-type"

    /// Its name in the JSON body.
    public var key: String { self == .firmwareVersion ? "firmwareVersion" : "thingType" }
    /// Its name in the hub's log lines.
    var words: String { self == .firmwareVersion ? "firmware version" : "thing type" }
}

/// What a thing asks of the framework: onboarding, installations, its MQTT endpoint,
/// action results, commands it ran by itself, state, firmware version and its
/// automation report; each checked against the thing's token and client ID.
extension FrameworkSide {
    /// A new MQTT installation (topic) for a thing: its installationID and
    /// topic, or nil when the store fails.
    func newInstallation(for t: ThingRecord) -> (installationID: String, topic: String)? {
        let installationID = HubIDs.installationID()
        let topic = HubIDs.mqttTopic()
        guard store.addInstallation(thingID: t.thingID, installationID: installationID, mqttTopic: topic) else {
            return nil
        }
        return (installationID, topic)
    }

    /// The endpoint of an installation with fresh broker credentials: the
    /// broker client `topic`, bound to client ID `topic`, gets a new random
    /// password each time the endpoint is handed out (the old one stops
    /// working), so the hub stores none. nil when the broker refuses.
    ///
    /// With `certificate` (PEM, signed for `topic` by the things' CA) the
    /// endpoint carries it instead: username `topic`, an empty password,
    /// portSSL the certificate listener, and nothing is made in the broker.
    func endpoint(for t: ThingRecord, installationID: String, topic: String, certificate: String? = nil)
        -> MQTTEndpoint?
    {
        var username = ""
        var password = ""
        var portSSL = options.advertisedTLSPort ?? 0
        if certificate != nil {
            username = topic
            portSSL = options.advertisedCertPort ?? portSSL
        } else if let admin {
            guard let pw = admin.thingCredentials(topic: topic, appID: options.appID) else { return nil }
            username = topic
            password = pw
        }
        return MQTTEndpoint(
            installationID: installationID, host: options.advertisedHost ?? options.brokerHost,
            portTCP: options.advertisedPort ?? options.brokerPort, portSSL: portSSL,
            username: username, password: password, mqttTopic: topic, ttl: 2_147_483_647,
            clientCertificate: certificate)
    }

    /// Under `--broker-admin none` a thing connects only with a certificate,
    /// which it gets by sending a CSR when it onboards or makes an MQTT
    /// installation: what would hand out a password (either without a CSR,
    /// and GET mqtt-endpoint) is refused with this 400, not retried.
    var certificateRequired: KiiResponse {
        error(
            400, "CERTIFICATE_SIGNING_REQUEST_REQUIRED",
            "this hub gives things client certificates only (--broker-admin none): onboard, or create the"
                + " installation, with a certificateSigningRequest")
    }

    /// The certificate (PEM) for the installation `topic` of a thing from
    /// the CSR `request`, recorded in the store first (so that deleting the
    /// thing or retiring the installation revokes it), or why the CA could
    /// not sign or the store could not record it (logged; the caller
    /// answers 500 and hands out nothing).
    func certificate(
        _ request: ThingCertificates.CheckedRequest, ca: ThingCertificates, thingID: String, installationID: String,
        topic: String
    ) -> Result<String, ThingCertificates.Problem> {
        switch ca.issue(request, topic: topic, days: options.thingCertDays) {
        case .failure(let p):
            onEvent?("no certificate for \(topic): \(p.message)")
            return .failure(p)
        case .success(let issued):
            guard
                store.recordCertificate(
                    thingID: thingID, installationID: installationID, serial: issued.serial,
                    notAfter: issued.notAfterMs)
            else {
                onEvent?("no certificate for \(topic): the store did not record its serial \(issued.serial)")
                return .failure(ThingCertificates.Problem("the certificate could not be recorded; try again"))
            }
            return .success(issued.pem)
        }
    }

    /// A certificate a thing's request asks for: the CA and the checked CSR.
    typealias CertificateOrder = (ca: ThingCertificates, request: ThingCertificates.CheckedRequest)

    /// The certificateSigningRequest of a thing's request body (onboarding
    /// by the thing, or POST installations), checked before anything is
    /// stored: `order` what to sign, nil for a password; or `refusal`, the
    /// 400 that answers the request (a field that is no CSR of at most
    /// OnboardingRequest.maxCSRBytes, a CSR ThingCertificates.request
    /// refuses, or none under `--broker-admin none`). A hub without a CA
    /// ignores a CSR: the thing gets a password, as from any hub.
    func certificateOrder(in j: JSON) -> (order: CertificateOrder?, refusal: KiiResponse?) {
        let field = OnboardingRequest.certificateSigningRequest(in: j)
        guard field.valid else {
            return (
                nil,
                error(
                    400, "INVALID_INPUT_DATA",
                    "certificateSigningRequest must be a PEM PKCS#10 request of at most \(OnboardingRequest.maxCSRBytes) bytes"
                )
            )
        }
        if let ca = thingCA.withLock({ $0 }), let pem = field.csr {
            switch ThingCertificates.request(pem) {
            case .failure(let p): return (nil, error(400, "INVALID_INPUT_DATA", p.message))
            case .success(let checked): return ((ca, checked), nil)
            }
        }
        return (nil, options.brokerAdmin == .none ? certificateRequired : nil)
    }

    /// The endpoint of installation `installationID` (`topic`) that a
    /// request with `order` gets: a certificate for `topic` (signed and
    /// recorded by `certificate(_:ca:thingID:installationID:topic:)`) and no
    /// broker record, else fresh broker credentials. Or `refusal`: 500 when
    /// the CA cannot sign, 503 when the broker refuses.
    func endpoint(for t: ThingRecord, installationID: String, topic: String, order: CertificateOrder?) -> (
        endpoint: MQTTEndpoint?, refusal: KiiResponse?
    ) {
        var certificate: String?
        if let order {
            switch self.certificate(
                order.request, ca: order.ca, thingID: t.thingID, installationID: installationID, topic: topic)
            {
            case .failure(let p): return (nil, error(500, "CERTIFICATE_NOT_ISSUED", p.message))
            case .success(let pem): certificate = pem
            }
        }
        guard let ep = endpoint(for: t, installationID: installationID, topic: topic, certificate: certificate) else {
            return (nil, brokerRefused)
        }
        return (ep, nil)
    }

    /// MQTT installations a thing keeps: each is a broker client. A new one
    /// past this retires the oldest (retireInstallations).
    public static let installationLimit = 16

    /// Retires the thing's oldest MQTT installations until at most `keep`
    /// remain: the broker deletes each one's client and role (disconnecting
    /// it if connected), then the store forgets it and its retained status
    /// and config messages are cleared. The installation the thing last
    /// announced itself online with is kept. A retired installation's
    /// certificates are revoked (ThingStore.removeInstallation; publishCRL).
    /// False when the broker does not confirm a removal (nothing more is
    /// retired).
    func retireInstallations(of t: ThingRecord, keeping keep: Int) -> Bool {
        let ordered = store.installationsOldestFirst(thingID: t.thingID)
        var excess = ordered.count - keep
        guard excess > 0 else { return true }
        defer { publishCRL() }
        let live = delivery.liveTopic(of: t.thingID)
        for (iid, topic) in ordered where excess > 0 && topic != live {
            if let admin, !admin.remove(username: topic, role: BrokerAdmin.thingRole(topic: topic)) { return false }
            guard store.removeInstallation(thingID: t.thingID, installationID: iid) else { return false }
            delivery.forgetTopic(topic)
            _ = publishRetained(topic: Topics.config(clientID: topic), payload: [])
            _ = publishRetained(topic: Topics.status(clientID: topic), payload: [])
            onEvent?("retired MQTT installation \(iid) of \(t.thingID) (topic \(topic))")
            excess -= 1
        }
        return true
    }

    /// The endpoint an owner's onboarding answer carries, as Kii's does: a
    /// new MQTT installation for the thing the app hands it to, so that the
    /// installations (and broker passwords) a running thing uses stay as
    /// they are. Owner onboardings fill at most half of the thing's
    /// installations, leaving the rest to the thing; past that, or when the
    /// broker refuses, nil (the answer then has no mqttEndpoint, and the
    /// thing makes its own installation with its token).
    /// Under `--broker-admin none`, nil: the thing gets its endpoint (and
    /// certificate) when it onboards itself, or makes its installation
    /// (POST installations), with a CSR.
    public func handoverEndpoint(for t: ThingRecord) -> MQTTEndpoint? {
        guard options.brokerAdmin == .dynsec, t.installations.count < Self.installationLimit / 2,
            let (iid, topic) = newInstallation(for: t)
        else {
            return nil
        }
        return endpoint(for: t, installationID: iid, topic: topic)
    }

    var brokerRefused: KiiResponse {
        error(503, "BROKER_UNAVAILABLE", "the broker did not make the thing's MQTT credentials; try again")
    }

    /// A claim onboarding (`claim`: the certificate's CN) needs a CSR: it is
    /// for things that connect with a certificate only.
    var claimNeedsCSR: KiiResponse {
        error(
            400, "CERTIFICATE_SIGNING_REQUEST_REQUIRED",
            "an onboarding with a claim certificate gives a client certificate only: send a certificateSigningRequest")
    }

    /// Onboarding by the thing: with the app's credentials (the bootstrap
    /// identity), or with a claim certificate whose CN is `claim`, checked
    /// by the caller (handleClaim).
    func onboardByThing(_ req: KiiRequest, claim: String? = nil) -> KiiResponse {
        guard let type = req.header("Content-Type"), MediaType.isOnboardingByThing(type) else {
            return error(
                415, "UNSUPPORTED_MEDIA_TYPE",
                "Content-Type must be \(MediaType.onboardingByThing) or \(MediaType.onboardingWithThingIDByThing)")
        }
        guard case .success(let j) = JSON.parse(req.body), j.isObject else {
            return error(400, "INVALID_INPUT_DATA", "the body must be a JSON object")
        }
        if MediaType.isOnboardingWithThingIDByThing(type) {
            // By thingID (Kii's onboard_with_thing_id): the thing was registered
            // before (by an owner, or by itself); the rest is the same onboarding.
            guard let tid = j["thingID"]?.stringValue, !tid.isEmpty, j["vendorThingID"] == nil else {
                return error(400, "INVALID_INPUT_DATA", "thingID and thingPassword are required strings")
            }
            guard let vendorThingID = store.thing(id: tid)?.vendorThingID else {
                return error(.thingIDNotFound(tid))
            }
            j.set("vendorThingID", string: vendorThingID)
        }
        // The CSR, checked before anything is stored (as for POST installations).
        let (signing, refusal) = certificateOrder(in: j)
        if let refusal { return refusal }
        guard let o = OnboardingRequest.decode(j) else {
            return error(400, "INVALID_INPUT_DATA", "vendorThingID (or thingID) and thingPassword are required strings")
        }
        if claim != nil && signing == nil { return claimNeedsCSR }
        // Only wrong passwords spend the budget: Kii's SDKs onboard at every
        // start, and a device that restarts often is no password guesser.
        let guessKey = "onboard:" + o.vendorThingID
        guard onboardingLimiter.hasToken(guessKey, now: Platform.nowMs()) else {
            return error(
                429, "TOO_MANY_REQUESTS", "too many onboarding attempts for \(o.vendorThingID); try again later")
        }
        if store.thing(vendorThingID: o.vendorThingID) == nil {
            // A new thing: in enrollment mode only an operator makes one
            // (`thingif things import`); else within the app-wide cap.
            if options.enrollmentOnly {
                metrics.refused("enrollment")
                return error(
                    403, "THING_NOT_ENROLLED", "\(o.vendorThingID) was not enrolled by the operator of this app")
            }
            if let cap = creationLimiter, !cap.allow("app", now: Platform.nowMs()) {
                metrics.refused("creation_cap")
                return error(
                    429, "TOO_MANY_REQUESTS",
                    "this app's things have created \(options.thingsCreatedPerHour) things in the last hour; try again later"
                )
            }
        }
        switch store.registerThing(
            vendorThingID: o.vendorThingID, password: o.thingPassword, thingType: o.thingType,
            firmwareVersion: o.firmwareVersion, dataGroupingInterval: nil)
        {
        case .failure(.wrongPassword):
            _ = onboardingLimiter.allow(guessKey, now: Platform.nowMs())
            return error(403, "WRONG_PASSWORD", "the password of \(o.vendorThingID) does not match")
        case .failure(.wrongType):
            return error(409, "THING_TYPE_MISMATCH", "\(o.vendorThingID) is registered with another thingType")
        case .failure(.storage):
            return storageFailed
        case .success(let t):
            // A thing that onboards again keeps its MQTT installation (with
            // a new broker password, or a new certificate for its topic).
            let installation: (installationID: String, topic: String)
            if let (iid, topic) = t.installations.sorted(by: { $0.key < $1.key }).first {
                installation = (iid, topic)
            } else if let fresh = newInstallation(for: t) {
                installation = fresh
            } else {
                return storageFailed
            }
            let (handed, failure) = endpoint(
                for: t, installationID: installation.installationID, topic: installation.topic, order: signing)
            guard let ep = handed else { return failure ?? brokerRefused }
            onEvent?(
                "onboarded \(o.vendorThingID) as \(t.thingID), commands on \(ep.mqttTopic)"
                    + (ep.clientCertificate != nil ? " (client certificate)" : "")
                    + (claim.map { ", claimed by \($0)" } ?? ""))
            return ok(
                200, OnboardingResponse(thingID: t.thingID, accessToken: t.accessToken, mqttEndpoint: ep).encode())
        }
    }

    enum Auth {
        case success(ThingRecord)
        case failure(KiiResponse)
    }

    /// Reads the thing a token belongs to.
    typealias ThingLookup = (_ token: String) -> StoreRead<ThingRecord>

    /// The answer to a thing's request when the store failed: a 500, which
    /// the thing sends again after its request timeout (a 4xx it drops).
    var storageFailed: KiiResponse { error(500, HubError.storage.code, HubError.storage.message) }

    /// The thing whose token the request carries, or a 401. A token that
    /// is no thing's is 401 INVALID_ACCESS_TOKEN over MQTT and, over HTTP,
    /// Kii's 403 WRONG_TOKEN, as the app API answers (docs/DECISIONS.md).
    /// `lookup` reads the thing of a token, `store.thingRead(accessToken:)`
    /// unless a route reads more with it in one go (action results).
    func authenticate(_ req: KiiRequest, overHTTP: Bool, lookup: ThingLookup? = nil) -> Auth {
        guard let token = req.bearerToken else {
            return .failure(error(401, "UNAUTHORIZED", "an Authorization: Bearer token is required"))
        }
        // A failure of the store is a 500, which the thing sends again; a
        // 401 it would drop for good.
        let found = lookup?(token) ?? store.thingRead(accessToken: token)
        if case .failed = found { return .failure(storageFailed) }
        guard case .found(var t) = found else {
            return .failure(
                overHTTP
                    ? error(
                        403, "WRONG_TOKEN", "the access token is not valid: unknown, expired, revoked or not a thing's")
                    : error(401, "INVALID_ACCESS_TOKEN", "the access token is not valid"))
        }
        // A looked-up record has no raw token; the caller's is the one it knows.
        t.accessToken = token
        return .success(t)
    }

    /// The request's token must be the thing's and, over MQTT, the request
    /// must come from one of the thing's own MQTT installations (client IDs);
    /// over HTTP (`clientID` nil) the token is the whole credential.
    func authorize(_ req: KiiRequest, thingID: String, clientID: String?) -> KiiResponse? {
        if case .failure(let r) = authorized(req, thingID: thingID, clientID: clientID) { return r }
        return nil
    }

    /// As `authorize`, with the thing's record (read once for the request).
    func authorized(_ req: KiiRequest, thingID: String, clientID: String?, lookup: ThingLookup? = nil) -> Auth {
        switch authenticate(req, overHTTP: clientID == nil, lookup: lookup) {
        case .failure(let r): return .failure(r)
        case .success(let t):
            guard t.thingID == thingID else {
                return .failure(error(403, "FORBIDDEN", "the token does not belong to \(thingID)"))
            }
            if let clientID, !t.installations.values.contains(clientID) {
                return .failure(
                    error(403, "FORBIDDEN", "client \(clientID) is not an MQTT installation of \(thingID)"))
            }
            return .success(t)
        }
    }

    func createInstallation(_ req: KiiRequest, overHTTP: Bool) -> KiiResponse {
        let t: ThingRecord
        switch authenticate(req, overHTTP: overHTTP) {
        case .failure(let r): return r
        case .success(let x): t = x
        }
        guard case .success(let j) = JSON.parse(req.body), (try? FormFields.installationType(j)) == "MQTT" else {
            return error(400, "INVALID_INPUT_DATA", "deviceType must be \"MQTT\"")
        }
        // thingif's own field, as in onboarding by the thing: a hub with a CA
        // answers a CSR with the endpoint and its certificate, so the thing
        // (handed over by its app) needs no GET mqtt-endpoint and no
        // password; under --broker-admin none an installation without one
        // is refused.
        let (order, refusal) = certificateOrder(in: j)
        if let refusal { return refusal }
        // Kii's thing SDKs make a new installation at every start: the
        // oldest ones are retired to make room (never the one a thingif
        // thing is online with), so a device that restarts often is not
        // refused.
        guard retireInstallations(of: t, keeping: Self.installationLimit - 1) else { return brokerRefused }
        guard let (iid, topic) = newInstallation(for: t) else {
            return storageFailed
        }
        let body = JSON.object()
        body.set("installationID", string: iid)
        if let order {
            let (handed, failure) = endpoint(for: t, installationID: iid, topic: topic, order: order)
            guard let ep = handed else {
                _ = store.removeInstallation(thingID: t.thingID, installationID: iid)
                return failure ?? brokerRefused
            }
            body.set("mqttEndpoint", ep.encode())
            // The thing connects and subscribes next, as after GET mqtt-endpoint.
            delivery.scheduleDelivery(thingID: t.thingID)
        }
        onEvent?(
            "created MQTT installation \(iid) for \(t.thingID)" + (order != nil ? " (client certificate)" : ""))
        return ok(201, body)
    }

    func endpoint(_ req: KiiRequest, installationID: String, overHTTP: Bool) -> KiiResponse {
        let t: ThingRecord
        switch authenticate(req, overHTTP: overHTTP) {
        case .failure(let r): return r
        case .success(let x): t = x
        }
        guard let topic = t.installations[installationID] else {
            return error(.installationNotFound(installationID))
        }
        guard options.brokerAdmin == .dynsec else { return certificateRequired }
        guard let ep = endpoint(for: t, installationID: installationID, topic: topic) else { return brokerRefused }
        // The thing connects and subscribes next: try what it has not received.
        delivery.scheduleDelivery(thingID: t.thingID)
        return ok(200, ep.encode())
    }

    func thingID(fromTarget target: String) -> String? {
        target.hasPrefix("thing:") ? String(target.dropFirst(6)) : nil
    }

    enum Target {
        case thing(ThingRecord)
        case refused(KiiResponse)
    }

    /// `body` for the thing of a "thing:{thingID}" target when the request
    /// may act for it (its token, one of its client IDs), else the answer
    /// that refuses it.
    func forTarget(
        _ req: KiiRequest, _ target: String, clientID: String?, lookup: ThingLookup? = nil,
        _ body: (ThingRecord) -> KiiResponse
    ) -> KiiResponse {
        switch authorizedTarget(req, target, clientID: clientID, lookup: lookup) {
        case .refused(let answer): return answer
        case .thing(let t): return body(t)
        }
    }

    /// The thing of a "thing:{thingID}" target when the request may act for
    /// it (its token, one of its client IDs), else the answer that refuses it.
    func authorizedTarget(_ req: KiiRequest, _ target: String, clientID: String?, lookup: ThingLookup? = nil)
        -> Target
    {
        guard let tid = thingID(fromTarget: target) else {
            return .refused(error(404, "TARGET_NOT_FOUND", "no target \(target)"))
        }
        switch authorized(req, thingID: tid, clientID: clientID, lookup: lookup) {
        case .failure(let denied): return .refused(denied)
        case .success(let t): return .thing(t)
        }
    }

    /// The results of `commandID`: `command` is that command as read with
    /// the thing that authorisation read (`FastPaths.thing(accessToken:command:)`),
    /// nil when the thing has none of that ID; `targets`, its notification
    /// targets when read with it.
    func actionResults(
        _ req: KiiRequest, thingID tid: String, commandID: String, command: CommandRecord?,
        targets read: [AppInstallation]? = nil
    ) -> KiiResponse {
        guard case .success(let j) = JSON.parse(req.body), let parsed = ActionResults.decode(j) else {
            return error(400, "INVALID_INPUT_DATA", "the body must be {\"actionResults\":[…]}")
        }
        // Results only for a command this thing was given (by the hub, or
        // one it reported running by itself): never for another thing's.
        guard let command, command.commandID == commandID, command.thingID == tid else {
            return error(.commandNotFound(commandID))
        }
        data.withLock { d in
            if d.resultPosts[commandID] == nil, let oldest = d.resultPostOrder.append(commandID) {
                d.resultPosts[oldest] = nil
            }
            d.resultPosts[commandID, default: 0] += 1
        }
        var text = j.dump()
        var all = parsed.all
        if all.isEmpty {
            // A command the thing dropped before it could read the actions
            // (ActionResults.dropped): every action failed with its reason.
            // No results and no reason is not an outcome.
            guard let reason = j["errorMessage"]?.stringValue, case .success(let payload) = JSON.parse(command.payload),
                case .success(let sent) = Command.decode(payload)
            else {
                return error(400, "INVALID_INPUT_DATA", "no action results and no errorMessage")
            }
            let failed = ActionResults.allFailed(sent, message: reason)
            text = failed.encode().dump()
            all = failed.all
        } else if parsed.groups.allSatisfy({ $0.alias == nil }),
            case .success(let payload) = JSON.parse(command.payload),
            // A schema command (the common case) is done here: only a trait
            // command, which has no schema, is decoded to be regrouped.
            payload["schema"] == nil,
            case .success(let sent) = Command.decode(payload), sent.shape == .trait,
            let grouped = parsed.grouped(like: sent)
        {
            // Flat results for a trait command (Kii's thing-if-ThingSDK posts
            // them so): grouped by the command's aliases, as apps read them.
            text = grouped.encode().dump()
        }
        let now = Platform.epochMs()
        // Results count once: a repeat (the thing sends again until it has an
        // answer) is accepted and changes nothing.
        guard command.results == nil else { return ok(204) }
        // Every action refused for a cancel (CommandCancel): the thing
        // confirms it never ran it, so the command is CANCELLED (§9.1).
        let state: CommandState =
            !all.isEmpty && all.allSatisfy(\.succeeded)
            ? .done : CommandCancel.isRefusal(all) ? .cancelled : .incomplete
        // Whom to tell, read in the lane's transaction: a command without a
        // target that a sweep sends to is never due for one, and needs no mark after.
        let targets = read ?? notifications.targets(for: command)
        // Results are idempotent by commandID: a repeat is accepted and ignored.
        if metrics.timed(
            "recordResults",
            { store.recordResults(commandID: commandID, results: text, state: state, at: now, swept: targets.anySwept) }
        ) {
            // The stored row now: the one read above with what was just written.
            var record = command
            record.results = text
            record.state = state
            record.modifiedAt = now
            // Counted and told after the lane's commit (AfterCommit).
            afterCommit {
                self.metrics.commandFinished(done: state == .done, createdAt: command.createdAt, now: now)
                self.onEvent?("results of \(commandID) from \(tid): \(text)")
                self.notifications.finished(record, targets: targets)
            }
        } else if store.command(id: commandID)?.results == nil {
            // Nothing written and no results there: not a repeat (another
            // hub's first results) but a failure of the store. A 204 would
            // lose them; the thing sends them again after a 500.
            return storageFailed
        }
        return ok(204)
    }

    /// A command the thing ran by itself (an action set, or a timer trigger
    /// on the device): stored once by commandID, so that apps see it.
    func commandReport(_ req: KiiRequest, thingID tid: String, commandID: String) -> KiiResponse {
        guard case .success(let j) = JSON.parse(req.body), j.isObject else {
            return error(400, "INVALID_INPUT_DATA", "the body must be a command object")
        }
        if let id = j["commandID"], id.stringValue != commandID {
            return error(400, "INVALID_INPUT_DATA", "commandID in the body is not \(commandID) of the path")
        }
        guard case .success(let command) = Command.decode(j) else {
            return error(400, "INVALID_INPUT_DATA", "the body is not a valid command")
        }
        if let issuer = command.issuer, issuer != "thing:\(tid)" {
            return error(400, "INVALID_INPUT_DATA", "the issuer of a command the thing reports must be thing:\(tid)")
        }
        guard store.command(id: commandID) == nil else { return ok(204) }  // a repeat
        let now = Platform.epochMs()
        if store.insertCommand(
            CommandRecord(
                commandID: commandID, thingID: tid, issuer: command.issuer ?? "thing:\(tid)",
                issuingInstallationID: nil, payload: j.dump(),
                createdAt: now, modifiedAt: now)) != nil
        {
            onEvent?("\(tid) reported command \(commandID) it ran by itself")
        }
        return ok(204)
    }

    /// A state upload to `target`. A whole state (PUT) over MQTT goes first
    /// to the store's `putState` (StateWriteFastPaths), which authorises
    /// and writes in one statement (one round trip on PostgreSQL); whatever
    /// it does not write (a refusal, a PATCH, a store without it) is authorised
    /// and written as usual, which also answers the refusals. Not over
    /// HTTP, where anyone may send a token: a refused one would cost that
    /// statement and then the usual read.
    func stateUpload(_ req: KiiRequest, target: String, clientID: String?) -> KiiResponse {
        // Parsed once, for either path; a body that is no object is
        // answered after authorisation, as every refusal of the body is.
        guard case .success(let j) = JSON.parse(req.body), j.isObject else {
            return forTarget(req, target, clientID: clientID) { _ in
                error(400, "INVALID_INPUT_DATA", "the state must be a JSON object")
            }
        }
        let upload = j.dump()
        if req.method == "PUT", clientID != nil, let stateWrites = fastPaths.stateWrites,
            let tid = thingID(fromTarget: target), let token = req.bearerToken
        {
            let merged = StateMerge.apply(method: "PUT", upload: upload, to: nil)
            let put = metrics.timed("applyState") {
                stateWrites.putState(
                    accessToken: token, thingID: tid, clientID: clientID, upload: upload, state: merged,
                    at: Platform.epochMs())
            }
            switch put {
            case .found(let p): return stateStored(thing: p.thing, p.write)
            case .failed: return storageFailed
            case .notFound: break
            }
        }
        return forTarget(req, target, clientID: clientID) { state(method: req.method, upload: upload, thing: $0) }
    }

    /// Kii's state upload by an owner: PUT or PATCH …/states with the token
    /// of a user who owns the thing (Kii's documentation: "the access token
    /// of the thing or thing owner"). Stored, kept in the history and
    /// probed by the triggers as the thing's own upload is; the caller has
    /// checked the size limit.
    public func ownerStateUpload(user: UserRecord, thingID: String, method: String, body: [UInt8]) -> KiiResponse {
        let thing: ThingRecord
        switch app.ownedThing(user: user, thingID: thingID) {
        case .failure(let e): return error(e)
        case .success(let t): thing = t
        }
        guard case .success(let j) = JSON.parse(body), j.isObject else {
            return error(400, "INVALID_INPUT_DATA", "the state must be a JSON object")
        }
        return state(method: method, upload: j.dump(), thing: thing)
    }

    /// A state upload (`upload`: the body's object as dumped) by `thing`,
    /// its record as authorisation read it: its state then is the old state
    /// the triggers compare with.
    func state(method: String, upload: String, thing: ThingRecord) -> KiiResponse {
        guard
            let written = metrics.timed(
                "applyState",
                {
                    fastPaths.applyState(
                        thingID: thing.thingID, method: method, upload: upload, at: Platform.epochMs(),
                        after: thing.state)
                })
        else {
            return storageFailed
        }
        return stateStored(thing: thing, written)
    }

    /// After a state upload's write: `thing` as it was before (its state is
    /// the old state the triggers compare with).
    private func stateStored(thing: ThingRecord, _ written: StateWrite) -> KiiResponse {
        let tid = thing.thingID
        let old = thing.state
        let merged = written.state
        // The triggers read in the upload's transaction; told and acted on
        // once stored: after the lane's commit (AfterCommit).
        let triggers = written.hasEnabledTrigger == false ? [] : triggerEngine.enabledTriggers(thingID: tid)
        afterCommit {
            self.onEvent?("state of \(tid): \(merged)")
            self.homeAssistant.stateChanged(thing: thing, merged: merged)
            self.triggerEngine.stateChanged(thingID: tid, old: old, new: merged, triggers: triggers)
        }
        return ok(204)
    }

    /// GET or PUT things/{id}/firmware-version or …/thing-type by the thing.
    func thingField(_ req: KiiRequest, _ field: ThingField, from clientID: String?, thingID tid: String) -> KiiResponse
    {
        if let denied = authorize(req, thingID: tid, clientID: clientID) { return denied }
        let r: Result<JSON?, HubError> =
            req.method == "GET"
            ? thingField(field, thingID: tid).map { $0 }
            : setThingField(field, thingID: tid, body: req.body).map { nil }
        switch r {
        case .failure(let e): return error(e.status, e.code, e.message)
        case .success(let body): return body.map { ok(200, $0) } ?? ok(204)
        }
    }

    /// A thing's firmware version or thing type as Kii answers it:
    /// {"firmwareVersion": …} or {"thingType": …}; 404 when it has none.
    /// The caller has checked who asks (the thing, or an owner).
    public func thingField(_ field: ThingField, thingID: String) -> Result<JSON, HubError> {
        guard let t = store.thing(id: thingID) else { return .failure(.thingNotFound(thingID)) }
        guard let v = field == .firmwareVersion ? t.firmwareVersion : t.thingType else {
            return .failure(field == .firmwareVersion ? .thingWithoutFirmwareVersion : .thingWithoutThingType)
        }
        let o = JSON.object()
        o.set(field.key, string: v)
        return .success(o)
    }

    /// Sets a thing's firmware version (ThingFirmwareVersionUpdateRequest) or
    /// thing type (ThingTypeUpdateRequest): {"firmwareVersion": …} or
    /// {"thingType": …}, 1 to 200 bytes. The caller has checked who asks.
    public func setThingField(_ field: ThingField, thingID: String, body: [UInt8]) -> Result<Void, HubError> {
        guard case .success(let j) = JSON.parse(body), let v = j[field.key]?.stringValue,
            (1...200).contains(v.utf8.count)
        else {
            return .failure(.invalid("\(field.key) must be a string of 1 to 200 bytes"))
        }
        let done =
            field == .firmwareVersion
            ? store.setFirmwareVersion(thingID: thingID, v) : store.setThingType(thingID: thingID, v)
        guard done else { return .failure(.thingNotFound(thingID)) }
        onEvent?("\(field.words) of \(thingID): \(v)")
        return .success(())
    }

    /// The thing's word on the automation configuration it was sent:
    /// {"version"?,"applied","message"?} (docs/PROTOCOL.md 11.2).
    func automationReport(_ req: KiiRequest, thingID tid: String) -> KiiResponse {
        guard case .success(let j) = JSON.parse(req.body), j.isObject, let applied = j["applied"]?.boolValue else {
            return error(400, "INVALID_INPUT_DATA", "the body must be {\"version\",\"applied\",\"message\"}")
        }
        let report = JSON.object()
        if let v = j["version"]?.intValue { report.set("version", .int(v)) }
        report.set("applied", .bool(applied))
        if let m = j["message"]?.stringValue { report.set("message", string: String(m.prefix(1024))) }
        report.set("reportedAt", .int(Int(Platform.epochMs())))
        guard store.saveAutomationReport(thingID: tid, report: report.dump()) else {
            return error(404, "CONFIGURATION_NOT_FOUND", "\(tid) was sent no automation configuration")
        }
        onEvent?("automation report of \(tid): \(report.dump())")
        return ok(204)
    }

    func quote(_ s: String) -> String { JSON.string(s)?.dump() ?? "\"\"" }

    /// A request body as the request log keeps it: a thing's password is
    /// not kept.
    static func redacted(_ body: [UInt8], path: String) -> String {
        guard path == "onboardings", case .success(let j) = JSON.parse(body), j.isObject else {
            return String(decoding: body, as: UTF8.self)
        }
        if j["thingPassword"] != nil { j.set("thingPassword", string: "(not kept)") }
        return j.dump()
    }
}

extension ActionResults {
    /// Flat results laid out as `command`'s alias groups: the n-th result
    /// answers the n-th action. nil when they do not fit (another count, or
    /// a result named other than its action); such results are kept as sent.
    func grouped(like command: Command) -> ActionResults? {
        let flat = all
        guard flat.count == command.groups.reduce(0, { $0 + $1.entries.count }) else { return nil }
        var groups: [Group] = []
        var i = 0
        for g in command.groups {
            var results: [ActionResult] = []
            for e in g.entries {
                guard flat[i].name == e.name else { return nil }
                results.append(flat[i])
                i += 1
            }
            groups.append(Group(alias: g.alias, results: results))
        }
        return ActionResults(groups: groups)
    }
}
