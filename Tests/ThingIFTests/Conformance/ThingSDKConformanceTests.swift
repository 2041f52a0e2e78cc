// SPDX-License-Identifier: Apache-2.0

import Foundation
import Testing
import ThingIF
import ThingIFHub

#if canImport(Glibc)
    import Glibc
#endif

/// Kii's C thing SDK thing-if-ThingSDK (KiiPlatform/thing-if-ThingSDK 350063d0, with
/// KiiThingSDK-Embedded b3ba2d14 and kii_json b184c055; its linux-sample) replayed
/// byte for byte against the real hub and broker. Its HTTP as kii-core/kii_core.c
/// writes it: request line in absolute form and HTTP/1.0, lowercase header names
/// with no space after the colon ("host:", "x-kii-appid:", "x-kii-appkey:",
/// "x-kii-sdk:", "content-type:", "authorization:bearer …", "content-length:"),
/// no Connection header, the body after a bare CRLF. It reads an answer into one
/// 4096-byte buffer (the sample's EX_COMMAND_HANDLER_BUFF_SIZE), finds the status
/// after "HTTP/1.1 ", stops at Content-Length, and without one reads until the
/// server closes. Its JSON from kii_thing_if.c (trait commands, flat action
/// results) and kii/kii_push.c (`{"installationType":"MQTT","development":false}`).
/// Its MQTT (kii/kii_mqtt.c) is byte for byte ebisu's, whose kii_mqtt_task.c grew
/// out of it: CONNECT "MQIsdp" level 3, flags 0xc2, keepalive 300, client ID =
/// mqttTopic, SUBSCRIBE packet ID 1 at QoS 0, so `EbisuMqtt` speaks it. The real
/// SDK was run against the hub as docs/PROTOCOL.md §12.2 tells; this suite is what
/// CI can run without it.
@Suite("Kii thing-if-ThingSDK conformance", .offPool)
struct ThingSDKConformanceTests {
    /// The alias and actions of the sample (linux-sample/example.c, script/air-conditioner-command-post.sh).
    static let alias = "AirConditionerAlias"
    /// linux-sample/air_conditioner-state.json, sent line by line as the file holds it.
    static let stateFile = """
        {
          "AirConditionerAlias" : {
            "power" : true,
            "currentTemperature" : 25
          }
        }

        """

    @Test(
        "thing-if-ThingSDK: HTTP/1.0 with lowercase bearer, a new installation by installationType at each of 8 starts, commands once, flat results regrouped, state, firmware version and thing type"
    )
    func restarts() async throws {
        try await withHubAPI { e in
            let vendorThingID = "thingsdk-test1"
            let sdk = KiiCore(port: e.port, appID: e.appID)
            // The owner registers the thing first (the sample's script/owner.sh; password as the run's).
            let (uid, ownerToken) = try await e.user()
            let reg = try await e.call(
                "POST", "\(e.thingIF)/onboardings", token: ownerToken,
                json: ["vendorThingID": vendorThingID, "thingPassword": "1234", "owner": "user:\(uid)"],
                contentType: "application/vnd.kii.OnboardingWithVendorThingIDByOwner+json")
            try #require(reg.status == 200, "\(reg.status) \(reg.text)")
            let tid = try #require(reg.string("thingID"))

            var received: [String: Int] = [:]  // commandID -> copies the device got
            var sent: [String] = []
            var offlineCommand: String?
            let starts = 8
            for start in 0..<starts {
                let thingToken = try await onboard(sdk, vendorThingID: vendorThingID, tid: tid)

                // kiiPush_install, then (1 s later) kiiPush_retrieveEndpoint.
                let inst = await offPool {
                    sdk.exchange(
                        "POST", "api/apps/\(e.appID)/installations",
                        contentType: "application/vnd.kii.InstallationCreationRequest+json", token: thingToken,
                        body: #"{"installationType":"MQTT","development":false}"#)
                }
                try #require(inst.status == 201, "installation: \(inst)")
                KiiCore.expectReadable(inst)
                let iid = try #require(inst.json["installationID"] as? String)
                #expect(iid.utf8.count <= 64, "KII_PUSH_INSTALLATIONID_SIZE")
                let ep = await offPool {
                    sdk.exchange(
                        "GET", "api/apps/\(e.appID)/installations/\(iid)/mqtt-endpoint", contentType: nil,
                        token: thingToken, body: nil)
                }
                try #require(ep.status == 200, "endpoint: \(ep)")
                KiiCore.expectReadable(ep)
                // kii_mqtt_endpoint_t: username[64], password[128], topic[64], host[64]; all
                // seven fields must be there (kii_json answers PARTIAL_SUCCESS otherwise).
                let topic = try #require(ep.json["mqttTopic"] as? String)
                let username = try #require(ep.json["username"] as? String)
                let password = try #require(ep.json["password"] as? String)
                let host = try #require(ep.json["host"] as? String)
                #expect(topic.utf8.count < 64 && username.utf8.count < 64 && host.utf8.count < 64)
                #expect(password.utf8.count < 128)
                #expect(ep.json["portTCP"] is Int && ep.json["portSSL"] is Int && ep.json["X-MQTT-TTL"] is Int)

                // kiiMQTT_connect / kiiMQTT_subscribe (the plain listener here; the real run used portSSL).
                let mqtt = try #require(EbisuMqtt(host: host, port: e.env.broker.port))
                defer { mqtt.cut() }
                #expect(mqtt.connect(clientID: topic, username: username, password: password) == 0)
                #expect(mqtt.subscribe(topic) == 0)

                // The command posted while the device was off (below) arrives now, once.
                if let pending = offlineCommand {
                    let got = mqtt.commands(within: 10_000, until: pending)
                    for c in got { received[c, default: 0] += 1 }
                    #expect(
                        got.contains(pending),
                        """
                        start \(start): the command sent while off did not arrive \
                        (\(e.hub.store.command(id: pending)?.state.rawValue ?? "?"), \(e.hub.delivery.deliveryState(pending)))
                        """)
                    try await answer(
                        e, sdk, commandID: pending, thingToken: thingToken, tid: tid, ownerToken: ownerToken)
                    offlineCommand = nil
                }

                // A trait command from the owner (script/air-conditioner-command-post.sh).
                let cid = try await postTrait(e, tid: tid, token: ownerToken, uid: uid, temperature: 20 + start)
                sent.append(cid)
                let got = mqtt.commands(within: 10_000, until: cid)
                for c in got { received[c, default: 0] += 1 }
                #expect(got.contains(cid), "start \(start): command \(cid) did not reach installation \(iid)")
                try await answer(e, sdk, commandID: cid, thingToken: thingToken, tid: tid, ownerToken: ownerToken)
                #expect(e.hub.presence.isOnline(tid), "start \(start): connected and subscribed, but shown offline")

                // prv_update_status: the state file, every EX_STATE_UPDATE_PERIOD (60 s).
                if start % 4 == 0 {
                    let st = await offPool {
                        sdk.exchange(
                            "PUT", "thing-if/apps/\(e.appID)/targets/thing:\(tid)/states",
                            contentType: "application/vnd.kii.MultipleTraitState+json", token: thingToken,
                            body: Self.stateFile)
                    }
                    // Kii's 201 for the thing's first upload, 204 after; the SDK takes any 2xx
                    // (kii_thing_if.c: response_code < 200 || >= 300 fails).
                    #expect(st.status == (start == 0 ? 201 : 204) && st.closedByServer, "state: \(st)")
                    let now = try await e.get("\(e.target(tid))/states", token: ownerToken)
                    let alias = now.json[Self.alias] as? [String: Any]
                    #expect(
                        alias?["power"] as? Bool == true && alias?["currentTemperature"] as? Int == 25, "\(now.text)")
                }

                // Power cut: no DISCONNECT. Every other time a command is sent while it is off,
                // once the broker has dropped the dead link (as EbisuConformanceTests does).
                mqtt.cut()
                if start % 2 == 0 && start < starts - 1 {
                    let sync = try #require(EbisuMqtt(host: host, port: e.env.broker.port))
                    #expect(sync.connect(clientID: topic, username: username, password: password) == 0)
                    #expect(sync.disconnectAndWait())
                    let c = try await postTrait(e, tid: tid, token: ownerToken, uid: uid, temperature: 30 + start)
                    sent.append(c)
                    offlineCommand = c
                }
            }

            // No command ran twice; every one is DONE with its results grouped by alias.
            #expect(received.values.allSatisfy { $0 == 1 }, "copies per command: \(received)")
            #expect(Set(received.keys) == Set(sent))
            for cid in sent {
                let c = try await e.get("\(e.target(tid))/commands/\(cid)", token: ownerToken)
                #expect(c.json["commandState"] as? String == "DONE", "\(cid): \(c.text)")
            }

            // The sample's `get` and `update` sub-commands: onboarding again, then the calls.
            let thingToken = try await onboard(sdk, vendorThingID: vendorThingID, tid: tid)
            let fw = "thing-if/apps/\(e.appID)/things/\(tid)/firmware-version"
            let type = "thing-if/apps/\(e.appID)/things/\(tid)/thing-type"
            // Before any: an error the SDK reads (errorCode), as Kii names it.
            let none = await offPool { sdk.exchange("GET", fw, contentType: nil, token: thingToken, body: nil) }
            #expect(
                none.status == 404 && none.json["errorCode"] as? String == "THING_WITHOUT_FIRMWARE_VERSION", "\(none)")
            KiiCore.expectReadable(none)
            let putFW = await offPool {
                sdk.exchange(
                    "PUT", fw, contentType: "application/vnd.kii.ThingFirmwareVersionUpdateRequest+json",
                    token: thingToken, body: #"{"firmwareVersion":"1.2.0"}"#)
            }
            #expect(putFW.status == 204 && putFW.closedByServer, "firmware version: \(putFW)")
            let putType = await offPool {
                sdk.exchange(
                    "PUT", type, contentType: "application/vnd.kii.ThingTypeUpdateRequest+json", token: thingToken,
                    body: #"{"thingType":"AirConditioner"}"#)
            }
            #expect(putType.status == 204 && putType.closedByServer, "thing type: \(putType)")
            let getFW = await offPool { sdk.exchange("GET", fw, contentType: nil, token: thingToken, body: nil) }
            #expect(getFW.status == 200 && getFW.json["firmwareVersion"] as? String == "1.2.0", "\(getFW)")
            KiiCore.expectReadable(getFW)
            let getType = await offPool { sdk.exchange("GET", type, contentType: nil, token: thingToken, body: nil) }
            #expect(getType.status == 200 && getType.json["thingType"] as? String == "AirConditioner", "\(getType)")
            KiiCore.expectReadable(getType)
        }
    }

    @Test("HTTP/1.0 without keep-alive: the connection ends after the answer, with a body or without (raw socket)")
    func http10Close() async throws {
        try await withHubAPI { e in
            let port = e.port
            // kii_core.c writes no Connection header; a 204 has no Content-Length, so the SDK
            // reads until the server closes (without the fix: the hub's 60 s idle timeout).
            for request in [
                "GET https://127.0.0.1/health HTTP/1.0\r\nhost:127.0.0.1\r\n\r\n",
                "GET /health HTTP/1.0\r\n\r\n",
                "GET /health HTTP/1.0\r\nConnection: keep-alive, Close\r\n\r\n"
            ] {
                let r = await offPool { Khc.raw(port: port, request, afterAnswerMs: 10_000) }
                #expect(r.status == 200 && r.closedByServer, "\(request): \(r)")
                #expect(r.head.hasPrefix("HTTP/1.1 "), "kii_core.c looks for \"HTTP/1.1 \": \(r.head)")
            }
            // HTTP/1.0 asking to keep it, and HTTP/1.1, stay open for the next request.
            for request in [
                "GET /health HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n",
                "GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
            ] {
                let open = await offPool { Khc.raw(port: port, request, afterAnswerMs: 2000) }
                #expect(open.status == 200 && !open.closedByServer, "\(request): \(open)")
            }
        }
    }

    /// prv_kii_thing_if_get_anonymous_token, then prv_onboard_with_vendor_thing_id
    /// (the app token as a lowercase bearer): the thing's token.
    func onboard(_ sdk: KiiCore, vendorThingID: String, tid: String) async throws -> String {
        let app = sdk.appID
        let tok = await offPool {
            sdk.exchange(
                "POST", "api/apps/\(app)/oauth2/token", contentType: "application/json", token: nil,
                body: #"{"grant_type":"client_credentials","client_id":"\#(app)","client_secret":"\#(KiiCore.appKey)"}"#
            )
        }
        try #require(tok.status == 200, "token: \(tok)")
        KiiCore.expectReadable(tok)
        let appToken = try #require(tok.json["access_token"] as? String)
        let ob = await offPool {
            sdk.exchange(
                "POST", "thing-if/apps/\(app)/onboardings",
                contentType: "application/vnd.kii.OnboardingWithVendorThingIDByThing+json", token: appToken,
                body: #"{"vendorThingID":"\#(vendorThingID)","thingPassword":"1234"}"#)
        }
        try #require(ob.status == 200, "onboarding: \(ob)")
        KiiCore.expectReadable(ob)
        #expect(ob.json["thingID"] as? String == tid)
        // kii_author_t: author_id[128], access_token[128]; "bearer " + token below 128 (MAX_AUTH_BUFF_SIZE).
        let thingToken = try #require(ob.json["accessToken"] as? String)
        #expect(tid.utf8.count < 128 && "bearer \(thingToken)".utf8.count < 128)
        return thingToken
    }

    /// A trait command as the sample's script posts it.
    func postTrait(_ e: HubAPIEnv, tid: String, token: String, uid: String, temperature: Int) async throws -> String {
        let body =
            #"{"issuer":"user:\#(uid)","actions":[{"\#(Self.alias)":[{"turnPower":true},{"setPresetTemperature":\#(temperature)}]}]}"#
        let r = try await e.call(
            "POST", "\(e.target(tid))/commands", token: token, body: Data(body.utf8),
            contentType: KiiCompatTests.traitContentType)
        try #require(r.status == 201, "\(r.status) \(r.text)")
        return try #require(r.string("commandID"))
    }

    /// handle_command: one PUT of flat results, `application/json`, one
    /// `{"name":{"succeeded":…}}` per action in order, the alias dropped. The hub
    /// stores them before it answers, so the command is DONE once the 204 is read.
    func answer(
        _ e: HubAPIEnv, _ sdk: KiiCore, commandID: String, thingToken: String, tid: String, ownerToken: String
    ) async throws {
        let body = #"{"actionResults":[{"turnPower":{"succeeded":true}},{"setPresetTemperature":{"succeeded":true}}]}"#
        let r = await offPool {
            sdk.exchange(
                "PUT", "thing-if/apps/\(sdk.appID)/targets/thing:\(tid)/commands/\(commandID)/action-results",
                contentType: "application/json", token: thingToken, body: body)
        }
        #expect(r.status == 204 && r.closedByServer, "results: \(r)")
        let c = try await e.get("\(e.target(tid))/commands/\(commandID)", token: ownerToken)
        #expect(c.json["commandState"] as? String == "DONE", "\(commandID): \(c.text)")
        let results = c.json["actionResults"] as? [[String: [[String: [String: Any]]]]]
        let grouped = results?.first?[Self.alias]
        #expect(
            results?.count == 1 && grouped?.count == 2 && grouped?[0]["turnPower"]?["succeeded"] as? Bool == true
                && grouped?[1]["setPresetTemperature"]?["succeeded"] as? Bool == true,
            "results regrouped by the command's alias: \(c.text)")
    }
}

// MARK: thing-if-ThingSDK's HTTP, as kii_core.c writes it

/// One request as kii_api_call_start / kii_api_call_end (kii-core/kii_core.c) build it.
struct KiiCore {
    /// The sample's EX_APP_KEY (linux-sample/example.h); the hub takes any.
    static let appKey = "d787de623f15483fa887815017f010e6"
    /// THING_IF_INFO (kii_thing_if.c).
    static let sdkInfo = "sn=tic;sv=1.0.1"
    /// The sample's EX_COMMAND_HANDLER_BUFF_SIZE / EX_STATE_UPDATER_BUFF_SIZE: a whole
    /// answer must fit below it (prv_kii_http_execute fails at `>= buffer_size`).
    static let buffer = 4096

    let port: Int
    let appID: String

    /// `path` without its leading slash, as the SDK keeps it. Read until the
    /// server closes, at most 10 s after the answer's head.
    func exchange(_ method: String, _ path: String, contentType: String?, token: String?, body: String?) -> KhcReply {
        var req = "\(method) https://127.0.0.1/\(path) HTTP/1.0\r\n"
        req += "host:127.0.0.1\r\nx-kii-appid:\(appID)\r\nx-kii-appkey:\(Self.appKey)\r\nx-kii-sdk:\(Self.sdkInfo)\r\n"
        if let contentType { req += "content-type:\(contentType)\r\n" }
        if let token { req += "authorization:bearer \(token)\r\n" }
        if let body { req += "content-length:\(body.utf8.count)\r\n" }
        req += "\r\n" + (body ?? "")
        return Khc.raw(port: port, req, afterAnswerMs: 10_000)
    }

    /// What prv_kii_http_execute needs of an answer with a body: "HTTP/1.1 "
    /// before the status, a Content-Length it can parse (kii_cl_parser.c), and
    /// the whole of it below the buffer.
    static func expectReadable(_ r: KhcReply, sourceLocation: SourceLocation = #_sourceLocation) {
        #expect(r.head.hasPrefix("HTTP/1.1 "), "status line: \(r.head)", sourceLocation: sourceLocation)
        let length = r.head.split(separator: "\r\n").first { $0.lowercased().hasPrefix("content-length:") }
            .flatMap { Int($0.split(separator: ":")[1].trimmingCharacters(in: .whitespaces)) }
        #expect(length == r.body.utf8.count, "Content-Length: \(r.head)", sourceLocation: sourceLocation)
        #expect(r.head.utf8.count + 4 + r.body.utf8.count < buffer, "answer too long", sourceLocation: sourceLocation)
    }
}
