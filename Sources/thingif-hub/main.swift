// SPDX-License-Identifier: Apache-2.0

import Foundation
import Logging
import ServiceLifecycle
import ThingIF
import ThingIFHub
import ThingIFHubServer
#if canImport(Glibc)
    import Glibc
#endif

// thingif-hub: the framework side. Things talk to it over MQTT, apps call
// its REST API over HTTP (docs/openapi.yaml). scripts/demo.sh shows it at
// work with the thingif CLI and the AirConditioner-Demo appliance.

// The operator's claim certificates for batches of devices (fleet
// provisioning by claim): a command of its own, before the hub's options.
if CommandLine.arguments.dropFirst().first == ClaimCertificateCommand.name {
    do {
        try ClaimCertificateCommand.run(Array(CommandLine.arguments.dropFirst(2))) { print($0) }
        exit(0)
    } catch let f as ClaimCertificateCommand.Failure {
        fputs(
            "thingif-hub claim-certificate: \(f)\n" + (f.status == 2 ? ClaimCertificateCommand.usage + "\n" : ""),
            stderr)
        exit(f.status)
    }
}

let config: HubConfig
do {
    switch try HubConfig.load(
        arguments: Array(CommandLine.arguments.dropFirst()),
        environment: ProcessInfo.processInfo.environment,
        readFile: { path in FileManager.default.contents(atPath: path).map { Array($0) } })
    {
    case .help:
        print(HubConfig.usage)
        exit(0)
    case .run(let c):
        config = c
    }
} catch {
    fputs("thingif-hub: \(error)\n\(HubConfig.usage)\n", stderr)
    exit(2)
}

@Sendable func say(_ s: String) {
    print(s)
    fflush(stdout)
}

// The store: a SQLite file by default; PostgreSQL when --db is a
// postgres:// URL (several hubs can share it); memory with --memory.
let store: HubStore
switch config.storage {
case .memory:
    store = MemoryStore(secrets: config.secrets, retention: config.retention)
case .postgres(let url):
    do {
        store = try PostgresStore(
            url: url, secrets: config.secrets, retention: config.retention, connections: config.dbConnections)
    } catch {
        // The error names host:port/dbname, never the URL (it may hold a password).
        fputs("thingif-hub: cannot open the PostgreSQL database: \(error)\n", stderr)
        exit(1)
    }
case .sqlite(let path):
    do {
        store = try SQLiteStore(path: path, secrets: config.secrets, retention: config.retention)
    } catch {
        fputs("thingif-hub: cannot open the database \(path): \(error)\n", stderr)
        exit(1)
    }
}

// Secure by default: the hub needs its broker identity (docs/SECURITY.md).
if config.brokerUsername == nil {
    guard config.insecureAnonymousBroker else {
        fputs(
            "thingif-hub: no broker identity: give --broker-username and its password (THINGIF_HUB_BROKER_PASSWORD or "
                + "the config file; docs/SECURITY.md), or --insecure-anonymous-broker for an open development broker\n",
            stderr)
        exit(2)
    }
    say("hub: WARNING: --insecure-anonymous-broker: no broker identity; things get no broker credentials")
}

var hubOptions = FrameworkSide.Options(
    appID: config.appID, appKey: config.appKey, brokerHost: config.brokerHost,
    brokerPort: config.brokerPort, advertisedHost: config.advertisedHost,
    advertisedPort: config.advertisedPort, brokerUsername: config.brokerUsername,
    brokerPassword: config.brokerPassword, brokerTLS: config.brokerTLS,
    advertisedTLSPort: config.advertisedTLSPort)
hubOptions.limits = config.limits
config.applyFloodSettings(to: &hubOptions)
config.applyThingCertificates(to: &hubOptions)
hubOptions.subscriptions = SubscriptionMode(rawValue: config.subscriptions) ?? .auto
hubOptions.lifetimes = config.commandLifetimes
hubOptions.cancelWaitMs = config.commandCancelWaitMs
hubOptions.webhooks = WebhookGuard(allow: config.webhookAllow)
guard let hub = FrameworkSide(hubOptions, store: store) else {
    fputs("thingif-hub: cannot create an MQTT client\n", stderr)
    exit(1)
}
if !config.quiet { hub.onEvent = { say("hub: " + $0) } }
hub.onLog = { say("hub: " + $0) }

do {
    // The REST API.
    var security = HubServer.Security(
        limits: config.limits,
        rateLimiter: config.rateLimit > 0
            ? RateLimiter(ratePerSecond: Double(config.rateLimit), burst: config.rateBurst) : nil,
        tlsCertFile: config.tlsCert, tlsKeyFile: config.tlsKey,
        metricsToken: config.metricsToken)
    security.addressLimiter =
        config.addressRate > 0
        ? RateLimiter(ratePerSecond: Double(config.addressRate), burst: config.addressBurst) : nil
    security.appLimiter =
        config.appAnonymousRate > 0
        ? RateLimiter(ratePerSecond: Double(config.appAnonymousRate), burst: config.appAnonymousBurst) : nil
    security.trustedProxies = config.trustedProxies
    security.connections = config.connections
    security.adminToken = config.adminToken
    if config.insecureFastPasswordHash {
        say(
            "hub: WARNING: --insecure-fast-password-hash is set (\(config.passwordIterations) iterations): for tests only"
        )
    }
    let server = HubServer(
        hub: hub, host: config.httpHost, port: config.httpPort, security: security,
        logLevel: config.quiet ? .error : .warning, log: { say("hub: " + $0) })
    guard hub.start() else {
        fputs(
            "thingif-hub: cannot start (broker at \(config.brokerHost):\(config.brokerPort)): \(hub.startProblem ?? "")\n",
            stderr)
        exit(1)
    }
    if let ca = config.thingCACert {
        say(
            "hub: things that send a CSR get a client certificate from the CA \(ca), valid \(config.thingCertDays) days,"
                + " for the broker's port \(config.advertisedCertPort ?? 0)"
                + (hubOptions.brokerAdmin == .none
                    ? "; --broker-admin none: no passwords, nothing made in the broker" : ""))
        if let crl = config.thingCRL {
            say(
                "hub: deleted things' certificates are revoked in \(crl) (valid 7 days, signed again daily)"
                    + (config.brokerPidFile.map { "; the broker of \($0) gets SIGHUP after each write" }
                        ?? "; nobody is told to read it again: reload the broker after each write (docs/SECURITY.md)"))
        }
    }
    // Home Assistant's MQTT discovery: the built-in mapping and the file's.
    if config.haDiscovery {
        var mappings = [HAClimateMapping.airConditionerDemo]
        if let file = config.haMappingsFile {
            guard let bytes = FileManager.default.contents(atPath: file) else {
                fputs("thingif-hub: cannot read haMappingsFile \(file)\n", stderr)
                exit(2)
            }
            switch HAClimateMapping.parse(Array(bytes)) {
            case .success(let more):
                // A file's mapping of a thingType replaces the built-in one.
                mappings = more + mappings.filter { m in !more.contains { $0.thingType == m.thingType } }
            case .failure(let e):
                fputs("thingif-hub: haMappingsFile \(file): \(e.message)\n", stderr)
                exit(2)
            }
        }
        if let user = config.haUsername, let password = config.haPassword {
            if let problem = hub.homeAssistant.provisionClient(
                username: user, password: password, prefix: config.haDiscoveryPrefix)
            {
                fputs("thingif-hub: Home Assistant's broker client: \(problem)\n", stderr)
                exit(1)
            }
        }
        hub.homeAssistant.enable(HomeAssistantOptions(prefix: config.haDiscoveryPrefix, mappings: mappings))
    }
    say(
        hub.partitions.partitioned
            ? "hub: things' requests in \(HubPartitions.count) partitions (--subscriptions \(config.subscriptions)),"
                + " \(hub.partitions.held.nonzeroBitCount) held by this hub"
            : "hub: things' requests through the shared subscription $share/\(Topics.hubShareGroup)/…"
                + " (--subscriptions \(config.subscriptions))")
    let where_ = config.memory ? "in memory" : "in \(config.db)"
    say(
        "hub: serving app \(config.appID) on the MQTT broker at \(config.brokerHost):\(config.brokerPort), data \(where_)"
    )
    var logger = Logger(label: "thingif-hub")
    logger.logLevel = .warning
    let group = ServiceGroup(
        configuration: .init(
            // The hub's own periodic work runs on its scheduler (FrameworkSide.jobs).
            services: [.init(service: server)], gracefulShutdownSignals: [.sigterm, .sigint],
            logger: logger))
    do {
        try await group.run()
    } catch {
        fputs("thingif-hub: the HTTP API stopped: \(error)\n", stderr)
        hub.stop()
        exit(1)
    }
    hub.stop()
    say("hub: stopped")
    exit(0)
}
