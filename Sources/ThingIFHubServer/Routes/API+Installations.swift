// SPDX-License-Identifier: Apache-2.0

// App installations and their event streams.

import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdCore
import Logging
import NIOCore
import ThingIF
import ThingIFHub

extension API {
    /// POST/DELETE …/installations, their event streams and tickets, and a
    /// thing's GET …/installations/{id}/mqtt-endpoint (its own call).
    var installationRoutes: RouteCollection<APIContext> {
        let r = RouteCollection(context: APIContext.self)
        let i = "/api/apps/{appID}/installations"
        r.post(RouterPath(i)) { try await createInstallation($0, $1) }
        r.delete(RouterPath("\(i)/{installationID}")) { try await deleteInstallation($0, $1) }
        r.get(RouterPath("\(i)/{installationID}/events")) { try await events($0, $1) }
        r.post(RouterPath("\(i)/{installationID}/events/tickets")) { try await eventTicket($0, $1) }
        r.get(RouterPath("\(i)/{installationID}/mqtt-endpoint")) { try await thingRequest($0, $1, .kii) }
        return r
    }

    // MARK: installations and events

    func createInstallation(_ request: Request, _ context: APIContext) async throws -> Response {
        // A thing's MQTT installation (Kii's thing SDKs), with its token.
        if isThingToken(request) { return try await thingRequest(request, context, .kii) }
        let user = try user(request, context)
        let body = try await object(request)
        let type = try FormFields.installationType(body)
        guard let kind = AppInstallation.Kind(rawValue: type) else {
            throw HubError.invalid(
                "deviceType must be MQTT, SSE, WEBHOOK, IOS, ANDROID or JPUSH, not \(type)",
                field: body["deviceType"] != nil ? "deviceType" : "installationType")
        }
        var url = try FormFields.optionalString(body, "webhookURL")
        if !kind.isDelivered {
            // Kii's installPush: the push service's token, 1 to 4096 bytes.
            let token = try FormFields.requiredString(body, "installationRegistrationID")
            guard (1...4096).contains(token.utf8.count), url == nil else {
                throw HubError.invalid(
                    "installationRegistrationID must be 1 to 4096 bytes, and no webhookURL",
                    field: url == nil ? "installationRegistrationID" : "webhookURL")
            }
            url = token
        }
        let i = try value(hub.app.addAppInstallation(user: user, kind: kind, webhookURL: url))
        let o = Reply.object([("installationID", i.installationID)])
        if kind == .mqtt {
            // Kii's KiiMqttInstallationResponse carries it too.
            o.set("installationRegistrationID", string: i.installationID)
        }
        if kind == .mqtt, let topic = i.target {
            o.set("mqttTopic", string: topic)
            // Where and as whom the app reads its notifications: a broker
            // client allowed only to subscribe to this topic.
            if let creds = try await costly({ [hub] in hub.app.pushCredentials(i) }) {
                let b = hub.app.advertisedBroker
                let ep = Reply.object([
                    ("host", b.host), ("username", creds.username), ("password", creds.password),
                    ("clientID", creds.username), ("mqttTopic", topic)
                ])
                ep.set("portTCP", JSON.int(b.port))
                ep.set("portSSL", JSON.int(b.tlsPort))
                o.set("mqttEndpoint", ep)
            }
        }
        return Reply.json(201, o)
    }

    func deleteInstallation(_ request: Request, _ context: APIContext) async throws -> Response {
        let user = try user(request, context)
        let id = try param(context, "installationID")
        guard hub.app.removeAppInstallation(user: user, installationID: id) else {
            throw HubError.installationNotFound(id)
        }
        hub.notifications.streams.closeInstallation(id)
        hub.app.removePushCredentials(installationID: id)
        return Reply.noContent()
    }

    /// The event stream: bearer token, or `?ticket=` from POST …/events/tickets.
    func events(_ request: Request, _ context: APIContext) async throws -> Response {
        let user = try eventsUser(request, context)
        let id = try param(context, "installationID")
        let i = try value(hub.app.appInstallation(user: user, id: id))
        guard i.kind == .sse else { throw HubError.invalid("installation \(id) is \(i.kind.rawValue), not SSE") }
        let streams = hub.notifications.streams
        let (streamID, stream) = streams.open(id, keepaliveSeconds: HTTPLimits.sseKeepaliveSeconds)
        var headers = HTTPFields()
        headers[.contentType] = "text/event-stream"
        headers[.cacheControl] = "no-cache"
        return Response(
            status: .ok, headers: headers,
            body: ResponseBody { writer in
                defer { streams.remove(id, streamID) }
                for await chunk in stream {
                    try await writer.write(ByteBuffer(string: chunk))
                }
                try await writer.finish(nil)
            })
    }

}
