// SPDX-License-Identifier: Apache-2.0

/// Onboarding messages (Kii Thing-IF) and the identity the thing keeps.
public enum MediaType {
    public static let onboardingByThing = "application/vnd.kii.OnboardingWithVendorThingIDByThing+json"
    /// Kii's other form of onboarding by the thing: a thing that knows its
    /// thingID (an owner registered it) onboards with it and its password.
    public static let onboardingWithThingIDByThing = "application/vnd.kii.OnboardingWithThingIDByThing+json"
    /// Kii's owner's forms (the app's onboarding of a thing it names by
    /// vendorThingID, or by the thingID of one that onboarded itself).
    public static let onboardingByOwner = "application/vnd.kii.OnboardingWithVendorThingIDByOwner+json"
    public static let onboardingWithThingIDByOwner = "application/vnd.kii.OnboardingWithThingIDByOwner+json"
    /// Kii's end-node forms: an end node onboarded onto the gateway that
    /// carries it, named by its thingID or by its vendorThingID
    /// (docs/GATEWAYS.md §3.2).
    public static let onboardingEndNodeWithGatewayThingID =
        "application/vnd.kii.OnboardingEndNodeWithGatewayThingID+json"
    public static let onboardingEndNodeWithGatewayVendorThingID =
        "application/vnd.kii.OnboardingEndNodeWithGatewayVendorThingID+json"
    public static let installationCreation = "application/vnd.kii.InstallationCreationRequest+json"
    public static let json = "application/json"

    /// True when a Content-Type names onboarding by the thing, by
    /// vendorThingID or by thingID.
    public static func isOnboardingByThing(_ contentType: String) -> Bool {
        names(contentType, onboardingByThing) || names(contentType, onboardingWithThingIDByThing)
    }

    /// True when a Content-Type names onboarding by the thing with its thingID.
    public static func isOnboardingWithThingIDByThing(_ contentType: String) -> Bool {
        names(contentType, onboardingWithThingIDByThing)
    }

    /// True when a Content-Type names an end node's onboarding, by the
    /// gateway's thingID or vendorThingID.
    public static func isOnboardingEndNode(_ contentType: String) -> Bool {
        names(contentType, onboardingEndNodeWithGatewayThingID)
            || names(contentType, onboardingEndNodeWithGatewayVendorThingID)
    }

    /// True when `contentType` is `expected`: the type before any parameter
    /// (";charset=…"), ASCII case ignored, compared as bytes.
    public static func names(_ contentType: String, _ expected: String) -> Bool {
        var type = contentType.utf8.prefix { $0 != UInt8(ascii: ";") }
        while let last = type.last, last == 0x20 || last == 0x09 { type = type.dropLast() }
        return String.equalIgnoringASCIICase(type, expected.utf8)
    }
}

/// Where and how a thing connects: Kii's mqttEndpoint object.
public struct MQTTEndpoint: Equatable, Sendable {
    public var installationID: String
    public var host: String
    public var portTCP: Int
    public var portSSL: Int
    public var username: String
    public var password: String
    public var mqttTopic: String
    public var ttl: Int
    /// The client certificate (PEM) the framework signed for this
    /// installation, CN = mqttTopic, when the thing sent a CSR and the
    /// framework has a CA for things; the thing then connects to portSSL
    /// with it and its own key, and username/password are empty. thingif's
    /// own field: Kii's thing SDKs ignore it.
    public var clientCertificate: String?

    /// Field by field, the strings as bytes (Text/Bytes.swift).
    public static func == (a: MQTTEndpoint, b: MQTTEndpoint) -> Bool {
        a.installationID.equals(b.installationID) && a.host.equals(b.host) && a.portTCP == b.portTCP
            && a.portSSL == b.portSSL && a.username.equals(b.username) && a.password.equals(b.password)
            && a.mqttTopic.equals(b.mqttTopic) && a.ttl == b.ttl
            && a.clientCertificate.equals(b.clientCertificate)
    }

    public init(
        installationID: String, host: String, portTCP: Int, portSSL: Int, username: String,
        password: String, mqttTopic: String, ttl: Int, clientCertificate: String? = nil
    ) {
        self.installationID = installationID
        self.host = host
        self.portTCP = portTCP
        self.portSSL = portSSL
        self.username = username
        self.password = password
        self.mqttTopic = mqttTopic
        self.ttl = ttl
        self.clientCertificate = clientCertificate
    }

    public func encode() -> JSON {
        let o = JSON.object()
        o.set("installationID", string: installationID)
        o.set("host", string: host)
        o.set("portTCP", .int(portTCP))
        o.set("portSSL", .int(portSSL))
        o.set("username", string: username)
        o.set("password", string: password)
        o.set("mqttTopic", string: mqttTopic)
        // Kii's name, which Kii's thing SDKs require; "ttl" for older readers.
        o.set("X-MQTT-TTL", .int(ttl))
        o.set("ttl", .int(ttl))
        // No MQTT over WebSocket is offered: 0, as Kii's clients read a port.
        o.set("portWS", .int(0))
        o.set("portWSS", .int(0))
        if let clientCertificate { o.set("clientCertificate", string: clientCertificate) }
        return o
    }

    public static func decode(_ j: JSON) -> MQTTEndpoint? {
        guard j.isObject,
            let installationID = j["installationID"]?.stringValue,
            let mqttTopic = j["mqttTopic"]?.stringValue, Topics.isSafeLevel(mqttTopic)
        else { return nil }
        let host = j["host"]?.stringValue ?? ""
        let portTCP = j["portTCP"]?.intValue ?? 0
        guard portTCP >= 0 && portTCP <= 65535 else { return nil }
        let certificate = j["clientCertificate"]
        if let certificate, certificate.stringValue == nil { return nil }
        return MQTTEndpoint(
            installationID: installationID, host: host, portTCP: portTCP,
            portSSL: j["portSSL"]?.intValue ?? 0,
            username: j["username"]?.stringValue ?? "",
            password: j["password"]?.stringValue ?? "",
            mqttTopic: mqttTopic, ttl: j["X-MQTT-TTL"]?.intValue ?? j["ttl"]?.intValue ?? 0,
            clientCertificate: certificate?.stringValue)
    }
}

/// Body of POST onboardings (application/vnd.kii.OnboardingWithVendorThingIDByThing+json).
public struct OnboardingRequest {
    public var vendorThingID: String
    public var thingPassword: String
    public var thingType: String?
    public var firmwareVersion: String?
    public var thingProperties: JSON?
    /// What the thing is (nil in a decoded body that names none).
    public var layoutPosition: LayoutPosition?
    /// A PKCS#10 certificate signing request (PEM) for the thing's MQTT
    /// client key: the framework, when it has a CA for things, answers with
    /// a certificate for the new installation (MQTTEndpoint.clientCertificate).
    /// thingif's own field; at most `maxCSRBytes`.
    public var certificateSigningRequest: String?

    /// The longest CSR taken (an RSA-4096 one in PEM is about 1,700 bytes).
    public static let maxCSRBytes = 8192
    /// The CSR's field, in this body and in a new MQTT installation's
    /// (POST installations, InstallationCreationRequest): the same rule for both.
    public static var csrField: String { "certificateSigningRequest" }

    /// The CSR a request body carries (onboarding by the thing, or POST
    /// installations): `valid` false when the field is there but is not a
    /// string of 1 to `maxCSRBytes` bytes; `csr` nil when it is absent.
    public static func certificateSigningRequest(in j: JSON) -> (valid: Bool, csr: String?) {
        guard let field = j[csrField] else { return (true, nil) }
        guard let text = field.stringValue, !text.isEmpty, text.utf8.count <= maxCSRBytes else { return (false, nil) }
        return (true, text)
    }

    public init(
        vendorThingID: String, thingPassword: String, thingType: String? = nil,
        firmwareVersion: String? = nil, thingProperties: JSON? = nil, layoutPosition: LayoutPosition? = .standalone,
        certificateSigningRequest: String? = nil
    ) {
        self.vendorThingID = vendorThingID
        self.thingPassword = thingPassword
        self.thingType = thingType
        self.firmwareVersion = firmwareVersion
        self.thingProperties = thingProperties
        self.layoutPosition = layoutPosition
        self.certificateSigningRequest = certificateSigningRequest
    }

    public func encode() -> JSON {
        let o = JSON.object()
        o.set("vendorThingID", string: vendorThingID)
        o.set("thingPassword", string: thingPassword)
        if let thingType { o.set("thingType", string: thingType) }
        if let firmwareVersion { o.set("firmwareVersion", string: firmwareVersion) }
        if let thingProperties { o.set("thingProperties", thingProperties) }
        if let layoutPosition { o.set(LayoutPosition.field, string: layoutPosition.rawValue) }
        if let certificateSigningRequest { o.set(Self.csrField, string: certificateSigningRequest) }
        return o
    }

    public static func decode(_ j: JSON) -> OnboardingRequest? {
        guard j.isObject, let v = j["vendorThingID"]?.stringValue, !v.isEmpty,
            let p = j["thingPassword"]?.stringValue, !p.isEmpty
        else { return nil }
        let props = j["thingProperties"]
        if let props, !props.isObject { return nil }
        let csr = certificateSigningRequest(in: j)
        guard csr.valid, case .success(let layout) = LayoutPosition.named(in: j) else { return nil }
        return OnboardingRequest(
            vendorThingID: v, thingPassword: p, thingType: j["thingType"]?.stringValue,
            firmwareVersion: j["firmwareVersion"]?.stringValue, thingProperties: props,
            layoutPosition: layout,
            certificateSigningRequest: csr.csr)
    }
}

/// The answer to onboarding: {thingID, accessToken, mqttEndpoint}.
public struct OnboardingResponse {
    public var thingID: String
    public var accessToken: String
    public var mqttEndpoint: MQTTEndpoint

    public init(thingID: String, accessToken: String, mqttEndpoint: MQTTEndpoint) {
        self.thingID = thingID
        self.accessToken = accessToken
        self.mqttEndpoint = mqttEndpoint
    }

    public func encode() -> JSON {
        let o = JSON.object()
        o.set("thingID", string: thingID)
        o.set("accessToken", string: accessToken)
        o.set("mqttEndpoint", mqttEndpoint.encode())
        return o
    }

    public static func decode(_ j: JSON) -> OnboardingResponse? {
        guard let thingID = j["thingID"]?.stringValue, Topics.isSafeLevel(thingID),
            let token = j["accessToken"]?.stringValue, !token.isEmpty,
            let ep = j["mqttEndpoint"].flatMap(MQTTEndpoint.decode)
        else { return nil }
        return OnboardingResponse(thingID: thingID, accessToken: token, mqttEndpoint: ep)
    }
}

/// What the thing stores in its storage directory after onboarding.
public struct Identity: Equatable, Sendable {
    public var appID: String
    /// Set when the thing onboarded itself; nil for a handed-over identity.
    public var vendorThingID: String?
    public var thingID: String
    public var accessToken: String
    public var endpoint: MQTTEndpoint

    public init(appID: String, vendorThingID: String?, thingID: String, accessToken: String, endpoint: MQTTEndpoint) {
        self.appID = appID
        self.vendorThingID = vendorThingID
        self.thingID = thingID
        self.accessToken = accessToken
        self.endpoint = endpoint
    }

    /// Field by field, the strings as bytes (Text/Bytes.swift).
    public static func == (a: Identity, b: Identity) -> Bool {
        a.appID.equals(b.appID) && a.vendorThingID.equals(b.vendorThingID)
            && a.thingID.equals(b.thingID) && a.accessToken.equals(b.accessToken) && a.endpoint == b.endpoint
    }

    public func encode() -> JSON {
        let o = JSON.object()
        o.set("appID", string: appID)
        if let vendorThingID { o.set("vendorThingID", string: vendorThingID) }
        o.set("thingID", string: thingID)
        o.set("accessToken", string: accessToken)
        o.set("mqttEndpoint", endpoint.encode())
        return o
    }

    public static func decode(_ j: JSON) -> Identity? {
        guard let app = j["appID"]?.stringValue, let r = OnboardingResponse.decode(j) else { return nil }
        return Identity(
            appID: app, vendorThingID: j["vendorThingID"]?.stringValue, thingID: r.thingID,
            accessToken: r.accessToken, endpoint: r.mqttEndpoint)
    }
}
