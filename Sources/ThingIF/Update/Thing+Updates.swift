// SPDX-License-Identifier: Apache-2.0

import CThingIF

/// Firmware updates as the C facade and the loop see them
/// (docs/UPDATES.md §9): the installer set at each start, the update
/// offer's action, the agent's turn in the loop, the replies to its block
/// requests, and the calls any thread may make (the mailbox).
extension Thing {
    var thingID: String? { shared.withLock { $0.identity?.thingID } }

    /// thingif_set_installer: reads the trust file and the journal. Not while
    /// a loop runs; once per handle.
    func setInstaller(
        _ callbacks: thingif_installer, userdata: UnsafeMutableRawPointer?, thingType: String, runningVersion: String,
        trustFile: String, maxTrialBoots: Int
    ) -> Int32 {
        if isLoopRunning { return THINGIF_ERR_STATE.code }
        if shared.withLock({ $0.updater != nil }) { return THINGIF_ERR_STATE.code }
        guard let bytes = Platform.readFile(trustFile, limit: UpdateLimits.maxTrustFile + 1) else {
            logger.error("cannot read the trust file \(trustFile)")
            return THINGIF_ERR_STORAGE.code
        }
        let factory: TrustRing
        switch TrustRing.parse(bytes) {
        case .failure(let e):
            logger.error("the trust file \(trustFile): \(e.message)")
            return THINGIF_ERR_JSON.code
        case .success(let ring): factory = ring
        }
        let installer = UpdateInstaller(
            callbacks: callbacks, userdata: userdata, thingType: thingType, runningVersion: runningVersion,
            factoryTrust: factory, maxTrialBoots: maxTrialBoots, storage: storage)
        let agent = UpdateAgent(thing: self, installer: installer, journal: UpdateJournal(storage: storage))
        shared.withLock { $0.updater = agent }
        return OK
    }

    var updater: UpdateAgent? { shared.withLock { $0.updater } }

    /// The `update` action of the reserved alias (loop thread).
    func runUpdateOffer(_ call: ActionCall) -> ActionResult {
        guard Updates.built, let agent = updater else { return UpdateAgent.noInstaller(call) }
        return agent.offer(call)
    }

    /// The agent's part of a loop turn.
    func tickUpdates() {
        guard Updates.built, let agent = updater else { return }
        let (connected, timeout) = shared.withLock { ($0.connected && $0.subscribed, $0.config.requestTimeoutMs) }
        agent.tick(now: Platform.nowMs(), connected: connected, timeoutMs: timeout)
    }

    /// A reply no outbox item waits for: one of the agent's block requests?
    func transientReply(_ requestID: String, _ reply: KiiResponse) -> Bool {
        guard Updates.built, let agent = updater else { return false }
        return agent.replied(requestID, reply)
    }
}

/// The calls other threads make (the C facade's), through the agent's mailbox.
extension Thing {
    /// thingif_update_installed.
    func updateInstalled(ok: Bool, message: String?) -> Int32 {
        guard let agent = updater else { return THINGIF_ERR_STATE.code }
        return agent.mailbox.withLock { m in
            // Once per install: a second call, also while the loop acts on
            // the first, is refused.
            guard m.status == .installing, !m.installTold else { return THINGIF_ERR_STATE.code }
            m.installed = (ok, message)
            m.installTold = true
            return OK
        }
    }

    /// thingif_update_confirm, or with `rejected` thingif_update_reject.
    func updateTrialVerdict(rejected: String?) -> Int32 {
        guard let agent = updater else { return THINGIF_ERR_STATE.code }
        return agent.mailbox.withLock { m in
            guard m.status == .trial else { return THINGIF_ERR_STATE.code }
            if let rejected { m.rejected = rejected } else { m.confirmed = true }
            return OK
        }
    }

    /// thingif_update_status: (status, blocks held, blocks).
    func updateStatus() -> (UpdateStatus?, Int, Int)? {
        guard let agent = updater else { return nil }
        return agent.mailbox.withLock { ($0.status, $0.held, $0.blocks) }
    }
}
