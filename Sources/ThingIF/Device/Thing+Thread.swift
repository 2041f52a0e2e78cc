// SPDX-License-Identifier: Apache-2.0

import CThingIF

/// The library's own loop thread (thingif_loop_start/stop) and the shutdown of a handle.
extension Thing {
    // MARK: own thread

    func startThread() -> Int32 {
        if isOnLoopThread { return THINGIF_ERR_IN_CALLBACK.code }
        let ok = shared.withLock { s -> Int32 in
            if s.ownThread != nil || s.loopThread != nil { return THINGIF_ERR_STATE.code }
            if s.identity == nil { return THINGIF_ERR_NOT_ONBOARDED.code }
            s.stopRequested = false
            return OK
        }
        guard ok == OK else { return ok }
        var tid = pthread_t()
        let arg = Unmanaged.passUnretained(self).toOpaque()
        // Hold the lock over creation so the thread sees ownThread set.
        let rc = shared.withLock { s -> Int32 in
            let r = pthread_create(
                &tid, nil,
                { raw in
                    let thing = Unmanaged<Thing>.fromOpaque(raw!).takeUnretainedValue()
                    thing.threadMain()
                    return nil
                }, arg)
            if r == 0 { s.ownThread = tid }
            return r
        }
        return rc == 0 ? OK : THINGIF_ERR_NOMEM.code
    }

    func threadMain() {
        while !shared.withLock({ $0.stopRequested }) {
            _ = loop(timeoutMs: 100)
        }
    }

    func stopThread() -> Int32 {
        let me = pthread_self()
        let tid = shared.withLock { s -> Result<pthread_t, StatusError> in
            // Inside a callback of thingif_loop() too, as the header says.
            if let l = s.loopThread, pthread_equal(l, me) != 0 {
                return .failure(StatusError(THINGIF_ERR_IN_CALLBACK.code))
            }
            guard let t = s.ownThread else { return .failure(StatusError(THINGIF_ERR_STATE.code)) }
            if pthread_equal(t, me) != 0 { return .failure(StatusError(THINGIF_ERR_IN_CALLBACK.code)) }
            s.stopRequested = true
            return .success(t)
        }
        switch tid {
        case .failure(let e): return e.code
        case .success(let t):
            pthread_join(t, nil)
            shared.withLock {
                $0.ownThread = nil
                $0.stopRequested = false
            }
            return OK
        }
    }

    /// Stops everything before the handle is freed.
    func shutdown() -> Int32 {
        let me = pthread_self()
        let inCallback = shared.withLock { s -> Bool in
            if let t = s.loopThread, pthread_equal(t, me) != 0 { return true }
            if let t = s.ownThread, pthread_equal(t, me) != 0 { return true }
            return false
        }
        if inCallback { return THINGIF_ERR_IN_CALLBACK.code }
        if shared.withLock({ $0.ownThread != nil }) { _ = stopThread() }
        let client = shared.withLock { s -> MqttClient? in
            let c = s.socketOpen ? s.client : nil
            s.client = nil
            s.socketOpen = false
            s.connected = false
            return c
        }
        pipeline.detach()
        if let client {
            // Reason 0x04: disconnect with Will, so the broker publishes "offline".
            client.disconnectWithWill()
            _ = client.loop(timeoutMs: 10)
        }
        return OK
    }
}
