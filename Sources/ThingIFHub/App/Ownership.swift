// SPDX-License-Identifier: Apache-2.0

/// The ownership rule of the app's API: a user acts as itself and as the
/// groups it belongs to, and a thing is the user's when one of those owns
/// it. It needs the store alone, so that the components given the store
/// and not the hub (AutomationConfigs) check it as the app's rules
/// (AppAPI) do.
struct Ownership {
    let store: any ThingStore & UserStore

    /// The typed IDs a user acts as: "user:{id}" and "group:{id}" of its groups.
    func identities(of user: UserRecord) -> [String] {
        ["user:\(user.userID)"] + store.groups(ofUser: user.userID).map { "group:\($0.groupID)" }
    }

    /// The thing when `user` owns it directly or through a group; otherwise
    /// 404 (an unknown thing and another owner's thing look the same).
    func ownedThing(user: UserRecord, thingID: String) -> Result<OwnedThing, HubError> {
        owned(store.thing(id: thingID), user: user, thingID: thingID)
    }

    /// `ownedThing` for the thing `thingID` as the caller read it (nil:
    /// unknown). The user's groups are read only when the thing is not the
    /// user's own (a read on every command of the REST API otherwise).
    func owned(_ thing: ThingRecord?, user: UserRecord, thingID: String) -> Result<OwnedThing, HubError> {
        guard let t = thing,
            t.owners.contains("user:\(user.userID)") || !Set(t.owners).isDisjoint(with: identities(of: user))
        else {
            return .failure(.thingNotFound(thingID))
        }
        return .success(OwnedThing(user: user, thing: t))
    }
}

/// A thing and a caller who owns it, as the ownership rule found them: what
/// every app call on one thing takes, so that none of them reads or checks
/// ownership again. Only `Ownership` makes one (its initialiser is the
/// module's), once per request: the REST layer resolves it before the
/// handler runs (its request context), an in-process caller with
/// `AppAPI.ownedThing(user:thingID:)`. The record is the thing as read
/// then; a call that changes the thing reads the store again.
public struct OwnedThing: Sendable {
    public let user: UserRecord
    public let thing: ThingRecord
    public var thingID: String { thing.thingID }

    init(user: UserRecord, thing: ThingRecord) {
        self.user = user
        self.thing = thing
    }
}
