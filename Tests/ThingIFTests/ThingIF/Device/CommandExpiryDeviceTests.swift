// SPDX-License-Identifier: Apache-2.0

import CThingIF
import CThingIFTestSupport
import Foundation
import Testing
import ThingIF

/// The device side of commands' expiry: a command that arrives past its
/// `expiresAt` by the thing's own clock is not run; every action gets a
/// failed result with a machine-readable reason. A real broker, hub and C
/// appliance; the commands are published raw, as a hub would send them.
@Suite("Command expiry on the thing", .offPool)
struct CommandExpiryDeviceTests {
    static let minuteMs: Int64 = 60_000

    private static func payload(_ id: String, expiresAt: Int64?) -> String {
        let expiry = expiresAt.map { ",\"expiresAt\":\($0)" } ?? ""
        return
            #"{"commandID":"\#(id)","schema":"AirConditioner-Demo","schemaVersion":1,"issuer":"user:demo"\#(expiry),"actions":[{"turnPower":{"power":true}},{"setFanSpeed":{"fanSpeed":3}}]}"#
    }

    private func send(_ env: Env, _ id: String, expiresAt: Int64?, to tid: String) {
        let p = Self.payload(id, expiresAt: expiresAt)
        #expect(env.hub.publishRawCommand(Array(p.utf8), commandID: id, to: tid, stored: p))
    }

    @Test("The rule: judged only with an expiry and a set clock (2020 on), past the tolerance")
    func rule() {
        let now: Int64 = 1_764_000_000_000
        #expect(!CommandExpiry.isExpired(expiresAt: nil, now: now, skewToleranceMs: 0))
        #expect(CommandExpiry.isExpired(expiresAt: now - 1, now: now, skewToleranceMs: 0))
        #expect(!CommandExpiry.isExpired(expiresAt: now, now: now, skewToleranceMs: 0))
        #expect(!CommandExpiry.isExpired(expiresAt: now - 60_000, now: now, skewToleranceMs: 60_000))
        #expect(CommandExpiry.isExpired(expiresAt: now - 60_001, now: now, skewToleranceMs: 60_000))
        // A clock before 2020 has not been set: no judgement.
        #expect(!CommandExpiry.isExpired(expiresAt: 0, now: CommandExpiry.clockSetSinceMs - 1, skewToleranceMs: 0))
        #expect(CommandExpiry.isExpired(expiresAt: 0, now: CommandExpiry.clockSetSinceMs, skewToleranceMs: 0))

        // The wire member: read, written back, and a wrong type is a command-level fault.
        guard case .success(let c) = Command.decode(Array(Self.payload("c-1", expiresAt: now).utf8), maxSize: 65536)
        else {
            Issue.record("decode")
            return
        }
        #expect(c.expiresAt == now && c.encode()["expiresAt"]?.int64Value == now)
        guard
            case .success(let bad) = Command.decode(
                Array(#"{"commandID":"c-2","expiresAt":"soon","actions":[{"a":{}}]}"#.utf8), maxSize: 65536)
        else {
            Issue.record("decode")
            return
        }
        guard case .invalid(_, let reason)? = bad.groups.first?.entries.first else {
            Issue.record("not refused: \(bad.groups)")
            return
        }
        #expect(reason.contains("\"expiresAt\" must be a non-negative integer"))
        if case .success(let none) = Command.decode(Array(Self.payload("c-3", expiresAt: nil).utf8), maxSize: 65536) {
            #expect(none.expiresAt == nil && none.encode()["expiresAt"] == nil)
        } else {
            Issue.record("decode")
        }
    }

    @Test("Arriving expired: not run, one failed result per action with reason EXPIRED; within the tolerance it runs")
    func refusedOnArrival() throws {
        try withEnv { env in
            let (t, tid) = try env.onlineAircon()
            let now = Int64(Date().timeIntervalSince1970 * 1000)

            send(env, "cmd-expired", expiresAt: now - 10 * Self.minuteMs, to: tid)
            let refused = try env.results(of: "cmd-expired")
            #expect(refused.map(\.name) == ["turnPower", "setFanSpeed"])
            for r in refused {
                #expect(!r.succeeded && (r.errorMessage ?? "").hasPrefix("expired:"), "\(r)")
                #expect(r.data?["reason"] as? String == "EXPIRED")
                #expect((r.data?["expiresAt"] as? NSNumber)?.int64Value == now - 10 * Self.minuteMs)
                #expect(((r.data?["thingTime"] as? NSNumber)?.int64Value ?? 0) >= now)
            }
            #expect(env.hub.store.command(id: "cmd-expired")?.state == .incomplete)
            #expect(t.logContains("arrived expired"))

            // 30 s late is within the default tolerance (60 s); a future one runs and the handler reads it.
            send(env, "cmd-late", expiresAt: now - 30_000, to: tid)
            #expect(try env.results(of: "cmd-late").allSatisfy(\.succeeded))
            let future = now + 10 * Self.minuteMs
            send(env, "cmd-future", expiresAt: future, to: tid)
            #expect(try env.results(of: "cmd-future").allSatisfy(\.succeeded))
            send(env, "cmd-none", expiresAt: nil, to: tid)
            #expect(try env.results(of: "cmd-none").allSatisfy(\.succeeded))
            let records = t.records
            #expect(!records.contains { $0.commandID == "cmd-expired" }, "no handler ran for the expired command")
            #expect(records.filter { $0.commandID == "cmd-future" }.allSatisfy { $0.expiresAt == future })
            #expect(records.filter { $0.commandID == "cmd-late" }.count == 2)
            #expect(records.filter { $0.commandID == "cmd-none" }.allSatisfy { $0.expiresAt == 0 })

            // Delivered again: the stored refusal is sent again, nothing runs.
            send(env, "cmd-expired", expiresAt: now - 10 * Self.minuteMs, to: tid)
            try env.expectAlive(tid)
            #expect(!t.records.contains { $0.commandID == "cmd-expired" })
        }
    }

    @Test("THINGIF_OPT_EXPIRY_SKEW_MS sets the tolerance (0 .. 1 day); a clock before 2020 does not judge")
    func toleranceAndUnsetClock() throws {
        try withEnv { env in
            let (t, tid) = try env.onlineAircon()
            let skew = Int32(THINGIF_OPT_EXPIRY_SKEW_MS.rawValue)
            #expect(ct_set_option(t.ct, skew, -1) == RC.invalid)
            #expect(ct_set_option(t.ct, skew, 86_400_001) == RC.invalid)
            #expect(ct_set_option(t.ct, skew, 0) == RC.ok)
            let now = Int64(Date().timeIntervalSince1970 * 1000)
            send(env, "cmd-strict", expiresAt: now - 30_000, to: tid)
            #expect(
                try env.results(of: "cmd-strict").allSatisfy {
                    !$0.succeeded && $0.data?["reason"] as? String == "EXPIRED"
                })

            // A thing whose clock reads 2010 runs even a command a day past its expiry.
            #expect(ct_use_fake_clock(t.ct, 1_262_304_000_000) == RC.ok)
            send(env, "cmd-unjudged", expiresAt: now - 1_440 * Self.minuteMs, to: tid)
            #expect(try env.results(of: "cmd-unjudged").allSatisfy(\.succeeded))
            #expect(t.records.filter { $0.commandID == "cmd-unjudged" }.count == 2)
            // The thing's clock (thingif_set_clock) is the one that judges.
            #expect(ct_use_fake_clock(t.ct, now + 60 * Self.minuteMs) == RC.ok)
            send(env, "cmd-by-its-clock", expiresAt: now + 30 * Self.minuteMs, to: tid)
            #expect(try env.results(of: "cmd-by-its-clock").allSatisfy { !$0.succeeded })
        }
    }
}
