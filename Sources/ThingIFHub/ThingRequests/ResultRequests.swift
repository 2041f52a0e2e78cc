// SPDX-License-Identifier: Apache-2.0

import ThingIF

/// A command's action results from the thing (or its gateway), and the
/// commands it ran by itself: stored once, counted, and told to the
/// command's issuer after the lane's commit. Given the commands' store,
/// the joined reads, the notifications, the metrics, the event sink and
/// the requests' authorization.
final class ResultRequests: @unchecked Sendable {
    let store: CommandStore
    let fastPaths: FastPaths
    let notifications: Notifications
    let metrics: HubMetrics
    let events: HubEvents
    let authorization: RequestAuthorization
    /// How many times results arrived per command (the newest `countLimit` commands).
    let posts = Locked(Posts())

    struct Posts {
        var count: [String: Int] = [:]  // commandID -> how many times results arrived
        var order = RecentLog<String>(capacity: ResultRequests.countLimit)  // the same keys
    }

    /// How many commands' result deliveries are counted (the newest).
    static let countLimit = 20_000

    init(
        store: CommandStore, fastPaths: FastPaths, notifications: Notifications, metrics: HubMetrics,
        events: HubEvents, authorization: RequestAuthorization
    ) {
        self.store = store
        self.fastPaths = fastPaths
        self.notifications = notifications
        self.metrics = metrics
        self.events = events
        self.authorization = authorization
    }

    /// How many times results arrived for a command (of the newest `countLimit`).
    func posts(of commandID: String) -> Int { posts.withLock { $0.count[commandID] ?? 0 } }

    /// PUT targets/{target}/commands/{commandID}/action-results: the thing
    /// of the token, the command and whom to tell in one read (one round
    /// trip), for a thing's own results and for an end node's through its
    /// gateway alike: the read finds the command among the gateway's end
    /// nodes' too, which authorisation then need not read again.
    func request(_ req: KiiRequest, target: String, commandID: String, clientID: String?) -> KiiResponse {
        guard let tid = authorization.thingID(fromTarget: target) else {
            return .refusal(404, "TARGET_NOT_FOUND", "no target \(target)")
        }
        var read: ThingAndCommand?
        let lookup: RequestAuthorization.ThingLookup = { token in
            self.fastPaths.thing(accessToken: token, command: commandID).map {
                read = $0
                return $0.thing
            }
        }
        switch authorization.actsFor(
            req, thingID: tid, clientID: clientID, lookup: lookup, knownEndNode: { read?.command?.thingID == tid })
        {
        case .failure(let refusal): return refusal.answer
        case .success:
            return actionResults(
                req, thingID: tid, commandID: commandID, command: read?.command, targets: read?.targets)
        }
    }

    /// The results of `commandID`: `command` is that command as read with
    /// the thing that authorisation read (`FastPaths.thing(accessToken:command:)`),
    /// nil when the thing has none of that ID; `targets`, its notification
    /// targets when read with it.
    func actionResults(
        _ req: KiiRequest, thingID tid: String, commandID: String, command: CommandRecord?,
        targets read: [AppInstallation]? = nil
    ) -> KiiResponse {
        guard case .success(let j) = JSON.parse(req.body), let parsed = ActionResults.decode(j) else {
            return .refusal(400, "INVALID_INPUT_DATA", "the body must be {\"actionResults\":[…]}")
        }
        // Results only for a command this thing was given (by the hub, or
        // one it reported running by itself): never for another thing's.
        guard let command, command.commandID == commandID, command.thingID == tid else {
            return .refusal(.commandNotFound(commandID))
        }
        posts.withLock { d in
            if d.count[commandID] == nil, let oldest = d.order.append(commandID) { d.count[oldest] = nil }
            d.count[commandID, default: 0] += 1
        }
        var text = j.dump()
        var all = parsed.all
        if all.isEmpty {
            // A command the thing dropped before it could read the actions
            // (ActionResults.dropped): every action failed with its reason.
            // No results and no reason is not an outcome.
            guard let reason = j["errorMessage"]?.stringValue, case .success(let payload) = JSON.parse(command.payload),
                case .success(let sent) = Command.decode(payload)
            else {
                return .refusal(400, "INVALID_INPUT_DATA", "no action results and no errorMessage")
            }
            let failed = ActionResults.allFailed(sent, message: reason)
            text = failed.encode().dump()
            all = failed.all
        } else if parsed.groups.allSatisfy({ $0.alias == nil }),
            case .success(let payload) = JSON.parse(command.payload),
            // A schema command (the common case) is done here: only a trait
            // command, which has no schema, is decoded to be regrouped.
            payload["schema"] == nil,
            case .success(let sent) = Command.decode(payload), sent.shape == .trait,
            let grouped = parsed.grouped(like: sent)
        {
            // Flat results for a trait command (Kii's thing-if-ThingSDK posts
            // them so): grouped by the command's aliases, as apps read them.
            text = grouped.encode().dump()
        }
        let now = Platform.epochMs()
        // Results count once: a repeat (the thing sends again until it has an
        // answer) is accepted and changes nothing.
        guard command.results == nil else { return .answer(204) }
        // Every action refused for a cancel (CommandCancel): the thing
        // confirms it never ran it, so the command is CANCELLED (§9.1).
        let state: CommandState =
            !all.isEmpty && all.allSatisfy(\.succeeded)
            ? .done : CommandCancel.isRefusal(all) ? .cancelled : .incomplete
        // Whom to tell, read in the lane's transaction: a command without a
        // target that a sweep sends to is never due for one, and needs no mark after.
        let targets = read ?? notifications.targets(for: command)
        // Results are idempotent by commandID: a repeat is accepted and ignored.
        if metrics.timed(
            "recordResults",
            { store.recordResults(commandID: commandID, results: text, state: state, at: now, swept: targets.anySwept) }
        ) {
            // The stored row now: the one read above with what was just written.
            var record = command
            record.results = text
            record.state = state
            record.modifiedAt = now
            // Counted and told after the lane's commit (AfterCommit).
            AfterCommit.later {
                self.metrics.commandFinished(done: state == .done, createdAt: command.createdAt, now: now)
                self.events.event("results of \(commandID) from \(tid): \(text)")
                self.notifications.finished(record, targets: targets)
            }
        } else if store.command(id: commandID)?.results == nil {
            // Nothing written and no results there: not a repeat (another
            // hub's first results) but a failure of the store. A 204 would
            // lose them; the thing sends them again after a 500.
            return .storageFailed
        }
        return .answer(204)
    }

    /// A command the thing ran by itself (an action set, or a timer trigger
    /// on the device): stored once by commandID, so that apps see it.
    func commandReport(_ req: KiiRequest, thingID tid: String, commandID: String) -> KiiResponse {
        guard case .success(let j) = JSON.parse(req.body), j.isObject else {
            return .refusal(400, "INVALID_INPUT_DATA", "the body must be a command object")
        }
        if let id = j["commandID"], id.stringValue != commandID {
            return .refusal(.invalid("commandID in the body is not \(commandID) of the path", field: "commandID"))
        }
        guard case .success(let command) = Command.decode(j) else {
            return .refusal(400, "INVALID_INPUT_DATA", "the body is not a valid command")
        }
        if let issuer = command.issuer, issuer != "thing:\(tid)" {
            return .refusal(
                .invalid("the issuer of a command the thing reports must be thing:\(tid)", field: "issuer"))
        }
        guard store.command(id: commandID) == nil else { return .answer(204) }  // a repeat
        let now = Platform.epochMs()
        if store.insertCommand(
            CommandRecord(
                commandID: commandID, thingID: tid, issuer: command.issuer ?? "thing:\(tid)",
                issuingInstallationID: nil, payload: j.dump(),
                createdAt: now, modifiedAt: now)) != nil
        {
            events.event("\(tid) reported command \(commandID) it ran by itself")
        }
        return .answer(204)
    }

}

extension ActionResults {
    /// Flat results laid out as `command`'s alias groups: the n-th result
    /// answers the n-th action. nil when they do not fit (another count, or
    /// a result named other than its action); such results are kept as sent.
    func grouped(like command: Command) -> ActionResults? {
        let flat = all
        guard flat.count == command.groups.reduce(0, { $0 + $1.entries.count }) else { return nil }
        var groups: [Group] = []
        var i = 0
        for g in command.groups {
            var results: [ActionResult] = []
            for e in g.entries {
                guard flat[i].name == e.name else { return nil }
                results.append(flat[i])
                i += 1
            }
            groups.append(Group(alias: g.alias, results: results))
        }
        return ActionResults(groups: groups)
    }
}
