// SPDX-License-Identifier: Apache-2.0

import ThingIF

/// MemoryStore's state.
extension MemoryStore {
    // MARK: state

    public func applyState(thingID: String, method: String, upload: String, at: Int64) -> String? {
        data.withLock { d in
            guard var t = d.things[thingID] else { return nil }
            let merged = StateMerge.apply(method: method, upload: upload, to: t.state)
            t.state = merged
            d.things[thingID] = t
            var h = d.history[thingID, default: []]
            d.sampleSeq += 1
            h.append(
                StateSample(
                    thingID: thingID, at: at, method: method, upload: upload, state: merged,
                    cursor: d.sampleSeq))
            if let oldest = StoreRules.oldestKept(retention, at: at) {
                h.removeAll { $0.at < oldest }
            }
            if retention.maxSamples > 0, h.count > retention.maxSamples {
                h.removeFirst(h.count - retention.maxSamples)
            }
            d.history[thingID] = h
            return merged
        }
    }

    public func stateHistory(thingID: String, from: Int64, to: Int64) -> [StateSample] {
        data.withLock { d in (d.history[thingID] ?? []).filter { $0.at >= from && $0.at < to } }
    }

    public func stateHistoryPage(
        thingID: String, from: Int64, to: Int64, after: Int64, skip: Int, limit: Int, alias: String?,
        ranges: [StateRange]
    ) -> (samples: [StateSample], next: Int64?) {
        data.withLock { d in
            var out: [StateSample] = []
            var last: Int64 = 0
            var skipped = 0
            for s in d.history[thingID] ?? [] where s.cursor > after && s.at >= from && s.at < to {
                guard StateRange.admit(ranges, state: s.state, alias: alias) else { continue }
                guard skipped >= skip else {
                    skipped += 1
                    continue
                }
                if out.count == max(0, limit) { return (out, last) }
                out.append(s)
                last = s.cursor
            }
            return (out, nil)
        }
    }
}
