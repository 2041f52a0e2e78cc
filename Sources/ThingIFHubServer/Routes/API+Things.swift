// SPDX-License-Identifier: Apache-2.0

// Things: onboarding, enrollment import, deletion.

import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdCore
import Logging
import NIOCore
import ThingIF
import ThingIFHub

extension API {
    /// Onboarding (the owner's forms, an end node's and the thing's own), enrollment
    /// import, deletion (Thing-IF's target path and Kii's thing resource).
    var thingRoutes: RouteCollection<APIContext> {
        let r = RouteCollection(context: APIContext.self)
        r.post("/thing-if/apps/{appID}/onboardings") { try await onboard($0, $1) }
        r.post("/api/apps/{appID}/things/import") { try await importThings($0, $1) }
        r.owned(self, .target).delete("/api/apps/{appID}/targets/{target}") { try await deleteThing($0, $1) }
        r.owned(self, .thingID(kiiNotFound: false)).delete("/api/apps/{appID}/things/{thingID}") {
            try await deleteThing($0, $1)
        }
        let kii = r.owned(self, .thingID(kiiNotFound: true))
        kii.get("/api/apps/{appID}/things/{thingID}/vendor-thing-id") { try await vendorThingID($0, $1) }
        kii.put("/api/apps/{appID}/things/{thingID}/vendor-thing-id") { try await vendorThingID($0, $1) }
        return r
    }

    // MARK: things

    /// Kii's GET and PUT …/things/{thingID}/vendor-thing-id, by an owner
    /// (VendorThingIDUpdateRequest: {"_vendorThingID","_password"}, 204).
    func vendorThingID(_ request: Request, _ context: APIContext) async throws -> Response {
        let owned = try context.owner()
        if request.method == .get { return Reply.json(200, try value(hub.app.vendorThingID(of: owned))) }
        let body = try await object(request)
        try value(try await costly { [hub] in hub.app.setVendorThingID(of: owned, body: body) })
        return Reply.noContent()
    }

    /// The operator's enrollment: POST …/things/import with
    /// `Authorization: Bearer <adminToken>` and {"things":[{"vendorThingID",
    /// "thingPassword","thingType"?,"firmwareVersion"?}…]} (at most 100):
    /// {"imported":n,"existing":n,"failed":[{"vendorThingID","errorCode","message"}]}.
    func importThings(_ request: Request, _ context: APIContext) async throws -> Response {
        try requireAdmin(request, context, route: "POST …/things/import", off: "enrollment import")
        let body = try await object(request)
        guard let list = body["things"], list.isArray, (1...100).contains(list.elements.count) else {
            throw HubError.invalid("\"things\" must be an array of 1 to 100 objects", field: "things")
        }
        var rows: [(String, String, String?, String?)] = []
        for e in list.elements {
            guard e.isObject else { throw HubError.invalid("each of \"things\" must be an object", field: "things") }
            rows.append(
                (
                    try FormFields.requiredString(e, "vendorThingID"),
                    try FormFields.requiredString(e, "thingPassword"),
                    try FormFields.optionalString(e, "thingType"), try FormFields.optionalString(e, "firmwareVersion")
                ))
        }
        let sendable = rows.map { Enrollment(vendorThingID: $0.0, password: $0.1, thingType: $0.2, firmware: $0.3) }
        let outcomes = try await costly { [hub] in
            sendable.map {
                hub.app.enroll(
                    vendorThingID: $0.vendorThingID, password: $0.password, thingType: $0.thingType,
                    firmwareVersion: $0.firmware)
            }
        }
        var imported = 0
        var existing = 0
        let failed = JSON.array()
        for (row, outcome) in zip(sendable, outcomes) {
            switch outcome {
            case .success(true): imported += 1
            case .success(false): existing += 1
            case .failure(let e):
                let f = Reply.object([
                    ("vendorThingID", row.vendorThingID), ("errorCode", e.code), ("message", e.message)
                ])
                failed.append(f)
            }
        }
        let o = JSON.object()
        o.set("imported", .int(imported))
        o.set("existing", .int(existing))
        o.set("failed", failed)
        return Reply.json(200, o)
    }

    struct Enrollment: Sendable {
        var vendorThingID: String
        var password: String
        var thingType: String?
        var firmware: String?
    }

    func onboard(_ request: Request, _ context: APIContext) async throws -> Response {
        // Onboarding by the thing itself (vendorThingID and password, no
        // user token): Kii's thing SDKs call this path with that media type.
        if request.headers[.contentType].map(MediaType.isOnboardingByThing) == true {
            return try await thingRequest(request, context, .thingIF)
        }
        // Kii's end-node forms with a gateway's own token: the gateway
        // onboards an end node onto itself, as over MQTT (ThingRequests);
        // its token's budget, not the anonymous one of a thing without an
        // identity.
        if let type = request.headers[.contentType], MediaType.isOnboardingEndNode(type), isThingToken(request) {
            return try await thingRequest(request, context, .thingIF, costlyWork: true)
        }
        let user = try user(request, context)
        // Kii's end-node forms name a gateway and no thing of the owner's
        // form: read before that form, which would refuse their fields.
        if let type = request.headers[.contentType], MediaType.isOnboardingEndNode(type) {
            return try await onboardEndNode(request, user: user, contentType: type)
        }
        let body = try await object(request)
        // Kii's two forms: by vendorThingID (OnboardingWithVendorThingIDByOwner) or,
        // for a thing that onboarded itself, by its thingID (OnboardingWithThingIDByOwner).
        let form = try value(
            OnboardingForm.parse(
                body,
                byThingID: request.headers[.contentType].map {
                    MediaType.names($0, MediaType.onboardingWithThingIDByOwner)
                } == true))
        let vendorThingID: String
        switch form.thing {
        case .vendorThingID(let v): vendorThingID = v
        case .thingID(let tid):
            vendorThingID = try value(hub.app.vendorThingID(ofThing: tid))
        }
        let outcome = try await costly { [hub] () -> Result<(ThingRecord, MQTTEndpoint?), HubError> in
            hub.app.onboardByOwner(
                user: user, vendorThingID: vendorThingID, password: form.password, owner: form.owner,
                thingType: form.thingType, firmwareVersion: form.firmwareVersion,
                dataGroupingInterval: form.dataGroupingInterval, layoutPosition: form.layoutPosition
            ).map { ($0, hub.app.handover(for: $0)) }
        }
        let (t, endpoint) = try value(outcome)
        let o = Reply.object([("thingID", t.thingID), ("accessToken", t.accessToken)])
        if let ep = endpoint { o.set("mqttEndpoint", ep.encode()) }
        return Reply.json(200, o)
    }

    /// Kii's OnboardingEndNodeWithGatewayThingID or …VendorThingID by an
    /// owner of the gateway (docs/GATEWAYS.md §3.2): 200
    /// {"endNodeThingID","accessToken"}. On the costly pool, as every
    /// onboarding: the store hashes or checks the end node's password.
    func onboardEndNode(_ request: Request, user: UserRecord, contentType: String) async throws -> Response {
        let body = try await object(request)
        let form = try value(
            EndNodeOnboardingForm.parse(
                body,
                byGatewayVendorThingID: MediaType.names(
                    contentType, MediaType.onboardingEndNodeWithGatewayVendorThingID)))
        let t = try value(try await costly { [hub] in hub.app.onboardEndNode(user: user, form: form) })
        return Reply.json(200, Reply.object([("endNodeThingID", t.thingID), ("accessToken", t.accessToken)]))
    }

    /// DELETE …/targets/thing:{thingID} or Kii's …/things/{thingID}: the
    /// owner deletes the thing and what belongs to it (ThingRemoval.remove); 204.
    func deleteThing(_ request: Request, _ context: APIContext) async throws -> Response {
        try value(hub.app.deleteThing(try context.owner()))
        return Reply.noContent()
    }

}
