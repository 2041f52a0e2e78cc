// SPDX-License-Identifier: Apache-2.0

import Foundation
import Testing
import ThingIFHub
#if canImport(Glibc)
    import Glibc
#endif

/// examples-c/aircon.c as a process (the test appliance, aircon.c compiled
/// in): how it onboards when the broker is not there yet.
@Suite("The example appliance", .offPool)
struct AirconExampleTests {
    /// aircon onboarding itself as `vendorThingID` through `port`, with a
    /// short request timeout so that a silent broker costs half a second.
    private func appliance(_ env: Env, port: Int, vendorThingID: String, password: String = "demo-pass") throws
        -> ApplianceProcess
    {
        try ApplianceProcess(
            args: [
                "--port", String(port), "--app-id", Env.appID, "--app-key", Env.appKey,
                "--vendor-thing-id", vendorThingID, "--password", password,
                "--storage", env.storage(vendorThingID), "--request-timeout-ms", "500"
            ],
            logPath: env.storage(vendorThingID + ".log"))
    }

    @Test(
        "Onboarding is tried again, with a growing pause, while no hub answers or no broker accepts; then it onboards")
    func onboardingRetried() throws {
        try withEnv { env in
            // First a broker where the app's bootstrap identity may publish
            // but no hub answers: THINGIF_ERR_TIMEOUT.
            let silent = try Broker.startFilesOnly()
            defer {
                silent.stop()
                silent.removeFiles()
            }
            let proxy = try CuttingProxy(upstreamPort: silent.port)
            defer { proxy.stop() }
            let aircon = try appliance(env, port: proxy.port, vendorThingID: "AC-RETRY")
            try aircon.start()
            defer { aircon.stop() }
            #expect(
                poll(timeoutMs: 30_000) {
                    aircon.log.contains("onboarding: the framework did not answer in time; trying again in 1 s")
                }, "\(aircon.log)")

            // Then connections closed at once: THINGIF_ERR_CONNECT.
            proxy.refuse(true)
            #expect(
                poll(timeoutMs: 30_000) {
                    aircon.log.contains("onboarding: could not connect to the broker; trying again in")
                }, "\(aircon.log)")
            #expect(aircon.log.contains("trying again in 2 s"), "the pause doubles: \(aircon.log)")
            #expect(env.hub.thing(vendorThingID: "AC-RETRY") == nil)

            // Then the hub's broker: the next attempt onboards.
            proxy.retarget(upstreamPort: env.broker.port)
            proxy.refuse(false)
            let thing = try #require(
                env.hub.waitForThing(vendorThingID: "AC-RETRY", timeoutMs: 30_000), "\(aircon.log)")
            #expect(env.hub.waitForOnline(thing.thingID, timeoutMs: 30_000), "\(aircon.log)")
            try env.expectAlive(thing.thingID)
            #expect(aircon.isRunning)
        }
    }

    @Test("A refused onboarding (a wrong password) is not tried again: aircon exits at once")
    func refusedNotRetried() throws {
        try withEnv { env in
            _ = try env.onlineAircon(vendorThingID: "AC-TAKEN")  // its password is password-1
            let aircon = try appliance(
                env, port: env.broker.port, vendorThingID: "AC-TAKEN", password: "not-the-password")
            try aircon.start()
            defer { aircon.stop() }
            #expect(poll(timeoutMs: 30_000) { !aircon.isRunning }, "\(aircon.log)")
            #expect(aircon.log.contains("onboarding failed: the framework rejected the request"), "\(aircon.log)")
            #expect(!aircon.log.contains("trying again"), "\(aircon.log)")
        }
    }

    @Test("SIGTERM during the pause between onboarding attempts stops aircon cleanly")
    func stoppedWhilePausing() throws {
        try withEnv { env in
            let proxy = try CuttingProxy(upstreamPort: env.broker.port)
            defer { proxy.stop() }
            proxy.refuse(true)
            let aircon = try appliance(env, port: proxy.port, vendorThingID: "AC-PAUSED")
            try aircon.start()
            defer { aircon.stop() }
            #expect(poll(timeoutMs: 30_000) { aircon.log.contains("trying again in 2 s") }, "\(aircon.log)")
            let pid = try #require(aircon.pid)
            kill(pid, SIGTERM)
            #expect(poll(timeoutMs: 30_000) { !aircon.isRunning }, "\(aircon.log)")
            #expect(aircon.log.contains("aircon: stopping"), "\(aircon.log)")
            #expect(!aircon.log.contains("onboarding failed"), "\(aircon.log)")
        }
    }
}
