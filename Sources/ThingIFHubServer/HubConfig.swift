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
    /// seconds, open connections (0: no limit).
    public var httpHeaderTimeout = HTTPConnectionLimits.defaultHeaderTimeout
    public var httpBodyTimeout = HTTPConnectionLimits.defaultBodyTimeout
    public var httpIdleTimeout = HTTPConnectionLimits.defaultIdleTimeout
    public var httpMaxConnections = HTTPConnectionLimits.defaultMaxConnections
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

    /// The flags' help (written by hand, one line or more per flag; a test
    /// checks it names every flag of the options table), then the
    /// environment variables and file keys, generated from that table.
    public static let usage = flagHelp + "\n" + generatedLists()

    private static let flagHelp = """
        usage: thingif-hub [options]
          --broker-host H, --host H   MQTT broker to connect to (default 127.0.0.1)
          --broker-port P, --port P   its port (default 1883)
          --http-host H               address of the REST API (default 127.0.0.1)
          --http-port P               its port (default 8080; 0 picks a free one)
          --app-id ID                 application ID (default demoApp)
          --app-key KEY               application key (default demoKey)
          --db PATH                   SQLite file (default ./thingif-hub.sqlite), or a PostgreSQL
                                      URL postgres://user[:password]@host[:port]/dbname (hubs
                                      can share one; prefer THINGIF_HUB_DB or the config file
                                      when it holds a password)
          --db-connections N          most PostgreSQL connections the hub opens (default 4)
          --memory                    keep everything in memory instead
          --advertised-host H         broker host given to things (default: the broker host)
          --advertised-port P         broker port given to things (default: the broker port)
          --config FILE               JSON file with any of the keys below
          --quiet                     do not print every request
        Security:
          --password-iterations N     PBKDF2-HMAC-SHA256 iterations of new password hashes
                                      (default and minimum 600000)
          --insecure-fast-password-hash  allow fewer iterations: FOR TESTS ONLY, never in production
          --token-lifetime S          seconds a user's access token lives (default 2592000, 30 days;
                                      0: no expiry)
          --thing-token-lifetime S    seconds a thing's access token lives (default 0: no expiry;
                                      revocable)
          --max-body N                largest request body in bytes (default 65536)
          --max-state-body N          largest state upload in bytes (default 65536)
          --max-history-page N        most state samples one history read returns (default 1000)
          --rate-limit N              requests a second per user and per thing (default 20; 0: off)
          --rate-burst N              requests at once per user and per thing (default 100)
          --state-retention N         newest state samples kept per thing (default 100000; 0: all)
          --state-retention-days D    days state samples are kept (default 0: no limit)
          --webhook-allow LIST        comma-separated host:port webhooks may reach although not public
          --tls-cert FILE             PEM certificate chain: serve the REST API over HTTPS
          --tls-key FILE              its PEM private key (both or neither)
        Floods (docs/SECURITY.md):
          --costly-threads N          threads hashing passwords and handing out broker credentials
                                      (default 0: cores - 1, at least 1)
          --costly-queue N            such jobs that may wait; then 503 with Retry-After (default 32)
          --bootstrap-rate N          MQTT bootstrap requests a second, whatever the client ID
                                      (default 20); beyond it they are dropped
          --bootstrap-burst N         and at once (default 200)
          --address-rate N            sign-ups, logins, tokens and onboardings by the thing over HTTP
                                      a second per source address, IPv4 /32 or IPv6 /64 (default 2; 0: off)
          --address-burst N           and at once (default 20)
          --app-anonymous-rate N      the same calls a second for the whole app (default 50; 0: off)
          --app-anonymous-burst N     and at once (default 500)
          --trusted-proxies LIST      comma-separated addresses or CIDRs whose X-Forwarded-For is believed
          --http-header-timeout S     seconds a request's head may take (default 10; 0: none)
          --http-body-timeout S       seconds its body may take (default 30; 0: none)
          --http-idle-timeout S       seconds an idle keep-alive connection stays open (default 60)
          --http-max-connections N    open HTTP connections at most (default 1000; 0: no limit)
          --things-created-per-hour N things that onboarding by the thing may create an hour,
                                      app-wide (default 3600; 0: no cap)
          --mqtt-installations-per-user N  apps' MQTT installations per user (default 16; 0: no cap)
          --mqtt-installations-per-app N   and per app (default 100000; 0: no cap)
          --onboarding MODE           open (default: any vendorThingID onboards, Kii's way) or enrolled
                                      (only those imported: thingif things import FILE.csv)
          --admin-token T             the operator's token for POST /api/apps/{appID}/things/import
                                      (default: that route is off; prefer THINGIF_HUB_ADMIN_TOKEN)
        The hub's broker identity:
          --broker-username U         user name at the broker
          --broker-password P         its password (prefer THINGIF_HUB_BROKER_PASSWORD or the
                                      config file: a flag is visible to every user in ps)
          --broker-cafile FILE        CA of the broker's certificate: TLS to the broker
          --broker-certfile FILE      client certificate for mutual TLS (with --broker-keyfile)
          --broker-keyfile FILE       its private key
          --advertised-tls-port P     broker TLS port given to things (mqttEndpoint.portSSL)
          --insecure-anonymous-broker run without a broker identity, on an open broker (development
                                      only: things then get no broker credentials)
        Operations:
          --metrics-token T           require Authorization: Bearer T on GET /metrics (default: open;
                                      prefer THINGIF_HUB_METRICS_TOKEN or the config file)
          --ha-discovery=false        no Home Assistant MQTT discovery (default: on)
          --ha-discovery-prefix P     its discovery prefix (default homeassistant)
          --ha-mappings-file FILE     JSON thing type mappings beside the built-in AirConditioner one
          --ha-username U             Home Assistant's broker client, made by the hub (with its
          --ha-password P             password: prefer THINGIF_HUB_HA_PASSWORD or the config file)
        Commands (docs/PROTOCOL.md 9.1):
          --command-ttl S             seconds a command posted without timeToLive lives (default 0: no expiry)
          --command-undelivered-limit S  seconds a command may stay SENDING before it ends EXPIRED
                                      "undelivered" (default 86400; 0: never)
          --command-unanswered-limit S   seconds a command may stay DELIVERED without results before it
                                      ends EXPIRED "unanswered" (default 86400; 0: never)
          --command-cancel-wait MS    how long a cancel of a DELIVERED command waits for the thing's
                                      answer before it answers 202, pending (default 5000; at most 60000)
        """

    private enum Kind { case string, int, bool, list }

    /// "Environment: …", "File keys: …" and the precedence, from `options`.
    private static func generatedLists() -> String {
        let env = ["THINGIF_HUB_" + options[0].env] + options.dropFirst().map { "_" + $0.env } + ["_CONFIG"]
        let keys = options.map { $0.kind == .list ? "\($0.key) (a string or an array of strings)" : $0.key }
        return wrapped("Environment: ", env) + "\n" + wrapped("File keys: ", keys) + "\n"
            + "Precedence: flags > environment > file > defaults."
    }

    /// `items` after `label`, comma-separated, ending with a full stop, in
    /// lines of at most 100 columns.
    private static func wrapped(_ label: String, _ items: [String]) -> String {
        var lines: [String] = []
        var line = label
        for (i, item) in items.enumerated() {
            let word = item + (i == items.count - 1 ? "." : ",")
            if line.count + 1 + word.count > 100 && line.count > 2 {
                lines.append(line)
                line = "  " + word
            } else {
                line += (line.hasSuffix(" ") ? "" : " ") + word
            }
        }
        lines.append(line)
        return lines.joined(separator: "\n")
    }

    /// Every flag and environment variable (without THINGIF_HUB_) of the
    /// options table, for the test that the usage names them all.
    static var allFlags: [String] { options.flatMap(\.flags) }
    static var allEnvironment: [String] { options.map(\.env) }

    private struct Option {
        var key: String
        var flags: [String]
        var env: String
        var kind: Kind
        var apply: (inout HubConfig, String) throws -> Void
    }

    private static func port(_ s: String, _ name: String, allowZero: Bool = false) throws -> Int {
        guard let p = Int(s), (allowZero ? 0 : 1)...65535 ~= p else {
            throw ConfigError(description: "\(name) must be a port number, not \(s)")
        }
        return p
    }

    private static func bool(_ s: String, _ name: String) throws -> Bool {
        switch s.lowercased() {
        case "1", "true", "yes", "on": return true
        case "0", "false", "no", "off", "": return false
        default: throw ConfigError(description: "\(name) must be true or false, not \(s)")
        }
    }

    private static func nonEmpty(_ s: String, _ name: String) throws -> String {
        guard !s.isEmpty else { throw ConfigError(description: "\(name) must not be empty") }
        return s
    }

    private static func count(_ s: String, _ name: String, min: Int = 0) throws -> Int {
        guard let n = Int(s), n >= min else {
            throw ConfigError(description: "\(name) must be a whole number of at least \(min), not \(s)")
        }
        return n
    }

    private static let options: [Option] = [
        Option(key: "passwordIterations", flags: ["--password-iterations"], env: "PASSWORD_ITERATIONS", kind: .int) {
            $0.passwordIterations = try count($1, "passwordIterations", min: 1)
        },
        Option(
            key: "insecureFastPasswordHash", flags: ["--insecure-fast-password-hash"],
            env: "INSECURE_FAST_PASSWORD_HASH", kind: .bool
        ) {
            $0.insecureFastPasswordHash = try bool($1, "insecureFastPasswordHash")
        },
        Option(
            key: "insecureAnonymousBroker", flags: ["--insecure-anonymous-broker"], env: "INSECURE_ANONYMOUS_BROKER",
            kind: .bool
        ) {
            $0.insecureAnonymousBroker = try bool($1, "insecureAnonymousBroker")
        },
        Option(key: "tokenLifetime", flags: ["--token-lifetime"], env: "TOKEN_LIFETIME", kind: .int) {
            $0.tokenLifetime = Int64(try count($1, "tokenLifetime"))
        },
        Option(key: "thingTokenLifetime", flags: ["--thing-token-lifetime"], env: "THING_TOKEN_LIFETIME", kind: .int) {
            $0.thingTokenLifetime = Int64(try count($1, "thingTokenLifetime"))
        },
        Option(key: "maxBody", flags: ["--max-body"], env: "MAX_BODY", kind: .int) {
            $0.maxBody = try count($1, "maxBody", min: 1024)
        },
        Option(key: "maxStateBody", flags: ["--max-state-body"], env: "MAX_STATE_BODY", kind: .int) {
            $0.maxStateBody = try count($1, "maxStateBody", min: 1024)
        },
        Option(key: "maxHistoryPage", flags: ["--max-history-page"], env: "MAX_HISTORY_PAGE", kind: .int) {
            $0.maxHistoryPage = try count($1, "maxHistoryPage", min: 1)
        },
        Option(key: "rateLimit", flags: ["--rate-limit"], env: "RATE_LIMIT", kind: .int) {
            $0.rateLimit = try count($1, "rateLimit")
        },
        Option(key: "rateBurst", flags: ["--rate-burst"], env: "RATE_BURST", kind: .int) {
            $0.rateBurst = try count($1, "rateBurst", min: 1)
        },
        Option(key: "stateRetention", flags: ["--state-retention"], env: "STATE_RETENTION", kind: .int) {
            $0.stateRetention = try count($1, "stateRetention")
        },
        Option(key: "stateRetentionDays", flags: ["--state-retention-days"], env: "STATE_RETENTION_DAYS", kind: .int) {
            $0.stateRetentionDays = try count($1, "stateRetentionDays")
        },
        Option(key: "webhookAllow", flags: ["--webhook-allow"], env: "WEBHOOK_ALLOW", kind: .list) {
            $0.webhookAllow = $1.split(separator: ",").map { String($0).trimmingSpaces() }.filter { !$0.isEmpty }
        },
        Option(key: "tlsCert", flags: ["--tls-cert"], env: "TLS_CERT", kind: .string) {
            $0.tlsCert = try nonEmpty($1, "tlsCert")
        },
        Option(key: "tlsKey", flags: ["--tls-key"], env: "TLS_KEY", kind: .string) {
            $0.tlsKey = try nonEmpty($1, "tlsKey")
        },
        Option(key: "brokerUsername", flags: ["--broker-username"], env: "BROKER_USERNAME", kind: .string) {
            $0.brokerUsername = try nonEmpty($1, "brokerUsername")
        },
        Option(key: "brokerPassword", flags: ["--broker-password"], env: "BROKER_PASSWORD", kind: .string) {
            $0.brokerPassword = $1
        },
        Option(key: "brokerCAFile", flags: ["--broker-cafile"], env: "BROKER_CAFILE", kind: .string) {
            $0.brokerCAFile = try nonEmpty($1, "brokerCAFile")
        },
        Option(key: "brokerCertFile", flags: ["--broker-certfile"], env: "BROKER_CERTFILE", kind: .string) {
            $0.brokerCertFile = try nonEmpty($1, "brokerCertFile")
        },
        Option(key: "brokerKeyFile", flags: ["--broker-keyfile"], env: "BROKER_KEYFILE", kind: .string) {
            $0.brokerKeyFile = try nonEmpty($1, "brokerKeyFile")
        },
        Option(key: "advertisedTLSPort", flags: ["--advertised-tls-port"], env: "ADVERTISED_TLS_PORT", kind: .int) {
            $0.advertisedTLSPort = try port($1, "advertisedTLSPort")
        },
        Option(key: "brokerHost", flags: ["--broker-host", "--host"], env: "BROKER_HOST", kind: .string) {
            $0.brokerHost = try nonEmpty($1, "brokerHost")
        },
        Option(key: "brokerPort", flags: ["--broker-port", "--port"], env: "BROKER_PORT", kind: .int) {
            $0.brokerPort = try port($1, "brokerPort")
        },
        Option(key: "httpHost", flags: ["--http-host"], env: "HTTP_HOST", kind: .string) {
            $0.httpHost = try nonEmpty($1, "httpHost")
        },
        Option(key: "httpPort", flags: ["--http-port"], env: "HTTP_PORT", kind: .int) {
            $0.httpPort = try port($1, "httpPort", allowZero: true)
        },
        Option(key: "appID", flags: ["--app-id"], env: "APP_ID", kind: .string) {
            $0.appID = try nonEmpty($1, "appID")
        },
        Option(key: "appKey", flags: ["--app-key"], env: "APP_KEY", kind: .string) {
            $0.appKey = try nonEmpty($1, "appKey")
        },
        Option(key: "db", flags: ["--db"], env: "DB", kind: .string) {
            $0.db = try nonEmpty($1, "db")
            $0.dbGiven = true
        },
        Option(key: "dbConnections", flags: ["--db-connections"], env: "DB_CONNECTIONS", kind: .int) {
            $0.dbConnections = try count($1, "dbConnections", min: 1)
        },
        Option(key: "memory", flags: ["--memory"], env: "MEMORY", kind: .bool) { $0.memory = try bool($1, "memory") },
        Option(key: "advertisedHost", flags: ["--advertised-host"], env: "ADVERTISED_HOST", kind: .string) {
            $0.advertisedHost = try nonEmpty($1, "advertisedHost")
        },
        Option(key: "advertisedPort", flags: ["--advertised-port"], env: "ADVERTISED_PORT", kind: .int) {
            $0.advertisedPort = try port($1, "advertisedPort")
        },
        Option(key: "quiet", flags: ["--quiet"], env: "QUIET", kind: .bool) { $0.quiet = try bool($1, "quiet") },
        Option(key: "metricsToken", flags: ["--metrics-token"], env: "METRICS_TOKEN", kind: .string) {
            $0.metricsToken = try nonEmpty($1, "metricsToken")
        },
        Option(key: "costlyThreads", flags: ["--costly-threads"], env: "COSTLY_THREADS", kind: .int) {
            $0.costlyThreads = try count($1, "costlyThreads")
        },
        Option(key: "costlyQueue", flags: ["--costly-queue"], env: "COSTLY_QUEUE", kind: .int) {
            $0.costlyQueue = try count($1, "costlyQueue", min: 1)
        },
        Option(key: "bootstrapRate", flags: ["--bootstrap-rate"], env: "BOOTSTRAP_RATE", kind: .int) {
            $0.bootstrapRate = try count($1, "bootstrapRate", min: 1)
        },
        Option(key: "bootstrapBurst", flags: ["--bootstrap-burst"], env: "BOOTSTRAP_BURST", kind: .int) {
            $0.bootstrapBurst = try count($1, "bootstrapBurst", min: 1)
        },
        Option(key: "addressRate", flags: ["--address-rate"], env: "ADDRESS_RATE", kind: .int) {
            $0.addressRate = try count($1, "addressRate")
        },
        Option(key: "addressBurst", flags: ["--address-burst"], env: "ADDRESS_BURST", kind: .int) {
            $0.addressBurst = try count($1, "addressBurst", min: 1)
        },
        Option(key: "appAnonymousRate", flags: ["--app-anonymous-rate"], env: "APP_ANONYMOUS_RATE", kind: .int) {
            $0.appAnonymousRate = try count($1, "appAnonymousRate")
        },
        Option(key: "appAnonymousBurst", flags: ["--app-anonymous-burst"], env: "APP_ANONYMOUS_BURST", kind: .int) {
            $0.appAnonymousBurst = try count($1, "appAnonymousBurst", min: 1)
        },
        Option(key: "httpHeaderTimeout", flags: ["--http-header-timeout"], env: "HTTP_HEADER_TIMEOUT", kind: .int) {
            $0.httpHeaderTimeout = try count($1, "httpHeaderTimeout")
        },
        Option(key: "httpBodyTimeout", flags: ["--http-body-timeout"], env: "HTTP_BODY_TIMEOUT", kind: .int) {
            $0.httpBodyTimeout = try count($1, "httpBodyTimeout")
        },
        Option(key: "httpIdleTimeout", flags: ["--http-idle-timeout"], env: "HTTP_IDLE_TIMEOUT", kind: .int) {
            $0.httpIdleTimeout = try count($1, "httpIdleTimeout")
        },
        Option(key: "httpMaxConnections", flags: ["--http-max-connections"], env: "HTTP_MAX_CONNECTIONS", kind: .int) {
            $0.httpMaxConnections = try count($1, "httpMaxConnections")
        },
        Option(
            key: "thingsCreatedPerHour", flags: ["--things-created-per-hour"], env: "THINGS_CREATED_PER_HOUR",
            kind: .int
        ) {
            $0.thingsCreatedPerHour = try count($1, "thingsCreatedPerHour")
        },
        Option(
            key: "mqttInstallationsPerUser", flags: ["--mqtt-installations-per-user"],
            env: "MQTT_INSTALLATIONS_PER_USER", kind: .int
        ) {
            $0.mqttInstallationsPerUser = try count($1, "mqttInstallationsPerUser")
        },
        Option(
            key: "mqttInstallationsPerApp", flags: ["--mqtt-installations-per-app"], env: "MQTT_INSTALLATIONS_PER_APP",
            kind: .int
        ) {
            $0.mqttInstallationsPerApp = try count($1, "mqttInstallationsPerApp")
        },
        Option(key: "trustedProxies", flags: ["--trusted-proxies"], env: "TRUSTED_PROXIES", kind: .list) {
            let list = $1.split(separator: ",").map { String($0).trimmingSpaces() }.filter { !$0.isEmpty }
            for p in list where !ClientAddress.isValidNetwork(p) {
                throw ConfigError(description: "trustedProxies: \(p) is not an IP address or CIDR prefix")
            }
            $0.trustedProxies = list
        },
        Option(key: "onboarding", flags: ["--onboarding"], env: "ONBOARDING", kind: .string) {
            guard $1 == "open" || $1 == "enrolled" else {
                throw ConfigError(description: "onboarding must be open or enrolled, not \($1)")
            }
            $0.onboarding = $1
        },
        Option(key: "adminToken", flags: ["--admin-token"], env: "ADMIN_TOKEN", kind: .string) {
            $0.adminToken = try nonEmpty($1, "adminToken")
        },
        Option(key: "haDiscovery", flags: ["--ha-discovery"], env: "HA_DISCOVERY", kind: .bool) {
            $0.haDiscovery = try bool($1, "haDiscovery")
        },
        Option(key: "haDiscoveryPrefix", flags: ["--ha-discovery-prefix"], env: "HA_DISCOVERY_PREFIX", kind: .string) {
            guard HomeAssistantOptions.isValidPrefix($1) else {
                throw ConfigError(description: "haDiscoveryPrefix must be topic levels without wildcards, not \($1)")
            }
            $0.haDiscoveryPrefix = $1
        },
        Option(key: "haMappingsFile", flags: ["--ha-mappings-file"], env: "HA_MAPPINGS_FILE", kind: .string) {
            $0.haMappingsFile = try nonEmpty($1, "haMappingsFile")
        },
        Option(key: "haUsername", flags: ["--ha-username"], env: "HA_USERNAME", kind: .string) {
            $0.haUsername = try nonEmpty($1, "haUsername")
        },
        Option(key: "haPassword", flags: ["--ha-password"], env: "HA_PASSWORD", kind: .string) {
            $0.haPassword = try nonEmpty($1, "haPassword")
        },
        Option(key: "commandTimeToLive", flags: ["--command-ttl"], env: "COMMAND_TTL", kind: .int) {
            let n = Int64(try count($1, "commandTimeToLive"))
            guard n <= CommandLifetimes.maxTimeToLive else {
                throw ConfigError(
                    description:
                        "commandTimeToLive must be at most \(CommandLifetimes.maxTimeToLive) seconds, not \($1)")
            }
            $0.commandTimeToLive = n
        },
        Option(
            key: "commandUndeliveredLimit", flags: ["--command-undelivered-limit"], env: "COMMAND_UNDELIVERED_LIMIT",
            kind: .int
        ) {
            $0.commandUndeliveredLimit = Int64(try count($1, "commandUndeliveredLimit"))
        },
        Option(
            key: "commandUnansweredLimit", flags: ["--command-unanswered-limit"], env: "COMMAND_UNANSWERED_LIMIT",
            kind: .int
        ) {
            $0.commandUnansweredLimit = Int64(try count($1, "commandUnansweredLimit"))
        },
        Option(
            key: "commandCancelWait", flags: ["--command-cancel-wait"], env: "COMMAND_CANCEL_WAIT", kind: .int
        ) {
            let n = Int64(try count($1, "commandCancelWait"))
            guard n <= 60_000 else {
                throw ConfigError(description: "commandCancelWait must be at most 60000 ms, not \($1)")
            }
            $0.commandCancelWaitMs = n
        }
    ]

    /// Parses the configuration. `readFile` reads the --config file.
    public static func load(
        arguments: [String], environment: [String: String],
        readFile: (String) -> [UInt8]?
    ) throws -> Outcome {
        // 1. Flags, kept to apply last.
        var flagValues: [(Option, String)] = []
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
            if o.kind == .bool {
                flagValues.append((o, inline ?? "true"))
            } else {
                guard let v = inline ?? args.popFirst() else { throw ConfigError(description: "\(name) needs a value") }
                flagValues.append((o, v))
            }
        }
        var c = HubConfig()
        // 2. The file.
        if let path = configPath, !path.isEmpty {
            guard let bytes = readFile(path) else {
                throw ConfigError(description: "cannot read the config file \(path)")
            }
            guard case .success(let j) = JSON.parse(bytes), j.isObject else {
                throw ConfigError(description: "the config file \(path) must hold a JSON object")
            }
            for (key, v) in j.members {
                guard let o = options.first(where: { $0.key == key }) else {
                    throw ConfigError(description: "unknown key \(key) in \(path)")
                }
                let text: String
                if let s = v.stringValue {
                    text = s
                } else if let n = v.intValue, o.kind == .int {
                    text = String(n)
                } else if let b = v.boolValue, o.kind == .bool {
                    text = b ? "true" : "false"
                } else if o.kind == .list, v.isArray, v.elements.allSatisfy({ $0.stringValue != nil }) {
                    text = v.elements.compactMap(\.stringValue).joined(separator: ",")
                } else {
                    throw ConfigError(description: "\(key) in \(path) has the wrong type (\(v.typeName))")
                }
                try o.apply(&c, text)
            }
        }
        // 3. The environment.
        for o in options {
            if let v = environment["THINGIF_HUB_" + o.env] { try o.apply(&c, v) }
        }
        // 4. The flags.
        for (o, v) in flagValues { try o.apply(&c, v) }
        try c.validate()
        return .run(c)
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
    }

    /// The store's secrets settings.
    public var secrets: HubSecrets {
        HubSecrets(
            passwordIterations: passwordIterations, userTokenLifetime: tokenLifetime,
            thingTokenLifetime: thingTokenLifetime)
    }

    public var retention: StateRetention { StateRetention(maxSamples: stateRetention, maxAgeDays: stateRetentionDays) }

    public var limits: HubLimits {
        HubLimits(maxStateBody: maxStateBody, maxBody: maxBody, maxHistoryPage: maxHistoryPage)
    }

    /// The HTTP connection limits.
    public var connections: HTTPConnectionLimits {
        HTTPConnectionLimits(
            headerTimeoutSeconds: httpHeaderTimeout, bodyTimeoutSeconds: httpBodyTimeout,
            idleTimeoutSeconds: httpIdleTimeout, maxConnections: httpMaxConnections)
    }

    /// Applies the flood settings that live in FrameworkSide's options.
    public func applyFloodSettings(to o: inout FrameworkSide.Options) {
        o.costlyThreads = costlyThreads > 0 ? costlyThreads : CostlyWork.defaultThreads
        o.costlyQueue = costlyQueue
        o.bootstrapRatePerSecond = Double(bootstrapRate)
        o.bootstrapBurst = bootstrapBurst
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

    /// TLS to the broker, when a CA file is set.
    public var brokerTLS: FrameworkSide.TLSFiles? {
        brokerCAFile.map { FrameworkSide.TLSFiles(caFile: $0, certFile: brokerCertFile, keyFile: brokerKeyFile) }
    }
}
