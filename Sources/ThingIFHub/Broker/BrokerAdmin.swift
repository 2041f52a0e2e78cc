// SPDX-License-Identifier: Apache-2.0

import CThingIF

import ThingIF

/// The hub's hand on mosquitto's dynamic-security plugin: it sends commands
/// on `$CONTROL/dynamic-security/v1` and reads the answers on
/// `…/response`, over a connection of its own (the hub's request handler
/// blocks on these answers on its MQTT thread, so they cannot arrive there).
///
/// What it makes (docs/SECURITY.md):
/// - role `thingif-hub` (publish anywhere), given to the hub's own client;
/// - role `thingif-onboarding-{appID}` and client `{appID}` (password: the
///   app key) for bootstrap connections: publish onboarding and installation
///   requests, subscribe to a concrete `p/{clientID}/resp`;
/// - per thing installation, client `{mqttTopic}` bound to client ID
///   `{mqttTopic}`, with role `thing-{mqttTopic}`: subscribe to its command,
///   reply and config topics, publish its own requests and status;
/// - per app MQTT installation, client `{installationID}` bound to that
///   client ID, with role `push-{installationID}`: subscribe to
///   `n/{installationID}`.
///
/// mosquitto 2.0's plugin has no `%c` substitution in ACLs, so every
/// per-client rule names its topics literally.
///
/// Threads: every method may be called from any thread; calls are serialised.
public final class BrokerAdmin: @unchecked Sendable {
    public static let controlTopic = "$CONTROL/dynamic-security/v1"
    public static let responseTopic = controlTopic + "/response"
    public static let hubRole = "thingif-hub"

    private struct State {
        var connected = false
        var subscribed = false
        /// Counts connections, so that a batch sent on a connection that
        /// dropped since is sent again.
        var epoch = 0
        var subscribeMid: Int32 = -1
        var pending: String?
        var answer: JSON?
    }

    private let client: MqttClient
    private let state = Locked(State())
    /// One command batch at a time.
    private let serial = Locked(())
    private let counter = Locked(0)
    public var onLog: (@Sendable (String) -> Void)?

    init?(options: FrameworkSide.Options) {
        guard let c = MqttClient(clientID: "thingif-hub-admin-" + Platform.randomHex(bytes: 8), cleanStart: true) else {
            return nil
        }
        client = c
        _ = c.setCredentials(username: options.brokerUsername, password: options.brokerPassword)
        c.setReconnectDelay(minS: 1, maxS: 2)
    }

    /// Sets TLS; false when the files cannot be used.
    func setTLS(_ tls: FrameworkSide.TLSFiles) -> Bool {
        client.setTLS(cafile: tls.caFile, certfile: tls.certFile, keyfile: tls.keyFile) == MOSQ_ERR_SUCCESS.rawValue
    }

    /// Connects and subscribes to the answers; waits up to `timeoutMs`.
    func start(host: String, port: Int, timeoutMs: Int) -> Bool {
        client.onConnect = { [unowned self] rc in
            guard rc == 0 else {
                self.onLog?("the broker refused the admin connection: \(MqttClient.describeConnack(rc))")
                return
            }
            let mid = self.client.subscribe(BrokerAdmin.responseTopic, qos: 1).mid
            self.state.withLock {
                $0.connected = true
                $0.subscribeMid = mid
                $0.epoch += 1
            }
        }
        client.onDisconnect = { [unowned self] _ in
            self.state.withLock {
                $0.connected = false
                $0.subscribed = false
            }
        }
        client.onSubscribe = { [unowned self] mid in
            self.state.withLock { s in if mid == s.subscribeMid { s.subscribed = true } }
        }
        client.onMessage = { [unowned self] m in self.received(m) }
        guard client.connect(host: host, port: port, keepalive: 30) == MOSQ_ERR_SUCCESS.rawValue,
            client.startThread() == MOSQ_ERR_SUCCESS.rawValue
        else { return false }
        return waitReady(timeoutMs: timeoutMs)
    }

    private func waitReady(timeoutMs: Int) -> Bool {
        let deadline = Platform.nowMs() + Int64(timeoutMs)
        while !state.withLock({ $0.connected && $0.subscribed }) {
            if Platform.nowMs() >= deadline { return false }
            Platform.sleepMs(5)
        }
        return true
    }

    func stop() {
        client.disconnect()
        _ = client.stopThread(force: false)
    }

    private func received(_ m: MqttClient.Message) {
        guard m.topic == BrokerAdmin.responseTopic, case .success(let j) = JSON.parse(m.payload),
            let first = j["responses"]?.elements.first, let tag = first["correlationData"]?.stringValue
        else { return }
        state.withLock { s in
            if s.pending == tag { s.answer = j }
        }
    }

    /// One answer of the plugin: the command's name and its error, if any.
    public struct Outcome: Sendable {
        public var command: String
        public var error: String?
        /// The answer's "data" member as JSON text (for get… commands).
        public var data: String?
        public var isSuccess: Bool { error == nil }
        /// "already exists" and "not found" answers make creation and removal idempotent.
        public var alreadyExists: Bool { error?.contains("already exists") ?? false }
        public var notFound: Bool { error?.contains("not found") ?? false }
    }

    /// Sends a batch of commands and waits for their answers (in order);
    /// nil when no answer came within `timeoutMs`. The plugin answers in
    /// milliseconds on an idle broker, but each change rewrites its whole
    /// file (a quarter second at 10,000 things, docs/SCALING.md) and the
    /// broker is one thread: 15 s, not 5, so that a busy broker is not
    /// taken for a missing plugin (one CI run's hub start, on a loaded
    /// machine, was).
    public func run(_ commands: [JSON], timeoutMs: Int = 15_000) -> [Outcome]? {
        serial.withLock { _ in
            let tag =
                "thingif-"
                + String(
                    counter.withLock { n -> Int in
                        n += 1; return n
                    })
            let list = JSON.array()
            for c in commands {
                c.set("correlationData", string: tag)
                list.append(c)
            }
            let doc = JSON.object()
            doc.set("commands", list)
            state.withLock {
                $0.pending = tag
                $0.answer = nil
            }
            defer { state.withLock { $0.pending = nil } }
            let deadline = Platform.nowMs() + Int64(timeoutMs)
            var answer: JSON?
            var sentOn = -1
            while answer == nil && Platform.nowMs() < deadline {
                // After a kick (the plugin drops clients whose rights change)
                // the connection comes back; send once it is ready, and again
                // if it dropped since (the commands are idempotent).
                let (ready, epoch) = state.withLock { ($0.connected && $0.subscribed, $0.epoch) }
                if ready && epoch != sentOn
                    && client.publish(topic: BrokerAdmin.controlTopic, payload: doc.dumpBytes(), qos: 1)
                        == MOSQ_ERR_SUCCESS.rawValue
                {
                    sentOn = epoch
                }
                Platform.sleepMs(1)
                answer = state.withLock { $0.answer }
            }
            guard let answer, let responses = answer["responses"]?.elements else { return nil }
            return responses.map {
                Outcome(
                    command: $0["command"]?.stringValue ?? "", error: $0["error"]?.stringValue,
                    data: $0["data"]?.dump())
            }
        }
    }

    // MARK: commands

    static func command(_ name: String, _ fields: [(String, JSON)]) -> JSON {
        let c = JSON.object()
        c.set("command", string: name)
        for (k, v) in fields { c.set(k, v) }
        return c
    }

    static func str(_ s: String) -> JSON { JSON.string(s) ?? JSON.null() }

    /// An ACL entry: acltype publishClientSend, publishClientReceive,
    /// subscribeLiteral, subscribePattern, unsubscribeLiteral or unsubscribePattern.
    static func acl(_ type: String, _ topic: String, allow: Bool, priority: Int = 0) -> JSON {
        let a = JSON.object()
        a.set("acltype", string: type)
        a.set("topic", string: topic)
        a.set("priority", JSON.int(priority))
        a.set("allow", JSON.bool(allow))
        return a
    }

    static func roles(_ names: [String]) -> JSON {
        let list = JSON.array()
        for n in names {
            let r = JSON.object()
            r.set("rolename", string: n)
            list.append(r)
        }
        return list
    }

    static func list(_ items: [JSON]) -> JSON {
        let l = JSON.array()
        for i in items { l.append(i) }
        return l
    }

    /// The rules of a thing installation whose client ID is `topic`; a
    /// gateway's (`gateway`) also reads its end nodes' command and events
    /// topics and writes their status topics, under its own client ID only
    /// (docs/GATEWAYS.md §4.3); it writes neither of the first two (only the
    /// hub does). No end node has a role of its own.
    public static func thingACLs(topic: String, appID: String, gateway: Bool = false) -> [JSON] {
        var rules = [
            acl("subscribeLiteral", topic, allow: true),
            acl("subscribeLiteral", Topics.response(clientID: topic), allow: true),
            acl("subscribeLiteral", Topics.config(clientID: topic), allow: true),
            acl(
                "publishClientSend", Topics.request(clientID: topic, api: .thingIF, appID: appID, path: "#"),
                allow: true),
            acl("publishClientSend", Topics.request(clientID: topic, api: .kii, appID: appID, path: "#"), allow: true),
            acl("publishClientSend", Topics.status(clientID: topic), allow: true)
        ]
        if gateway {
            rules += [
                acl("subscribeLiteral", Topics.endNodeCommands(clientID: topic, endNode: "+"), allow: true),
                acl("subscribeLiteral", Topics.endNodeEvents(clientID: topic, endNode: "+"), allow: true),
                acl("publishClientSend", Topics.endNodeStatus(clientID: topic, endNode: "+"), allow: true)
            ]
        }
        return rules
    }

    /// The rules of bootstrap connections (the app's credentials). Without
    /// `%c`, a bootstrap client may read `p/{X}/resp` for any concrete X it
    /// names; the filter `p/+/resp` itself, the only wildcard filter within
    /// that pattern, is refused. Client IDs are unguessable (64 bits and more).
    public static func onboardingACLs(appID: String) -> [JSON] {
        [
            acl(
                "publishClientSend", Topics.request(clientID: "+", api: .thingIF, appID: appID, path: "onboardings"),
                allow: true),
            acl(
                "publishClientSend", Topics.request(clientID: "+", api: .kii, appID: appID, path: "installations"),
                allow: true),
            acl(
                "publishClientSend",
                Topics.request(
                    clientID: "+", api: .kii, appID: appID,
                    path: "installations/+/mqtt-endpoint"), allow: true),
            acl("subscribeLiteral", Topics.response(clientID: "+"), allow: false, priority: 10),
            acl("subscribePattern", Topics.response(clientID: "+"), allow: true)
        ]
    }

    /// The last rules of every role the hub makes: deny every other
    /// subscription and publish. Without them the plugin's default deny
    /// defers to the broker's acl_file (mosquitto 2.0.11), which holds the
    /// patterns of things with certificates and allows every subscription,
    /// so a client of the plugin could subscribe to anything and read what
    /// the plugin's default lets it receive. With them the plugin decides
    /// for its own clients; the file speaks only for the certificate
    /// listener's clients, whom the plugin does not know.
    /// (New objects each time: a JSON value belongs to one list.)
    public static var denyTheRest: [JSON] {
        [
            acl("subscribePattern", "#", allow: false, priority: -1000),
            acl("publishClientSend", "#", allow: false, priority: -1000)
        ]
    }

    public static func onboardingRole(appID: String) -> String { "thingif-onboarding-\(appID)" }
    public static func thingRole(topic: String) -> String { "thing-\(topic)" }
    public static func pushRole(installationID: String) -> String { "push-\(installationID)" }

    // MARK: what the hub makes

    /// Checks that the hub's own client may publish commands, configs and
    /// replies (role thingif-hub), and makes the bootstrap identity of the
    /// app, or without `bootstrap` (claims only) removes it if an earlier
    /// start made it. Idempotent. Returns a problem, or nil.
    func provision(hubUsername: String, appID: String, appKey: String, bootstrap: Bool = true) -> String? {
        // The plugin drops a client whose roles change: the hub's role is
        // added only when missing, so a restarted hub is not kicked.
        guard let got = run([BrokerAdmin.command("getClient", [("username", BrokerAdmin.str(hubUsername))])]),
            let info = got.first
        else { return "no answer from the broker's dynamic-security plugin" }
        guard info.isSuccess else {
            return "the broker does not know the hub's client \(hubUsername): \(info.error ?? "")"
        }
        var roles: [String] = []
        if let text = info.data, case .success(let d) = JSON.parse(text) {
            roles = d["client"]?["roles"]?.elements.compactMap { $0["rolename"]?.stringValue } ?? []
        }
        guard roles.contains(BrokerAdmin.hubRole) else {
            // The plugin drops a client whose roles change, so the hub does
            // not change its own: the operator gives the role once.
            return "the hub's broker client \(hubUsername) lacks the role \(BrokerAdmin.hubRole); make it once with: "
                + "mosquitto_ctrl dynsec createRole \(BrokerAdmin.hubRole); "
                + "mosquitto_ctrl dynsec addRoleACL \(BrokerAdmin.hubRole) publishClientSend '#' allow; "
                + "mosquitto_ctrl dynsec addRoleACL \(BrokerAdmin.hubRole) subscribePattern '#' allow; "
                + "mosquitto_ctrl dynsec addClientRole \(hubUsername) \(BrokerAdmin.hubRole) "
                + "(deploy/make-broker-config.sh does it)"
        }
        let role = BrokerAdmin.onboardingRole(appID: appID)
        guard bootstrap else {
            // The plugin disconnects a connected client it deletes.
            return remove(username: appID, role: role) ? nil : "cannot remove the bootstrap identity \(appID)"
        }
        if let problem = ensureClient(
            username: appID, password: appKey, clientID: nil, role: role,
            acls: BrokerAdmin.onboardingACLs(appID: appID))
        {
            return "cannot make the bootstrap identity: \(problem)"
        }
        return nil
    }

    /// Makes (or re-keys) the broker client of a thing installation and
    /// returns its new password; nil when the broker did not agree. A
    /// gateway's role gets its end-node rules, also when a hub that did not
    /// give them made the role.
    func thingCredentials(topic: String, appID: String, gateway: Bool = false) -> String? {
        credentials(
            username: topic, role: BrokerAdmin.thingRole(topic: topic),
            acls: BrokerAdmin.thingACLs(topic: topic, appID: appID, gateway: gateway))
    }

    /// The same for an app's MQTT (push) installation, which reads `topic`.
    func pushCredentials(installationID: String, topic: String) -> String? {
        credentials(
            username: installationID, role: BrokerAdmin.pushRole(installationID: installationID),
            acls: [BrokerAdmin.acl("subscribeLiteral", topic, allow: true)])
    }

    private func credentials(username: String, role: String, acls: [JSON]) -> String? {
        let password = Platform.randomHex(bytes: 24)
        if let problem = ensureClient(
            username: username, password: password, clientID: username, role: role, acls: acls)
        {
            onLog?("broker client \(username): \(problem)")
            return nil
        }
        return password
    }

    /// Creates a client with its own role, or, when they exist already (a
    /// restart, a re-onboarding, a changed app key or prefix), gives the
    /// role every rule of `acls` (and the final deny) it lacks and sets the client's password
    /// (the plugin drops the old session). The plugin keeps one rule per
    /// type and topic ("ACL with this topic already exists"), so rules
    /// given again do not pile up; none is taken away. Returns what went
    /// wrong, nil on success.
    private func ensureClient(username: String, password: String, clientID: String?, role: String, acls: [JSON])
        -> String?
    {
        var client: [(String, JSON)] = [
            ("username", BrokerAdmin.str(username)), ("password", BrokerAdmin.str(password))
        ]
        if let clientID { client.append(("clientid", BrokerAdmin.str(clientID))) }
        client.append(("roles", BrokerAdmin.roles([role])))
        guard
            let out = run([
                BrokerAdmin.command(
                    "createRole",
                    [("rolename", BrokerAdmin.str(role)), ("acls", BrokerAdmin.list(acls + BrokerAdmin.denyTheRest))]
                ),
                BrokerAdmin.command("createClient", client)
            ])
        else { return "no answer from the broker's dynamic-security plugin" }
        if let bad = out.first(where: { !$0.isSuccess && !$0.alreadyExists }) {
            return "the broker refused \(bad.command): \(bad.error ?? "")"
        }
        var again: [JSON] = []
        if out.first?.alreadyExists == true {
            for a in acls + BrokerAdmin.denyTheRest {
                let c = BrokerAdmin.command("addRoleACL", [("rolename", BrokerAdmin.str(role))])
                for (k, v) in a.members { c.set(k, v) }
                again.append(c)
            }
        }
        if out.last?.alreadyExists == true {
            again.append(
                BrokerAdmin.command(
                    "setClientPassword",
                    [("username", BrokerAdmin.str(username)), ("password", BrokerAdmin.str(password))]))
        }
        if !again.isEmpty {
            guard let set = run(again) else { return "no answer from the broker's dynamic-security plugin" }
            if let bad = set.first(where: { !$0.isSuccess && !$0.alreadyExists }) {
                return "the broker refused \(bad.command): \(bad.error ?? "")"
            }
        }
        return nil
    }

    /// Removes a client and its role (a deleted thing or installation); the
    /// plugin disconnects a client that is connected. True when the broker
    /// confirmed both, or did not know them (removal is idempotent): an
    /// installation whose thing got a client certificate has neither, and
    /// the plugin saves nothing for a command that found nothing.
    @discardableResult
    func remove(username: String, role: String) -> Bool {
        guard
            let out = run([
                BrokerAdmin.command("deleteClient", [("username", BrokerAdmin.str(username))]),
                BrokerAdmin.command("deleteRole", [("rolename", BrokerAdmin.str(role))])
            ])
        else { return false }
        return out.count == 2 && out.allSatisfy { $0.isSuccess || $0.notFound }
    }
}

// MARK: Home Assistant

extension BrokerAdmin {
    public static func homeAssistantRole(username: String) -> String { "homeassistant-\(username)" }

    /// The rules of Home Assistant's client: read the discovery configs
    /// (`<prefix>/#`) and the things' state and availability topics that
    /// the hub publishes; publish only its birth message (`<prefix>/status`)
    /// and its command topics (`thingif/+/set/+`), which the hub turns into
    /// Thing-IF commands. Never a thing's own topics (p/…, commands).
    public static func homeAssistantACLs(prefix: String) -> [JSON] {
        [
            acl("subscribePattern", "\(prefix)/#", allow: true),
            acl("subscribePattern", HATopics.state("+"), allow: true),
            acl("subscribePattern", HATopics.availability("+"), allow: true),
            acl("publishClientSend", HATopics.status(prefix: prefix), allow: true),
            acl("publishClientSend", HATopics.commandFilter, allow: true)
        ]
    }

    /// Makes Home Assistant's client (any client ID) with `password`, or
    /// sets the password and the rules of one that exists. nil when done.
    func homeAssistantClient(username: String, password: String, prefix: String) -> String? {
        ensureClient(
            username: username, password: password, clientID: nil,
            role: BrokerAdmin.homeAssistantRole(username: username),
            acls: BrokerAdmin.homeAssistantACLs(prefix: prefix)
        ).map { "cannot make Home Assistant's client: \($0)" }
    }
}
