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
    func ownedThing(user: UserRecord, thingID: String) -> Result<ThingRecord, HubError> {
        owned(store.thing(id: thingID), user: user, thingID: thingID)
    }

    /// `ownedThing` for the thing `thingID` as the caller read it (nil:
    /// unknown). The user's groups are read only when the thing is not the
    /// user's own (a read on every command of the REST API otherwise).
    func owned(_ thing: ThingRecord?, user: UserRecord, thingID: String) -> Result<ThingRecord, HubError> {
        guard let t = thing,
            t.owners.contains("user:\(user.userID)") || !Set(t.owners).isDisjoint(with: identities(of: user))
        else {
            return .failure(.thingNotFound(thingID))
        }
        return .success(t)
    }
}
