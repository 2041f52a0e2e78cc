// swift-tools-version:6.0
// SPDX-License-Identifier: Apache-2.0

import PackageDescription

// libthingif is one Swift module (ThingIF) built from two folders: the core
// (Sources/ThingIF, no Foundation) and the C facade (Sources/ThingIFC, type
// conversion only). CMakeLists.txt builds the same module into libthingif.so.N (N: THINGIF_ABI_VERSION)
// and libthingif.a; this package builds it for the hub and the test harness.
//
// The hub: ThingIFHub (framework side over MQTT, storage, app logic; no
// Foundation), ThingIFHubServer (the REST API on Hummingbird) and the
// thingif-hub executable. The `thingif` CLI is the app side at a terminal.
let swift5: [SwiftSetting] = [.swiftLanguageMode(.v5)]

let package = Package(
    name: "thingif",
    products: [
        .library(name: "ThingIF", type: .dynamic, targets: ["ThingIF"]),
        .executable(name: "thingif-hub", targets: ["thingif-hub"]),
        .executable(name: "thingif", targets: ["thingif-cli"]),
    ],
    dependencies: [
        .package(url: "https://github.com/hummingbird-project/hummingbird", from: "2.28.1"),
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.8.2"),
        // GET /metrics: the hub's counters and histograms in Prometheus' text format.
        .package(url: "https://github.com/swift-server/swift-prometheus", from: "2.4.1"),
        // The hub's configuration: flags, environment and file as layered providers (HubConfig).
        .package(url: "https://github.com/apple/swift-configuration", from: "1.4.0"),
        // The things' CA (ThingCertificates): reads CSRs, signs client certificates.
        .package(url: "https://github.com/apple/swift-certificates", from: "1.21.1"),
        // Its key types, named to check a CSR's key (swift-certificates' own range).
        .package(url: "https://github.com/apple/swift-crypto.git", "3.12.3"..<"6.0.0"),
    ],
    targets: [
        .systemLibrary(
            name: "CThingIF",
            path: "Sources/CThingIF",
            pkgConfig: "libmosquitto",
            providers: [.apt(["libmosquitto-dev", "libjansson-dev", "libssl-dev"])]
        ),
        .target(
            name: "ThingIF",
            dependencies: ["CThingIF"],
            path: "Sources",
            exclude: [
                "CThingIF", "CSQLite", "CPostgres", "CCrypto", "ThingIFRules", "ThingIFHub", "ThingIFHubServer", "thingif-hub",
                "thingif-cli",
            ],
            sources: ["ThingIF", "ThingIFC"],
            swiftSettings: swift5
        ),
        .systemLibrary(
            name: "CSQLite",
            path: "Sources/CSQLite",
            pkgConfig: "sqlite3",
            providers: [.apt(["libsqlite3-dev"])]
        ),
        // libpq: PostgresStore, the hub's store when several hubs share one database.
        .systemLibrary(
            name: "CPostgres",
            path: "Sources/CPostgres",
            pkgConfig: "libpq",
            providers: [.apt(["libpq-dev"])]
        ),
        // OpenSSL's libcrypto: PBKDF2-HMAC-SHA256 for passwords, SHA-256 for tokens.
        .systemLibrary(
            name: "CCrypto",
            path: "Sources/CCrypto",
            pkgConfig: "libcrypto",
            providers: [.apt(["libssl-dev"])]
        ),
        // Server-trigger conditions and cron schedules: the rules the hub
        // enforces and the CLI checks before it sends (one place for both).
        .target(name: "ThingIFRules", dependencies: ["ThingIF"], swiftSettings: swift5),
        .target(
            name: "ThingIFHub",
            dependencies: [
                "ThingIF", "ThingIFRules", "CSQLite", "CPostgres", "CCrypto",
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "X509", package: "swift-certificates"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "_CryptoExtras", package: "swift-crypto"),
            ],
            swiftSettings: swift5
        ),
        .target(
            name: "ThingIFHubServer",
            dependencies: [
                "ThingIFHub",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HummingbirdCore", package: "hummingbird"),
                .product(name: "HummingbirdTLS", package: "hummingbird"),
                .product(name: "Configuration", package: "swift-configuration"),
            ],
            // The OpenAPI document (docs/openapi.yaml links to it), served at GET /openapi.yaml,
            // and the web dashboard's HTML, CSS and JS, served under /dashboard/.
            resources: [.copy("openapi.yaml"), .copy("dashboard")],
            swiftSettings: swift5
        ),
        .executableTarget(name: "thingif-hub", dependencies: ["ThingIFHubServer"], swiftSettings: swift5),
        .executableTarget(
            name: "thingif-cli",
            // ThingIF for the automation codec and limits the thing and the hub use;
            // ThingIFRules for the server triggers' conditions and schedules the hub checks.
            dependencies: [
                "ThingIF", "ThingIFRules", .product(name: "ArgumentParser", package: "swift-argument-parser"),
                // `thingif update sign`: ES256 over a manifest, as an offline signer.
                .product(name: "Crypto", package: "swift-crypto"),
            ],
            swiftSettings: swift5
        ),
        .target(
            name: "CThingIFTestSupport",
            dependencies: ["ThingIF"],
            path: "Tests/CThingIFTestSupport",
            cSettings: [.headerSearchPath("../../include"), .unsafeFlags(["-Wall", "-Wextra", "-Werror"])]
        ),
        // The test appliance: examples-c/aircon.c with the flags only tests
        // use (tests-c/aircon_test.c compiles it in), built here so that the
        // tests can run it as a separate process (CMakeLists.txt builds it too).
        .executableTarget(
            name: "aircon_test",
            dependencies: ["ThingIF"],
            path: "tests-c",
            sources: ["aircon_test.c"],
            cSettings: [.headerSearchPath("../include"), .unsafeFlags(["-Wall", "-Wextra", "-Werror"])]
        ),
        // The gateway example (examples-c/lamps.c), built here so that
        // GatewayExampleTests run it as a process, as the demo does.
        .executableTarget(
            name: "lamps",
            dependencies: ["ThingIF"],
            path: "examples-c",
            sources: ["lamps.c"],
            cSettings: [.headerSearchPath("../include"), .unsafeFlags(["-Wall", "-Wextra", "-Werror"])]
        ),
        .testTarget(
            name: "ThingIFTests",
            dependencies: [
                "ThingIF", "ThingIFRules", "ThingIFHub", "ThingIFHubServer", "CThingIFTestSupport", "aircon_test", "lamps",
                "thingif-cli",
                // Signs test manifests as a release's offline signer would (Tests/…/Update).
                .product(name: "Crypto", package: "swift-crypto"),
            ],
            swiftSettings: swift5
        ),
        // The long fault streams (1,000+ commands through broker restarts,
        // SIGKILLs and cut connections), apart so that the sanitizer run can
        // take all of ThingIFTests and leave these out. Support/ is a link to
        // ThingIFTests' own.
        .testTarget(
            name: "ThingIFSoakTests",
            dependencies: ["ThingIF", "ThingIFRules", "ThingIFHub", "ThingIFHubServer", "CThingIFTestSupport", "aircon_test", "thingif-cli"],
            swiftSettings: swift5
        ),
    ]
)
