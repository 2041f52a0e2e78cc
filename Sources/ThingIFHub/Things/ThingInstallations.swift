// SPDX-License-Identifier: Apache-2.0

import ThingIF

/// A thing's MQTT installations: each is a broker client (a topic that is
/// its client ID and username) with fresh credentials, or a certificate
/// signed by the things' CA, handed out in an endpoint. The thing's
/// requests (onboarding, POST installations, GET mqtt-endpoint) and an
/// owner's onboarding make them; a thing keeps at most `limit`. Given the
/// options, store, broker administration, MQTT client, the things' CA and
/// presence (which knows the installation a thing is online with).
public final class ThingInstallations: @unchecked Sendable {
    let options: FrameworkSide.Options
    let store: any CertificateStore & ThingStore
    let client: MqttClient
    let admin: BrokerAdmin?
    let authority: ThingAuthority
    let presence: Presence
    let events: HubEvents

    init(
        options: FrameworkSide.Options, store: any CertificateStore & ThingStore, client: MqttClient,
        admin: BrokerAdmin?,
        authority: ThingAuthority, presence: Presence, events: HubEvents
    ) {
        self.options = options
        self.store = store
        self.client = client
        self.admin = admin
        self.authority = authority
        self.presence = presence
        self.events = events
    }

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
    /// working), so the hub stores none. A gateway's client also gets its
    /// end nodes' topics (BrokerAdmin.thingACLs). nil when the broker refuses.
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
            guard
                let pw = admin.thingCredentials(
                    topic: topic, appID: options.appID, gateway: t.layoutPosition == .gateway)
            else { return nil }
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
    static var certificateRequired: KiiResponse {
        .refusal(
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
            events.event("no certificate for \(topic): \(p.message)")
            return .failure(p)
        case .success(let issued):
            guard
                store.recordCertificate(
                    thingID: thingID, installationID: installationID, serial: issued.serial,
                    notAfter: issued.notAfterMs)
            else {
                events.event("no certificate for \(topic): the store did not record its serial \(issued.serial)")
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
                .refusal(
                    .invalid(
                        "certificateSigningRequest must be a PEM PKCS#10 request of at most \(OnboardingRequest.maxCSRBytes) bytes",
                        field: OnboardingRequest.csrField))
            )
        }
        if let ca = authority.ca, let pem = field.csr {
            switch ThingCertificates.request(pem) {
            case .failure(let p): return (nil, .refusal(.invalid(p.message, field: OnboardingRequest.csrField)))
            case .success(let checked): return ((ca, checked), nil)
            }
        }
        return (nil, options.brokerAdmin == .none ? Self.certificateRequired : nil)
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
            case .failure(let p): return (nil, .refusal(500, "CERTIFICATE_NOT_ISSUED", p.message))
            case .success(let pem): certificate = pem
            }
            // A gateway's end-node rights are in the broker before its answer goes out.
            if t.layoutPosition == .gateway { authority.publishGatewayRules() }
        }
        guard let ep = endpoint(for: t, installationID: installationID, topic: topic, certificate: certificate) else {
            return (nil, Self.brokerRefused)
        }
        return (ep, nil)
    }

    /// MQTT installations a thing keeps: each is a broker client. A new one
    /// past this retires the oldest (retire).
    public static let limit = 16

    /// Retires the thing's oldest MQTT installations until at most `keep`
    /// remain: the broker deletes each one's client and role (disconnecting
    /// it if connected), then the store forgets it and its retained status
    /// and config messages are cleared. The installation the thing last
    /// announced itself online with is kept. A retired installation's
    /// certificates are revoked (ThingStore.removeInstallation; publishCRL).
    /// False when the broker does not confirm a removal (nothing more is
    /// retired).
    func retire(of t: ThingRecord, keeping keep: Int) -> Bool {
        let ordered = store.installationsOldestFirst(thingID: t.thingID)
        var excess = ordered.count - keep
        guard excess > 0 else { return true }
        defer {
            authority.publishCRL()
            if t.layoutPosition == .gateway { authority.publishGatewayRules() }
        }
        let live = presence.liveTopic(of: t.thingID)
        for (iid, topic) in ordered where excess > 0 && topic != live {
            if let admin, !admin.remove(username: topic, role: BrokerAdmin.thingRole(topic: topic)) { return false }
            guard store.removeInstallation(thingID: t.thingID, installationID: iid) else { return false }
            presence.forgetTopic(topic)
            _ = client.publishRetained(topic: Topics.config(clientID: topic), payload: [])
            _ = client.publishRetained(topic: Topics.status(clientID: topic), payload: [])
            events.event("retired MQTT installation \(iid) of \(t.thingID) (topic \(topic))")
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
    public func handover(for t: ThingRecord) -> MQTTEndpoint? {
        guard options.brokerAdmin == .dynsec, t.installations.count < Self.limit / 2,
            let (iid, topic) = newInstallation(for: t)
        else {
            return nil
        }
        return endpoint(for: t, installationID: iid, topic: topic)
    }

    static var brokerRefused: KiiResponse {
        .refusal(503, "BROKER_UNAVAILABLE", "the broker did not make the thing's MQTT credentials; try again")
    }
}
