// SPDX-License-Identifier: Apache-2.0

import ThingIF

/// Deleting a thing (DELETE …/targets/thing:{thingID}; README "Deleting a
/// thing"): the store's rows, the hub's own memory of it, its broker
/// identities and the retained messages it leaves on the broker.
extension FrameworkSide {
    /// Deletes a thing that `user` owns (directly or through a group): 404
    /// for an unknown thing or another owner's, as for every thing call.
    /// Kii's user deletion, by the user itself: UserStore.deleteUser (its
    /// tokens, installations, ownerships and memberships), then the broker
    /// logins of its MQTT installations. The deleted installations are
    /// returned so that the server closes their event streams.
    public func deleteUser(_ user: UserRecord) -> Result<[AppInstallation], HubError> {
        guard let installations = store.deleteUser(id: user.userID) else { return .failure(.storage) }
        for i in installations where i.kind == .mqtt { app.removePushCredentials(installationID: i.installationID) }
        return .success(installations)
    }

    public func deleteThing(user: UserRecord, thingID: String) -> Result<Void, HubError> {
        app.ownedThing(user: user, thingID: thingID).flatMap { removeThing($0) }
    }

    /// In this order:
    /// 1. the broker deletes the dynamic-security client and role of each
    ///    of its MQTT installations (the plugin disconnects a connected one).
    ///    A broker that does not confirm stops the deletion here with 503:
    ///    the thing is still there, and the call can be repeated;
    /// 2. the store deletes the thing and what belongs to it
    ///    (ThingStore.deleteThing): its tokens stop working, its requests
    ///    find no thing, and its certificates move to the revoked list;
    ///    the hub writes the things' CRL and tells the broker (publishCRL);
    /// 3. the hub forgets its online status (things_online) and schedules;
    /// 4. empty retained messages clear its automation config and status
    ///    topics (after 1: the will of a disconnected thing comes first);
    /// 5. Home Assistant's discovery config, state and availability are
    ///    cleared the same way, which makes Home Assistant remove the entity.
    func removeThing(_ t: ThingRecord) -> Result<Void, HubError> {
        let topics = t.installations.values.sorted()
        if let admin {
            for topic in topics where !admin.remove(username: topic, role: BrokerAdmin.thingRole(topic: topic)) {
                return .failure(
                    HubError(
                        503, "BROKER_UNAVAILABLE",
                        "the broker did not confirm removing the client \(topic); \(t.thingID) is not deleted, try again"
                    ))
            }
        }
        let triggers = store.triggers(thingID: t.thingID)
        guard store.deleteThing(id: t.thingID) else { return .failure(.storage) }
        publishCRL()
        let online = delivery.forget(thingID: t.thingID, topics: topics)
        metrics.setOnline(online)
        for trigger in triggers { triggerEngine.reschedule(trigger.triggerID) }
        for topic in topics {
            _ = publishRetained(topic: Topics.config(clientID: topic), payload: [])
            _ = publishRetained(topic: Topics.status(clientID: topic), payload: [])
        }
        homeAssistant.removed(thingID: t.thingID)
        onEvent?("\(t.thingID) deleted (\(topics.count) MQTT installation(s))")
        return .success(())
    }

    /// A status message of a client ID that no thing has: when this hub
    /// still counts a thing that went online with it, another hub sharing
    /// the store deleted that thing (and cleared its status topic), so this
    /// hub forgets it too and `things_online` stays right on every hub.
    func forgetDeleted(clientID: String) {
        let candidates = delivery.things(onTopic: clientID)
        let gone = candidates.filter { store.thing(id: $0) == nil }
        guard !gone.isEmpty else { return }
        let online = delivery.forget(thingIDs: gone)
        metrics.setOnline(online)
        for tid in gone { onEvent?("\(tid) was deleted by another hub") }
    }
}
