// SPDX-License-Identifier: Apache-2.0

import HTTPTypes
import Hummingbird
import NIOCore
import ThingIF
import ThingIFHub

/// GET /metrics: the hub's Prometheus metrics in the text exposition format.
/// Open by default (operators scrape it from their own network); with a
/// metricsToken, only `Authorization: Bearer <token>` gets them.
enum MetricsRoute {
    static let contentType = "text/plain; version=0.0.4; charset=utf-8"

    static func response(hub: FrameworkSide, token: String?, authorization: String?) -> Response {
        if let token, !token.isEmpty {
            let given = authorization.flatMap(BearerToken.parse)
            guard let given, LibCrypto.equal(Array(given.utf8), Array(token.utf8)) else {
                var r = Reply.error(
                    HubError(401, "UNAUTHORIZED", "GET /metrics needs Authorization: Bearer <metricsToken>"))
                r.headers[.wwwAuthenticate] = "Bearer"
                return r
            }
        }
        // Counted rather than kept (a gateway's Will or deletion moves many at
        // once), and at most once a second.
        hub.metrics.countEndNodes(
            online: { hub.presence.endNodesOnline() }, total: { hub.store.endNodeTotal() },
            rolloutMembers: { hub.store.rolloutMemberStates() }, updateJobs: { hub.store.updateJobStatuses() })
        var headers = HTTPFields()
        headers[.contentType] = contentType
        return Response(
            status: .ok, headers: headers, body: .init(byteBuffer: ByteBuffer(bytes: hub.metrics.exposition())))
    }
}
