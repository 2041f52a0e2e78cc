// SPDX-License-Identifier: Apache-2.0

import ThingIF

/// A state upload stored, whoever sent it: the thing itself (over MQTT or
/// HTTP, StateRequests) or an owner (AppAPI.uploadState).
/// Written in one call (the state, its history sample and whether the
/// thing has an enabled trigger); Home Assistant's state and the triggers'
/// evaluation wait for the write's commit (AfterCommit).
final class StateUploads: @unchecked Sendable {
    let fastPaths: FastPaths
    let metrics: HubMetrics
    let triggerEngine: TriggerEngine
    let homeAssistant: HomeAssistant
    let events: HubEvents
    /// The trait registry: where the thing's type and firmware version have
    /// an entry, an upload must fit it (docs/decisions/kii-trait-registry.md).
    let traits: TraitRegistry

    init(
        fastPaths: FastPaths, metrics: HubMetrics, triggerEngine: TriggerEngine, homeAssistant: HomeAssistant,
        events: HubEvents, traits: TraitRegistry
    ) {
        self.fastPaths = fastPaths
        self.metrics = metrics
        self.triggerEngine = triggerEngine
        self.homeAssistant = homeAssistant
        self.events = events
        self.traits = traits
    }

    /// A state upload (`upload`: the body's object as dumped) by `thing`,
    /// its record as authorisation read it: its state then is the old state
    /// the triggers compare with.
    func store(method: String, upload: String, thing: ThingRecord) -> KiiResponse {
        // A field of the wrong type is refused before anything is stored
        // (parsed only while the registry may hold an entry).
        if traits.maybeInUse(), case .success(let j) = JSON.parse(upload),
            let refusal = traits.check(state: j, for: thing)
        {
            return .refusal(refusal)
        }
        guard
            let written = metrics.timed(
                "applyState",
                {
                    fastPaths.applyState(
                        thingID: thing.thingID, method: method, upload: upload, at: Platform.epochMs(),
                        after: thing.state)
                })
        else {
            return .refusal(.storage)
        }
        return stored(thing: thing, written)
    }

    /// After a state upload's write (the store's or its fused putState): `thing` as it was before (its state is
    /// the old state the triggers compare with, nil before its first upload).
    func stored(thing: ThingRecord, _ written: StateWrite) -> KiiResponse {
        let tid = thing.thingID
        let old = thing.state
        let merged = written.state
        // The triggers read in the upload's transaction; told and acted on
        // once stored: after the lane's commit (AfterCommit).
        let triggers = written.hasEnabledTrigger == false ? [] : triggerEngine.enabledTriggers(thingID: tid)
        AfterCommit.later {
            self.events.event("state of \(tid): \(merged)")
            self.homeAssistant.stateChanged(thing: thing, merged: merged)
            self.triggerEngine.stateChanged(thingID: tid, old: old, new: merged, triggers: triggers)
        }
        // Kii answers 201 to a thing's first upload, 204 to the others
        // (Kii's REST guide, "State Registration and Retrieval"). Two first
        // uploads at once may both be answered 201.
        return .answer(old == nil ? 201 : 204)
    }
}
