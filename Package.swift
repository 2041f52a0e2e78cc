// swift-tools-version:6.0
import PackageDescription

// libthingif is one Swift module (ThingIF) built from two folders: the core
// (Sources/ThingIF, no Foundation) and the C facade (Sources/ThingIFC, type
// conversion only). CMakeLists.txt builds the same module into libthingif.so.1
// and libthingif.a; this package builds it for the hub and the test harness.
let swift5: [SwiftSetting] = [.swiftLanguageMode(.v5)]

let package = Package(
    name: "thingif",
    products: [
        .library(name: "thingif", type: .dynamic, targets: ["ThingIF"]),
        .executable(name: "thingif-hub", targets: ["thingif-hub"]),
    ],
    targets: [
        .systemLibrary(
            name: "CThingIF",
            path: "Sources/CThingIF",
            pkgConfig: "libmosquitto",
            providers: [.apt(["libmosquitto-dev", "libjansson-dev"])]
        ),
        .target(
            name: "ThingIF",
            dependencies: ["CThingIF"],
            path: "Sources",
            exclude: ["CThingIF", "ThingIFHub", "thingif-hub"],
            sources: ["ThingIF", "ThingIFC"],
            swiftSettings: swift5
        ),
        .target(name: "ThingIFHub", dependencies: ["ThingIF"], swiftSettings: swift5),
        .executableTarget(name: "thingif-hub", dependencies: ["ThingIFHub"], swiftSettings: swift5),
        .target(
            name: "CThingIFTestSupport",
            dependencies: ["ThingIF"],
            path: "Tests/CThingIFTestSupport",
            cSettings: [.headerSearchPath("../../include"), .unsafeFlags(["-Wall", "-Wextra", "-Werror"])]
        ),
        // The C appliance, built here too so that the fault tests can run it
        // as a separate process (CMakeLists.txt builds it as well).
        .executableTarget(
            name: "aircon",
            dependencies: ["ThingIF"],
            path: "examples-c",
            sources: ["aircon.c"],
            cSettings: [.headerSearchPath("../include"), .unsafeFlags(["-Wall", "-Wextra", "-Werror"])]
        ),
        .testTarget(
            name: "ThingIFTests",
            dependencies: ["ThingIF", "ThingIFHub", "CThingIFTestSupport", "aircon"],
            swiftSettings: swift5
        ),
    ]
)
