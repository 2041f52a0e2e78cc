// SPDX-License-Identifier: Apache-2.0

import Configuration
import Foundation
import Testing
import ThingIFHub
@testable import ThingIFHubServer

/// thingif-hub's settings (HubConfig.swift): one table of options read from
/// flags, the environment and a file, in that order of precedence.
@Suite("Hub configuration")
struct HubConfigTests {
    @Test("The usage names every flag of the options table, each environment variable and file key, and no other")
    func usageFromTable() throws {
        let usage = HubConfig.usage
        for flag in HubConfig.allFlags { #expect(usage.contains(flag), "the usage does not name \(flag)") }
        // The flags the help text names are the table's (none left over from a removed option).
        let named = Set(
            usage.split(whereSeparator: { " ,\n=()".contains($0) })
                .filter { $0.hasPrefix("--") && $0.count > 2 }.map(String.init))
        let known = Set(HubConfig.allFlags + ["--help", "--config"])
        #expect(named.subtracting(known).isEmpty, "\(named.subtracting(known))")
        // Generated lists: every variable set through the environment is listed.
        let env = try #require(usage.range(of: "Environment: ")).upperBound
        let listed = usage[env...].prefix(while: { $0 != "." })
        for (name, value) in [("THINGIF_HUB_DB_CONNECTIONS", "3"), ("THINGIF_HUB_COMMAND_TTL", "60")] {
            let short = name == "THINGIF_HUB_DB_CONNECTIONS" ? "_DB_CONNECTIONS" : "_COMMAND_TTL"
            #expect(listed.contains(short))
            guard case .run = try HubConfig.load(arguments: [], environment: [name: value], readFile: { _ in nil })
            else {
                Issue.record("\(name) not accepted")
                continue
            }
        }
        let names = listed.split(whereSeparator: { " ,\n".contains($0) }).map(String.init)
        #expect(!names.contains("_TIMEOUT"), "no variable that nothing reads")
        for e in HubConfig.allEnvironment {
            #expect(names.contains("_" + e) || names.contains("THINGIF_HUB_" + e), "the usage does not list \(e)")
        }
        #expect(usage.contains("File keys: ") && usage.contains("dbConnections"))
    }

    @Test("Configuration: flags > environment > file > defaults")
    func configuration() throws {
        let d = try loadHubConfig([])
        #expect(d.brokerHost == "127.0.0.1" && d.brokerPort == 1883 && d.httpHost == "127.0.0.1" && d.httpPort == 8080)
        #expect(d.appID == "demoApp" && d.appKey == "demoKey" && d.db == "./thingif-hub.sqlite" && !d.memory)
        let file =
            #"{"brokerPort": 1884, "httpPort": "9000", "appID": "fileApp", "db": "/tmp/f.sqlite", "memory": true}"#
        let f = try loadHubConfig(["--config", "hub.json"], file: file)
        #expect(
            f.brokerPort == 1884 && f.httpPort == 9000 && f.appID == "fileApp" && f.db == "/tmp/f.sqlite" && f.memory)
        let env = ["THINGIF_HUB_HTTP_PORT": "9001", "THINGIF_HUB_APP_ID": "envApp", "THINGIF_HUB_CONFIG": "hub.json"]
        let fe = try loadHubConfig([], env, file: file)
        #expect(fe.httpPort == 9001 && fe.appID == "envApp" && fe.brokerPort == 1884)
        let all = try loadHubConfig(
            ["--http-port=9002", "--port", "1999", "--app-id", "flagApp", "--quiet"], env, file: file)
        #expect(all.httpPort == 9002 && all.brokerPort == 1999 && all.appID == "flagApp" && all.quiet && all.memory)
        #expect(throws: HubConfig.ConfigError.self) { try loadHubConfig(["--http-port", "70000"]) }
        #expect(throws: HubConfig.ConfigError.self) { try loadHubConfig(["--bogus"]) }
        #expect(throws: HubConfig.ConfigError.self) { try loadHubConfig(["--config", "x"], file: #"{"nope": 1}"#) }
        #expect(throws: HubConfig.ConfigError.self) { try loadHubConfig(["--config", "x"], file: nil) }
        #expect(try HubConfig.load(arguments: ["--help"], environment: [:], readFile: { _ in nil }) == .help)
    }

    @Test("Configuration: a text, number, port, switch and list from each layer; a bad value of each kind")
    func configurationLayers() throws {
        func failure(_ args: [String], _ env: [String: String] = [:], file: String? = nil) -> String {
            do {
                _ = try loadHubConfig(args, env, file: file)
                return "no error"
            } catch { return "\(error)" }
        }
        let file = #"{"appKey": "fileKey", "rateLimit": 7, "brokerPort": 1884, "quiet": true, "webhookAllow": ["f:1"]}"#
        let f = try loadHubConfig(["--config", "hub.json"], file: file)
        #expect(f.appKey == "fileKey" && f.rateLimit == 7 && f.brokerPort == 1884 && f.quiet)
        #expect(f.webhookAllow == ["f:1"])
        let env = [
            "THINGIF_HUB_CONFIG": "hub.json", "THINGIF_HUB_APP_KEY": "envKey", "THINGIF_HUB_RATE_LIMIT": "8",
            "THINGIF_HUB_BROKER_PORT": "1885", "THINGIF_HUB_QUIET": "no", "THINGIF_HUB_WEBHOOK_ALLOW": "e:1,e:2"
        ]
        let e = try loadHubConfig([], env, file: file)
        #expect(e.appKey == "envKey" && e.rateLimit == 8 && e.brokerPort == 1885 && !e.quiet)
        #expect(e.webhookAllow == ["e:1", "e:2"])
        let a = try loadHubConfig(
            ["--app-key", "flagKey", "--rate-limit=9", "--port", "1886", "--quiet", "--webhook-allow", "a:1"], env,
            file: file)
        #expect(a.appKey == "flagKey" && a.rateLimit == 9 && a.brokerPort == 1886 && a.quiet)
        #expect(a.webhookAllow == ["a:1"])
        // A switch alone is on; with a value, as given. A repeated flag: the last.
        #expect(try !loadHubConfig(["--ha-discovery=false"]).haDiscovery && loadHubConfig(["--memory=yes"]).memory)
        #expect(try loadHubConfig(["--app-id", "one", "--app-id", "two"]).appID == "two")
        // A comma splits a list only, never a text (a password may hold one).
        #expect(try loadHubConfig(["--broker-password", "a,b"]).brokerPassword == "a,b")
        // One line for a bad value of each kind, from whichever layer.
        #expect(failure(["--rate-limit", "many"]) == "rateLimit must be a whole number of at least 0, not many")
        #expect(failure([], ["THINGIF_HUB_BROKER_PORT": "0"]) == "brokerPort must be a port number, not 0")
        #expect(failure([], ["THINGIF_HUB_QUIET": "maybe"]) == "quiet must be true or false, not maybe")
        #expect(failure(["--app-key="]) == "appKey must not be empty")
        #expect(
            failure(["--config", "x"], file: #"{"trustedProxies": ["10.0.0.0/40"]}"#)
                == "trustedProxies: 10.0.0.0/40 is not an IP address or CIDR prefix")
        #expect(failure(["--config", "x"], file: #"{"quiet": "maybe"}"#) == "quiet must be true or false, not maybe")
        #expect(failure(["--config", "x"], file: #"{"appKey": 1}"#).hasPrefix("appKey in x has the wrong type"))
        #expect(
            failure(["--config", "x"], file: #"{"rateLimit": true}"#).hasPrefix("rateLimit in x has the wrong type"))
        // Only the value that is used is read: a higher layer's replaces a bad one.
        #expect(try loadHubConfig(["--rate-limit", "3"], ["THINGIF_HUB_RATE_LIMIT": "many"]).rateLimit == 3)
        // Bad usage.
        #expect(failure(["--bogus"]) == "unknown argument --bogus")
        #expect(failure(["extra"]) == "unknown argument extra")
        #expect(failure(["--app-id"]) == "--app-id needs a value")
        #expect(failure(["--config", "x"], file: #"{"nope": 1}"#) == "unknown key nope in x")
        #expect(failure(["--config", "x"]) == "cannot read the config file x")
    }

    @Test("The usage shows each default as HubConfig() holds it")
    func usageDefaults() {
        let d = HubConfig()
        let entries = HubConfig.usage.components(separatedBy: "\n  --")
        for (flag, value) in [
            ("broker-port P, --port P", "\(d.brokerPort)"), ("rate-limit N", "\(d.rateLimit)"), ("db PATH", d.db),
            ("command-cancel-wait MS", "\(d.commandCancelWaitMs)"), ("token-lifetime S", "\(d.tokenLifetime)")
        ] {
            let entry = entries.first { $0.hasPrefix(flag + " ") } ?? "(none)"
            #expect(entry.contains("default \(value))"), "--\(flag): \(entry)")
        }
        #expect(
            entries.contains { $0.hasPrefix("ha-discovery=false ") }, "a switch on by default shows how to turn it off")
    }

    @Test("Configuration: swift-configuration's access log names the layer and redacts passwords and tokens")
    func configurationAccessLog() throws {
        final class Log: AccessReporter, @unchecked Sendable {
            let lock = NSLock()
            var lines: [String] = []
            func report(_ event: AccessEvent) { lock.withLock { lines.append("\(event)") } }
        }
        let log = Log()
        _ = try HubConfig.load(
            arguments: ["--app-id", "flagApp", "--admin-token", "t0ken"],
            environment: ["THINGIF_HUB_BROKER_PASSWORD": "s3cret", "THINGIF_HUB_APP_KEY": "envKey"],
            readFile: { _ in nil }, accessReporter: log)
        let lines = log.lock.withLock { log.lines }
        func line(_ name: String) -> String { lines.first { $0.contains(name) } ?? "(none)" }
        #expect(line("APP_ID").contains("flagApp") && line("APP_KEY").contains("envKey"))
        #expect(line("APP_KEY").contains("EnvironmentVariablesProvider"))
        #expect(!line("BROKER_PASSWORD").contains("s3cret") && line("BROKER_PASSWORD").contains("REDACTED"))
        #expect(!line("ADMIN_TOKEN").contains("t0ken") && line("ADMIN_TOKEN").contains("REDACTED"))
    }

    @Test("Configuration: the security and broker identity settings, their minimums and pairs")
    func securityConfiguration() throws {
        let d = try loadHubConfig([])
        #expect(d.passwordIterations == 600_000 && !d.insecureFastPasswordHash)
        #expect(d.tokenLifetime == 30 * 86_400 && d.thingTokenLifetime == 0)
        #expect(d.maxBody == 65_536 && d.maxStateBody == 65_536 && d.maxHistoryPage == 1000)
        #expect(d.rateLimit == 20 && d.rateBurst == 100 && d.webhookAllow.isEmpty && d.tlsCert == nil)
        #expect(d.brokerUsername == nil && d.brokerPassword == nil && d.brokerTLS == nil && d.advertisedTLSPort == nil)
        #expect(d.secrets == HubSecrets())
        // Fewer iterations only with the test-only opt-in, from any source.
        #expect(throws: HubConfig.ConfigError.self) { try loadHubConfig(["--password-iterations", "1000"]) }
        let fast = try loadHubConfig(["--password-iterations", "1000", "--insecure-fast-password-hash"])
        #expect(fast.secrets.passwordIterations == 1000)
        let fastEnv = try loadHubConfig(
            [], ["THINGIF_HUB_PASSWORD_ITERATIONS": "2000", "THINGIF_HUB_INSECURE_FAST_PASSWORD_HASH": "1"])
        #expect(fastEnv.passwordIterations == 2000)
        #expect(try loadHubConfig(["--password-iterations", "700000"]).passwordIterations == 700_000)

        let file = #"""
            {"brokerUsername": "hub", "brokerPassword": "file-secret", "brokerCAFile": "/ca.pem",
             "brokerCertFile": "/c.pem", "brokerKeyFile": "/k.pem", "advertisedTLSPort": 8883,
             "webhookAllow": ["127.0.0.1:9000", "hooks.local:80"], "tokenLifetime": 60, "stateRetention": 10,
             "maxBody": 4096, "rateLimit": 5, "tlsCert": "/s.pem", "tlsKey": "/s.key"}
            """#
        let f = try loadHubConfig(["--config", "hub.json"], file: file)
        #expect(f.brokerUsername == "hub" && f.brokerPassword == "file-secret" && f.advertisedTLSPort == 8883)
        #expect(f.brokerTLS == FrameworkSide.TLSFiles(caFile: "/ca.pem", certFile: "/c.pem", keyFile: "/k.pem"))
        #expect(f.webhookAllow == ["127.0.0.1:9000", "hooks.local:80"])
        #expect(f.secrets.userTokenLifetime == 60 && f.retention.maxSamples == 10 && f.limits.maxBody == 4096)
        #expect(f.rateLimit == 5 && f.tlsCert == "/s.pem" && f.tlsKey == "/s.key")
        let env = [
            "THINGIF_HUB_BROKER_PASSWORD": "env-secret", "THINGIF_HUB_BROKER_USERNAME": "envhub",
            "THINGIF_HUB_WEBHOOK_ALLOW": "a:1, b:2", "THINGIF_HUB_ADVERTISED_TLS_PORT": "18883"
        ]
        let fe = try loadHubConfig(["--config", "hub.json"], env, file: file)
        #expect(fe.brokerPassword == "env-secret" && fe.brokerUsername == "envhub" && fe.webhookAllow == ["a:1", "b:2"])
        #expect(fe.advertisedTLSPort == 18883)
        let all = try loadHubConfig(
            [
                "--config", "hub.json", "--broker-username", "flaghub", "--broker-cafile", "/ca2.pem",
                "--advertised-tls-port", "28883", "--max-body", "2048", "--rate-limit", "0"
            ], env, file: file)
        #expect(
            all.brokerUsername == "flaghub" && all.brokerTLS?.caFile == "/ca2.pem" && all.advertisedTLSPort == 28883)
        #expect(all.maxBody == 2048 && all.rateLimit == 0 && all.brokerPassword == "env-secret")
        // Pairs and ranges.
        #expect(throws: HubConfig.ConfigError.self) { try loadHubConfig(["--tls-cert", "/s.pem"]) }
        #expect(throws: HubConfig.ConfigError.self) {
            try loadHubConfig(["--broker-certfile", "/c.pem", "--broker-keyfile", "/k.pem"])
        }
        #expect(throws: HubConfig.ConfigError.self) { try loadHubConfig(["--advertised-tls-port", "0"]) }
        #expect(throws: HubConfig.ConfigError.self) { try loadHubConfig(["--max-body", "10"]) }
        #expect(throws: HubConfig.ConfigError.self) { try loadHubConfig(["--token-lifetime", "-1"]) }
        #expect(HubConfig.usage.contains("--insecure-fast-password-hash") && HubConfig.usage.contains("FOR TESTS ONLY"))
        #expect(HubConfig.usage.contains("prefer THINGIF_HUB_BROKER_PASSWORD"))
    }
}

@Suite("Hub storage choice")
struct HubStorageChoiceTests {
    @Test("--db, THINGIF_HUB_DB and the file's db choose PostgreSQL for a postgres:// URL; SQLite stays the default")
    func storageChoice() throws {
        func storage(_ args: [String], _ env: [String: String] = [:], file: String? = nil) throws -> HubConfig.Storage {
            try loadHubConfig(args, env, file: file).storage
        }
        let url = "postgres://thingif:pw@db.example:5432/thingif"
        #expect(try storage([]) == .sqlite(path: "./thingif-hub.sqlite"))
        #expect(try storage(["--db", "/var/lib/thingif/hub.sqlite"]) == .sqlite(path: "/var/lib/thingif/hub.sqlite"))
        #expect(try storage(["--db", url]) == .postgres(url: url))
        #expect(try storage(["--db=postgresql://u@h/d"]) == .postgres(url: "postgresql://u@h/d"))
        #expect(try storage([], ["THINGIF_HUB_DB": url]) == .postgres(url: url))
        #expect(try storage(["--config", "hub.json"], file: #"{"db": "\#(url)"}"#) == .postgres(url: url))
        #expect(try storage(["--db", url, "--memory"]) == .memory)
    }

    @Test("--db-connections, THINGIF_HUB_DB_CONNECTIONS and the file's dbConnections: at least 1, default 4")
    func dbConnections() throws {
        func connections(_ args: [String], _ env: [String: String] = [:], file: String? = nil) throws -> Int {
            try loadHubConfig(args, env, file: file).dbConnections
        }
        #expect(try connections([]) == 4)
        #expect(try connections(["--db-connections", "9"]) == 9)
        #expect(try connections([], ["THINGIF_HUB_DB_CONNECTIONS": "2"]) == 2)
        #expect(try connections(["--config", "hub.json"], file: #"{"dbConnections": 6}"#) == 6)
        #expect(throws: (any Error).self) { try connections(["--db-connections", "0"]) }
        #expect(throws: (any Error).self) { try connections(["--db-connections", "many"]) }
    }
}

/// HubConfig.load, not asked for help; `file` is the config file's text
/// whatever its path (nil: it cannot be read).
func loadHubConfig(_ args: [String], _ env: [String: String] = [:], file: String? = nil) throws -> HubConfig {
    let outcome = try HubConfig.load(
        arguments: args, environment: env, readFile: { _ in file.map { Array($0.utf8) } })
    guard case .run(let c) = outcome else { throw HarnessError("help") }
    return c
}
