// SPDX-License-Identifier: Apache-2.0

import ThingIF
import ThingIFHub

/// The app calls on one thing as a test makes them: the ownership check
/// first (`ownedThing`, what the REST layer's request context resolves
/// once per request), then the call with its answer, so that a test of a
/// caller who does not own the thing sees the 404 the route answers.
extension AppAPI {
    func postCommand(user: UserRecord, thingID: String, form: JSON, installationID: String?) -> Result<
        CommandRecord, HubError
    > {
        ownedThing(user: user, thingID: thingID).flatMap {
            postCommand(on: $0, form: form, installationID: installationID)
        }
    }

    func listCommands(user: UserRecord, thingID: String, paginationKey: String?, bestEffortLimit: Int?) -> Result<
        (commands: [CommandRecord], next: String?), HubError
    > {
        ownedThing(user: user, thingID: thingID).flatMap {
            listCommands(on: $0, paginationKey: paginationKey, bestEffortLimit: bestEffortLimit)
        }
    }

    func stateHistory(user: UserRecord, thingID: String, from: Int64, to: Int64) -> Result<
        (groups: [StateGroup], next: String?), HubError
    > {
        ownedThing(user: user, thingID: thingID).flatMap { stateHistory(on: $0, from: from, to: to) }
    }

    func deleteThing(user: UserRecord, thingID: String) -> Result<Void, HubError> {
        ownedThing(user: user, thingID: thingID).flatMap { deleteThing($0) }
    }

    func removeEndNode(user: UserRecord, gatewayThingID: String, endNodeThingID: String) -> Result<Void, HubError> {
        ownedThing(user: user, thingID: gatewayThingID).flatMap {
            removeEndNode(of: $0, endNodeThingID: endNodeThingID)
        }
    }

    func createTrigger(user: UserRecord, thingID: String, body: JSON) -> Result<ServerTriggerRecord, HubError> {
        ownedThing(user: user, thingID: thingID).flatMap { createTrigger(on: $0, body: body) }
    }

    func listTriggers(user: UserRecord, thingID: String) -> Result<[ServerTriggerRecord], HubError> {
        ownedThing(user: user, thingID: thingID).map { listTriggers(on: $0) }
    }

    func getTrigger(user: UserRecord, thingID: String, triggerID: String) -> Result<ServerTriggerRecord, HubError> {
        ownedThing(user: user, thingID: thingID).flatMap { getTrigger(on: $0, triggerID: triggerID) }
    }

    func setTriggerEnabled(user: UserRecord, thingID: String, triggerID: String, enabled: Bool) -> Result<
        Void, HubError
    > {
        ownedThing(user: user, thingID: thingID).flatMap {
            setTriggerEnabled(on: $0, triggerID: triggerID, enabled: enabled)
        }
    }

    func deleteTrigger(user: UserRecord, thingID: String, triggerID: String) -> Result<Void, HubError> {
        ownedThing(user: user, thingID: thingID).flatMap { deleteTrigger(on: $0, triggerID: triggerID) }
    }
}
