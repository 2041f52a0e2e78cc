import ThingIF

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
    public var memory = false
    public var advertisedHost: String?
    public var advertisedPort: Int?
    public var demo = false
    public var timeoutS = 30
    public var quiet = false

    public init() {}

    public enum Outcome: Equatable {
        case run(HubConfig)
        case help
    }

    public struct ConfigError: Error, CustomStringConvertible, Equatable {
        public let description: String
    }

    public static let usage = """
        usage: thingif-hub [options]
          --broker-host H, --host H   MQTT broker to connect to (default 127.0.0.1)
          --broker-port P, --port P   its port (default 1883)
          --http-host H               address of the REST API (default 127.0.0.1)
          --http-port P               its port (default 8080; 0 picks a free one)
          --app-id ID                 application ID (default demoApp)
          --app-key KEY               application key (default demoKey)
          --db PATH                   SQLite file (default ./thingif-hub.sqlite)
          --memory                    keep everything in memory instead
          --advertised-host H         broker host given to things (default: the broker host)
          --advertised-port P         broker port given to things (default: the broker port)
          --config FILE               JSON file with any of the keys below
          --demo                      wait for a thing, send the demo commands, print the results, exit
                                      (MQTT only, in memory unless --db is given)
          --timeout S                 seconds to wait for the thing and each result in --demo (default 30)
          --quiet                     do not print every request
        Environment: THINGIF_HUB_BROKER_HOST, _BROKER_PORT, _HTTP_HOST, _HTTP_PORT, _APP_ID,
          _APP_KEY, _DB, _MEMORY, _ADVERTISED_HOST, _ADVERTISED_PORT, _TIMEOUT, _QUIET, _CONFIG.
        File keys: brokerHost, brokerPort, httpHost, httpPort, appID, appKey, db, memory,
          advertisedHost, advertisedPort, timeout, quiet.
        Precedence: flags > environment > file > defaults.
        """

    private enum Kind { case string, int, bool }

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

    private static let options: [Option] = [
        Option(key: "brokerHost", flags: ["--broker-host", "--host"], env: "BROKER_HOST", kind: .string) { $0.brokerHost = try nonEmpty($1, "brokerHost") },
        Option(key: "brokerPort", flags: ["--broker-port", "--port"], env: "BROKER_PORT", kind: .int) { $0.brokerPort = try port($1, "brokerPort") },
        Option(key: "httpHost", flags: ["--http-host"], env: "HTTP_HOST", kind: .string) { $0.httpHost = try nonEmpty($1, "httpHost") },
        Option(key: "httpPort", flags: ["--http-port"], env: "HTTP_PORT", kind: .int) { $0.httpPort = try port($1, "httpPort", allowZero: true) },
        Option(key: "appID", flags: ["--app-id"], env: "APP_ID", kind: .string) { $0.appID = try nonEmpty($1, "appID") },
        Option(key: "appKey", flags: ["--app-key"], env: "APP_KEY", kind: .string) { $0.appKey = try nonEmpty($1, "appKey") },
        Option(key: "db", flags: ["--db"], env: "DB", kind: .string) {
            $0.db = try nonEmpty($1, "db")
            $0.dbGiven = true
        },
        Option(key: "memory", flags: ["--memory"], env: "MEMORY", kind: .bool) { $0.memory = try bool($1, "memory") },
        Option(key: "advertisedHost", flags: ["--advertised-host"], env: "ADVERTISED_HOST", kind: .string) { $0.advertisedHost = try nonEmpty($1, "advertisedHost") },
        Option(key: "advertisedPort", flags: ["--advertised-port"], env: "ADVERTISED_PORT", kind: .int) { $0.advertisedPort = try port($1, "advertisedPort") },
        Option(key: "demo", flags: ["--demo"], env: "DEMO", kind: .bool) { $0.demo = try bool($1, "demo") },
        Option(key: "timeout", flags: ["--timeout"], env: "TIMEOUT", kind: .int) {
            guard let t = Int($1), t > 0 else { throw ConfigError(description: "timeout must be a positive number of seconds, not \($1)") }
            $0.timeoutS = t
        },
        Option(key: "quiet", flags: ["--quiet"], env: "QUIET", kind: .bool) { $0.quiet = try bool($1, "quiet") },
    ]

    /// Parses the configuration. `readFile` reads the --config file.
    public static func load(arguments: [String], environment: [String: String],
                            readFile: (String) -> [UInt8]?) throws -> Outcome {
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
                guard let v = inline ?? args.popFirst() else { throw ConfigError(description: "--config needs a value") }
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
            guard let bytes = readFile(path) else { throw ConfigError(description: "cannot read the config file \(path)") }
            guard case .success(let j) = JSON.parse(bytes), j.isObject else {
                throw ConfigError(description: "the config file \(path) must hold a JSON object")
            }
            for (key, v) in j.members {
                guard let o = options.first(where: { $0.key == key }), key != "demo" else {
                    throw ConfigError(description: "unknown key \(key) in \(path)")
                }
                let text: String
                if let s = v.stringValue {
                    text = s
                } else if let n = v.intValue, o.kind == .int {
                    text = String(n)
                } else if let b = v.boolValue, o.kind == .bool {
                    text = b ? "true" : "false"
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
        return .run(c)
    }
}
