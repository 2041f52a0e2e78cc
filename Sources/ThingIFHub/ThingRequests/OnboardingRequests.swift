// SPDX-License-Identifier: Apache-2.0

import ThingIF

/// Onboarding by the thing (with the app's credentials or a claim
/// certificate), its MQTT installations and their endpoints: bootstrap
/// work, on the costly pool. Given the options, the things' store, the
/// installations, delivery (a thing that connects next is tried), the
/// metrics, the event sink, the budgets of wrong passwords and of new
/// things, and the requests' authorization.
final class OnboardingRequests: @unchecked Sendable {
    let options: FrameworkSide.Options
    let store: ThingStore
    let installations: ThingInstallations
    let delivery: CommandDelivery
    let metrics: HubMetrics
    let events: HubEvents
    let authorization: RequestAuthorization
    /// Wrong passwords per vendorThingID, things' and end nodes' alike
    /// (EndNodeRules.guesses): a burst of 10, then one per 10 s; past that
    /// every attempt gets 429 (password guessing over the bootstrap
    /// identity). Right ones spend nothing: Kii's SDKs onboard at every start.
    let guesses: RateLimiter
    /// Things created by the thing itself, app-wide (nil: no cap).
    let creationLimiter: RateLimiter?

    init(
        options: FrameworkSide.Options, store: ThingStore, installations: ThingInstallations,
        delivery: CommandDelivery, metrics: HubMetrics, events: HubEvents, authorization: RequestAuthorization,
        guesses: RateLimiter
    ) {
        self.options = options
        self.store = store
        self.installations = installations
        self.delivery = delivery
        self.metrics = metrics
        self.events = events
        self.authorization = authorization
        self.guesses = guesses
        creationLimiter =
            options.thingsCreatedPerHour > 0
            ? RateLimiter(
                ratePerSecond: Double(options.thingsCreatedPerHour) / 3600, burst: options.thingsCreatedPerHour) : nil
    }

    /// A claim onboarding (`claim`: the certificate's CN) needs a CSR: it is
    /// for things that connect with a certificate only.
    var claimNeedsCSR: KiiResponse {
        .refusal(
            400, "CERTIFICATE_SIGNING_REQUEST_REQUIRED",
            "an onboarding with a claim certificate gives a client certificate only: send a certificateSigningRequest")
    }

    /// Onboarding by the thing: with the app's credentials (the bootstrap
    /// identity), or with a claim certificate whose CN is `claim`, checked
    /// by the caller (handleClaim).
    func byThing(_ req: KiiRequest, claim: String? = nil) -> KiiResponse {
        guard let type = req.header("Content-Type"), MediaType.isOnboardingByThing(type) else {
            return .refusal(
                415, "UNSUPPORTED_MEDIA_TYPE",
                "Content-Type must be \(MediaType.onboardingByThing) or \(MediaType.onboardingWithThingIDByThing)")
        }
        guard case .success(let j) = JSON.parse(req.body), j.isObject else {
            return .refusal(400, "INVALID_INPUT_DATA", "the body must be a JSON object")
        }
        if MediaType.isOnboardingWithThingIDByThing(type) {
            // By thingID (Kii's onboard_with_thing_id): the thing was registered
            // before (by an owner, or by itself); the rest is the same onboarding.
            guard let tid = j["thingID"]?.stringValue, !tid.isEmpty, j["vendorThingID"] == nil else {
                return .refusal(
                    .invalid(
                        "thingID and thingPassword are required strings",
                        field: j["vendorThingID"] != nil ? "vendorThingID" : "thingID"))
            }
            guard let vendorThingID = store.thing(id: tid)?.vendorThingID else {
                return .refusal(.thingIDNotFound(tid))
            }
            j.set("vendorThingID", string: vendorThingID)
        }
        // The CSR, checked before anything is stored (as for POST installations).
        let (signing, refusal) = installations.certificateOrder(in: j)
        if let refusal { return refusal }
        // The layout's own refusal first: decode refuses it without saying why.
        if case .failure(let r) = LayoutPosition.named(in: j) {
            return .refusal(.invalid(r.message, field: LayoutPosition.field))
        }
        guard let o = OnboardingRequest.decode(j) else {
            // The credential at fault (decode also refuses thingProperties that are no object).
            let missing = ["vendorThingID", "thingPassword"].first {
                !(j[$0]?.stringValue.map { !$0.isEmpty } ?? false)
            }
            return .refusal(
                .invalid("vendorThingID (or thingID) and thingPassword are required strings", field: missing))
        }
        if claim != nil && signing == nil { return claimNeedsCSR }
        // Only wrong passwords spend the budget: Kii's SDKs onboard at every
        // start, and a device that restarts often is no password guesser.
        let guessKey = "onboard:" + o.vendorThingID
        guard guesses.hasToken(guessKey, now: Platform.nowMs()) else {
            return .refusal(
                429, "TOO_MANY_REQUESTS", "too many onboarding attempts for \(o.vendorThingID); try again later")
        }
        if store.thing(vendorThingID: o.vendorThingID) == nil {
            // A new thing: in enrollment mode only an operator makes one
            // (`thingif things import`); else within the app-wide cap.
            if options.enrollmentOnly {
                metrics.refused("enrollment")
                return .refusal(
                    403, "THING_NOT_ENROLLED", "\(o.vendorThingID) was not enrolled by the operator of this app")
            }
            if let cap = creationLimiter, !cap.allow("app", now: Platform.nowMs()) {
                metrics.refused("creation_cap")
                return .refusal(
                    429, "TOO_MANY_REQUESTS",
                    "this app's things have created \(options.thingsCreatedPerHour) things in the last hour; try again later"
                )
            }
        }
        switch store.registerThing(
            vendorThingID: o.vendorThingID, password: o.thingPassword, thingType: o.thingType,
            firmwareVersion: o.firmwareVersion, dataGroupingInterval: nil, layoutPosition: o.layoutPosition)
        {
        case .failure(.wrongPassword):
            _ = guesses.allow(guessKey, now: Platform.nowMs())
            return .refusal(403, "WRONG_PASSWORD", "the password of \(o.vendorThingID) does not match")
        case .failure(.wrongType):
            return .refusal(409, "THING_TYPE_MISMATCH", "\(o.vendorThingID) is registered with another thingType")
        case .failure(.wrongLayout):
            return .refusal(.layoutMismatch(o.vendorThingID))
        case .failure(.storage):
            return .storageFailed
        case .success(let t):
            // A thing that onboards again keeps its MQTT installation (with
            // a new broker password, or a new certificate for its topic).
            let installation: (installationID: String, topic: String)
            if let (iid, topic) = t.installations.sorted(by: { $0.key < $1.key }).first {
                installation = (iid, topic)
            } else if let fresh = installations.newInstallation(for: t) {
                installation = fresh
            } else {
                return .storageFailed
            }
            let (handed, failure) = installations.endpoint(
                for: t, installationID: installation.installationID, topic: installation.topic, order: signing)
            guard let ep = handed else { return failure ?? ThingInstallations.brokerRefused }
            events.event(
                "onboarded \(o.vendorThingID) as \(t.thingID), commands on \(ep.mqttTopic)"
                    + (ep.clientCertificate != nil ? " (client certificate)" : "")
                    + (claim.map { ", claimed by \($0)" } ?? ""))
            return .answer(
                200, OnboardingResponse(thingID: t.thingID, accessToken: t.accessToken, mqttEndpoint: ep).encode())
        }
    }

    /// The thing whose token the request carries, when it may have an MQTT
    /// installation of its own: an end node may not, as its traffic goes
    /// through its gateway's connection only (409 END_NODE_UNSUPPORTED).
    private func connectable(_ req: KiiRequest, overHTTP: Bool) -> RequestAuthorization.Auth {
        let auth = authorization.authenticate(req, overHTTP: overHTTP)
        guard case .success(let t) = auth, t.layoutPosition == .endNode else { return auth }
        return .failure(.refusal(.endNodeUnsupported(t.thingID, "MQTT installation")))
    }

    func installation(_ req: KiiRequest, overHTTP: Bool) -> KiiResponse {
        let t: ThingRecord
        switch connectable(req, overHTTP: overHTTP) {
        case .failure(let r): return r
        case .success(let x): t = x
        }
        let parsed = try? JSON.parse(req.body).get()
        guard let j = parsed, (try? FormFields.installationType(j)) == "MQTT" else {
            // An object's deviceType (or installationType, its other name) is at fault.
            let key = parsed.flatMap {
                $0.isObject ? ($0["deviceType"] != nil ? "deviceType" : "installationType") : nil
            }
            return .refusal(.invalid("deviceType must be \"MQTT\"", field: key))
        }
        // thingif's own field, as in onboarding by the thing: a hub with a CA
        // answers a CSR with the endpoint and its certificate, so the thing
        // (handed over by its app) needs no GET mqtt-endpoint and no
        // password; under --broker-admin none an installation without one
        // is refused.
        let (order, refusal) = installations.certificateOrder(in: j)
        if let refusal { return refusal }
        // Kii's thing SDKs make a new installation at every start: the
        // oldest ones are retired to make room (never the one a thingif
        // thing is online with), so a device that restarts often is not
        // refused.
        guard installations.retire(of: t, keeping: ThingInstallations.limit - 1) else {
            return ThingInstallations.brokerRefused
        }
        guard let (iid, topic) = installations.newInstallation(for: t) else {
            return .storageFailed
        }
        let body = JSON.object()
        body.set("installationID", string: iid)
        if let order {
            let (handed, failure) = installations.endpoint(for: t, installationID: iid, topic: topic, order: order)
            guard let ep = handed else {
                _ = store.removeInstallation(thingID: t.thingID, installationID: iid)
                return failure ?? ThingInstallations.brokerRefused
            }
            body.set("mqttEndpoint", ep.encode())
            // The thing connects and subscribes next, as after GET mqtt-endpoint.
            delivery.scheduleDelivery(thingID: t.thingID)
        }
        events.event(
            "created MQTT installation \(iid) for \(t.thingID)" + (order != nil ? " (client certificate)" : ""))
        return .answer(201, body)
    }

    func endpoint(_ req: KiiRequest, installationID: String, overHTTP: Bool) -> KiiResponse {
        let t: ThingRecord
        switch connectable(req, overHTTP: overHTTP) {
        case .failure(let r): return r
        case .success(let x): t = x
        }
        guard let topic = t.installations[installationID] else {
            return .refusal(.installationNotFound(installationID))
        }
        guard options.brokerAdmin == .dynsec else { return ThingInstallations.certificateRequired }
        guard let ep = installations.endpoint(for: t, installationID: installationID, topic: topic) else {
            return ThingInstallations.brokerRefused
        }
        // The thing connects and subscribes next: try what it has not received.
        delivery.scheduleDelivery(thingID: t.thingID)
        return .answer(200, ep.encode())
    }

}
