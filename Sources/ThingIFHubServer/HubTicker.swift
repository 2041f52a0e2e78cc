// SPDX-License-Identifier: Apache-2.0

import ServiceLifecycle

/// The hub's periodic work (the server triggers' schedules and the sweep of
/// notifications a hub did not send) as a Service of the hub's ServiceGroup:
/// `tick` every `periodMs`, until a graceful shutdown or cancellation, which
/// stop it between two ticks, never inside one.
public struct HubTicker: Service {
    let periodMs: Int
    let tick: @Sendable () -> Void

    public init(periodMs: Int = 1000, tick: @escaping @Sendable () -> Void) {
        self.periodMs = max(1, periodMs)
        self.tick = tick
    }

    public func run() async {
        await cancelWhenGracefulShutdown {
            while !Task.isCancelled {
                tick()
                do { try await Task.sleep(for: .milliseconds(periodMs)) } catch { return }
            }
        }
    }
}
