// SPDX-License-Identifier: Apache-2.0

import ThingIF

/// Callers in this process that wait for a command to end (an owner's
/// cancel, waiting for the thing's answer: API+Commands). Notifications
/// wakes them for every end it hears of: one this hub recorded
/// (`finished`) and, on a store that hubs share, the results another hub
/// recorded (`finishedElsewhere`). A waiter reads the store again when
/// woken, so a wake-up for an end it does not care about costs one read.
///
/// Threads: every method may be called from any thread.
public final class CommandEnds: @unchecked Sendable {
    private struct Waiter {
        let id: UInt64
        let continuation: CheckedContinuation<Void, Never>
    }
    private let waiting = Locked<(next: UInt64, byCommand: [String: [Waiter]])>((0, [:]))

    init() {}

    /// Returns once `commandID` ended here or elsewhere, once `ended()`
    /// is true, or after `timeoutMs`, whichever is first. `ended` runs
    /// after the waiter is registered, so an end between the caller's last
    /// look and this call is not missed.
    public func wait(for commandID: String, timeoutMs: Int64, ended: () -> Bool) async {
        guard timeoutMs > 0 else { return }
        await withCheckedContinuation { (c: CheckedContinuation<Void, Never>) in
            let id = waiting.withLock { w -> UInt64 in
                w.next &+= 1
                w.byCommand[commandID, default: []].append(Waiter(id: w.next, continuation: c))
                return w.next
            }
            if ended() {
                resume(commandID, id)
                return
            }
            // The deadline: a timer, not a poll; whoever takes the waiter resumes it.
            Task.detached { [self] in
                try? await Task.sleep(nanoseconds: UInt64(timeoutMs) * 1_000_000)
                resume(commandID, id)
            }
        }
    }

    /// Wakes every waiter of `commandID`.
    func ended(_ commandID: String) {
        let woken = waiting.withLock { w -> [Waiter] in
            w.byCommand.removeValue(forKey: commandID) ?? []
        }
        for waiter in woken { waiter.continuation.resume() }
    }

    /// Resumes one waiter if nobody took it yet (exactly once).
    private func resume(_ commandID: String, _ id: UInt64) {
        let taken = waiting.withLock { w -> Waiter? in
            guard var list = w.byCommand[commandID], let i = list.firstIndex(where: { $0.id == id }) else { return nil }
            let waiter = list.remove(at: i)
            w.byCommand[commandID] = list.isEmpty ? nil : list
            return waiter
        }
        taken?.continuation.resume()
    }

    /// How many callers wait (for the tests and metrics).
    public var waiters: Int { waiting.withLock { $0.byCommand.values.reduce(0) { $0 + $1.count } } }
}
