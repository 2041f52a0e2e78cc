// SPDX-License-Identifier: Apache-2.0

import CThingIF
import Foundation
import ThingIF
@testable import ThingIFHub

extension HubSecrets {
    /// For tests only: 1,000 PBKDF2 iterations instead of 600,000.
    static let fastForTests = HubSecrets(passwordIterations: 1_000)
}

/// What the tests drive and observe the framework side with: not part of the
/// hub's public API (the production binary has no use for them).
extension FrameworkSide {
    /// Onboarding by the app without an owner: registers (or finds) the thing
    /// and returns its thingID and access token, to hand over to the device.
    public func onboardByApp(vendorThingID: String, password: String, thingType: String? = nil) -> (
        thingID: String, accessToken: String
    )? {
        switch store.registerThing(
            vendorThingID: vendorThingID, password: password, thingType: thingType,
            firmwareVersion: nil, dataGroupingInterval: nil, layoutPosition: nil)
        {
        case .success(let t): return (t.thingID, t.accessToken)
        case .failure: return nil
        }
    }

    public func thing(_ thingID: String) -> ThingRecord? { store.thing(id: thingID) }
    public func thing(vendorThingID: String) -> ThingRecord? { store.thing(vendorThingID: vendorThingID) }

    public var requests: [ThingRequests.Record] { thingRequests.log }

    /// Publishes on any topic (QoS 1) as the hub: what a forged or broken
    /// message from the framework's side does to a thing.
    public func publishRaw(topic: String, payload: [UInt8]) -> Bool {
        client.publish(topic: topic, payload: payload, qos: 1) == MOSQ_ERR_SUCCESS.rawValue
    }

    /// Publishes a retained message (QoS 1) as the hub.
    public func publishRetained(topic: String, payload: [UInt8]) -> Bool {
        client.publishRetained(topic: topic, payload: payload)
    }

    /// Things whose last status message said "online".
    public var onlineThings: [String] { presence.thingsSeen.filter { presence.announcedOnline($0) }.sorted() }

    /// Waits for any thing to come online and returns its thingID.
    public func waitForOnlineThing(timeoutMs: Int) -> String? {
        expectOffPool("FrameworkSide.waitForOnlineThing")
        var r: String?
        _ = wait(timeoutMs: timeoutMs) {
            r = onlineThings.first
            return r != nil
        }
        return r
    }

    public func waitForOnline(_ thingID: String, timeoutMs: Int) -> Bool {
        expectOffPool("FrameworkSide.waitForOnline")
        return wait(timeoutMs: timeoutMs) { presence.isOnline(thingID) }
    }

    /// Builds and sends a schema command; returns its commandID.
    /// `actions` is the JSON text of the actions array.
    public func sendCommand(
        to thingID: String, schema: String, schemaVersion: Int, actions: String,
        issuer: String = "user:demo", title: String? = nil, description: String? = nil,
        metadata: String? = nil
    ) -> String? {
        var doc = "{\"commandID\":\"\(FrameworkSide.newCommandID())\",\"schema\":\(quote(schema)),"
        doc += "\"schemaVersion\":\(schemaVersion),\"issuer\":\(quote(issuer)),\"actions\":\(actions)"
        if let title { doc += ",\"title\":\(quote(title))" }
        if let description { doc += ",\"description\":\(quote(description))" }
        if let metadata { doc += ",\"metadata\":\(metadata)" }
        doc += "}"
        guard case .success(let j) = JSON.parse(doc), case .success(let cmd) = Command.decode(j) else { return nil }
        return delivery.send(cmd, to: thingID) ? cmd.id : nil
    }

    /// Publishes any bytes on the thing's command topic; with `commandID`,
    /// first records a command of that ID for the thing, so that the results
    /// the thing reports for it are accepted (tests of bad payloads).
    public func publishRawCommand(
        _ payload: [UInt8], commandID: String?, to thingID: String,
        stored: String? = nil
    ) -> Bool {
        if let commandID { recordCommand(commandID, for: thingID, payload: stored) }
        return delivery.publish(payload, to: thingID)
    }

    /// Records a command of `commandID` for the thing without sending it
    /// (nothing when it exists), so that the thing's results for it are
    /// accepted; `payload` is what the store keeps as sent (a placeholder
    /// with the commandID alone by default).
    public func recordCommand(_ commandID: String, for thingID: String, payload: String? = nil) {
        guard store.command(id: commandID) == nil else { return }
        let placeholder = JSON.object()
        placeholder.set("commandID", string: commandID)
        let now = Platform.epochMs()
        _ = store.insertCommand(
            CommandRecord(
                commandID: commandID, thingID: thingID, issuer: nil,
                issuingInstallationID: nil, payload: payload ?? placeholder.dump(),
                createdAt: now, modifiedAt: now))
    }

    private func quote(_ s: String) -> String { JSON.string(s)?.dump() ?? "\"\"" }

    /// The action results the thing reported for a command (JSON text).
    public func results(of commandID: String) -> String? { store.command(id: commandID)?.results }

    /// How many times the thing reported results for a command.
    public func resultPostCount(of commandID: String) -> Int { thingRequests.resultPosts(of: commandID) }

    public func waitForResults(of commandID: String, timeoutMs: Int) -> String? {
        expectOffPool("FrameworkSide.waitForResults")
        var r: String?
        _ = wait(timeoutMs: timeoutMs) {
            r = results(of: commandID)
            return r != nil
        }
        return r
    }

    public func waitForThing(vendorThingID: String, timeoutMs: Int) -> ThingRecord? {
        expectOffPool("FrameworkSide.waitForThing")
        var r: ThingRecord?
        _ = wait(timeoutMs: timeoutMs) {
            r = thing(vendorThingID: vendorThingID)
            return r != nil
        }
        return r
    }

    /// Every state upload of the thing, oldest first: ("PUT" | "PATCH", the uploaded JSON text).
    public func stateUploads(of thingID: String) -> [(method: String, body: String)] {
        store.stateHistory(thingID: thingID, from: 0, to: .max).map { ($0.method, $0.upload) }
    }

    /// Waits until the thing has made at least `count` state uploads.
    public func waitForStateUploads(of thingID: String, count: Int, timeoutMs: Int) -> [(method: String, body: String)]
    {
        expectOffPool("FrameworkSide.waitForStateUploads")
        var r: [(method: String, body: String)] = []
        _ = wait(timeoutMs: timeoutMs) {
            r = stateUploads(of: thingID)
            return r.count >= count
        }
        return r
    }
}
