// SPDX-License-Identifier: Apache-2.0

import ThingIF

/// One group of the state history: the samples whose time falls in
/// [from, to), where the range is one data grouping interval.
public struct StateGroup: Sendable {
    public var from: Int64
    public var to: Int64
    public var samples: [StateSample]
}

/// The app side of the framework, `hub.app`: the rules of what the REST API
/// (ThingIFHubServer) and the CLI's calls may do. Authentication of the
/// caller is the REST layer's job; these methods check ownership and the
/// fields, and store nothing before every check passed.
///
/// It is given the parts it uses (FrameworkSide makes it once), never the
/// hub, and reaches no thing request: an owner's state upload is stored
/// as the thing's own is, by `StateUploads`.
public struct AppAPI {
    let store: HubStore
    let options: FrameworkSide.Options
    let fastPaths: FastPaths
    let delivery: CommandDelivery
    let presence: Presence
    let triggerEngine: TriggerEngine
    let removal: ThingRemoval
    let endNodes: EndNodes
    let endNodeRules: EndNodeRules
    let stateUploads: StateUploads
    /// A thing's firmware version and thing type, as the thing's own calls read and set them.
    let fields: ThingFields
    let metrics: HubMetrics
    let admin: BrokerAdmin?
    /// The automation configs things run by themselves (action sets, timer
    /// triggers): their owners' calls, behind this door too.
    public let automation: AutomationConfigs
    /// The things' MQTT installations, for the endpoint an owner's onboarding hands over.
    let installations: ThingInstallations
    /// What image uploads held and staged (AppAPI+Images).
    let imageUploads: ImageUploadStats

    // MARK: users and groups

    /// A pseudo user (no loginName) or a normal user (loginName + password).
    public func createUser(loginName: String?, password: String?) -> Result<UserRecord, HubError> {
        var hash: String?
        if let loginName {
            guard AppAPI.isValidLoginName(loginName) else {
                return .failure(.invalid("loginName must be 3 to 64 letters, digits or . _ @ -", field: "loginName"))
            }
            guard let password, (4...128).contains(password.count) else {
                return .failure(.invalid("password must be 4 to 128 characters", field: "password"))
            }
            hash = PasswordHash.make(password, iterations: store.secrets.passwordIterations)
            if store.user(loginName: loginName) != nil {
                return .failure(HubError(409, "USER_ALREADY_EXISTS", "loginName \(loginName) is taken"))
            }
        } else if password != nil {
            return .failure(.invalid("a password needs a loginName", field: "loginName"))
        }
        guard let u = store.createUser(loginName: loginName, passwordHash: hash) else {
            return .failure(loginName != nil ? HubError(409, "USER_ALREADY_EXISTS", "loginName is taken") : .storage)
        }
        return .success(u)
    }

    /// A good login issues a NEW token (returned in the record's
    /// accessToken); earlier ones stay valid until they expire or are revoked.
    /// A normal user's token for its loginName and password.
    public func login(loginName: String, password: String) -> Result<UserRecord, HubError> {
        let wrong = HubError(400, "invalid_grant", "the loginName or the password is wrong")
        guard var u = store.user(loginName: loginName), let hash = u.passwordHash else {
            // The same KDF work as for a known user: no timing oracle for
            // which loginNames exist.
            PasswordHash.dummyVerify(password, iterations: store.secrets.passwordIterations)
            return .failure(wrong)
        }
        guard PasswordHash.verify(password, hash) else { return .failure(wrong) }
        if PasswordHash.isLegacy(hash) {
            // The old hand-made chain: replaced by the KDF now that the password is known.
            _ = store.setPasswordHash(
                userID: u.userID,
                PasswordHash.make(password, iterations: store.secrets.passwordIterations))
        }
        guard let token = store.issueToken(kind: .user, subjectID: u.userID) else { return .failure(.storage) }
        u.accessToken = token
        return .success(u)
    }

    static func isValidLoginName(_ s: String) -> Bool {
        (3...64).contains(s.count)
            && s.unicodeScalars.allSatisfy {
                ("a"..."z").contains($0) || ("A"..."Z").contains($0) || ("0"..."9").contains($0)
                    || "._@-".unicodeScalars.contains($0)
            }
    }

    public func createGroup(name: String, owner: UserRecord, members: [String]) -> Result<GroupRecord, HubError> {
        guard (1...64).contains(name.count) else {
            return .failure(.invalid("name must be 1 to 64 characters", field: "name"))
        }
        guard members.count <= 100 else { return .failure(.invalid("at most 100 members", field: "members")) }
        for m in members where store.user(id: m) == nil {
            return .failure(.invalid("no user \(m)", field: "members"))
        }
        guard let g = store.createGroup(name: name, ownerUserID: owner.userID, members: members) else {
            return .failure(.storage)
        }
        return .success(g)
    }

    /// The ownership rule (Ownership.swift), which components given only
    /// the store check too.
    var ownership: Ownership { Ownership(store: store) }

    /// The typed IDs a user acts as: "user:{id}" and "group:{id}" of its groups.
    func identities(of user: UserRecord) -> [String] { ownership.identities(of: user) }

    // MARK: things

    /// Onboarding by the app (owner): registers or finds the thing by
    /// vendorThingID + password and binds `owner` ("user:…" or "group:…",
    /// which the user must own or belong to).
    public func onboardByOwner(
        user: UserRecord, vendorThingID: String, password: String, owner: String,
        thingType: String?, firmwareVersion: String?,
        dataGroupingInterval: String?, layoutPosition: LayoutPosition? = nil
    ) -> Result<ThingRecord, HubError> {
        if let e = OnboardingForm.check(vendorThingID: vendorThingID, password: password)
            ?? OnboardingForm.check(owner: owner, dataGroupingInterval: dataGroupingInterval)
        {
            return .failure(e)
        }
        guard identities(of: user).contains(owner) else {
            return .failure(.forbidden("the caller is not \(owner) and not a member of it"))
        }
        switch store.registerThing(
            vendorThingID: vendorThingID, password: password, thingType: thingType,
            firmwareVersion: firmwareVersion, dataGroupingInterval: dataGroupingInterval,
            layoutPosition: layoutPosition)
        {
        case .failure(.wrongPassword):
            return .failure(HubError(403, "WRONG_PASSWORD", "the password of \(vendorThingID) does not match"))
        case .failure(.wrongType):
            return .failure(
                HubError(409, "THING_TYPE_MISMATCH", "\(vendorThingID) is registered with another thingType"))
        case .failure(.wrongLayout):
            return .failure(.layoutMismatch(vendorThingID))
        case .failure(.storage):
            return .failure(.storage)
        case .success(let t):
            guard store.addOwner(thingID: t.thingID, owner: owner), var bound = store.thing(id: t.thingID) else {
                return .failure(.storage)
            }
            // The token issued by this onboarding (a lookup does not know it).
            bound.accessToken = t.accessToken
            return .success(bound)
        }
    }

    /// The thing when `user` owns it directly or through a group; otherwise
    /// 404 (an unknown thing and another owner's thing look the same). The
    /// one check of ownership: every call on one thing takes its answer.
    public func ownedThing(user: UserRecord, thingID: String) -> Result<OwnedThing, HubError> {
        ownership.ownedThing(user: user, thingID: thingID)
    }

    /// `ownedThing` for the thing `thingID` as the caller read it (nil: unknown).
    func owned(_ thing: ThingRecord?, user: UserRecord, thingID: String) -> Result<OwnedThing, HubError> {
        ownership.owned(thing, user: user, thingID: thingID)
    }

    // MARK: commands

    /// postNewCommand: validates the CommandForm (schema, schemaVersion,
    /// actions, issuer, title, description, metadata), stores the command and
    /// publishes it to the thing.
    public func postCommand(on owned: OwnedThing, form: JSON, installationID: String?) -> Result<
        CommandRecord, HubError
    > {
        let (user, thing) = (owned.user, owned.thing)
        let command: Command
        // The caller itself needs no lookup; a group issuer reads the groups.
        let me = "user:\(user.userID)"
        switch commandForm(form, issuerAllowed: { $0 == me || identities(of: user).contains($0) }) {
        case .failure(let e): return .failure(e)
        case .success(let c): command = c
        }
        // Where the trait registry has the thing's entry, a trait command
        // must fit it: refused before it is stored or sent.
        if let refusal = traits.check(command, for: thing) { return .failure(refusal) }
        let expiresAt: Int64?
        switch options.lifetimes.expiry(form: form, now: Platform.epochMs()) {
        case .failure(let e): return .failure(e)
        case .success(let e): expiresAt = e
        }
        if let installationID {
            guard store.appInstallation(id: installationID)?.userID == user.userID else {
                return .failure(.invalid("installation \(installationID) is not one of the caller's"))
            }
        }
        guard
            let record = delivery.stored(
                command, to: thing, issuer: command.issuer,
                installationID: installationID, expiresAt: expiresAt)
        else {
            return .failure(.storage)
        }
        return .success(record)
    }

    /// Checks a CommandForm and builds the command (CommandForm.swift).
    func commandForm(_ form: JSON, issuerAllowed: (String) -> Bool) -> Result<Command, HubError> {
        CommandForm.command(form, issuerAllowed: issuerAllowed)
    }

    public func getCommand(on owned: OwnedThing, commandID: String) -> Result<CommandRecord, HubError> {
        guard let c = store.command(id: commandID), c.thingID == owned.thingID else {
            return .failure(.commandNotFound(commandID))
        }
        return .success(c)
    }

    /// listCommands: ascending; `paginationKey` is the opaque key of the
    /// previous page; `next` is nil after the last page.
    public func listCommands(
        on owned: OwnedThing, paginationKey: String?,
        bestEffortLimit: Int?
    ) -> Result<(commands: [CommandRecord], next: String?), HubError> {
        let limit = bestEffortLimit ?? AppLimits.defaultPageSize
        guard limit >= 1 else { return .failure(.invalid("bestEffortLimit must be a positive integer")) }
        let pageSize = min(limit, AppLimits.maxPageSize)
        var after: Int64 = 0
        if let key = paginationKey {
            guard let seq = Int64(key), seq >= 0 else {
                return .failure(HubError(400, "INVALID_PAGINATION_KEY", "paginationKey is not one this hub gave"))
            }
            after = seq
        }
        let page = store.commands(thingID: owned.thingID, afterSeq: after, limit: pageSize + 1)
        let shown = Array(page.prefix(pageSize))
        let next = page.count > pageSize ? shown.last.map { String($0.seq) } : nil
        return .success((shown, next))
    }

    static func commandJSON(_ c: CommandRecord) -> JSON {
        let o: JSON
        if case .success(let p) = JSON.parse(c.payload), p.isObject { o = p } else { o = JSON.object() }
        o.set("commandID", string: c.commandID)
        o.set("target", string: "thing:\(c.thingID)")
        if let issuer = c.issuer { o.set("issuer", string: issuer) }
        o.set("commandState", string: c.state.rawValue)
        if let r = c.results, case .success(let rj) = JSON.parse(r), let list = rj["actionResults"] {
            o.set("actionResults", list)
        }
        o.set("createdAt", .int(Int(c.createdAt)))
        o.set("modifiedAt", .int(Int(c.modifiedAt)))
        // The payload carries expiresAt already (the thing reads it there);
        // the store's column is the same value.
        if let e = c.expiresAt { o.set("expiresAt", .int64(e)) }
        if let r = c.endReason { o.set("endReason", string: r) }
        return o
    }

    // MARK: state

    /// One page of at most `limit` samples (capped to `maxPage`), grouped;
    /// `next` is the paginationKey of the following page, nil at the end.
    /// With `wholeIntervals` (Kii's grouped query) the range grows to the
    /// whole grouping intervals it touches, as the aggregations read them.
    /// The state history in [from, to), grouped by the thing's data grouping
    /// interval (one group per interval that has samples; a thing onboarded
    /// without an interval has Kii's default, one minute).
    /// One page: at most `limit` samples (default and cap `maxPage`);
    /// `next` is the paginationKey of the following page, nil at the end.
    /// `ranges` keep only the samples that pass them (of `alias`'s state
    /// when given: a query on a trait alias).
    public func stateHistory(
        on owned: OwnedThing, from: Int64, to: Int64, paginationKey: String? = nil,
        limit: Int? = nil, maxPage: Int = HubLimits.defaultMaxHistoryPage, wholeIntervals: Bool = false,
        alias: String? = nil, ranges: [StateRange] = []
    )
        -> Result<(groups: [StateGroup], next: String?), HubError>
    {
        let (thing, thingID) = (owned.thing, owned.thingID)
        guard from >= 0, from < to else { return .failure(.invalid("from must be less than to (milliseconds)")) }
        var (from, to) = (from, to)
        if wholeIntervals {
            (from, to) = Self.wholeIntervals(from: from, to: to, of: thing)
            if let e = Self.intervalLimit(from: from, to: to, of: thing) { return .failure(e) }
        }
        if let limit, limit < 1 { return .failure(.invalid("bestEffortLimit must be a positive integer")) }
        var key = StatePageKey.offset(0)
        if let paginationKey {
            guard let k = StatePageKey(paginationKey) else { return .failure(.invalid("bad paginationKey")) }
            key = k
        }
        let after: Int64
        let skip: Int
        switch key {
        case .offset(let n): (after, skip) = (0, n)
        case .cursor(let v): (after, skip) = (v, 0)
        }
        let page = store.stateHistoryPage(
            thingID: thingID, from: from, to: to, after: after, skip: skip,
            limit: min(limit ?? maxPage, max(1, maxPage)), alias: alias, ranges: ranges)
        let samples = page.samples
        // The next key says where the next page starts the way this one
        // was asked: by offset (Kii's shape), or by the old cursor.
        let next = page.next.map { cursor -> String in
            switch key {
            case .offset(let n): return StatePageKey.offset(n + samples.count).text
            case .cursor: return StatePageKey.cursor(cursor).text
            }
        }
        let interval = Self.interval(of: thing)
        var groups: [StateGroup] = []
        for s in samples {
            let start = s.at - s.at % interval
            if groups.last?.from == start {
                groups[groups.count - 1].samples.append(s)
            } else {
                groups.append(StateGroup(from: start, to: start + interval, samples: [s]))
            }
        }
        return .success((groups, next))
    }

    // MARK: app installations and notifications

    /// MQTT installations get a topic of their own (`target`); WEBHOOK ones
    /// need an http:// or https:// URL; SSE ones stream from the REST API.
    public func addAppInstallation(user: UserRecord, kind: AppInstallation.Kind, webhookURL: String?) -> Result<
        AppInstallation, HubError
    > {
        var target: String?
        if !kind.isDelivered {
            // A push service's token (Kii's installationRegistrationID),
            // passed in webhookURL's place: kept, never called.
            target = webhookURL
        } else if kind == .webhook {
            guard let url = webhookURL, url.count <= 2048, url.hasPrefix("http://") || url.hasPrefix("https://") else {
                return .failure(
                    .invalid("a WEBHOOK installation needs webhookURL, an http:// or https:// URL", field: "webhookURL")
                )
            }
            if case .refused(let why) = options.webhooks.checkAtInstallation(url) {
                return .failure(.invalid(why, field: "webhookURL"))
            }
            target = url
        } else if webhookURL != nil {
            return .failure(.invalid("webhookURL is only for WEBHOOK installations", field: "webhookURL"))
        }
        if kind == .mqtt {
            // Each is a broker client and role: bounded per user and per app.
            let perUser = options.mqttInstallationsPerUser
            if perUser > 0, store.appInstallations(userID: user.userID).filter({ $0.kind == .mqtt }).count >= perUser {
                metrics.refused("installation_cap")
                return .failure(
                    HubError(409, "TOO_MANY_INSTALLATIONS", "the user has \(perUser) MQTT installations already"))
            }
            let perApp = options.mqttInstallationsPerApp
            if perApp > 0, store.countAppInstallations(kind: .mqtt) >= perApp {
                metrics.refused("installation_cap")
                return .failure(
                    HubError(409, "TOO_MANY_INSTALLATIONS", "this app has \(perApp) MQTT installations already"))
            }
        }
        guard let i = store.addAppInstallation(userID: user.userID, kind: kind, target: target) else {
            return .failure(.storage)
        }
        return .success(i)
    }

    // MARK: tokens, things, commands and installations beyond the above

    // MARK: users and groups

    /// The user a bearer token belongs to; nil for an unknown token or a thing's token.
    public func user(token: String) -> UserRecord? { store.user(accessToken: token) }

    /// Revokes a raw access token of `user`'s own: false when it is not one
    /// (unknown, already revoked, or another user's or a thing's).
    public func revoke(token: String, by user: UserRecord) -> Bool {
        guard store.user(accessToken: token)?.userID == user.userID else { return false }
        return store.revokeToken(token)
    }

    /// Kii's user deletion, by the user itself: UserStore.deleteUser (its
    /// tokens, installations, ownerships and memberships), then the broker
    /// logins of its MQTT installations. The deleted installations are
    /// returned so that the server closes their event streams.
    public func deleteUser(_ user: UserRecord) -> Result<[AppInstallation], HubError> {
        guard let installations = store.deleteUser(id: user.userID) else { return .failure(.storage) }
        for i in installations where i.kind == .mqtt { removePushCredentials(installationID: i.installationID) }
        return .success(installations)
    }

    // MARK: things

    /// The user a bearer token belongs to (nil: as `user(token:)`) and
    /// whether it may act on thing `thingID`: as `ownedThing`, from one read
    /// of both (`FastPaths.user(accessToken:thing:)`).
    public func user(token: String, owning thingID: String) -> (
        user: UserRecord, thing: Result<OwnedThing, HubError>
    )? {
        fastPaths.user(accessToken: token, thing: thingID).map {
            ($0.user, owned($0.thing, user: $0.user, thingID: thingID))
        }
    }

    /// Kii's GET …/things/{thingID}/vendor-thing-id: {"_vendorThingID"} of
    /// a thing the user owns (404 THING_NOT_FOUND for one named by thingID
    /// alone, which has none).
    public func vendorThingID(of owned: OwnedThing) -> Result<JSON, HubError> {
        guard let v = owned.thing.vendorThingID else {
            return .failure(.thingIDNotFound(owned.thingID))
        }
        let o = JSON.object()
        o.set("_vendorThingID", string: v)
        return .success(o)
    }

    /// Kii's VendorThingIDUpdateRequest, by an owner:
    /// {"_vendorThingID","_password"}, both required and checked as at
    /// onboarding; the thing then onboards with them. Its tokens and
    /// installations stay. 409 THING_ALREADY_EXISTS when another thing has
    /// that vendorThingID. Runs the password KDF: call it as costly work.
    public func setVendorThingID(of owned: OwnedThing, body: JSON) -> Result<Void, HubError> {
        let vendorThingID: String
        let password: String
        do {
            vendorThingID = try FormFields.requiredString(body, "_vendorThingID")
            password = try FormFields.requiredString(body, "_password")
        } catch {
            return .failure(error)
        }
        if let e = OnboardingForm.check(
            vendorThingID: vendorThingID, password: password, fields: ("_vendorThingID", "_password"))
        {
            return .failure(e)
        }
        let (thing, thingID) = (owned.thing, owned.thingID)
        let hash = PasswordHash.make(password, iterations: store.secrets.passwordIterations)
        switch store.setVendorThingID(thingID: thingID, vendorThingID: vendorThingID, passwordHash: hash) {
        case .changed:
            // An end node's gateway learns its new name (GATEWAYS.md §3.4, §4.2).
            if thing.layoutPosition == .endNode, let gateway = thing.gatewayThingID.flatMap({ store.thing(id: $0) }) {
                endNodes.announce(.changed(thingID: thingID, vendorThingID: vendorThingID), to: gateway)
            }
            return .success(())
        case .taken:
            return .failure(
                HubError(409, "THING_ALREADY_EXISTS", "Thing with vendorThingID \(vendorThingID) already exists"))
        case .noThing: return .failure(.thingNotFound(thingID))
        case .storage: return .failure(.storage)
        }
    }

    /// Deletes a thing that `user` owns (directly or through a group): 404
    /// for an unknown thing or another owner's, as for every thing call
    /// (ThingRemoval says what goes).
    public func deleteThing(_ owned: OwnedThing) -> Result<Void, HubError> {
        removal.remove(owned.thing)
    }

    /// The things `user` owns directly or through its groups, by thingID.
    public func ownedThings(user: UserRecord) -> [ThingRecord] {
        store.things(ownedBy: identities(of: user))
    }

    // MARK: commands

    /// Cancels a command for `user`, who must be allowed to read it (an
    /// owner of its thing; anyone else gets the 404 a read gets); the rest
    /// is CommandDelivery.startCancel's (docs/PROTOCOL.md §9.1).
    public func startCancel(on owned: OwnedThing, commandID: String) -> CancelStep {
        switch getCommand(on: owned, commandID: commandID) {
        case .failure(let e): return .answered(.failure(e))
        case .success(let c): return delivery.startCancel(c)
        }
    }

    /// The command as the app API shows it: the form's fields plus
    /// commandID, target, commandState, actionResults, createdAt, modifiedAt.
    public func commandJSON(_ c: CommandRecord) -> JSON { AppAPI.commandJSON(c) }

    // MARK: state

    /// Kii's state upload by an owner: PUT or PATCH …/states with the token
    /// of a user who owns the thing (Kii's documentation: "the access token
    /// of the thing or thing owner"). Stored, kept in the history and
    /// probed by the triggers as the thing's own upload is; the caller has
    /// checked the size limit.
    public func uploadState(on owned: OwnedThing, method: String, body: [UInt8]) -> KiiResponse {
        let thing = owned.thing
        guard case .success(let j) = JSON.parse(body), j.isObject else {
            return .refusal(400, "INVALID_INPUT_DATA", "the state must be a JSON object")
        }
        return stateUploads.store(method: method, upload: j.dump(), thing: thing)
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
            return .failure(
                .invalid(
                    "vendorThingID and thingPassword must be 1 to 200 characters",
                    field: (1...200).contains(vendorThingID.count) ? "thingPassword" : "vendorThingID"))
        }
        let known = store.thing(vendorThingID: vendorThingID) != nil
        switch store.registerThing(
            vendorThingID: vendorThingID, password: password, thingType: thingType,
            firmwareVersion: firmwareVersion, dataGroupingInterval: nil, layoutPosition: nil)
        {
        case .failure(.wrongPassword):
            return .failure(HubError(409, "THING_ALREADY_EXISTS", "\(vendorThingID) exists with another password"))
        case .failure(.wrongType):
            return .failure(HubError(409, "THING_TYPE_MISMATCH", "\(vendorThingID) exists with another thingType"))
        case .failure(.wrongLayout):
            return .failure(.layoutMismatch(vendorThingID))
        case .failure(.storage):
            return .failure(.storage)
        case .success:
            return .success(!known)
        }
    }

    // MARK: app installations and notifications

    public func removeAppInstallation(user: UserRecord, installationID: String) -> Bool {
        store.removeAppInstallation(id: installationID, userID: user.userID)
    }

    /// Broker credentials for an app's MQTT installation: client ID and
    /// username `installationID`, allowed only to read its topic. A new
    /// password each call. nil without a broker identity or when the broker
    /// refuses.
    public func pushCredentials(_ installation: AppInstallation) -> (username: String, password: String)? {
        guard installation.kind == .mqtt, let topic = installation.target, let admin = admin,
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

extension AppAPI {
    // MARK: a thing's fields

    /// An owner's read of a thing's firmware version or thing type
    /// (ThingFields, as the thing's own call reads it).
    public func thingField(_ field: ThingField, of owned: OwnedThing) -> Result<JSON, HubError> {
        fields.read(field, thingID: owned.thingID)
    }

    /// An owner's change of a thing's firmware version or thing type.
    public func setThingField(_ field: ThingField, of owned: OwnedThing, body: [UInt8]) -> Result<Void, HubError> {
        fields.set(field, thingID: owned.thingID, body: body)
    }
}
