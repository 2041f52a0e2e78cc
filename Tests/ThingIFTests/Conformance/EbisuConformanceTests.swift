// SPDX-License-Identifier: Apache-2.0

import CThingIF
import CThingIFTestSupport
import Foundation
import Testing
import ThingIF
import ThingIFHub

#if canImport(Glibc)
    import Glibc
#endif

/// Kii's own C device SDK, ebisu (KiiPlatform/ebisu, tio/linux-sample), replayed
/// byte for byte against the real hub and broker: its HTTP requests as khc
/// writes them (khc/src/khc_state_impl.c: request line in absolute form, "HOST:",
/// "Connection: Close", every body chunked, an empty chunk even after a GET, then
/// the answer read until the server closes), its JSON (kii/kii_ti_impl.c,
/// kii/kii_push_impl.c, tio/command_parser.c) and its MQTT packets
/// (kii/kii_mqtt_task.c: CONNECT "MQIsdp" level 3, clean session, keepalive 300,
/// SUBSCRIBE packet ID 1 at QoS 0, PUBLISH read without a packet ID). Each answer
/// is checked for what ebisu reads of it. The real SDK was run against the hub
/// as docs/PROTOCOL.md §12 tells; this suite is what CI can run without it.
@Suite("Kii ebisu conformance", .offPool)
struct EbisuConformanceTests {
    /// Kii's sample app ID (tio/linux-sample/example.h) is not ours: the hub's is used.
    static let alias = "AirconAlias"

    @Test(
        "ebisu: token with a dummy secret, onboarding, a new installation at each of 18 starts, commands reach the current one once, results and state; retired installations lose their broker login; a thingif thing beside it"
    )
    func restarts() async throws {
        try await withHubAPI { e in
            let port = e.port
            let app = e.appID
            let vendorThingID = "ebisu-test1"
            // The owner registers the thing first, as the sample's README asks (its password "1234").
            let (uid, ownerToken) = try await e.user()
            let reg = try await e.call(
                "POST", "\(e.thingIF)/onboardings", token: ownerToken,
                json: ["vendorThingID": vendorThingID, "thingPassword": "1234", "owner": "user:\(uid)"],
                contentType: "application/vnd.kii.OnboardingWithVendorThingIDByOwner+json")
            try #require(reg.status == 200, "\(reg.status) \(reg.text)")
            let tid = try #require(reg.string("thingID"))

            // A thing on thingif's own library, on the same hub at the same time.
            let (acID, acToken) = try await e.onboard("AC-BESIDE-EBISU", owner: "user:\(uid)", token: ownerToken)
            _ = try await e.appliance(thingID: acID, token: acToken)

            var received: [String: Int] = [:]  // commandID -> copies the device got
            var sent: [String] = []
            var firstEndpoint: (topic: String, username: String, password: String)?
            var offlineCommand: String?
            var pastTopics: [String] = []
            let starts = 18
            for start in 0..<starts {
                // kii_ti_onboard: the app token first (client_secret "dummy"), then onboarding with it.
                let tok = await offPool {
                    Khc.exchange(
                        port: port, "POST", "/api/apps/\(app)/oauth2/token",
                        headers: ["Content-Type: application/json"],
                        body: #"{"grant_type":"client_credentials","client_id":"\#(app)","client_secret":"dummy"}"#)
                }
                try #require(tok.status == 200 && tok.closedByServer, "token: \(tok)")
                let appToken = try #require(tok.json["access_token"] as? String)
                let ob = await offPool {
                    Khc.exchange(
                        port: port, "POST", "/thing-if/apps/\(app)/onboardings",
                        headers: [
                            "Authorization: Bearer \(appToken)",
                            "Content-Type: application/vnd.kii.OnboardingWithVendorThingIDByThing+json"
                        ],
                        body: #"{"vendorThingID":"\#(vendorThingID)","thingPassword":"1234"}"#)
                }
                try #require(ob.status == 200 && ob.closedByServer, "onboarding: \(ob)")
                #expect(ob.json["thingID"] as? String == tid)
                let thingToken = try #require(ob.json["accessToken"] as? String)
                let auth = "Authorization: Bearer \(thingToken)"

                // _mqtt_state_install_push: a new installation ("development" as a string).
                let inst = await offPool {
                    Khc.exchange(
                        port: port, "POST", "/api/apps/\(app)/installations",
                        headers: [
                            "X-Kii-Appid: \(app)", "X-Kii-Appkey: k", auth,
                            "Content-Type: application/vnd.kii.InstallationCreationRequest+json"
                        ],
                        body: #"{"deviceType":"MQTT", "development": "false"}"#)
                }
                try #require(inst.status == 201 && inst.closedByServer, "installation: \(inst)")
                let iid = try #require(inst.json["installationID"] as? String)
                // _mqtt_state_get_endpoint: a GET, followed by the empty chunk khc always sends.
                let ep = await offPool {
                    Khc.exchange(
                        port: port, "GET", "/api/apps/\(app)/installations/\(iid)/mqtt-endpoint",
                        headers: ["X-Kii-Appid: \(app)", "X-Kii-Appkey: k", auth], body: nil)
                }
                try #require(ep.status == 200 && ep.closedByServer, "endpoint: \(ep)")
                let topic = try #require(ep.json["mqttTopic"] as? String)
                let username = try #require(ep.json["username"] as? String)
                let password = try #require(ep.json["password"] as? String)
                let host = try #require(ep.json["host"] as? String)
                #expect(ep.json["portTCP"] is Int && ep.json["portSSL"] is Int && ep.json["X-MQTT-TTL"] is Int)
                if firstEndpoint == nil { firstEndpoint = (topic, username, password) }
                pastTopics.append(topic)

                // MQTT as kii_mqtt_task.c speaks it (the plain listener here; the real run used portSSL).
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
                        (\(e.hub.store.command(id: pending)?.state.rawValue ?? "?"), \(e.hub.delivery.deliveryState(pending)); \
                        current topic \(topic), past \(pastTopics))
                        """)
                    try await answer(e, mqtt: nil, commandID: pending, thingToken: thingToken, tid: tid)
                    offlineCommand = nil
                }

                // A trait command from the owner reaches the current installation.
                let cid = try await postTrait(e, tid: tid, token: ownerToken, uid: uid)
                sent.append(cid)
                let got = mqtt.commands(within: 10_000, until: cid)
                for c in got { received[c, default: 0] += 1 }
                #expect(got.contains(cid), "start \(start): command \(cid) did not reach installation \(iid)")
                try await answer(e, mqtt: mqtt, commandID: cid, thingToken: thingToken, tid: tid)
                let done = try await e.waitForFinished(tid, cid, token: ownerToken)
                #expect(done["commandState"] as? String == "DONE", "\(done)")
                #expect(e.hub.presence.isOnline(tid), "start \(start): connected and subscribed, but shown offline")

                // tio_updater: the state, as kii_ti_put_state sends it; and a command to the
                // thingif thing beside it.
                if start % 6 == 0 {
                    let ac = try await e.postCommand(acID, token: ownerToken, userID: uid)
                    let acDone = try await e.waitForFinished(acID, ac, token: ownerToken)
                    #expect(acDone["commandState"] as? String == "DONE", "\(acDone)")
                    let st = await offPool {
                        Khc.exchange(
                            port: port, "PUT", "/thing-if/apps/\(app)/targets/thing:\(tid)/states",
                            headers: [
                                "Content-Type: application/vnd.kii.MultipleTraitState+json", auth
                            ],
                            body: #"{"AirconAlias":{"PresetTemperature":25,"RoomTemperature":\#(20 + start)}}"#)
                    }
                    // Kii's 201 for the thing's first upload, 204 after; khc reads any 2xx
                    // (kii_ti_impl.c _upload_state: resp_code < 200 || 300 <= resp_code fails).
                    #expect(st.status == (start == 0 ? 201 : 204) && st.closedByServer, "state: \(st)")
                }

                // Power cut: no DISCONNECT. Every other time a command is sent while it is off.
                mqtt.cut()
                if start % 3 == 1 && start < starts - 1 {
                    // Only once the broker has dropped the dead link: a command published before
                    // that goes to a dead socket (the known gap in PROTOCOL.md §12.1). A clean
                    // session under the same client ID, ended by DISCONNECT, makes sure of it.
                    let sync = try #require(EbisuMqtt(host: host, port: e.env.broker.port))
                    #expect(sync.connect(clientID: topic, username: username, password: password) == 0)
                    #expect(sync.disconnectAndWait())
                    let c = try await postTrait(e, tid: tid, token: ownerToken, uid: uid)
                    sent.append(c)
                    offlineCommand = c
                }
            }

            // No command ran twice; every one has results.
            #expect(received.values.allSatisfy { $0 == 1 }, "copies per command: \(received)")
            #expect(Set(received.keys) == Set(sent))
            for cid in sent {
                let c = try await e.get("\(e.target(tid))/commands/\(cid)", token: ownerToken)
                #expect(c.json["commandState"] as? String == "DONE", "\(cid): \(c.text)")
            }
            // 18 starts kept at most 16 installations; the first one's broker login is gone.
            let kept = e.hub.store.installationsOldestFirst(thingID: tid)
            #expect(kept.count <= ThingInstallations.limit)
            let first = try #require(firstEndpoint)
            #expect(!kept.contains { $0.mqttTopic == first.topic })
            let old = try #require(EbisuMqtt(host: "127.0.0.1", port: e.env.broker.port))
            defer { old.cut() }
            let refused = old.connect(clientID: first.topic, username: first.username, password: first.password)
            #expect(refused != 0, "a retired installation's broker login still works")
        }
    }

    /// A trait command as the owner's app posts it (KiiCompatTests' vector).
    func postTrait(_ e: HubAPIEnv, tid: String, token: String, uid: String) async throws -> String {
        let body =
            #"{"issuer":"user:\#(uid)","actions":[{"\#(Self.alias)":[{"power":true},{"setPresetTemperature":20}]}]}"#
        let r = try await e.call(
            "POST", "\(e.target(tid))/commands", token: token, body: Data(body.utf8),
            contentType: KiiCompatTests.traitContentType)
        try #require(r.status == 201, "\(r.status) \(r.text)")
        return try #require(r.string("commandID"))
    }

    /// tio/command_parser.c: one PUT of the alias-grouped results.
    func answer(_ e: HubAPIEnv, mqtt: EbisuMqtt?, commandID: String, thingToken: String, tid: String) async throws {
        let port = e.port
        let app = e.appID
        let body =
            #"{"actionResults":[{"\#(Self.alias)":[{"power":{"succeeded":true}},{"setPresetTemperature":{"succeeded":true}}]}]}"#
        let r = await offPool {
            Khc.exchange(
                port: port, "PUT", "/thing-if/apps/\(app)/targets/thing:\(tid)/commands/\(commandID)/action-results",
                headers: [
                    "X-Kii-Appid: \(app)", "X-Kii-Appkey: k",
                    "Content-Type: application/vnd.kii.CommandResultsUpdateRequest+json",
                    "Authorization: Bearer \(thingToken)"
                ],
                body: body)
        }
        #expect(r.status == 204 && r.closedByServer, "results: \(r)")
    }

    @Test("Connection: Close in any case ends the connection after the answer (raw socket)")
    func connectionClose() async throws {
        try await withHubAPI { e in
            let port = e.port
            for value in ["Close", "CLOSE", "close", "keep-alive, Close"] {
                let r = await offPool {
                    Khc.raw(
                        port: port,
                        "GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: \(value)\r\n\r\n")
                }
                // Closed by the server (without the fix it stays open until
                // raw() gives up after 60 s). No bound on the time itself: on
                // a busy CI machine the answer alone can take seconds.
                #expect(r.status == 200 && r.closedByServer, "\(value): \(r)")
            }
            // Without it the connection stays open for the next request (the
            // hub's idle timeout is 60 s): still open 2 s after the answer.
            let open = await offPool {
                Khc.raw(port: port, "GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", afterAnswerMs: 2000)
            }
            #expect(open.status == 200 && !open.closedByServer, "\(open)")
        }
    }
}

// MARK: ebisu's HTTP, as khc writes it

struct KhcReply: CustomStringConvertible {
    var status = 0
    var head = ""
    var body = ""
    var closedByServer = false
    var elapsedMs = 0
    var json: [String: Any] {
        ((try? JSONSerialization.jsonObject(with: Data(body.utf8))) as? [String: Any]) ?? [:]
    }
    var description: String { "\(status) closed=\(closedByServer) \(elapsedMs) ms \(body)" }
}

enum Khc {
    /// One request as khc sends it, and the answer read until the server closes.
    static func exchange(port: Int, _ method: String, _ path: String, headers: [String], body: String?) -> KhcReply {
        var req = "\(method) https://127.0.0.1\(path) HTTP/1.1\r\nHOST: 127.0.0.1\r\n"
        for h in headers { req += h + "\r\n" }
        if method == "GET" {
            req += "Connection: Close\r\n\r\n"
        } else {
            req += "Transfer-Encoding: chunked\r\nConnection: Close\r\n\r\n"
        }
        if let body, !body.isEmpty {
            req += String(body.utf8.count, radix: 16) + "\r\n" + body + "\r\n"
        }
        // khc_state_req_body_read finds the end: a zero chunk, after a GET too.
        req += "0\r\n\r\n"
        return raw(port: port, req)
    }

    /// Sends `request` and reads until the server closes (or `waitMs` passes:
    /// generous, since a 2-core machine running the whole suite once kept
    /// the in-process hub from answering for over 10 s).
    /// With `afterAnswerMs`, it stops that long after the answer's head
    /// arrived if the server has not closed by then (a keep-alive check
    /// that does not depend on how fast the answer comes).
    static func raw(port: Int, _ request: String, waitMs: Int = 60_000, afterAnswerMs: Int? = nil) -> KhcReply {
        var reply = KhcReply()
        guard let fd = connectLoopback(port: port, receiveTimeoutMs: 100) else { return reply }
        defer { close(fd) }
        let started = Date()
        _ = request.withCString { send(fd, $0, strlen($0), Int32(MSG_NOSIGNAL)) }
        var data: [UInt8] = []
        var buf = [UInt8](repeating: 0, count: 4096)
        var answered: Date?
        while Date().timeIntervalSince(started) * 1000 < Double(waitMs) {
            if let answered, let after = afterAnswerMs, Date().timeIntervalSince(answered) * 1000 >= Double(after) {
                break
            }
            let n = recv(fd, &buf, buf.count, 0)
            if n > 0 {
                data += buf[0..<n]
                if answered == nil, String(decoding: data, as: UTF8.self).contains("\r\n\r\n") { answered = Date() }
            } else if n == 0 {
                reply.closedByServer = true
                break
            } else if errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR {
                reply.closedByServer = true
                break
            }
        }
        reply.elapsedMs = Int(Date().timeIntervalSince(started) * 1000)
        let text = String(decoding: data, as: UTF8.self)
        guard let split = text.range(of: "\r\n\r\n") else {
            reply.head = text
            return reply
        }
        reply.head = String(text[..<split.lowerBound])
        let statusLine = reply.head.split(separator: "\r\n").first ?? ""
        reply.status = Int(statusLine.split(separator: " ").dropFirst().first ?? "") ?? 0
        var rest = String(text[split.upperBound...])
        if reply.head.lowercased().contains("transfer-encoding: chunked") {
            // khc_state_resp_body_parse_chunk_size: hex size, CRLF, data, CRLF.
            var body = ""
            while let line = rest.range(of: "\r\n"), let size = Int(rest[..<line.lowerBound], radix: 16), size > 0 {
                let start = line.upperBound
                let bytes = Array(rest[start...].utf8)
                body += String(decoding: bytes.prefix(size), as: UTF8.self)
                rest = String(decoding: bytes.dropFirst(size + 2), as: UTF8.self)
            }
            reply.body = body
        } else {
            reply.body = rest
        }
        return reply
    }
}

// MARK: ebisu's MQTT, as kii_mqtt_task.c writes it

/// A raw MQTT 3.1 connection with ebisu's exact packets.
final class EbisuMqtt: @unchecked Sendable {
    private var fd: Int32
    private var buffer: [UInt8] = []

    init?(host: String, port: Int) {
        fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { return nil }
        var addr = sockaddr_in()
        addr.sin_family = sa_family_t(AF_INET)
        addr.sin_port = UInt16(port).bigEndian
        addr.sin_addr.s_addr = inet_addr(host)
        let rc = withUnsafePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                Glibc.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard rc == 0 else {
            close(fd)
            return nil
        }
        var tv = timeval(tv_sec: 0, tv_usec: 100_000)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
    }

    deinit { cut() }

    /// Drops the connection without a DISCONNECT (a power cut, as the broker
    /// sees it when the link goes). shutdown() as well as close(): a broker
    /// another test spawns meanwhile must not keep the socket open.
    func cut() {
        if fd >= 0 {
            shutdown(fd, Int32(SHUT_RDWR))
            close(fd)
        }
        fd = -1
    }

    private static func string(_ s: String) -> [UInt8] {
        let b = Array(s.utf8)
        return [UInt8(b.count >> 8), UInt8(b.count & 0xff)] + b
    }

    private static func remainingLength(_ n: Int) -> [UInt8] {
        var out: [UInt8] = []
        var x = n
        repeat {
            var d = UInt8(x % 128)
            x /= 128
            if x > 0 { d |= 0x80 }
            out.append(d)
        } while x > 0
        return out
    }

    private func write(_ bytes: [UInt8]) -> Bool {
        bytes.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) } == bytes.count
    }

    /// One packet: (first byte, remaining bytes), or nil when none came in time.
    private func packet(timeoutMs: Int) -> (UInt8, [UInt8])? {
        let deadline = Date().addingTimeInterval(Double(timeoutMs) / 1000)
        var chunk = [UInt8](repeating: 0, count: 4096)
        while true {
            if buffer.count >= 2 {
                var len = 0
                var mult = 1
                var i = 1
                var complete = false
                while i < buffer.count && i <= 4 {
                    len += Int(buffer[i] & 127) * mult
                    mult *= 128
                    if buffer[i] & 128 == 0 {
                        complete = true
                        break
                    }
                    i += 1
                }
                if complete && buffer.count >= i + 1 + len {
                    let p = (buffer[0], Array(buffer[(i + 1)..<(i + 1 + len)]))
                    buffer.removeFirst(i + 1 + len)
                    return p
                }
            }
            if Date() > deadline || fd < 0 { return nil }
            let n = recv(fd, &chunk, chunk.count, 0)
            if n > 0 { buffer += chunk[0..<n] } else if n == 0 { return nil }
        }
    }

    /// _mqtt_send_connect: "MQIsdp", level 3, flags 0xc2 (username, password,
    /// clean session), keepalive 300. Returns the CONNACK's return code (-1: none).
    func connect(clientID: String, username: String, password: String) -> Int {
        var body: [UInt8] = [0x00, 0x06] + Array("MQIsdp".utf8) + [0x03, 0xc2, 0x01, 0x2c]
        body += Self.string(clientID) + Self.string(username) + Self.string(password)
        guard write([0x10] + Self.remainingLength(body.count) + body),
            let (type, rest) = packet(timeoutMs: 30_000), type & 0xf0 == 0x20, rest.count == 2
        else { return -1 }
        return Int(rest[1])
    }

    /// _mqtt_send_subscribe: packet ID 1, QoS 0. The SUBACK's code (-1: none).
    func subscribe(_ topic: String) -> Int {
        let body: [UInt8] = [0x00, 0x01] + Self.string(topic) + [0x00]
        guard write([0x82] + Self.remainingLength(body.count) + body),
            let (type, rest) = packet(timeoutMs: 30_000), type & 0xf0 == 0x90, rest.count == 3,
            rest[0] == 0, rest[1] == 1
        else { return -1 }
        return Int(rest[2])
    }

    /// DISCONNECT, then waits until the broker closes the connection.
    func disconnectAndWait() -> Bool {
        guard write([0xe0, 0x00]) else { return false }
        let deadline = Date().addingTimeInterval(5)
        var chunk = [UInt8](repeating: 0, count: 256)
        while Date() < deadline {
            let n = recv(fd, &chunk, chunk.count, 0)
            if n == 0 { return true }
        }
        return false
    }

    /// _mqtt_state_recv_msg: each PUBLISH's commandID (the body after the
    /// topic, no packet ID: QoS 0), until `until` arrived and 300 ms more
    /// passed (a second copy would show), or `within` ms.
    func commands(within ms: Int, until wanted: String) -> [String] {
        var out: [String] = []
        let deadline = Date().addingTimeInterval(Double(ms) / 1000)
        var settle: Date?
        while Date() < (settle ?? deadline) {
            guard let (type, rest) = packet(timeoutMs: 100) else { continue }
            guard type & 0xf0 == 0x30, rest.count >= 2 else { continue }
            #expect(type & 0x06 == 0, "a PUBLISH above QoS 0 on a QoS 0 subscription")
            let topicLength = Int(rest[0]) << 8 | Int(rest[1])
            let payload = Data(rest.dropFirst(2 + topicLength))
            let cid = ((try? JSONSerialization.jsonObject(with: payload)) as? [String: Any])?["commandID"] as? String
            if let cid {
                out.append(cid)
                if cid == wanted && settle == nil { settle = Date().addingTimeInterval(0.3) }
            }
        }
        return out
    }
}
