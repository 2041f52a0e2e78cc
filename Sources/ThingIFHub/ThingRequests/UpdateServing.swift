// SPDX-License-Identifier: Apache-2.0

import ThingIF

/// Where things' block and hash-page reads run, and their bounds
/// (docs/UPDATES.md §9): a pool of its own (never the request lanes that
/// serve commands, nor the costly pool that hashes passwords), at most
/// `perThing` reads in flight per thing, at most `queue` waiting for the
/// pool's threads, and a token bucket of bytes a second for all things.
/// A read beyond any of them is refused at once (the caller answers 429
/// and the thing asks again after its request timeout).
public final class UpdateServing: @unchecked Sendable {
    public let perThing: Int
    public let bytesPerSecond: Int64
    /// The bucket holds one second's bytes, and at least one largest block.
    public let burst: Int64
    /// The pool the reads run on (its figures: `running`, `waiting`).
    public let pool: CostlyWork

    private struct State {
        var inFlight: [String: Int] = [:]
        var tokens: Double
        var lastMs: Int64
        var servedBytes: Int64 = 0
        var refused = 0
    }

    private let state: Locked<State>

    public init(limits: HubLimits) {
        perThing = max(1, limits.updateRequestsPerThing)
        bytesPerSecond = max(0, limits.updateBytesPerSecond)
        burst = max(bytesPerSecond, Int64(UpdateLimits.maxBlockSize))
        pool = CostlyWork(threads: max(1, limits.updateServeThreads), queueLimit: max(1, limits.updateServeQueue))
        state = Locked(State(tokens: Double(burst), lastMs: Platform.nowMs()))
    }

    /// Bytes served since the start (blocks and hash pages).
    public var servedBytes: Int64 { state.withLock { $0.servedBytes } }
    /// Reads refused by a bound since the start.
    public var refused: Int { state.withLock { $0.refused } }
    /// Reads of `thingID` in flight now.
    public func inFlight(_ thingID: String) -> Int { state.withLock { $0.inFlight[thingID] ?? 0 } }

    /// Takes a place for one read of `cost` bytes by `thingID`: false (and
    /// nothing taken) when the thing has `perThing` in flight or the bytes
    /// are spent. Each true is followed by one `release`.
    public func admit(_ thingID: String, cost: Int, now: Int64 = Platform.nowMs()) -> Bool {
        state.withLock { s in
            let n = s.inFlight[thingID] ?? 0
            guard n < perThing else {
                s.refused += 1
                return false
            }
            if bytesPerSecond > 0 {
                let elapsed = Double(max(0, now - s.lastMs)) / 1000
                s.tokens = min(Double(burst), s.tokens + elapsed * Double(bytesPerSecond))
                s.lastMs = max(s.lastMs, now)
                guard s.tokens >= Double(cost) else {
                    s.refused += 1
                    return false
                }
                s.tokens -= Double(cost)
            }
            s.inFlight[thingID] = n + 1
            return true
        }
    }

    /// Gives back the place `admit` took; `served` bytes were sent.
    public func release(_ thingID: String, served: Int) {
        state.withLock { s in
            let n = (s.inFlight[thingID] ?? 1) - 1
            s.inFlight[thingID] = n > 0 ? n : nil
            s.servedBytes += Int64(served)
        }
    }

    /// Runs `read` on the pool within the bounds and hands its reply to
    /// `answer` (after the place is given back, so the thing's next request
    /// finds it free); false, and nothing run, when a bound refused it.
    public func submit(
        _ thingID: String, cost: Int, read: @escaping () -> KiiResponse, answer: @escaping (KiiResponse) -> Void
    ) -> Bool {
        guard admit(thingID, cost: cost) else { return false }
        let queued = pool.trySubmit { [self] in
            let reply = read()
            release(thingID, served: reply.isSuccess ? reply.body.count : 0)
            answer(reply)
        }
        if !queued {
            release(thingID, served: 0)
            state.withLock { $0.refused += 1 }
        }
        return queued
    }

    /// Runs `read` here within the same bounds (a request over HTTP, whose
    /// caller waits); nil when a bound refused it.
    public func inline(_ thingID: String, cost: Int, read: () -> KiiResponse) -> KiiResponse? {
        guard admit(thingID, cost: cost) else { return nil }
        let reply = read()
        release(thingID, served: reply.isSuccess ? reply.body.count : 0)
        return reply
    }

    func open() { pool.open() }
    func close() { pool.close() }
}
