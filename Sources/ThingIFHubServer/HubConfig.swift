// SPDX-License-Identifier: Apache-2.0

import Configuration
import ThingIF
import ThingIFHub

/// The configuration of thingif-hub, from flags, environment (THINGIF_HUB_*)
/// and a JSON file (`--config FILE` or THINGIF_HUB_CONFIG). Precedence:
/// flags > environment > file > defaults.
public struct HubConfig: Equatable, Sendable {
    public var brokerHost = "127.0.0.1"
    public var brokerPort = 1883
    public var httpHost = "127.0.0.1"
    public var httpPort = 8080
    public var appID = "demoApp"
    public var appKey = "demoKey"
    public var db = "./thingif-hub.sqlite"
    /// True when db was set (by any source), not defaulted.
    public var dbGiven = false
    /// The most connections to a PostgreSQL db the hub opens at once.
    public var dbConnections = PostgresStore.defaultConnections
    public var memory = false

    /// Where the hub keeps its data.
    public enum Storage: Equatable, Sendable {
        case memory
        /// An SQLite file (the default).
        case sqlite(path: String)
        /// A PostgreSQL database: db is a postgres:// or postgresql:// URL.
        case postgres(url: String)
    }

    /// --memory, else PostgreSQL when db is a postgres:// URL, else SQLite.
    public var storage: Storage {
        if memory { return .memory }
        return PostgresStore.isURL(db) ? .postgres(url: db) : .sqlite(path: db)
    }

    public var advertisedHost: String?
    public var advertisedPort: Int?
    public var quiet = false
    /// PBKDF2 iterations of new password hashes; at least 600,000 unless
    /// insecureFastPasswordHash (tests only).
    public var passwordIterations = 600_000
    public var insecureFastPasswordHash = false
    /// Connect without a broker identity (an open development broker only).
    public var insecureAnonymousBroker = false
    /// Seconds users' tokens live (0: no expiry); things' tokens likewise.
    public var tokenLifetime: Int64 = 30 * 86_400
    public var thingTokenLifetime: Int64 = 0
    /// Bytes: the largest state upload, the largest other body.
    public var maxStateBody = 64 * 1024
    public var maxBody = 64 * 1024
    /// The most state history samples one read returns.
    public var maxHistoryPage = 1000
    /// The most end nodes one gateway carries.
    public var maxEndNodesPerGateway = HubLimits.defaultMaxEndNodesPerGateway
    /// Bytes: the largest firmware image an upload may store.
    public var maxImageBytes = HubLimits.defaultMaxImageBytes
    /// Update jobs' block serving (docs/UPDATES.md §9): reads in flight per
    /// thing, the pool's threads and queue, bytes a second in all (0: no cap).
    public var updateRequestsPerThing = HubLimits.defaultUpdateRequestsPerThing
    public var updateServeThreads = HubLimits.defaultUpdateServeThreads
    public var updateServeQueue = HubLimits.defaultUpdateServeQueue
    public var updateBytesPerSecond = HubLimits.defaultUpdateBytesPerSecond
    /// Requests a second each user and each thing may make on average, and
    /// at once; rateLimit 0 turns the limit off.
    public var rateLimit = 20
    public var rateBurst = 100
    /// Newest state samples kept per thing (0: all), and days kept (0: no limit).
    public var stateRetention = 100_000
    public var stateRetentionDays = 0
    /// host:port entries webhooks may reach although they are not public.
    public var webhookAllow: [String] = []
    /// PEM files: serve the REST API over HTTPS.
    public var tlsCert: String?
    public var tlsKey: String?
    /// The hub's own identity at the broker.
    public var brokerUsername: String?
    public var brokerPassword: String?
    public var brokerCAFile: String?
    public var brokerCertFile: String?
    public var brokerKeyFile: String?
    public var advertisedTLSPort: Int?
    /// The things' CA (PEM certificate and key, both or neither): things
    /// that send a CSR get a client certificate valid thingCertDays days,
    /// for the broker listener advertisedCertPort.
    public var thingCACert: String?
    public var thingCAKey: String?
    public var thingCertDays = FrameworkSide.ThingCAFiles.defaultDays
    public var advertisedCertPort: Int?
    /// The things' CRL the hub writes (PEM; the broker's crlfile), and the
    /// broker's pid file, whose process gets SIGHUP after each write.
    public var thingCRL: String?
    public var brokerPidFile: String?
    public var brokerACL: String?
    /// "dynsec" (a broker client per thing installation) or "none" (the
    /// hub administers nothing in the broker; certificates only).
    public var brokerAdmin = FrameworkSide.BrokerAdminMode.dynsec.rawValue
    /// How several hubs split the things' requests: "auto" (by the broker's
    /// CONNACK), "shared" ($share) or "partitioned" (SubscriptionMode).
    public var subscriptions = SubscriptionMode.auto.rawValue
    /// When set, GET /metrics requires `Authorization: Bearer <metricsToken>`.
    public var metricsToken: String?
    /// The costly work's pool (password hashing, broker credentials):
    /// threads (0: cores - 1, at least 1) and jobs that may wait (then 503).
    public var costlyThreads = 0
    public var costlyQueue = CostlyWork.defaultQueueLimit
    /// MQTT bootstrap requests (onboardings, installations, endpoints): a
    /// global budget a second and at once; beyond it they are dropped.
    public var bootstrapRate = 20
    public var bootstrapBurst = 200
    /// A thing's requests (results, state, …: per MQTT client ID, and per
    /// token over HTTP): a budget a second and at once; beyond it 429,
    /// which libthingif answers by sending again after its request timeout.
    public var thingRate = 200
    public var thingBurst = 2000
    /// Sign-up, login, token and onboarding by the thing over HTTP: per
    /// source address (IPv4 /32, IPv6 /64) and for the whole app, a second
    /// and at once; a rate of 0 turns that budget off.
    public var addressRate = 2
    public var addressBurst = 20
    public var appAnonymousRate = 50
    public var appAnonymousBurst = 500
    /// Peers whose X-Forwarded-For is believed (addresses or CIDR prefixes).
    public var trustedProxies: [String] = []
    /// HTTP: seconds for a request's head, for its body, idle keep-alive
    /// seconds, open connections, and of them per client address (0: no limit).
    public var httpHeaderTimeout = HTTPConnectionLimits.defaultHeaderTimeout
    public var httpBodyTimeout = HTTPConnectionLimits.defaultBodyTimeout
    public var httpIdleTimeout = HTTPConnectionLimits.defaultIdleTimeout
    public var httpMaxConnections = HTTPConnectionLimits.defaultMaxConnections
    public var httpMaxConnectionsPerAddress = HTTPConnectionLimits.defaultMaxConnectionsPerAddress
    /// Things created by onboarding by the thing, app-wide, per hour (0: no cap).
    public var thingsCreatedPerHour = 3600
    /// MQTT installations of apps per user and per app (0: no cap).
    public var mqttInstallationsPerUser = 16
    public var mqttInstallationsPerApp = 100_000
    /// "open" (Kii's way: any vendorThingID onboards) or "enrolled" (only
    /// those imported by the operator).
    public var onboarding = "open"
    /// The operator's token for POST …/things/import (nil: the route is off).
    public var adminToken: String?
    /// Claim batches whose onboardings the hub refuses (fleet provisioning
    /// by claim: a retired batch).
    public var refusedClaims: [String] = []
    /// Devices onboard with claim certificates only (no bootstrap identity).
    public var claimsOnly = false
    /// Home Assistant's MQTT discovery (on by default), under this prefix,
    /// with the thing type mappings of this JSON file beside the built-in one.
    public var haDiscovery = true
    public var haDiscoveryPrefix = "homeassistant"
    public var haMappingsFile: String?
    /// Home Assistant's own broker client, made by the hub when both are set.
    public var haUsername: String?
    public var haPassword: String?
    /// Commands' lifetimes in seconds (CommandLifetimes): the TTL of a
    /// command posted without one (0: none), and how long one may stay
    /// undelivered or unanswered before it ends EXPIRED (0: no bound).
    public var commandTimeToLive: Int64 = 0
    public var commandUndeliveredLimit: Int64 = 86_400
    public var commandUnansweredLimit: Int64 = 86_400
    /// How long a cancel of a DELIVERED command waits for the thing's
    /// answer, in ms (FrameworkSide.Options.cancelWaitMs).
    public var commandCancelWaitMs: Int64 = CommandLifetimes.defaultCancelWaitMs

    public init() {}

    public enum Outcome: Equatable {
        case run(HubConfig)
        case help
    }

    public struct ConfigError: Error, CustomStringConvertible, Equatable {
        public let description: String
    }

    /// The usage: every option's flags, help and default, then the
    /// environment variables and file keys, all generated from `sections`.
    public static let usage = generatedUsage()

    /// Every flag and environment variable (without THINGIF_HUB_) of the
    /// options table, for the test that the usage names them all.
    static var allFlags: [String] { options.flatMap(\.flags) }
    static var allEnvironment: [String] { options.map(\.env) }

    // MARK: The options table

    /// One option, said once: its file key, its flags (the first also names
    /// its environment variable: --broker-host, THINGIF_HUB_BROKER_HOST), the
    /// placeholder of its value (nil: a switch), its help, how a value is
    /// checked and stored, and how its default (a field of HubConfig()) shows.
    private struct Option {
        var key: String
        var flags: [String]
        var arg: String?
        var kind: Kind
        var help: String
        var set: (inout HubConfig, String) throws -> Void
        var shown: (HubConfig) -> String?
        /// A password, a token or what may hold one: redacted in the
        /// access log (swift-configuration's CONFIG_ACCESS_LOG_FILE).
        var isSecret = false

        /// BROKER_HOST for --broker-host.
        var env: String { String(flags[0].dropFirst(2).uppercased().map { $0 == "-" ? "_" : $0 }) }

        /// This option, doing `more` after it stores a value.
        func also(_ more: @escaping (inout HubConfig) -> Void) -> Option {
            var o = self
            o.set = {
                try self.set(&$0, $1)
                more(&$0)
            }
            return o
        }

        func secret() -> Option {
            var o = self
            o.isSecret = true
            return o
        }
    }

    /// What a value is: the file takes a number for a number, true or false
    /// for a switch, an array of strings for a list, and a string for any.
    private enum Kind { case text, number, toggle, list }

    /// A value's check: nil, or the one-line error for `key`.
    private typealias Check = (_ key: String, _ value: String) -> String?

    private static let nonEmpty: Check = { key, v in v.isEmpty ? "\(key) must not be empty" : nil }
    private static let anyText: Check = { _, _ in nil }

    /// `v`, unless `check` refuses it.
    private static func checked(_ key: String, _ v: String, _ check: Check) throws -> String {
        if let message = check(key, v) { throw ConfigError(description: message) }
        return v
    }

    /// An option whose value `parse` makes (or refuses, with the one-line
    /// error) and stores at `path`; `shown` gives its default for the usage.
    private static func option<T>(
        _ key: String, _ flags: [String], _ arg: String?, _ kind: Kind, _ path: WritableKeyPath<HubConfig, T>,
        _ help: String, parse: @escaping (String) throws -> T, shown: @escaping (T) -> String?
    ) -> Option {
        Option(
            key: key, flags: flags, arg: arg, kind: kind, help: help, set: { $0[keyPath: path] = try parse($1) },
            shown: { shown($0[keyPath: path]) })
    }

    private static func text(
        _ key: String, _ flags: [String], _ arg: String, _ path: WritableKeyPath<HubConfig, String>, _ help: String,
        check: @escaping Check = nonEmpty
    ) -> Option {
        option(key, flags, arg, .text, path, help, parse: { try checked(key, $0, check) }, shown: { $0 })
    }

    /// A string that has no default.
    private static func text(
        _ key: String, _ flags: [String], _ arg: String, _ path: WritableKeyPath<HubConfig, String?>, _ help: String,
        check: @escaping Check = nonEmpty
    ) -> Option {
        option(key, flags, arg, .text, path, help, parse: { try checked(key, $0, check) }, shown: { $0 })
    }

    /// A whole number of at least `min` and, with `max`, at most max.limit max.unit.
    private static func number<N: FixedWidthInteger>(
        _ key: String, _ flags: [String], _ arg: String, _ path: WritableKeyPath<HubConfig, N>, _ help: String,
        min: Int = 0, max: (limit: Int, unit: String)? = nil
    ) -> Option {
        option(
            key, flags, arg, .number, path, help,
            parse: { v in
                guard let n = Int(v), n >= min else {
                    throw ConfigError(description: "\(key) must be a whole number of at least \(min), not \(v)")
                }
                if let max, n > max.limit {
                    throw ConfigError(description: "\(key) must be at most \(max.limit) \(max.unit), not \(v)")
                }
                return N(n)
            }, shown: { "\($0)" })
    }

    private static func portNumber(_ key: String, _ v: String, allowZero: Bool = false) throws -> Int {
        guard let p = Int(v), (allowZero ? 0 : 1)...65535 ~= p else {
            throw ConfigError(description: "\(key) must be a port number, not \(v)")
        }
        return p
    }

    private static func port(
        _ key: String, _ flags: [String], _ path: WritableKeyPath<HubConfig, Int>, _ help: String,
        allowZero: Bool = false
    ) -> Option {
        option(
            key, flags, "P", .number, path, help, parse: { try portNumber(key, $0, allowZero: allowZero) },
            shown: { "\($0)" })
    }

    /// A port that has no default.
    private static func port(
        _ key: String, _ flags: [String], _ path: WritableKeyPath<HubConfig, Int?>, _ help: String
    ) -> Option {
        option(key, flags, "P", .number, path, help, parse: { try portNumber(key, $0) }, shown: { $0.map { "\($0)" } })
    }

    /// A switch: a flag alone is true; a value is 1/true/yes/on or 0/false/no/off.
    private static func toggle(
        _ key: String, _ flags: [String], _ path: WritableKeyPath<HubConfig, Bool>, _ help: String
    ) -> Option {
        option(
            key, flags, nil, .toggle, path, help,
            parse: { v in
                switch v.lowercased() {
                case "1", "true", "yes", "on": return true
                case "0", "false", "no", "off", "": return false
                default: throw ConfigError(description: "\(key) must be true or false, not \(v)")
                }
            }, shown: { $0 ? "true" : nil })
    }

    /// Comma-separated items (in the file, a string or an array of strings).
    private static func list(
        _ key: String, _ flags: [String], _ path: WritableKeyPath<HubConfig, [String]>, _ help: String,
        check: @escaping Check = anyText
    ) -> Option {
        option(
            key, flags, "LIST", .list, path, help,
            parse: { v in
                try v.split(separator: ",").map { String($0).trimmingSpaces() }.filter { !$0.isEmpty }
                    .map { try checked(key, $0, check) }
            }, shown: { _ in nil })
    }

    private static let options: [Option] = sections.flatMap(\.options)

    /// The options under the usage's headings. The defaults are HubConfig's
    /// fields; the usage shows them as "(default …)".
    private static let sections: [(title: String?, options: [Option])] = [
        (
            nil,
            [
                text("brokerHost", ["--broker-host", "--host"], "H", \.brokerHost, "MQTT broker to connect to"),
                port("brokerPort", ["--broker-port", "--port"], \.brokerPort, "its port"),
                text("httpHost", ["--http-host"], "H", \.httpHost, "address of the REST API"),
                port("httpPort", ["--http-port"], \.httpPort, "its port; 0 picks a free one", allowZero: true),
                text("appID", ["--app-id"], "ID", \.appID, "application ID"),
                text("appKey", ["--app-key"], "KEY", \.appKey, "application key"),
                text(
                    "db", ["--db"], "PATH", \.db,
                    "SQLite file, or a PostgreSQL URL postgres://user[:password]@host[:port]/dbname (hubs can share"
                        + " one; prefer THINGIF_HUB_DB or the config file when it holds a password)"
                ).secret().also { $0.dbGiven = true },
                number(
                    "dbConnections", ["--db-connections"], "N", \.dbConnections,
                    "most PostgreSQL connections the hub opens", min: 1),
                text(
                    "subscriptions", ["--subscriptions"], "MODE", \.subscriptions,
                    "how hubs on one database split the things' requests: auto (partitioned when the broker's"
                        + " CONNACK says it has no shared subscriptions), shared ($share/thingif-hub/…), or"
                        + " partitioned (plain subscriptions; 64 partitions leased in the database)"
                ) { key, v in
                    SubscriptionMode(rawValue: v) == nil ? "\(key) must be auto, shared or partitioned, not \(v)" : nil
                },
                toggle("memory", ["--memory"], \.memory, "keep everything in memory instead"),
                text(
                    "advertisedHost", ["--advertised-host"], "H", \.advertisedHost,
                    "broker host given to things (default: the broker host)"),
                port(
                    "advertisedPort", ["--advertised-port"], \.advertisedPort,
                    "broker port given to things (default: the broker port)"),
                toggle("quiet", ["--quiet"], \.quiet, "do not print every request")
            ]
        ),
        (
            "Security:",
            [
                number(
                    "passwordIterations", ["--password-iterations"], "N", \.passwordIterations,
                    "PBKDF2-HMAC-SHA256 iterations of new password hashes, at least the default", min: 1),
                toggle(
                    "insecureFastPasswordHash", ["--insecure-fast-password-hash"], \.insecureFastPasswordHash,
                    "allow fewer iterations: FOR TESTS ONLY, never in production"),
                number(
                    "tokenLifetime", ["--token-lifetime"], "S", \.tokenLifetime,
                    "seconds a user's access token lives (0: no expiry)"),
                number(
                    "thingTokenLifetime", ["--thing-token-lifetime"], "S", \.thingTokenLifetime,
                    "seconds a thing's access token lives (0: no expiry; revocable)"),
                number("maxBody", ["--max-body"], "N", \.maxBody, "largest request body in bytes", min: 1024),
                number(
                    "maxImageBytes", ["--max-image-bytes"], "N", \.maxImageBytes,
                    "largest firmware image an upload may store, in bytes (256 MiB)", min: 1),
                number(
                    "updateRequestsPerThing", ["--update-requests-per-thing"], "N", \.updateRequestsPerThing,
                    "block and hash-page reads one thing may have in flight (4); beyond, 429", min: 1),
                number(
                    "updateServeThreads", ["--update-serve-threads"], "N", \.updateServeThreads,
                    "threads that read blocks for things, off the command lanes (2)", min: 1),
                number(
                    "updateServeQueue", ["--update-serve-queue"], "N", \.updateServeQueue,
                    "block reads that may wait for those threads (256); beyond, 429", min: 1),
                number(
                    "updateBytesPerSecond", ["--update-bytes-per-second"], "N", \.updateBytesPerSecond,
                    "bytes of blocks the hub serves a second in all (32 MiB; 0: no cap); beyond, 429"),
                number(
                    "maxStateBody", ["--max-state-body"], "N", \.maxStateBody, "largest state upload in bytes",
                    min: 1024),
                number(
                    "maxHistoryPage", ["--max-history-page"], "N", \.maxHistoryPage,
                    "most state samples one history read returns", min: 1),
                number(
                    "maxEndNodesPerGateway", ["--max-end-nodes-per-gateway"], "N", \.maxEndNodesPerGateway,
                    "most end nodes one gateway carries; the onboarding past it is 409",
                    min: HubLimits.endNodesPerGatewayRange.lowerBound,
                    max: (HubLimits.endNodesPerGatewayRange.upperBound, "end nodes")),
                number(
                    "rateLimit", ["--rate-limit"], "N", \.rateLimit,
                    "requests a second per user and per thing (0: off)"),
                number(
                    "rateBurst", ["--rate-burst"], "N", \.rateBurst, "requests at once per user and per thing",
                    min: 1),
                number(
                    "stateRetention", ["--state-retention"], "N", \.stateRetention,
                    "newest state samples kept per thing (0: all; up to 1/64 more between cuts)"),
                number(
                    "stateRetentionDays", ["--state-retention-days"], "D", \.stateRetentionDays,
                    "days state samples are kept (0: no limit)"),
                list(
                    "webhookAllow", ["--webhook-allow"], \.webhookAllow,
                    "comma-separated host:port webhooks may reach although not public"),
                text(
                    "tlsCert", ["--tls-cert"], "FILE", \.tlsCert,
                    "PEM certificate chain: serve the REST API over HTTPS"),
                text("tlsKey", ["--tls-key"], "FILE", \.tlsKey, "its PEM private key (both or neither)")
            ]
        ),
        (
            "Floods (docs/SECURITY.md):",
            [
                number(
                    "costlyThreads", ["--costly-threads"], "N", \.costlyThreads,
                    "threads hashing passwords and handing out broker credentials (0: cores - 1, at least 1)"),
                number(
                    "costlyQueue", ["--costly-queue"], "N", \.costlyQueue,
                    "such jobs that may wait; then 503 with Retry-After", min: 1),
                number(
                    "bootstrapRate", ["--bootstrap-rate"], "N", \.bootstrapRate,
                    "MQTT bootstrap requests a second, whatever the client ID; beyond it they are dropped", min: 1),
                number("bootstrapBurst", ["--bootstrap-burst"], "N", \.bootstrapBurst, "and at once", min: 1),
                number(
                    "thingRate", ["--thing-rate"], "N", \.thingRate,
                    "requests a second per thing (MQTT client ID, or token over HTTP); beyond it 429", min: 1),
                number("thingBurst", ["--thing-burst"], "N", \.thingBurst, "and at once", min: 1),
                number(
                    "addressRate", ["--address-rate"], "N", \.addressRate,
                    "sign-ups, logins, tokens and onboardings by the thing over HTTP a second per source address,"
                        + " IPv4 /32 or IPv6 /64 (0: off)"),
                number("addressBurst", ["--address-burst"], "N", \.addressBurst, "and at once", min: 1),
                number(
                    "appAnonymousRate", ["--app-anonymous-rate"], "N", \.appAnonymousRate,
                    "the same calls a second for the whole app (0: off)"),
                number(
                    "appAnonymousBurst", ["--app-anonymous-burst"], "N", \.appAnonymousBurst, "and at once", min: 1),
                list(
                    "trustedProxies", ["--trusted-proxies"], \.trustedProxies,
                    "comma-separated addresses or CIDRs whose X-Forwarded-For is believed"
                ) { key, p in
                    ClientAddress.isValidNetwork(p) ? nil : "\(key): \(p) is not an IP address or CIDR prefix"
                },
                number(
                    "httpHeaderTimeout", ["--http-header-timeout"], "S", \.httpHeaderTimeout,
                    "seconds a request's head may take (0: none)"),
                number(
                    "httpBodyTimeout", ["--http-body-timeout"], "S", \.httpBodyTimeout,
                    "seconds its body may take (0: none)"),
                number(
                    "httpIdleTimeout", ["--http-idle-timeout"], "S", \.httpIdleTimeout,
                    "seconds an idle keep-alive connection stays open"),
                number(
                    "httpMaxConnections", ["--http-max-connections"], "N", \.httpMaxConnections,
                    "open HTTP connections at most (0: no limit)"),
                number(
                    "httpMaxConnectionsPerAddress", ["--http-max-connections-per-address"], "N",
                    \.httpMaxConnectionsPerAddress,
                    "of them from one client address, IPv4 /32 or IPv6 /64, the forwarded one behind trusted proxies;"
                        + " beyond it a new one is closed at once (0: no limit)"),
                number(
                    "thingsCreatedPerHour", ["--things-created-per-hour"], "N", \.thingsCreatedPerHour,
                    "things that onboarding by the thing may create an hour, app-wide (0: no cap)"),
                number(
                    "mqttInstallationsPerUser", ["--mqtt-installations-per-user"], "N", \.mqttInstallationsPerUser,
                    "apps' MQTT installations per user (0: no cap)"),
                number(
                    "mqttInstallationsPerApp", ["--mqtt-installations-per-app"], "N", \.mqttInstallationsPerApp,
                    "and per app (0: no cap)"),
                text(
                    "onboarding", ["--onboarding"], "MODE", \.onboarding,
                    "open (any vendorThingID onboards, Kii's way) or enrolled (only those imported: thingif things"
                        + " import FILE.csv)"
                ) { key, v in v == "open" || v == "enrolled" ? nil : "\(key) must be open or enrolled, not \(v)" },
                text(
                    "adminToken", ["--admin-token"], "T", \.adminToken,
                    "the operator's token for POST /api/apps/{appID}/things/import (default: that route is off;"
                        + " prefer THINGIF_HUB_ADMIN_TOKEN)"
                ).secret()
            ]
        ),
        (
            "The hub's broker identity:",
            [
                text("brokerUsername", ["--broker-username"], "U", \.brokerUsername, "user name at the broker"),
                text(
                    "brokerPassword", ["--broker-password"], "P", \.brokerPassword,
                    "its password (prefer THINGIF_HUB_BROKER_PASSWORD or the config file: a flag is visible to"
                        + " every user in ps)", check: anyText
                ).secret(),
                text(
                    "brokerCAFile", ["--broker-cafile"], "FILE", \.brokerCAFile,
                    "CA of the broker's certificate: TLS to the broker"),
                text(
                    "brokerCertFile", ["--broker-certfile"], "FILE", \.brokerCertFile,
                    "client certificate for mutual TLS (with --broker-keyfile)"),
                text("brokerKeyFile", ["--broker-keyfile"], "FILE", \.brokerKeyFile, "its private key"),
                port(
                    "advertisedTLSPort", ["--advertised-tls-port"], \.advertisedTLSPort,
                    "broker TLS port given to things (mqttEndpoint.portSSL)"),
                toggle(
                    "insecureAnonymousBroker", ["--insecure-anonymous-broker"], \.insecureAnonymousBroker,
                    "run without a broker identity, on an open broker (development only: things then get no broker"
                        + " credentials)")
            ]
        ),
        (
            "Things' client certificates (docs/SECURITY.md):",
            [
                text(
                    "thingCACert", ["--thing-ca-cert"], "FILE", \.thingCACert,
                    "PEM CA certificate that signs a client certificate for each thing sending a CSR"),
                text(
                    "thingCAKey", ["--thing-ca-key"], "FILE", \.thingCAKey,
                    "its PEM private key, unencrypted (both or neither)"),
                number(
                    "thingCertDays", ["--thing-cert-days"], "N", \.thingCertDays, "days a thing's certificate is valid",
                    min: 1, max: (FrameworkSide.ThingCAFiles.maxDays, "days")),
                port(
                    "advertisedCertPort", ["--advertised-cert-port"], \.advertisedCertPort,
                    "broker listener for things' certificates, given as mqttEndpoint.portSSL with a certificate"
                        + " (needed with the CA)"),
                list(
                    "refusedClaims", ["--refused-claims"], \.refusedClaims,
                    "claim batches (BATCH of a claim certificate's CN claim.APPID.BATCH) whose onboardings are"
                        + " refused: a retired batch (thingif-hub claim-certificate makes them)"
                ) { key, v in
                    Topics.claimParts(Topics.claimPrefix + "a." + v)?.batch == v
                        ? nil : "\(key): \(v) is no claim batch name (1 to \(Topics.maxClaimBatch) of A-Z a-z 0-9 - _)"
                },
                toggle(
                    "claimsOnly", ["--claims-only"], \.claimsOnly,
                    "devices onboard with claim certificates only: the hub makes no bootstrap identity (app ID and"
                        + " app key) in the broker and removes one made before (needs the CA)"),
                text(
                    "thingCRL", ["--thing-crl"], "FILE", \.thingCRL,
                    "write the CA's revocation list here (the broker's crlfile): deleted things' certificates;"
                        + " re-signed daily, valid 7 days (needs the CA)"),
                text(
                    "brokerPidFile", ["--broker-pid-file"], "FILE", \.brokerPidFile,
                    "mosquitto's pid_file: SIGHUP after each CRL or acl_file write, so the broker reads it again"
                        + " (needs --thing-crl or --broker-acl)"),
                text(
                    "brokerACL", ["--broker-acl"], "FILE", \.brokerACL,
                    "the broker's acl_file: the hub keeps the end-node rights of gateways with certificates in a"
                        + " section at its end (needs the CA)"),
                text(
                    "brokerAdmin", ["--broker-admin"], "MODE", \.brokerAdmin,
                    "dynsec (a broker client per thing in the dynamic-security plugin) or none (nothing in the broker;"
                        + " needs the CA, and things must send a CSR)"
                ) { key, v in
                    FrameworkSide.BrokerAdminMode(rawValue: v) == nil ? "\(key) must be dynsec or none, not \(v)" : nil
                }
            ]
        ),
        (
            "Operations:",
            [
                text(
                    "metricsToken", ["--metrics-token"], "T", \.metricsToken,
                    "require Authorization: Bearer T on GET /metrics (default: open; prefer"
                        + " THINGIF_HUB_METRICS_TOKEN or the config file)"
                ).secret(),
                toggle(
                    "haDiscovery", ["--ha-discovery"], \.haDiscovery, "no Home Assistant MQTT discovery (default: on)"),
                text(
                    "haDiscoveryPrefix", ["--ha-discovery-prefix"], "P", \.haDiscoveryPrefix, "its discovery prefix"
                ) { key, v in
                    HomeAssistantOptions.isValidPrefix(v)
                        ? nil : "\(key) must be topic levels without wildcards, not \(v)"
                },
                text(
                    "haMappingsFile", ["--ha-mappings-file"], "FILE", \.haMappingsFile,
                    "JSON thing type mappings beside the built-in AirConditioner one"),
                text(
                    "haUsername", ["--ha-username"], "U", \.haUsername,
                    "Home Assistant's broker client, made by the hub (with its password)"),
                text(
                    "haPassword", ["--ha-password"], "P", \.haPassword,
                    "its password (prefer THINGIF_HUB_HA_PASSWORD or the config file)"
                ).secret()
            ]
        ),
        (
            "Commands (docs/PROTOCOL.md 9.1):",
            [
                number(
                    "commandTimeToLive", ["--command-ttl"], "S", \.commandTimeToLive,
                    "seconds a command posted without timeToLive lives (0: no expiry)",
                    max: (Int(CommandLifetimes.maxTimeToLive), "seconds")),
                number(
                    "commandUndeliveredLimit", ["--command-undelivered-limit"], "S", \.commandUndeliveredLimit,
                    "seconds a command may stay SENDING before it ends EXPIRED \"undelivered\" (0: never)"),
                number(
                    "commandUnansweredLimit", ["--command-unanswered-limit"], "S", \.commandUnansweredLimit,
                    "seconds a command may stay DELIVERED without results before it ends EXPIRED \"unanswered\""
                        + " (0: never)"),
                number(
                    "commandCancelWait", ["--command-cancel-wait"], "MS", \.commandCancelWaitMs,
                    "how long a cancel of a DELIVERED command waits for the thing's answer before it answers 202,"
                        + " pending", max: (60_000, "ms"))
            ]
        )
    ]

    // MARK: The usage, generated

    private static func generatedUsage() -> String {
        let defaults = HubConfig()
        var lines = [
            "usage: thingif-hub [options]",
            "   or: thingif-hub claim-certificate ... (a claim certificate for a batch of devices; its --help)"
        ]
        lines.append(entry("--config FILE", "JSON file with any of the file keys below (or THINGIF_HUB_CONFIG)"))
        lines.append(entry("-h, --help", "print this text"))
        for (title, options) in sections {
            if let title { lines.append(title) }
            for o in options {
                let shown = o.shown(defaults)
                if let arg = o.arg {
                    let names = o.flags.map { "\($0) \(arg)" }.joined(separator: ", ")
                    lines.append(entry(names, withDefault(o.help, shown)))
                } else {
                    // A switch that is on by default is shown turning it off.
                    let names = o.flags.map { shown == nil ? $0 : "\($0)=false" }.joined(separator: ", ")
                    lines.append(entry(names, o.help))
                }
            }
        }
        let env = ["THINGIF_HUB_" + options[0].env] + options.dropFirst().map { "_" + $0.env } + ["_CONFIG"]
        let keys = options.map { $0.kind == .list ? "\($0.key) (a string or an array of strings)" : $0.key }
        lines.append(wrapped("Environment: ", listed(env), indent: 2))
        lines.append(wrapped("File keys: ", listed(keys), indent: 2))
        lines.append("Precedence: flags > environment > file > defaults.")
        return lines.joined(separator: "\n")
    }

    /// "help (default d)", or "help (note; default d)" when help ends in a note.
    private static func withDefault(_ help: String, _ shown: String?) -> String {
        guard let shown else { return help }
        return help.hasSuffix(")") ? help.dropLast() + "; default \(shown))" : help + " (default \(shown))"
    }

    /// "a, b, c." as words.
    private static func listed(_ items: [String]) -> [String] {
        items.enumerated().map { $1 + ($0 == items.count - 1 ? "." : ",") }
    }

    /// An option's line: its names, then its help from column 30.
    private static func entry(_ names: String, _ help: String) -> String {
        let head = "  " + names
        let padded = head + String(repeating: " ", count: Swift.max(1, 30 - head.count))
        return wrapped(padded, help.split(separator: " ").map(String.init), indent: 30)
    }

    /// `words` after `head`, in lines of at most 100 columns, the next ones
    /// indented by `indent`.
    private static func wrapped(_ head: String, _ words: [String], indent: Int) -> String {
        var lines: [String] = []
        var line = head
        for word in words {
            if line.count + 1 + word.count > 100 && line.count > indent {
                lines.append(line)
                line = String(repeating: " ", count: indent) + word
            } else {
                line += (line.hasSuffix(" ") ? "" : " ") + word
            }
        }
        lines.append(line)
        return lines.joined(separator: "\n")
    }

    // MARK: Loading

    /// Parses the configuration. `readFile` reads the --config file.
    ///
    /// The layers are swift-configuration providers, asked in order: the
    /// flags, the environment (THINGIF_HUB_ + the option's name), the file;
    /// the first that has an option gives its value, which the table then
    /// checks. The flags and the file are read here, strictly (an unknown
    /// flag or key, a missing value, a wrong JSON type is an error), into
    /// in-memory providers.
    public static func load(
        arguments: [String], environment: [String: String],
        readFile: (String) -> [UInt8]?, accessReporter: (any AccessReporter)? = nil
    ) throws -> Outcome {
        var flagValues: [String: String] = [:]
        var configPath = environment["THINGIF_HUB_CONFIG"]
        var args = arguments[...]
        while let a = args.popFirst() {
            if a == "-h" || a == "--help" { return .help }
            var name = a
            var inline: String?
            if a.hasPrefix("--"), let eq = a.firstIndex(of: "=") {
                name = String(a[..<eq])
                inline = String(a[a.index(after: eq)...])
            }
            if name == "--config" {
                guard let v = inline ?? args.popFirst() else {
                    throw ConfigError(description: "--config needs a value")
                }
                configPath = v
                continue
            }
            guard let o = options.first(where: { $0.flags.contains(name) }) else {
                throw ConfigError(description: "unknown argument \(a)")
            }
            if o.kind == .toggle {
                flagValues[o.env] = inline ?? "true"
            } else {
                guard let v = inline ?? args.popFirst() else { throw ConfigError(description: "\(name) needs a value") }
                flagValues[o.env] = v
            }
        }
        var fileValues: [String: String] = [:]
        if let path = configPath, !path.isEmpty {
            fileValues = try readConfigFile(path, readFile)
        }
        func provider(_ name: String, _ values: [String: String]) -> InMemoryProvider {
            InMemoryProvider(
                name: name,
                values: Dictionary(
                    uniqueKeysWithValues: values.map {
                        (AbsoluteConfigKey([$0]), ConfigValue(.string($1), isSecret: false))
                    }
                ))
        }
        let reader = ConfigReader(
            providers: [
                provider("flags", flagValues),
                EnvironmentVariablesProvider(environmentVariables: environment).prefixKeys(with: ["THINGIF_HUB"]),
                provider("config file", fileValues)
            ], accessReporter: accessReporter)
        var c = HubConfig()
        for o in options {
            if let v = reader.string(forKey: [o.env], isSecret: o.isSecret) { try o.set(&c, v) }
        }
        try c.validate()
        return .run(c)
    }

    /// The config file's members as text, by the options' environment
    /// names. A string does for any option; a number for a number, true or
    /// false for a switch, an array of strings for a list.
    private static func readConfigFile(_ path: String, _ readFile: (String) -> [UInt8]?) throws -> [String: String] {
        guard let bytes = readFile(path) else {
            throw ConfigError(description: "cannot read the config file \(path)")
        }
        guard case .success(let j) = JSON.parse(bytes), j.isObject else {
            throw ConfigError(description: "the config file \(path) must hold a JSON object")
        }
        var values: [String: String] = [:]
        for (key, v) in j.members {
            guard let o = options.first(where: { $0.key == key }) else {
                throw ConfigError(description: "unknown key \(key) in \(path)")
            }
            if let s = v.stringValue {
                values[o.env] = s
            } else if let n = v.intValue, o.kind == .number {
                values[o.env] = String(n)
            } else if let b = v.boolValue, o.kind == .toggle {
                values[o.env] = b ? "true" : "false"
            } else if o.kind == .list, v.isArray, v.elements.allSatisfy({ $0.stringValue != nil }) {
                values[o.env] = v.elements.compactMap(\.stringValue).joined(separator: ",")
            } else {
                throw ConfigError(description: "\(key) in \(path) has the wrong type (\(v.typeName))")
            }
        }
        return values
    }

    /// Checks that span several settings.
    func validate() throws {
        if passwordIterations < PasswordHash.defaultIterations && !insecureFastPasswordHash {
            throw ConfigError(
                description:
                    "passwordIterations must be at least \(PasswordHash.defaultIterations) (fewer only with --insecure-fast-password-hash, for tests)"
            )
        }
        if (tlsCert == nil) != (tlsKey == nil) {
            throw ConfigError(description: "tlsCert and tlsKey go together")
        }
        if (brokerCertFile == nil) != (brokerKeyFile == nil) {
            throw ConfigError(description: "brokerCertFile and brokerKeyFile go together")
        }
        if (haUsername == nil) != (haPassword == nil) {
            throw ConfigError(description: "haUsername and haPassword go together")
        }
        if brokerCertFile != nil && brokerCAFile == nil {
            throw ConfigError(description: "brokerCertFile needs brokerCAFile (TLS to the broker)")
        }
        if (thingCACert == nil) != (thingCAKey == nil) {
            throw ConfigError(description: "thingCACert and thingCAKey go together")
        }
        if thingCACert != nil && advertisedCertPort == nil {
            throw ConfigError(
                description: "thingCACert needs advertisedCertPort (the broker listener for things' certificates)")
        }
        if advertisedCertPort != nil && thingCACert == nil {
            throw ConfigError(description: "advertisedCertPort needs thingCACert and thingCAKey")
        }
        if thingCRL != nil && thingCACert == nil {
            throw ConfigError(description: "thingCRL needs thingCACert and thingCAKey (the things' CA signs the CRL)")
        }
        if brokerPidFile != nil && thingCRL == nil && brokerACL == nil {
            throw ConfigError(
                description: "brokerPidFile needs thingCRL or brokerACL (the hub signals the broker to read them)")
        }
        if brokerACL != nil && thingCACert == nil {
            throw ConfigError(
                description:
                    "brokerACL needs thingCACert and thingCAKey (it gives gateways with certificates their rights)")
        }
        if claimsOnly && thingCACert == nil {
            throw ConfigError(
                description: "claimsOnly needs thingCACert and thingCAKey (a claim onboarding gives a certificate)")
        }
        if brokerAdmin == FrameworkSide.BrokerAdminMode.none.rawValue && thingCACert == nil {
            throw ConfigError(
                description:
                    "brokerAdmin none needs thingCACert and thingCAKey (things then connect only with certificates)")
        }
    }

    /// The store's secrets settings.
    public var secrets: HubSecrets {
        HubSecrets(
            passwordIterations: passwordIterations, userTokenLifetime: tokenLifetime,
            thingTokenLifetime: thingTokenLifetime)
    }

    public var retention: StateRetention { StateRetention(maxSamples: stateRetention, maxAgeDays: stateRetentionDays) }

    public var limits: HubLimits {
        HubLimits(
            maxStateBody: maxStateBody, maxBody: maxBody, maxHistoryPage: maxHistoryPage,
            maxEndNodesPerGateway: maxEndNodesPerGateway, maxImageBytes: maxImageBytes,
            updateRequestsPerThing: updateRequestsPerThing, updateServeThreads: updateServeThreads,
            updateServeQueue: updateServeQueue, updateBytesPerSecond: updateBytesPerSecond)
    }

    /// The HTTP connection limits.
    public var connections: HTTPConnectionLimits {
        HTTPConnectionLimits(
            headerTimeoutSeconds: httpHeaderTimeout, bodyTimeoutSeconds: httpBodyTimeout,
            idleTimeoutSeconds: httpIdleTimeout, maxConnections: httpMaxConnections,
            maxConnectionsPerAddress: httpMaxConnectionsPerAddress)
    }

    /// Applies the flood settings that live in FrameworkSide's options.
    public func applyFloodSettings(to o: inout FrameworkSide.Options) {
        o.costlyThreads = costlyThreads > 0 ? costlyThreads : CostlyWork.defaultThreads
        o.costlyQueue = costlyQueue
        o.bootstrapRatePerSecond = Double(bootstrapRate)
        o.bootstrapBurst = bootstrapBurst
        o.requestRatePerSecond = Double(thingRate)
        o.requestBurst = thingBurst
        o.thingsCreatedPerHour = thingsCreatedPerHour
        o.mqttInstallationsPerUser = mqttInstallationsPerUser
        o.mqttInstallationsPerApp = mqttInstallationsPerApp
        o.enrollmentOnly = onboarding == "enrolled"
    }

    /// Commands' expiry and bounds (FrameworkSide.Options.lifetimes).
    public var commandLifetimes: CommandLifetimes {
        CommandLifetimes(
            defaultTimeToLive: commandTimeToLive, undeliveredLimit: commandUndeliveredLimit,
            unansweredLimit: commandUnansweredLimit)
    }

    /// Applies the things' CA settings to FrameworkSide's options.
    public func applyThingCertificates(to o: inout FrameworkSide.Options) {
        if let cert = thingCACert, let key = thingCAKey {
            o.thingCA = FrameworkSide.ThingCAFiles(certFile: cert, keyFile: key)
        }
        o.thingCertDays = thingCertDays
        o.advertisedCertPort = advertisedCertPort
        o.thingCRL = thingCRL
        o.brokerPidFile = brokerPidFile
        o.brokerACL = brokerACL
        o.brokerAdmin = FrameworkSide.BrokerAdminMode(rawValue: brokerAdmin) ?? .dynsec
        o.refusedClaims = Set(refusedClaims)
        o.claimsOnly = claimsOnly
    }

    /// TLS to the broker, when a CA file is set.
    public var brokerTLS: FrameworkSide.TLSFiles? {
        brokerCAFile.map { FrameworkSide.TLSFiles(caFile: $0, certFile: brokerCertFile, keyFile: brokerKeyFile) }
    }
}
