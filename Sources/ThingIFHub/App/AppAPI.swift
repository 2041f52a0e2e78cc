// SPDX-License-Identifier: Apache-2.0

import ThingIF

/// The rules of the app API; FrameworkSide's public methods in FrameworkSide+AppAPI.swift
/// call in here.
struct AppAPI {
    unowned let hub: FrameworkSide
    var store: HubStore { hub.store }

    // MARK: users and groups

    func createUser(loginName: String?, password: String?) -> Result<UserRecord, HubError> {
        var hash: String?
        if let loginName {
            guard AppAPI.isValidLoginName(loginName) else {
                return .failure(.invalid("loginName must be 3 to 64 letters, digits or . _ @ -"))
            }
            guard let password, (4...128).contains(password.count) else {
                return .failure(.invalid("password must be 4 to 128 characters"))
            }
            hash = PasswordHash.make(password, iterations: store.secrets.passwordIterations)
            if store.user(loginName: loginName) != nil {
                return .failure(HubError(409, "USER_ALREADY_EXISTS", "loginName \(loginName) is taken"))
            }
        } else if password != nil {
            return .failure(.invalid("a password needs a loginName"))
        }
        guard let u = store.createUser(loginName: loginName, passwordHash: hash) else {
            return .failure(loginName != nil ? HubError(409, "USER_ALREADY_EXISTS", "loginName is taken") : .storage)
        }
        return .success(u)
    }

    /// A good login issues a NEW token (returned in the record's
    /// accessToken); earlier ones stay valid until they expire or are revoked.
    func login(loginName: String, password: String) -> Result<UserRecord, HubError> {
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

    func createGroup(name: String, owner: UserRecord, members: [String]) -> Result<GroupRecord, HubError> {
        guard (1...64).contains(name.count) else { return .failure(.invalid("name must be 1 to 64 characters")) }
        guard members.count <= 100 else { return .failure(.invalid("at most 100 members")) }
        for m in members where store.user(id: m) == nil {
            return .failure(.invalid("no user \(m)"))
        }
        guard let g = store.createGroup(name: name, ownerUserID: owner.userID, members: members) else {
            return .failure(.storage)
        }
        return .success(g)
    }

    /// The typed IDs a user acts as: "user:{id}" and "group:{id}" of its groups.
    func identities(of user: UserRecord) -> [String] {
        ["user:\(user.userID)"] + store.groups(ofUser: user.userID).map { "group:\($0.groupID)" }
    }

    // MARK: things

    func onboardByOwner(
        user: UserRecord, vendorThingID: String, password: String, owner: String,
        thingType: String?, firmwareVersion: String?,
        dataGroupingInterval: String?
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
            firmwareVersion: firmwareVersion, dataGroupingInterval: dataGroupingInterval)
        {
        case .failure(.wrongPassword):
            return .failure(HubError(403, "WRONG_PASSWORD", "the password of \(vendorThingID) does not match"))
        case .failure(.wrongType):
            return .failure(
                HubError(409, "THING_TYPE_MISMATCH", "\(vendorThingID) is registered with another thingType"))
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

    /// The user's groups are read only when the thing is not the user's own
    /// (a read on every command of the REST API otherwise).
    func ownedThing(user: UserRecord, thingID: String) -> Result<ThingRecord, HubError> {
        owned(store.thing(id: thingID), user: user, thingID: thingID)
    }

    /// `ownedThing` for the thing `thingID` as the caller read it (nil: unknown).
    func owned(_ thing: ThingRecord?, user: UserRecord, thingID: String) -> Result<ThingRecord, HubError> {
        guard let t = thing,
            t.owners.contains("user:\(user.userID)") || !Set(t.owners).isDisjoint(with: identities(of: user))
        else {
            return .failure(.thingNotFound(thingID))
        }
        return .success(t)
    }

    // MARK: commands

    func postCommand(user: UserRecord, thingID: String, form: JSON, installationID: String?) -> Result<
        CommandRecord, HubError
    > {
        ownedThing(user: user, thingID: thingID).flatMap {
            postCommand(user: user, owned: $0, form: form, installationID: installationID)
        }
    }

    /// As `postCommand(user:thingID:…)` for a thing `ownedThing` gave.
    func postCommand(user: UserRecord, owned thing: ThingRecord, form: JSON, installationID: String?) -> Result<
        CommandRecord, HubError
    > {
        let command: Command
        // The caller itself needs no lookup; a group issuer reads the groups.
        let me = "user:\(user.userID)"
        switch commandForm(form, issuerAllowed: { $0 == me || identities(of: user).contains($0) }) {
        case .failure(let e): return .failure(e)
        case .success(let c): command = c
        }
        let expiresAt: Int64?
        switch hub.options.lifetimes.expiry(form: form, now: Platform.epochMs()) {
        case .failure(let e): return .failure(e)
        case .success(let e): expiresAt = e
        }
        if let installationID {
            guard store.appInstallation(id: installationID)?.userID == user.userID else {
                return .failure(.invalid("installation \(installationID) is not one of the caller's"))
            }
        }
        guard
            let record = hub.delivery.stored(
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

    func getCommand(user: UserRecord, thingID: String, commandID: String) -> Result<CommandRecord, HubError> {
        if case .failure(let e) = ownedThing(user: user, thingID: thingID) { return .failure(e) }
        guard let c = store.command(id: commandID), c.thingID == thingID else {
            return .failure(.commandNotFound(commandID))
        }
        return .success(c)
    }

    func listCommands(
        user: UserRecord, thingID: String, paginationKey: String?,
        bestEffortLimit: Int?
    ) -> Result<(commands: [CommandRecord], next: String?), HubError> {
        if case .failure(let e) = ownedThing(user: user, thingID: thingID) { return .failure(e) }
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
        let page = store.commands(thingID: thingID, afterSeq: after, limit: pageSize + 1)
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
    func stateHistory(
        user: UserRecord, thingID: String, from: Int64, to: Int64, paginationKey: String? = nil,
        limit: Int? = nil, maxPage: Int = HubLimits.defaultMaxHistoryPage, wholeIntervals: Bool = false
    )
        -> Result<(groups: [StateGroup], next: String?), HubError>
    {
        let thing: ThingRecord
        switch ownedThing(user: user, thingID: thingID) {
        case .failure(let e): return .failure(e)
        case .success(let t): thing = t
        }
        guard from >= 0, from < to else { return .failure(.invalid("from must be less than to (milliseconds)")) }
        var (from, to) = (from, to)
        if wholeIntervals { (from, to) = Self.wholeIntervals(from: from, to: to, of: thing) }
        if let limit, limit < 1 { return .failure(.invalid("bestEffortLimit must be a positive integer")) }
        var after: Int64 = 0
        if let paginationKey {
            guard let v = Int64(paginationKey), v >= 0 else { return .failure(.invalid("bad paginationKey")) }
            after = v
        }
        let page = store.stateHistoryPage(
            thingID: thingID, from: from, to: to, after: after,
            limit: min(limit ?? maxPage, max(1, maxPage)))
        let samples = page.samples
        let next = page.next.map { String($0) }
        guard let interval = thing.dataGroupingInterval.flatMap({ AppLimits.groupingIntervals[$0] }) else {
            return .success((samples.isEmpty ? [] : [StateGroup(from: from, to: to, samples: samples)], next))
        }
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

    func addAppInstallation(user: UserRecord, kind: AppInstallation.Kind, webhookURL: String?) -> Result<
        AppInstallation, HubError
    > {
        var target: String?
        if !kind.isDelivered {
            // A push service's token (Kii's installationRegistrationID),
            // passed in webhookURL's place: kept, never called.
            target = webhookURL
        } else if kind == .webhook {
            guard let url = webhookURL, url.count <= 2048, url.hasPrefix("http://") || url.hasPrefix("https://") else {
                return .failure(.invalid("a WEBHOOK installation needs webhookURL, an http:// or https:// URL"))
            }
            if case .refused(let why) = hub.options.webhooks.checkAtInstallation(url) {
                return .failure(.invalid(why))
            }
            target = url
        } else if webhookURL != nil {
            return .failure(.invalid("webhookURL is only for WEBHOOK installations"))
        }
        if kind == .mqtt {
            // Each is a broker client and role: bounded per user and per app.
            let perUser = hub.options.mqttInstallationsPerUser
            if perUser > 0, store.appInstallations(userID: user.userID).filter({ $0.kind == .mqtt }).count >= perUser {
                hub.metrics.refused("installation_cap")
                return .failure(
                    HubError(409, "TOO_MANY_INSTALLATIONS", "the user has \(perUser) MQTT installations already"))
            }
            let perApp = hub.options.mqttInstallationsPerApp
            if perApp > 0, store.countAppInstallations(kind: .mqtt) >= perApp {
                hub.metrics.refused("installation_cap")
                return .failure(
                    HubError(409, "TOO_MANY_INSTALLATIONS", "this app has \(perApp) MQTT installations already"))
            }
        }
        guard let i = store.addAppInstallation(userID: user.userID, kind: kind, target: target) else {
            return .failure(.storage)
        }
        return .success(i)
    }
}
