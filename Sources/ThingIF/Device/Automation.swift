// SPDX-License-Identifier: Apache-2.0

import CThingIF

/// Action sets and timer triggers, persisted as one JSON file written
/// atomically (Storage.write) after every change. Not thread-safe: the
/// engine keeps it in `Thing.Shared`.
final class Automation {
    static let fileName = "automation.json"
    // The types, codec, checks and limits are AutomationCodec and
    // AutomationLimits (Wire/), shared with the hub and the CLI.

    private let storage: Storage
    var sets: [ActionSet] = []
    var triggers: [TimerTrigger] = []
    /// The version of the last remote configuration applied.
    var remoteVersion: Int?
    private(set) var loadProblem: String?

    init(storage: Storage) {
        self.storage = storage
        guard let bytes = storage.read(Automation.fileName, limit: 16 << 20) else { return }
        guard case .success(let j) = JSON.parse(bytes), j.isObject else {
            loadProblem =
                str("\(storage.path(Automation.fileName)) is not valid JSON; starting without action sets and timers")
            return
        }
        remoteVersion = j["remoteVersion"]?.intValue
        for s in j["actionSets"]?.elements ?? [] {
            guard case .success(var set) = AutomationCodec.decodeSet(s) else { continue }
            set.remote = s["remote"]?.boolValue ?? false
            sets.append(set)
        }
        for t in j["timerTriggers"]?.elements ?? [] {
            guard case .success(var trig) = AutomationCodec.decodeTrigger(t) else { continue }
            trig.remote = t["remote"]?.boolValue ?? false
            trig.startDate = t["startDate"]?.epochMsValue ?? trig.fireDate
            triggers.append(trig)
        }
    }

    func set(named name: String) -> Int? { sets.firstIndex { $0.name.equals(name) } }
    func trigger(named name: String) -> Int? { triggers.firstIndex { $0.name.equals(name) } }

    func save() -> Bool {
        let o = JSON.object()
        if let remoteVersion { o.set("remoteVersion", .int(remoteVersion)) }
        let a = JSON.array()
        for s in sets {
            let e = AutomationCodec.encode(s)
            e.set("remote", .bool(s.remote))
            a.append(e)
        }
        o.set("actionSets", a)
        let t = JSON.array()
        for tr in triggers {
            let e = AutomationCodec.encode(tr)
            e.set("startDate", .int64(tr.startDate))
            e.set("remote", .bool(tr.remote))
            t.append(e)
        }
        o.set("timerTriggers", t)
        return storage.write(Automation.fileName, o.dumpBytes())
    }
}
