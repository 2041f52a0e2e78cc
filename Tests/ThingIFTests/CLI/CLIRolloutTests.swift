// SPDX-License-Identifier: Apache-2.0

import Crypto
import Foundation
import Testing
import ThingIF
import ThingIFHub
import ThingIFHubServer

/// `thingif update rollout …` and `thingif update cancel`, the CLI binary
/// against the real hub (its ticks run by the test with its own clock):
/// create with every option, list, show, things, cancel one job, pause,
/// resume, cancel, show --wait; the hub's 400 naming a field and a usage
/// error before any request.
@Suite("thingif CLI rollouts", .offPool)
struct CLIRolloutTests {
    @Test(
        "update rollout create/list/show/things/pause/resume/cancel and update cancel, against the hub",
        .enabled(if: CLIEndToEnd.cli != nil, "needs the thingif CLI next to the test bundle"))
    func rolloutFlow() async throws {
        try await HubUpdateTests().withUpdates(.memory) { e in
            let cli = try #require(CLIEndToEnd.cli)
            let root = try makeTempDirectory(prefix: "thingif-cli-rollout")
            defer { try? FileManager.default.removeItem(atPath: root) }
            let (uid, userToken) = try await e.user()
            var things: [String] = []
            for i in 0..<2 {
                things.append(try await e.onboardSilent("cli-ro-\(i)", owner: "user:\(uid)", token: userToken).thingID)
            }
            things.sort()
            try Data(HubImageTests.image(6_000, seed: 4)).write(to: URL(fileURLWithPath: root + "/fw.img"))
            try P256.Signing.PrivateKey().pemRepresentation.write(
                toFile: root + "/fw.pem", atomically: true, encoding: .utf8)
            let env = [
                "THINGIF_HUB_URL": e.base, "THINGIF_APP_ID": Env.appID, "THINGIF_ADMIN_TOKEN": HubUpdateTests.admin,
                "THINGIF_CONFIG": root + "/cli.json"
            ]
            func thingif(_ args: String...) async throws -> (status: Int32, output: String) {
                try await offPool { Result { try runProgram(cli, args, environment: env) } }.get()
            }
            var r = try await thingif(
                "update", "manifest", root + "/fw.img", "--version", "1.2.0", "--thing-type", "AirConditioner",
                "--block-size", "1024", "--out", root + "/fw.json")
            #expect(r.status == 0, "\(r.output)")
            r = try await thingif("update", "sign", root + "/fw.json", "--key", root + "/fw.pem", "--kid", "fw-1")
            #expect(r.status == 0, "\(r.output)")
            let offer = ["--image", root + "/fw.img", "--manifest", root + "/fw.json"]
            func create(_ extra: [String]) async throws -> (status: Int32, output: String) {
                try await offPool {
                    Result { try runProgram(cli, ["update", "rollout", "create"] + offer + extra, environment: env) }
                }.get()
            }
            // Refused: no target (usage, exit 2, nothing sent); retries out of range (the hub's 400, exit 1).
            r = try await create(["--rate", "10", "--max-in-flight", "1"])
            #expect(r.status == 2 && r.output.contains("name the target"), "\(r.output)")
            r = try await create(["--thing", things[0], "--rate", "10", "--max-in-flight", "1", "--retries", "9"])
            #expect(r.status == 1 && r.output.contains("retries"), "\(r.output)")
            r = try await create(["--thing", things[0], "--rate", "10", "--max-in-flight", "1", "--ramp", "1,x"])
            #expect(r.status == 2 && r.output.contains("--ramp"), "\(r.output)")
            #expect(e.hub.store.rollouts()?.isEmpty == true, "nothing was created")

            r = try await create(
                [
                    "--thing", things[0], "--thing", things[1], "--thing-type", "AirConditioner", "--rate", "10",
                    "--max-in-flight", "1", "--ramp", "1,2.5,60", "--timeout", "600", "--retries", "2",
                    "--abort-percent", "50", "--abort-min-executed", "2", "--abort-status", "FAILED", "--trial", "60"
                ])
            #expect(r.status == 0, "\(r.output)")
            let id = try #require(r.output.split(separator: "\n").last.map(String.init))
            let stored = try #require(e.hub.store.rollout(id: id).value, "\(r.output)")
            #expect(stored.ramp == RolloutRamp(startPerMinute: 1, factor: 2.5, everyS: 60))
            #expect(stored.timeoutS == 600 && stored.retries == 2 && stored.maxInFlight == 1 && stored.trialS == 60)
            #expect(
                stored.abortFailurePercent == 50 && stored.abortMinExecuted == 2 && stored.abortStatuses == [.failed])
            #expect(stored.target == RolloutTarget(thingType: "AirConditioner", things: things))
            r = try await thingif("update", "rollout", "list")
            #expect(r.status == 0 && r.output.contains("\(id)  1.2.0  running  2 things"), "\(r.output)")

            // One released; the CLI lists it, and cancels its job.
            #expect(e.hub.app.rolloutTick(now: Platform.epochMs()) == 1)
            r = try await thingif("update", "rollout", "things", id)
            let rows = r.output.split(separator: "\n").map { $0.split(separator: " ", omittingEmptySubsequences: true) }
            #expect(rows.count == 2 && rows[0].prefix(3) == [Substring(things[0]), "offered", "1"], "\(r.output)")
            let job = try #require(rows.first?.last.map(String.init))
            r = try await thingif("update", "cancel", things[0], job)
            #expect(r.status == 0 && field(r.output, "status") == "CANCELLED", "\(r.output)")
            #expect(field(r.output, "reason") == "CANCELLED_BY_OPERATOR", "\(r.output)")
            r = try await thingif("update", "cancel", things[0], job)
            #expect(r.status == 1 && r.output.contains("UPDATE_JOB_ENDED"), "\(r.output)")

            // Pause, resume, cancel; show --wait the end.
            r = try await thingif("update", "rollout", "pause", id)
            #expect(r.status == 0 && field(r.output, "status") == "paused", "\(r.output)")
            r = try await thingif("update", "rollout", "pause", id)
            #expect(r.status == 1 && r.output.contains("ROLLOUT_STATUS"), "\(r.output)")
            r = try await thingif("update", "rollout", "resume", id)
            #expect(r.status == 0 && field(r.output, "status") == "running", "\(r.output)")
            r = try await thingif("update", "rollout", "show", id, "--wait", "completed", "--timeout", "0.5")
            #expect(r.status == 1 && field(r.output, "status") == "running", "not completed: \(r.output)")
            r = try await thingif("update", "rollout", "cancel", id)
            #expect(r.status == 0 && field(r.output, "status") == "cancelled", "\(r.output)")
            r = try await thingif("update", "rollout", "show", id, "--wait", "cancelled")
            #expect(r.status == 0, "\(r.output)")
            #expect(field(r.output, "retries") == "2" && field(r.output, "timeoutS") == "600", "\(r.output)")
            #expect(field(r.output, "CANCELLED") == "1" && field(r.output, "queued") == "1", "\(r.output)")
            // The adminToken is required.
            r = try await offPool {
                Result {
                    try runProgram(
                        cli, ["update", "rollout", "show", id, "--admin-token", "not-the-token"], environment: env)
                }
            }.get()
            #expect(r.status == 1, "\(r.output)")
        }
    }
}
