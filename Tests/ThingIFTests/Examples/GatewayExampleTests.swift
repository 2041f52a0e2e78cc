// SPDX-License-Identifier: Apache-2.0

import Foundation
import Testing
@testable import ThingIFHub
#if canImport(Glibc)
    import Glibc
#endif

/// examples-c/lamps.c, the gateway example, as a process against a real
/// broker and hub: what docs/GATEWAYS.md §10 says it shows, end to end,
/// driven through its console (a FIFO on its stdin) as a person would type.
@Suite("The gateway example", .offPool)
struct GatewayExampleTests {
    static let schema = "Lamp-Demo"

    /// The lamps gateway with its console.
    final class Lamps {
        let process: ApplianceProcess
        let fifo: String
        private let console: Int32

        init(_ env: Env, lamps: Int = 4, delayMs: Int = 20) throws {
            fifo = env.storage("lamps.console")
            guard mkfifo(fifo, 0o600) == 0 else { throw HarnessError("mkfifo \(fifo) failed") }
            // Read and write: the open never waits for the other end, and the
            // gateway's stdin sees no end of file between our lines.
            console = open(fifo, O_RDWR)
            guard console >= 0 else { throw HarnessError("open \(fifo) failed") }
            process = try ApplianceProcess(
                program: "lamps",
                args: [
                    "--port", String(env.broker.port), "--app-id", Env.appID, "--app-key", Env.appKey,
                    "--storage", env.storage("lamps"), "--lamps", String(lamps),
                    "--radio-delay-ms", String(delayMs)
                ],
                logPath: env.storage("lamps.log"), stdinPath: fifo)
        }

        deinit {
            process.stop()
            close(console)
        }

        var log: String { process.log }

        /// Types a console line.
        func type(_ line: String) {
            let bytes = Array((line + "\n").utf8)
            #expect(write(console, bytes, bytes.count) == bytes.count)
        }

        /// Waits for a line of the gateway's output.
        func waitFor(_ text: String, sourceLocation: SourceLocation = #_sourceLocation) {
            #expect(
                poll(timeoutMs: 30_000) { self.log.contains(text) }, "no '\(text)' in:\n\(log)",
                sourceLocation: sourceLocation)
        }
    }

    /// The lamp's thingID at the hub, once its gateway onboarded it.
    static func lamp(_ env: Env, _ n: Int, gateway: String) throws -> String {
        let vendor = String(format: "LAMP-%04d", n)
        let record = try #require(env.hub.waitForThing(vendorThingID: vendor, timeoutMs: 30_000), "no \(vendor)")
        #expect(record.layoutPosition == .endNode && record.gatewayThingID == gateway)
        #expect(record.thingType == "Lamp" && record.firmwareVersion == "1.0.0")
        return record.thingID
    }

    static func state(_ env: Env, _ thingID: String) -> [String: Any]? { parseObject(env.hub.thing(thingID)?.state) }

    @Test(
        "The gateway onboards itself and its lamps, runs each lamp's commands through the radio, uploads each lamp's state, holds an unplugged lamp's command, removes a lamp, takes one an owner added, and keeps them all across a restart"
    )
    func lampsEndToEnd() throws {
        try withEnv { env in
            let lamps = try Lamps(env)
            try lamps.process.start()

            // 1. The gateway onboards itself as a gateway.
            let gw = try #require(env.hub.waitForThing(vendorThingID: "GW-0001", timeoutMs: 30_000), "\(lamps.log)")
            #expect(gw.layoutPosition == .gateway)
            lamps.waitFor("onboarded as \(gw.thingID) (a gateway)")

            // 2. Each lamp onboarded on its behalf, its thingID printed, online.
            var ids: [String] = []
            for n in 0..<4 {
                let id = try Self.lamp(env, n, gateway: gw.thingID)
                lamps.waitFor(String(format: "LAMP-%04d added as %@", n, id))
                #expect(env.hub.waitForOnline(id, timeoutMs: 30_000), "\(lamps.log)")
                ids.append(id)
            }
            // Each lamp's first state: off, at 50 %.
            #expect(poll { Self.state(env, ids[0])?["brightness"] as? Int == 50 }, "\(lamps.log)")
            #expect(Self.state(env, ids[0])?["power"] as? Bool == false)

            // 3 + 4. A lamp's command goes through the radio; its state follows.
            let (_, results) = try env.command(
                #"[{"turnPower":{"power":true}},{"setBrightness":{"brightness":80}}]"#, to: ids[1], schema: Self.schema)
            #expect(results.map(\.succeeded) == [true, true], "\(lamps.log)")
            #expect(poll { Self.state(env, ids[1])?["brightness"] as? Int == 80 }, "\(lamps.log)")
            #expect(Self.state(env, ids[1])?["power"] as? Bool == true)
            #expect(Self.state(env, ids[0])?["power"] as? Bool == false, "another lamp is unchanged")
            lamps.waitFor("LAMP-0001: brightness 80")
            // Refusals: out of range, the wrong type, and the gateway itself.
            let (_, bad) = try env.command(
                #"[{"setBrightness":{"brightness":150}},{"turnPower":{"power":"yes"}}]"#, to: ids[0],
                schema: Self.schema)
            #expect(bad.map(\.succeeded) == [false, false])
            #expect(bad.first?.errorMessage == "brightness is out of range 0..100")
            #expect(bad.last?.errorMessage == "power must be true or false")
            let (_, own) = try env.command(#"[{"turnPower":{"power":true}}]"#, to: gw.thingID, schema: Self.schema)
            #expect(own.first?.succeeded == false)
            #expect(own.first?.errorMessage?.hasPrefix("the gateway has no lamp of its own") == true)

            // 5. An unplugged lamp: offline at the hub, which holds its command
            // until it is plugged back.
            lamps.type("unplug 2")
            lamps.waitFor("unplug LAMP-0002: success")
            #expect(poll { !env.hub.presence.isOnline(ids[2]) }, "\(lamps.log)")
            let held = try #require(
                env.hub.sendCommand(
                    to: ids[2], schema: Self.schema, schemaVersion: 1, actions: #"[{"turnPower":{"power":true}}]"#))
            #expect(env.hub.store.command(id: held)?.state == .sending)
            lamps.type("plug 2")
            let text = try #require(env.hub.waitForResults(of: held, timeoutMs: 30_000), "\(lamps.log)")
            #expect(try parseResults(text).map(\.succeeded) == [true])
            #expect(poll { Self.state(env, ids[2])?["power"] as? Bool == true })

            // 6. A lamp removed at the gateway is deleted at the hub; one an
            // owner adds through the hub reaches the gateway and runs commands.
            lamps.type("remove 3")
            lamps.waitFor("LAMP-0003 removed (was \(ids[3]))")
            #expect(poll { env.hub.thing(ids[3]) == nil }, "\(lamps.log)")
            let user = try GatewayDeviceTests.owner(env, of: gw.thingID, login: "lamp-owner")
            let added = try GatewayDeviceTests.ownerOnboards(env, user, gw.thingID, "LAMP-OWNER")
            lamps.waitFor("LAMP-OWNER added as \(added)")
            #expect(env.hub.waitForOnline(added, timeoutMs: 30_000), "\(lamps.log)")
            let (_, theirs) = try env.command(
                #"[{"setBrightness":{"brightness":10}}]"#, to: added, schema: Self.schema)
            #expect(theirs.map(\.succeeded) == [true])

            // The console refuses what it does not know, and goes on.
            lamps.type("unplug 99")
            lamps.waitFor("unplug: no such lamp: 99")
            lamps.type(String(repeating: "x", count: 400))
            lamps.waitFor("console: a line longer than")
            lamps.type("dance")
            lamps.waitFor("commands: plug N, unplug N, remove N, list")
            lamps.type("list")
            lamps.waitFor("  LAMP-OWNER  \(added)  online")

            // A restart keeps every lamp's thingID (the registry in the
            // storage folder); the radio still finds lamp 3, which is
            // onboarded anew.
            lamps.process.stop()
            try lamps.process.start()
            lamps.waitFor("LAMP-0000 known as \(ids[0])")
            let (_, again) = try env.command(#"[{"turnPower":{"power":true}}]"#, to: ids[0], schema: Self.schema)
            #expect(again.map(\.succeeded) == [true], "\(lamps.log)")
            let (_, owned) = try env.command(#"[{"turnPower":{"power":true}}]"#, to: added, schema: Self.schema)
            #expect(owned.map(\.succeeded) == [true], "the owner's lamp is still carried: \(lamps.log)")
            let renewed = try Self.lamp(env, 3, gateway: gw.thingID)
            #expect(renewed != ids[3])
            #expect(env.hub.thing(vendorThingID: "LAMP-0000")?.thingID == ids[0])
        }
    }

    @Test("A bad command line is refused with the usage, exit 2")
    func badArguments() throws {
        let exe = try #require(ApplianceProcess.locate("lamps"))
        let log = NSTemporaryDirectory() + "lamps-args-\(getpid()).log"
        defer { unlink(log) }
        for args in [["--lamps", "0"], ["--lamps", "1001"], ["--radio-delay-ms", "-1"], ["--port"], ["--nope", "1"]] {
            #expect(try runChild(exe, args, logPath: log) == 2, "\(args)")
        }
        #expect(readText(log).contains("usage: lamps [options]"))
    }
}
