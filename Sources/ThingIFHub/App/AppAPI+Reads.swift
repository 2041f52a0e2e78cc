// SPDX-License-Identifier: Apache-2.0

import ThingIF

/// What the REST routes read of the hub besides the app's calls proper,
/// behind the same door: before, the routes went past the app API into
/// the store, delivery and the installations for these (issue 57).
extension AppAPI {
    /// The user's own app installation `id`; 404 INSTALLATION_NOT_FOUND for
    /// another's or none, as for a read of it.
    public func appInstallation(user: UserRecord, id: String) -> Result<AppInstallation, HubError> {
        guard let i = store.appInstallation(id: id), i.userID == user.userID else {
            return .failure(.installationNotFound(id))
        }
        return .success(i)
    }

    /// The user a single-use event ticket was issued to (nil: none any more).
    public func user(id: String) -> UserRecord? { store.user(id: id) }

    /// Whether `token` is a live thing's (a thing's own call on a route an
    /// owner may also call), not a user's.
    public func isThingToken(_ token: String) -> Bool {
        !token.isEmpty && store.thing(accessToken: token) != nil
    }

    /// The vendorThingID of the thing `thingID`, for an owner's onboarding
    /// by thingID (Kii's OnboardingWithThingIDByOwner).
    public func vendorThingID(ofThing thingID: String) -> Result<String, HubError> {
        guard let v = store.thing(id: thingID)?.vendorThingID else { return .failure(.thingIDNotFound(thingID)) }
        return .success(v)
    }

    /// The MQTT endpoint an owner's onboarding hands over to the app for the
    /// thing (ThingInstallations.handover), nil when there is none to hand.
    public func handover(for t: ThingRecord) -> MQTTEndpoint? { installations.handover(for: t) }

    /// How long a user's token lives (the store's secrets).
    public var userTokenLifetime: Int64 { store.secrets.userTokenLifetime }

    /// A cancel sent to the thing (`startCancel` answered `.waiting`): its
    /// outcome once the thing answered (CommandLifecycle.cancelAnswer),
    /// waiting for it at most `timeoutMs` (woken by the command's end,
    /// here or on another hub of the same store: CommandEnds); nil when the
    /// thing has not answered by then; `pendingCancel` is the command as it is then.
    public func cancelAnswer(commandID: String, waitingMs timeoutMs: Int64) async -> Result<CommandRecord, HubError>? {
        let ends = delivery.notifications.ends
        await ends.wait(for: commandID, timeoutMs: timeoutMs) { delivery.cancelAnswer(commandID) != nil }
        return delivery.cancelAnswer(commandID)
    }

    /// The command whose cancel still waits for the thing, as it is now.
    public func pendingCancel(commandID: String) -> Result<CommandRecord, HubError> {
        store.command(id: commandID).map { .success($0) } ?? .failure(.storage)
    }
}
