// SPDX-License-Identifier: Apache-2.0

import Foundation
import Testing
import ThingIF
import ThingIFHub

/// The calls of Kii's app SDKs (thing-if-iOSSDK, -AndroidSDK, -JSSDK) and of
/// their test helpers that the hub serves as Kii does: user deletion, a
/// thing's vendorThingID, the owner's state upload. Each names its source.
@Suite("Kii app API", .offPool)
struct KiiAppAPITests {
    @Test("DELETE …/users/{userID}: 204; tokens, installations and ownerships go; the thing stays for a new owner")
    func deleteUser() async throws {
        try await withHubAPI { e in
            // thing-if-iOSSDK ThingIFSDKLargeTests/NotOnboardedYetTestsBase.swift (deletePseudoUser):
            // the pseudo user deletes itself with its own token while it owns a thing, 204.
            let (uid, token) = try await e.user()
            let (tid, thingToken) = try await e.onboard("AC-DEL-USER", owner: "user:\(uid)", token: token)
            let mqtt = try await e.installation("MQTT", token: token)
            let sse = try await e.installation("SSE", token: token)
            let (otherID, otherToken) = try await e.user()

            // Another user's ID, or one that is nobody's: 404 USER_NOT_FOUND, nothing deleted.
            for id in [otherID, "nobody"] {
                let r = try await e.call("DELETE", "\(e.api)/users/\(id)", token: token)
                #expect(r.status == 404 && r.errorCode == "USER_NOT_FOUND", "\(id): \(r.status) \(r.text)")
                #expect(r.json["message"] as? String == "User \(id) not found")
            }
            #expect(e.hub.store.user(id: otherID) != nil && e.hub.store.user(id: uid) != nil)
            #expect(try await e.call("DELETE", "\(e.api)/users/\(uid)").status == 401)

            let deleted = try await e.call("DELETE", "\(e.api)/users/\(uid)", token: token)
            #expect(deleted.status == 204, "\(deleted.status) \(deleted.text)")
            // The token is no one's now, as Kii's documentation says.
            let after = try await e.get("\(e.target(tid))/commands", token: token)
            #expect(after.status == 403 && after.errorCode == "WRONG_TOKEN", "\(after.status) \(after.text)")
            #expect(e.hub.store.appInstallation(id: mqtt.id) == nil && e.hub.store.appInstallation(id: sse.id) == nil)
            // The MQTT installation's broker login is gone with it.
            if let username = mqtt.username {
                let probe = try MqttProbe(
                    port: e.env.broker.port, clientID: username, username: username, password: mqtt.password)
                #expect(probe.connackCode != 0, "the deleted installation's login still connects")
                probe.stop()
            }
            // The thing stays, with no owner; it keeps working with its own token, and a new
            // owner onboards it with its password.
            let thing = try #require(e.hub.store.thing(id: tid))
            #expect(thing.owners.isEmpty)
            #expect(e.hub.store.thing(accessToken: thingToken)?.thingID == tid)
            let (newID, _) = try await e.onboard("AC-DEL-USER", owner: "user:\(otherID)", token: otherToken)
            #expect(newID == tid)
            #expect(e.hub.store.thing(id: tid)?.owners == ["user:\(otherID)"])
            // users/me with a deleted user's token: the token is refused first.
            #expect(try await e.call("DELETE", "\(e.api)/users/me", token: token).status == 403)
            let me = try await e.call("DELETE", "\(e.api)/users/me", token: otherToken)
            #expect(me.status == 204 && e.hub.store.user(id: otherID) == nil, "\(me.status) \(me.text)")
        }
    }

    @Test("GET and PUT …/things/{thingID}/vendor-thing-id: read, changed with its password, refused when taken")
    func vendorThingID() async throws {
        try await withHubAPI { e in
            // thing-if-iOSSDK ThingIFSDKLargeTests (getVendorThingID, updateVendorThingID) and
            // thing-if-JSSDK src/ops/ThingOps.ts: {"_vendorThingID"} and VendorThingIDUpdateRequest.
            let (uid, token) = try await e.user()
            let (tid, _) = try await e.onboard("AC-VTID-1", owner: "user:\(uid)", token: token)
            let (otherTid, _) = try await e.onboard("AC-VTID-2", owner: "user:\(uid)", token: token)
            let path = "\(e.api)/things/\(tid)/vendor-thing-id"
            let updateType = "application/vnd.kii.VendorThingIDUpdateRequest+json"

            let got = try await e.get(path, token: token)
            #expect(got.status == 200 && got.string("_vendorThingID") == "AC-VTID-1", "\(got.status) \(got.text)")

            let put = try await e.call(
                "PUT", path, token: token, body: Data(#"{"_vendorThingID":"AC-VTID-NEW","_password":"pw2"}"#.utf8),
                contentType: updateType)
            #expect(put.status == 204, "\(put.status) \(put.text)")
            #expect(try await e.get(path, token: token).string("_vendorThingID") == "AC-VTID-NEW")
            // The thing now onboards itself with them, and no longer with the old ones.
            let byThing = MediaType.onboardingByThing
            let again = try await e.call(
                "POST", "\(e.thingIF)/onboardings",
                body: Data(#"{"vendorThingID":"AC-VTID-NEW","thingPassword":"pw2"}"#.utf8), contentType: byThing)
            #expect(again.status == 200 && again.string("thingID") == tid, "\(again.status) \(again.text)")
            let old = try await e.call(
                "POST", "\(e.thingIF)/onboardings",
                body: Data(#"{"vendorThingID":"AC-VTID-NEW","thingPassword":"pw"}"#.utf8), contentType: byThing)
            #expect(old.status == 403, "\(old.status) \(old.text)")

            // Taken by another thing: 409, nothing changed.
            let taken = try await e.call(
                "PUT", path, token: token, body: Data(#"{"_vendorThingID":"AC-VTID-2","_password":"pw3"}"#.utf8),
                contentType: updateType)
            #expect(taken.status == 409 && taken.errorCode == "THING_ALREADY_EXISTS", "\(taken.status) \(taken.text)")
            #expect(e.hub.store.thing(id: tid)?.vendorThingID == "AC-VTID-NEW")
            #expect(e.hub.store.thing(id: otherTid)?.vendorThingID == "AC-VTID-2")

            // Bad bodies: 400 and nothing changed.
            for body in [
                #"{"_vendorThingID":"AC-VTID-X"}"#, #"{"_password":"pw"}"#, #"{"_vendorThingID":1,"_password":"pw"}"#,
                #"{"_vendorThingID":"","_password":"pw"}"#, #"[1]"#, "{",
                #"{"_vendorThingID":"\#(String(repeating: "v", count: 300))","_password":"pw"}"#
            ] {
                let r = try await e.call("PUT", path, token: token, body: Data(body.utf8), contentType: updateType)
                #expect(r.status == 400 && r.isErrorBody, "\(body): \(r.status) \(r.text)")
            }
            #expect(e.hub.store.thing(id: tid)?.vendorThingID == "AC-VTID-NEW")
            // Not the caller's thing, or no thing: 404 THING_NOT_FOUND, as for every /things/{thingID} call.
            let (_, stranger) = try await e.user()
            for (who, p) in [(stranger, path), (token, "\(e.api)/things/th.nope/vendor-thing-id")] {
                let r = try await e.get(p, token: who)
                #expect(r.status == 404 && r.errorCode == "THING_NOT_FOUND", "\(r.status) \(r.text)")
                let w = try await e.call(
                    "PUT", p, token: who, body: Data(#"{"_vendorThingID":"AC-VTID-Z","_password":"pw"}"#.utf8),
                    contentType: updateType)
                #expect(w.status == 404 && w.errorCode == "THING_NOT_FOUND", "\(w.status) \(w.text)")
            }
            #expect(e.hub.store.thing(vendorThingID: "AC-VTID-Z") == nil)
        }
    }

    @Test("PUT and PATCH …/states with the owner's token: stored, in the history, read back; a stranger's is refused")
    func ownerStateUpload() async throws {
        try await withHubAPI { e in
            // thing-if-iOSSDK ThingIFSDKLargeTests/ThingIFAPI+LargeTestUtils.swift (updateTargetStates):
            // PUT …/states, MultipleTraitState+json, with the owner's token, as Kii's documentation
            // allows ("the access token of the thing or thing owner").
            let (uid, token) = try await e.user()
            let (tid, _) = try await e.onboard("AC-OWNER-STATE", owner: "user:\(uid)", token: token)
            let states = "\(e.target(tid))/states"
            // Before any upload an alias query finds nothing (Kii: 409 STATE_HISTORY_NOT_AVAILABLE,
            // which thing-if-iOSSDK ThingIFAPIQueryUngroupedTests.testSuccessQueryEmptyResults reads
            // as no results); once a state is there, an alias it lacks is TRAIT_ALIAS_NOT_FOUND.
            let query = #"{"query":{"clause":{"type":"all"}}}"#
            let early = try await e.call(
                "POST", "\(states)/aliases/AirConditionerAlias/query", token: token, body: Data(query.utf8))
            #expect(early.status == 200 && (early.json["results"] as? [Any])?.isEmpty == true, "\(early.text)")
            let put = try await e.call(
                "PUT", states, token: token,
                body: Data(#"{"AirConditionerAlias":{"power":true,"currentTemperature":23}}"#.utf8),
                contentType: "application/vnd.kii.MultipleTraitState+json")
            #expect(put.status == 201, "the first upload, as Kii answers it: \(put.status) \(put.text)")
            let patch = try await e.call(
                "PATCH", states, token: token, body: Data(#"{"HumidityAlias":{"currentHumidity":40}}"#.utf8),
                contentType: "application/vnd.kii.MultipleTraitStatePatch+json")
            #expect(patch.status == 204, "\(patch.status) \(patch.text)")
            let read = try await e.get(states, token: token)
            #expect((read.json["AirConditionerAlias"] as? [String: Any])?["currentTemperature"] as? Int == 23)
            #expect((read.json["HumidityAlias"] as? [String: Any])?["currentHumidity"] as? Int == 40, "\(read.text)")
            #expect(e.hub.store.stateHistory(thingID: tid, from: 0, to: .max).count == 2)
            let known = try await e.call(
                "POST", "\(states)/aliases/AirConditionerAlias/query", token: token, body: Data(query.utf8))
            #expect((known.json["results"] as? [Any])?.count == 2, "\(known.status) \(known.text)")
            let unknown = try await e.call(
                "POST", "\(states)/aliases/NoSuchAlias/query", token: token, body: Data(query.utf8))
            #expect(unknown.status == 404 && unknown.errorCode == "TRAIT_ALIAS_NOT_FOUND", "\(unknown.text)")

            // Another user's token: 404 as for every call on a thing it does not own; not an
            // object: 400; nothing stored either way.
            let (_, stranger) = try await e.user()
            let foreign = try await e.call("PUT", states, token: stranger, body: Data(#"{"A":{"x":1}}"#.utf8))
            #expect(foreign.status == 404 && foreign.errorCode == "TARGET_NOT_FOUND", "\(foreign.status)")
            for body in ["[1]", "{", "\"s\""] {
                let r = try await e.call("PUT", states, token: token, body: Data(body.utf8))
                #expect(r.status == 400 && r.isErrorBody, "\(body): \(r.status) \(r.text)")
            }
            #expect(e.hub.store.stateHistory(thingID: tid, from: 0, to: .max).count == 2)
        }
    }

    @Test("POST /api/oauth2/token with the app in X-Kii-AppID: Kii Cloud's login path; another app's is 404")
    func loginOnKiiPath() async throws {
        try await withHubAPI { e in
            // thing-if-ThingSDK script/owner.sh: POST /api/oauth2/token, x-kii-appid, {username,password}.
            _ = try await e.user(loginName: "kii-owner")
            let body: [String: Any] = ["username": "kii-owner", "password": "pw-kii-owner"]
            let r = try await e.call("POST", "/api/oauth2/token", json: body, headers: ["x-kii-appid": e.appID])
            #expect(r.status == 200 && r.string("access_token") != nil, "\(r.status) \(r.text)")
            let token = try #require(r.string("access_token"))
            #expect(try await e.get("\(e.api)/users/me", token: token).status == 200)
            let other = try await e.call("POST", "/api/oauth2/token", json: body, headers: ["x-kii-appid": "nope"])
            #expect(other.status == 404 && other.errorCode == "APP_NOT_FOUND", "\(other.status) \(other.text)")
            let none = try await e.call("POST", "/api/oauth2/token", json: body)
            #expect(none.status == 404 && none.errorCode == "APP_NOT_FOUND", "\(none.status) \(none.text)")
            let wrong = try await e.call(
                "POST", "/api/oauth2/token", json: ["username": "kii-owner", "password": "nope"],
                headers: ["x-kii-appid": e.appID])
            #expect(wrong.status >= 400 && wrong.status < 500 && wrong.isErrorBody, "\(wrong.status)")
        }
    }
}
