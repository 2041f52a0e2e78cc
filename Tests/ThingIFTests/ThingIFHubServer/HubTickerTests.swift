// SPDX-License-Identifier: Apache-2.0

import Foundation
import Logging
import ServiceLifecycle
import Testing
import ThingIF
import ThingIFHubServer

@Suite("Hub ticker", .offPool)
struct HubTickerTests {
    @Test("The ticker ticks in the service group; a graceful shutdown stops it between ticks, and the group ends")
    func gracefulStop() async throws {
        let ticks = Locked(0)
        let inTick = Locked(false)
        let overlapped = Locked(false)
        let ticker = HubTicker(periodMs: 20) {
            if inTick.withLock({ $0 }) { overlapped.withLock { $0 = true } }
            inTick.withLock { $0 = true }
            usleep(5_000)
            ticks.withLock { $0 += 1 }
            inTick.withLock { $0 = false }
        }
        var logger = Logger(label: "ticker-test")
        logger.logLevel = .error
        let group = ServiceGroup(
            configuration: .init(
                services: [.init(service: ticker, successTerminationBehavior: .ignore)], logger: logger))
        let task = Task(executorPreference: HubExecutor.shared) { try await group.run() }
        var waited = 0
        while ticks.withLock({ $0 }) < 3 && waited < 500 {
            try await Task.sleep(for: .milliseconds(20))
            waited += 1
        }
        #expect(ticks.withLock { $0 } >= 3, "it ticks")
        await group.triggerGracefulShutdown()
        let start = ContinuousClock.now
        try await task.value
        #expect(ContinuousClock.now - start < .seconds(30), "the group ends after the shutdown")
        #expect(!inTick.withLock { $0 }, "stopped between ticks, not inside one")
        let after = ticks.withLock { $0 }
        try await Task.sleep(for: .milliseconds(100))
        #expect(ticks.withLock { $0 } == after, "no tick after the shutdown")
        #expect(!overlapped.withLock { $0 })
    }
}
