// SPDX-License-Identifier: Apache-2.0

import ThingIF

/// The answers to a thing's requests, as Kii frames them: a JSON body (or
/// none) and, for a refusal, HubError's {"errorCode","message"} body.
extension KiiResponse {
    static func refusal(_ status: Int, _ code: String, _ message: String) -> KiiResponse {
        refusal(HubError(status, code, message))
    }

    static func refusal(_ e: HubError) -> KiiResponse {
        KiiResponse(status: e.status, headers: [("Content-Type", MediaType.json)], body: e.body.dumpBytes())
    }

    static func answer(_ status: Int, _ body: JSON? = nil) -> KiiResponse {
        guard let body else { return KiiResponse(status: status) }
        return KiiResponse(status: status, headers: [("Content-Type", MediaType.json)], body: body.dumpBytes())
    }

    /// The answer to a thing's request when the store failed: a 500, which
    /// the thing sends again after its request timeout (a 4xx it drops).
    static var storageFailed: KiiResponse { refusal(.storage) }
}
