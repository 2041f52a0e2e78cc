// SPDX-License-Identifier: Apache-2.0

import ThingIF

/// One group of the state history: the samples whose time falls in
/// [from, to), where the range is one data grouping interval.
public struct StateGroup: Sendable {
    public var from: Int64
    public var to: Int64
    public var samples: [StateSample]
}

/// The app side of the framework: what the REST API (ThingIFHubServer)
/// calls. Authentication of the caller is the REST layer's job; these
/// methods check ownership.
extension FrameworkSide {
    // MARK: users and groups

    /// A pseudo user (no loginName) or a normal user (loginName + password).
    public func createUser(loginName: String?, password: String?) -> Result<UserRecord, HubError> {
        appAPI.createUser(loginName: loginName, password: password)
    }

    /// A normal user's token for its loginName and password.
    public func login(loginName: String, password: String) -> Result<UserRecord, HubError> {
        appAPI.login(loginName: loginName, password: password)
    }

    /// The user a bearer token belongs to; nil for an unknown token or a thing's token.
    public func user(token: String) -> UserRecord? { store.user(accessToken: token) }

    /// Revokes a raw access token of `user`'s own: false when it is not one
    /// (unknown, already revoked, or another user's or a thing's).
    public func revoke(token: String, by user: UserRecord) -> Bool {
        guard store.user(accessToken: token)?.userID == user.userID else { return false }
        return store.revokeToken(token)
    }

    public func createGroup(name: String, owner: UserRecord, members: [String]) -> Result<GroupRecord, HubError> {
        appAPI.createGroup(name: name, owner: owner, members: members)
    }

    // MARK: things

    /// Onboarding by the app (owner): registers or finds the thing by
    /// vendorThingID + password and binds `owner` ("user:…" or "group:…",
    /// which the user must own or belong to).
    public func onboardByOwner(
        user: UserRecord, vendorThingID: String, password: String, owner: String,
        thingType: String?, firmwareVersion: String?,
        dataGroupingInterval: String?
    ) -> Result<ThingRecord, HubError> {
        appAPI.onboardByOwner(
            user: user, vendorThingID: vendorThingID, password: password, owner: owner,
            thingType: thingType, firmwareVersion: firmwareVersion,
            dataGroupingInterval: dataGroupingInterval)
    }

    /// The thing when `user` owns it directly or through a group; otherwise
    /// 404 (an unknown thing and another owner's thing look the same).
    public func ownedThing(user: UserRecord, thingID: String) -> Result<ThingRecord, HubError> {
        appAPI.ownedThing(user: user, thingID: thingID)
    }

    /// The user a bearer token belongs to (nil: as `user(token:)`) and
    /// whether it may act on thing `thingID`: as `ownedThing`, from one read
    /// of both (`FastPaths.user(accessToken:thing:)`).
    public func user(token: String, owning thingID: String) -> (
        user: UserRecord, thing: Result<ThingRecord, HubError>
    )? {
        fastPaths.user(accessToken: token, thing: thingID).map {
            ($0.user, appAPI.owned($0.thing, user: $0.user, thingID: thingID))
        }
    }

    /// Kii's GET …/things/{thingID}/vendor-thing-id: {"_vendorThingID"} of
    /// a thing the user owns (404 THING_NOT_FOUND for one named by thingID
    /// alone, which has none).
    public func vendorThingID(user: UserRecord, thingID: String) -> Result<JSON, HubError> {
        ownedThing(user: user, thingID: thingID).flatMap { t in
            guard let v = t.vendorThingID else {
                return .failure(.thingIDNotFound(thingID))
            }
            let o = JSON.object()
            o.set("_vendorThingID", string: v)
            return .success(o)
        }
    }

    /// Kii's VendorThingIDUpdateRequest, by an owner:
    /// {"_vendorThingID","_password"}, both required and checked as at
    /// onboarding; the thing then onboards with them. Its tokens and
    /// installations stay. 409 THING_ALREADY_EXISTS when another thing has
    /// that vendorThingID. Runs the password KDF: call it as costly work.
    public func setVendorThingID(user: UserRecord, thingID: String, body: JSON) -> Result<Void, HubError> {
        let vendorThingID: String
        let password: String
        do {
            vendorThingID = try FormFields.requiredString(body, "_vendorThingID")
            password = try FormFields.requiredString(body, "_password")
        } catch {
            return .failure(error)
        }
        if let e = OnboardingForm.check(vendorThingID: vendorThingID, password: password) { return .failure(e) }
        if case .failure(let e) = ownedThing(user: user, thingID: thingID) { return .failure(e) }
        let hash = PasswordHash.make(password, iterations: store.secrets.passwordIterations)
        switch store.setVendorThingID(thingID: thingID, vendorThingID: vendorThingID, passwordHash: hash) {
        case .changed: return .success(())
        case .taken:
            return .failure(
                HubError(409, "THING_ALREADY_EXISTS", "Thing with vendorThingID \(vendorThingID) already exists"))
        case .noThing: return .failure(.thingNotFound(thingID))
        case .storage: return .failure(.storage)
        }
    }

    /// The things `user` owns directly or through its groups, by thingID.
    public func ownedThings(user: UserRecord) -> [ThingRecord] {
        store.things(ownedBy: appAPI.identities(of: user))
    }

    // MARK: commands

    /// postNewCommand: validates the CommandForm (schema, schemaVersion,
    /// actions, issuer, title, description, metadata), stores the command and
    /// publishes it to the thing.
    public func postCommand(
        user: UserRecord, thingID: String, form: JSON,
        installationID: String?
    ) -> Result<CommandRecord, HubError> {
        appAPI.postCommand(user: user, thingID: thingID, form: form, installationID: installationID)
    }

    /// As `postCommand(user:thingID:…)` for a thing `ownedThing` gave
    /// (the REST route has checked ownership already: read once).
    public func postCommand(
        user: UserRecord, owned thing: ThingRecord, form: JSON, installationID: String?
    ) -> Result<CommandRecord, HubError> {
        appAPI.postCommand(user: user, owned: thing, form: form, installationID: installationID)
    }

    public func getCommand(user: UserRecord, thingID: String, commandID: String) -> Result<CommandRecord, HubError> {
        appAPI.getCommand(user: user, thingID: thingID, commandID: commandID)
    }

    /// Cancels a command for `user`, who must be allowed to read it (an
    /// owner of its thing; anyone else gets the 404 a read gets); the rest
    /// is CommandDelivery.startCancel's (docs/PROTOCOL.md §9.1).
    public func startCancel(user: UserRecord, thingID: String, commandID: String) -> CancelStep {
        switch appAPI.getCommand(user: user, thingID: thingID, commandID: commandID) {
        case .failure(let e): return .answered(.failure(e))
        case .success(let c): return delivery.startCancel(c)
        }
    }

    /// listCommands: ascending; `paginationKey` is the opaque key of the
    /// previous page; `next` is nil after the last page.
    public func listCommands(
        user: UserRecord, thingID: String, paginationKey: String?,
        bestEffortLimit: Int?
    ) -> Result<(commands: [CommandRecord], next: String?), HubError> {
        appAPI.listCommands(
            user: user, thingID: thingID, paginationKey: paginationKey, bestEffortLimit: bestEffortLimit)
    }

    /// The command as the app API shows it: the form's fields plus
    /// commandID, target, commandState, actionResults, createdAt, modifiedAt.
    public func commandJSON(_ c: CommandRecord) -> JSON { AppAPI.commandJSON(c) }

    // MARK: state

    /// The state history in [from, to), grouped by the thing's data grouping
    /// interval (one group per interval that has samples; a thing without an
    /// interval gets one group for the whole range).
    /// One page: at most `limit` samples (default and cap `maxPage`);
    /// `next` is the paginationKey of the following page, nil at the end.
    public func stateHistory(
        user: UserRecord, thingID: String, from: Int64, to: Int64, paginationKey: String? = nil,
        limit: Int? = nil, maxPage: Int = HubLimits.defaultMaxHistoryPage
    )
        -> Result<(groups: [StateGroup], next: String?), HubError>
    {
        appAPI.stateHistory(
            user: user, thingID: thingID, from: from, to: to, paginationKey: paginationKey,
            limit: limit, maxPage: maxPage)
    }

    // MARK: enrollment (the operator's pre-registration)

    /// Registers a thing with its vendorThingID and password before it ever
    /// onboards (fleet provisioning's pre-registration): with
    /// `enrollmentOnly`, onboarding by the thing accepts only such things.
    /// True when it was new, false when it was there with that password.
    /// Costly (a password hash): call it on `costly`.
    public func enroll(vendorThingID: String, password: String, thingType: String?, firmwareVersion: String?)
        -> Result<Bool, HubError>
    {
        guard (1...200).contains(vendorThingID.count), (1...200).contains(password.count) else {
            return .failure(.invalid("vendorThingID and thingPassword must be 1 to 200 characters"))
        }
        let known = store.thing(vendorThingID: vendorThingID) != nil
        switch store.registerThing(
            vendorThingID: vendorThingID, password: password, thingType: thingType,
            firmwareVersion: firmwareVersion, dataGroupingInterval: nil)
        {
        case .failure(.wrongPassword):
            return .failure(HubError(409, "THING_ALREADY_EXISTS", "\(vendorThingID) exists with another password"))
        case .failure(.wrongType):
            return .failure(HubError(409, "THING_TYPE_MISMATCH", "\(vendorThingID) exists with another thingType"))
        case .failure(.storage):
            return .failure(.storage)
        case .success:
            return .success(!known)
        }
    }

    // MARK: app installations and notifications

    /// MQTT installations get a topic of their own (`target`); WEBHOOK ones
    /// need an http:// or https:// URL; SSE ones stream from the REST API.
    public func addAppInstallation(
        user: UserRecord, kind: AppInstallation.Kind,
        webhookURL: String?
    ) -> Result<AppInstallation, HubError> {
        appAPI.addAppInstallation(user: user, kind: kind, webhookURL: webhookURL)
    }

    public func removeAppInstallation(user: UserRecord, installationID: String) -> Bool {
        store.removeAppInstallation(id: installationID, userID: user.userID)
    }

    /// Broker credentials for an app's MQTT installation: client ID and
    /// username `installationID`, allowed only to read its topic. A new
    /// password each call. nil without a broker identity or when the broker
    /// refuses.
    public func pushCredentials(_ installation: AppInstallation) -> (username: String, password: String)? {
        guard installation.kind == .mqtt, let topic = installation.target, let admin,
            let pw = admin.pushCredentials(installationID: installation.installationID, topic: topic)
        else { return nil }
        return (installation.installationID, pw)
    }

    /// Removes the broker client of an app's MQTT installation.
    public func removePushCredentials(installationID: String) {
        admin?.remove(username: installationID, role: BrokerAdmin.pushRole(installationID: installationID))
    }

    /// The broker as things and apps should reach it: host, plain port, TLS port (0: none).
    public var advertisedBroker: (host: String, port: Int, tlsPort: Int) {
        (
            options.advertisedHost ?? options.brokerHost, options.advertisedPort ?? options.brokerPort,
            options.advertisedTLSPort ?? 0
        )
    }
}
