// SPDX-License-Identifier: Apache-2.0

import ThingIF

/// Kii's end-node onboarding on …/onboardings over MQTT: told apart on
/// libmosquitto's thread by the head of its payload, then triaged on a
/// thread of its own (`accept`), before any budget is spent. What the
/// gateway's calls then do is EndNodeRequests'.
extension ThingRequests {
    /// Whether the head of an MQTT request's payload (up to its blank line,
    /// at most `headPeek` bytes) holds "OnboardingEndNode" in any ASCII
    /// case: how `accept` tells a gateway's end-node onboarding from a
    /// thing's on libmosquitto's thread, without decoding or allocating.
    /// It may be wrong only towards the end-node path, whose full check on
    /// the pool answers 415 then.
    static func headNamesEndNode(_ payload: [UInt8]) -> Bool {
        let needle = Array("onboardingendnode".utf8)
        let end = min(payload.count, headPeek)
        guard end >= needle.count else { return false }
        var i = 0
        while i + needle.count <= end {
            // The blank line ends the head.
            if i + 3 < end, payload[i] == 13, payload[i + 1] == 10, payload[i + 2] == 13, payload[i + 3] == 10 {
                return false
            }
            var j = 0
            while j < needle.count, payload[i + j] | 0x20 == needle[j] { j += 1 }
            if j == needle.count { return true }
            i += 1
        }
        return false
    }

    /// Kii's end-node onboarding on …/onboardings over MQTT, on the
    /// end-node triage's thread (`accept`): the token is checked first. The
    /// named gateway's own token from one of its client IDs is served as on
    /// its lane, spending that client ID's budget (`serve`), its KDF on the
    /// costly pool. Anything else (no token, another's, a client ID that is
    /// not the token's, a body that is no end-node onboarding) spends the
    /// refusals' budget of its own, never a gateway's: answered within it,
    /// dropped and counted beyond it
    /// (`refused_total{defence="end_node_onboarding_budget"}`).
    func triageEndNodeOnboarding(_ inbound: Inbound, _ t: Topics.ParsedRequest) {
        let m = inbound.message
        guard Topics.isSafeLevel(t.clientID), !t.clientID.hasPrefix(Topics.claimPrefix) else { return }
        var gateway: ThingRecord?
        var refusal: KiiResponse?
        if t.appID != options.appID {
            refusal = .refusal(404, "APP_NOT_FOUND", "app \(t.appID) is not served here")
        } else if let req = KiiRequest.decode(m.payload) {
            if !EndNodeRequests.isEndNodeOnboarding(req) {
                refusal = .refusal(415, "UNSUPPORTED_MEDIA_TYPE", EndNodeRequests.mediaTypes)
            } else {
                switch authorization.authenticate(req, overHTTP: false) {
                case .failure(let r): refusal = r
                case .success(let g) where !g.installations.values.contains(t.clientID):
                    refusal = .refusal(
                        403, "FORBIDDEN", "client \(t.clientID) is not an MQTT installation of \(g.thingID)")
                case .success(let g): gateway = g
                }
            }
        }
        // A request that does not decode: `serve` answers its 400, within the refusals' budget.
        if gateway == nil {
            guard endNodeRefusalLimiter.allow("end-node-onboarding", now: Platform.nowMs()) else {
                metrics.refused("end_node_onboarding_budget")
                return
            }
        }
        serve(
            m, clientID: t.clientID, route: .onboarding, logPath: t.path,
            replyTopic: Topics.response(clientID: t.clientID), spendsBudget: gateway != nil
        ) { req in
            if let refusal { return .now(refusal) }
            guard let gateway else { return .now(.refusal(400, "INVALID_INPUT_DATA", "not an end-node onboarding")) }
            return handlers.endNodes.onboarding(req, by: gateway, clientID: t.clientID)
        }
    }

}
