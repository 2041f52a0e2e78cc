// SPDX-License-Identifier: Apache-2.0

/// The messages of an end node's onboarding and of a gateway's end-node
/// list, as Kii Thing-IF has them (docs/GATEWAYS.md §3.2, §3.3): what the
/// gateway's library sends and reads, and what the hub's form encodes, so
/// that both write the same fields.
public struct EndNodeOnboardingRequest {
    /// The gateway's thingID (OnboardingEndNodeWithGatewayThingID) or
    /// vendorThingID (…WithGatewayVendorThingID).
    public enum Gateway: Equatable, Sendable {
        case thingID(String)
        case vendorThingID(String)

        /// The same form naming the same bytes (Text/Bytes.swift).
        public static func == (a: Gateway, b: Gateway) -> Bool {
            switch (a, b) {
            case (.thingID(let x), .thingID(let y)), (.vendorThingID(let x), .vendorThingID(let y)): return x.equals(y)
            default: return false
            }
        }
    }

    public var gateway: Gateway
    public var vendorThingID: String
    public var password: String
    /// A typed ID (user:{id} or group:{id}); nil: the gateway's owners.
    public var owner: String?
    public var thingType: String?
    public var firmwareVersion: String?
    /// A JSON object, or nil.
    public var thingProperties: JSON?

    /// The body field that names the end node: the library finds an
    /// onboarding's end node again from it when the answer comes.
    public static let vendorThingIDField = "endNodeVendorThingID"

    public init(
        gateway: Gateway, vendorThingID: String, password: String, owner: String? = nil, thingType: String? = nil,
        firmwareVersion: String? = nil, thingProperties: JSON? = nil
    ) {
        self.gateway = gateway
        self.vendorThingID = vendorThingID
        self.password = password
        self.owner = owner
        self.thingType = thingType
        self.firmwareVersion = firmwareVersion
        self.thingProperties = thingProperties
    }

    /// Where libthingif sends it over MQTT: POST things/{gw}/end-nodes
    /// under the gateway's own client ID, which no other identity may
    /// publish (Kii's gateways send it to …/onboardings, which the
    /// bootstrap identity may publish too; the hub serves both).
    public static func path(gateway: String) -> String { str("things/\(gateway)/end-nodes") }

    /// The media type of the request.
    public var mediaType: String {
        switch gateway {
        case .thingID: return MediaType.onboardingEndNodeWithGatewayThingID
        case .vendorThingID: return MediaType.onboardingEndNodeWithGatewayVendorThingID
        }
    }

    public func encode() -> JSON {
        let o = JSON.object()
        switch gateway {
        case .thingID(let v): o.set("gatewayThingID", string: v)
        case .vendorThingID(let v): o.set("gatewayVendorThingID", string: v)
        }
        o.set(Self.vendorThingIDField, string: vendorThingID)
        o.set("endNodePassword", string: password)
        if let owner { o.set("owner", string: owner) }
        if let thingType { o.set("endNodeThingType", string: thingType) }
        if let firmwareVersion { o.set("endNodeFirmwareVersion", string: firmwareVersion) }
        if let thingProperties { o.set("endNodeThingProperties", thingProperties) }
        return o
    }

    /// The end node's thingID in the framework's answer
    /// {"endNodeThingID","accessToken"}: a safe topic level, or nil.
    public static func thingID(inAnswer body: [UInt8]) -> String? {
        guard case .success(let j) = JSON.parse(body), let id = j["endNodeThingID"]?.stringValue,
            Topics.isSafeLevel(id)
        else { return nil }
        return id
    }
}

/// One page of GET things/{gw}/end-nodes:
/// {"results":[{"thingID","vendorThingID",…}],"nextPaginationKey"?}.
public struct EndNodeListPage {
    public var entries: [(thingID: String, vendorThingID: String)]
    public var nextPaginationKey: String?

    /// The page's entries whose thingID is a safe topic level and whose
    /// vendorThingID is not empty; nil when the body is not such a page.
    public static func decode(_ body: [UInt8]) -> EndNodeListPage? {
        guard case .success(let j) = JSON.parse(body), let results = j["results"], results.isArray else { return nil }
        var entries: [(thingID: String, vendorThingID: String)] = []
        for r in results.elements {
            guard let id = r["thingID"]?.stringValue, Topics.isSafeLevel(id),
                let v = r["vendorThingID"]?.stringValue, !v.isEmpty
            else { continue }
            entries.append((id, v))
        }
        let next = j["nextPaginationKey"]?.stringValue
        return EndNodeListPage(entries: entries, nextPaginationKey: next.flatMap { $0.isEmpty ? nil : $0 })
    }
}
