// SPDX-License-Identifier: Apache-2.0

import ThingIF

/// The thing's state uploads: authorised, then stored, kept in the
/// history and told to Home Assistant and the triggers after the lane's
/// commit (StateUploads). Given the joined writes, the metrics, the
/// uploads' component and the requests' authorization.
final class StateRequests: @unchecked Sendable {
    let fastPaths: FastPaths
    let metrics: HubMetrics
    let stateUploads: StateUploads
    let authorization: RequestAuthorization

    init(fastPaths: FastPaths, metrics: HubMetrics, stateUploads: StateUploads, authorization: RequestAuthorization) {
        self.fastPaths = fastPaths
        self.metrics = metrics
        self.stateUploads = stateUploads
        self.authorization = authorization
    }

    /// A state upload to `target`. A whole state (PUT) over MQTT goes first
    /// to the store's `putState` (StateWriteFastPaths), which authorises
    /// and writes in one statement (one round trip on PostgreSQL); whatever
    /// it does not write (a refusal, a PATCH, a store without it) is authorised
    /// and written as usual, which also answers the refusals. Not over
    /// HTTP, where anyone may send a token: a refused one would cost that
    /// statement and then the usual read.
    func request(_ req: KiiRequest, target: String, clientID: String?) -> KiiResponse {
        // Parsed once, for either path; a body that is no object is
        // answered after authorisation, as every refusal of the body is.
        guard case .success(let j) = JSON.parse(req.body), j.isObject else {
            return authorization.forTarget(req, target, clientID: clientID) { _ in
                .refusal(400, "INVALID_INPUT_DATA", "the state must be a JSON object")
            }
        }
        let upload = j.dump()
        // The fused write checks no trait definitions: taken only while the
        // registry holds no firmware version (TraitRegistry.maybeInUse).
        if req.method == "PUT", clientID != nil, let stateWrites = fastPaths.stateWrites,
            !stateUploads.traits.maybeInUse(),
            let tid = authorization.thingID(fromTarget: target), let token = req.bearerToken
        {
            let merged = StateMerge.apply(method: "PUT", upload: upload, to: nil)
            let put = metrics.timed("applyState") {
                stateWrites.putState(
                    accessToken: token, thingID: tid, clientID: clientID, upload: upload, state: merged,
                    at: Platform.epochMs())
            }
            switch put {
            case .found(let p): return stateUploads.stored(thing: p.thing, p.write)
            case .failed: return .storageFailed
            case .notFound: break
            }
        }
        return authorization.forTarget(req, target, clientID: clientID) {
            state(method: req.method, upload: upload, thing: $0)
        }
    }

    /// A state upload (`upload`: the body's object as dumped) by `thing`,
    /// its record as authorisation read it (StateUploads).
    func state(method: String, upload: String, thing: ThingRecord) -> KiiResponse {
        stateUploads.store(method: method, upload: upload, thing: thing)
    }

}
