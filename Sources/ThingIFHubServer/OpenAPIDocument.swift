// SPDX-License-Identifier: Apache-2.0

import Foundation

/// The OpenAPI document served at GET /openapi.yaml: one file,
/// Sources/ThingIFHubServer/openapi.yaml (a SwiftPM resource; docs/openapi.yaml
/// is a symbolic link to it), so there is one copy to edit.
enum OpenAPIDocument {
    static let resourceBundleName = "thingif_ThingIFHubServer.resources"

    /// The document's bytes, or nil when the resource bundle is not beside the
    /// executable (a copied binary): the hub then answers 404 for it rather than
    /// stopping, as SwiftPM's generated `Bundle.module` would.
    static func load() -> [UInt8]? {
        let exe = URL(fileURLWithPath: CommandLine.arguments.first ?? "").resolvingSymlinksInPath()
        var candidates = [Bundle.main.bundleURL, exe.deletingLastPathComponent()]
        // A test bundle: the resources sit beside the .xctest directory.
        candidates += Bundle.allBundles.map { $0.bundleURL.deletingLastPathComponent() }
        for dir in candidates {
            let file = dir.appendingPathComponent(resourceBundleName).appendingPathComponent("openapi.yaml")
            if let data = FileManager.default.contents(atPath: file.path) { return Array(data) }
        }
        return nil
    }
}
