// SPDX-License-Identifier: Apache-2.0

import ThingIFHubServer

extension HubConfig {
    /// The configuration `thingif-hub` would run with for these flags,
    /// environment and configuration file (named by THINGIF_HUB_CONFIG when
    /// `file` is given), read from memory: what the settings tests check.
    static func forTest(_ args: [String], env: [String: String] = [:], file: String? = nil) throws -> HubConfig {
        var e = env
        if file != nil { e["THINGIF_HUB_CONFIG"] = "/cfg.json" }
        guard
            case .run(let c) = try HubConfig.load(
                arguments: args, environment: e, readFile: { _ in file.map { Array($0.utf8) } })
        else { throw HarnessError("help") }
        return c
    }
}
