// SPDX-License-Identifier: Apache-2.0

import CThingIF

private let mosquittoLibrary: Void = { _ = mosquitto_lib_init() }()

/// One MQTT 5 connection through libmosquitto. The thing, its bootstrap
/// connection and the framework side all use this one narrow interface.
///
/// Callbacks run on whichever thread drives the connection: the caller of
/// `loop(timeoutMs:)`, or libmosquitto's thread after `startThread()`.
/// They are set before `connect` and not changed while the connection runs.
public final class MqttClient {
    public struct Message: Sendable {
        public var topic: String
        public var payload: [UInt8]
        public var qos: Int32
        public var retain: Bool
        /// MQTT 5 Response Topic, when the publisher set one.
        public var responseTopic: String?
        /// MQTT 5 Correlation Data, when the publisher set it.
        public var correlationData: [UInt8]?
    }

    public let clientID: String
    public var onConnect: ((_ reasonCode: Int32) -> Void)?
    /// As onConnect, and before it, with the CONNACK's MQTT 5 properties
    /// (libmosquitto's list, borrowed for the call; nil when none), for a
    /// caller that reads one with mosquitto_property_read_*.
    public var onConnectProperties: ((_ reasonCode: Int32, _ properties: OpaquePointer?) -> Void)?
    public var onDisconnect: ((_ reasonCode: Int32) -> Void)?
    public var onMessage: ((Message) -> Void)?
    public var onSubscribe: ((_ mid: Int32) -> Void)?
    /// As onSubscribe, with the SUBACK's codes per topic: a granted QoS
    /// (0–2) or a refusal (0x80 and up, e.g. 0x87 not authorised).
    public var onSubscribeGranted: ((_ mid: Int32, _ granted: [Int32]) -> Void)?
    /// A QoS 1 publish was acknowledged: its mid and the PUBACK's MQTT 5
    /// reason code (0 success, 0x10 no matching subscribers, ≥ 0x80 refused).
    public var onPublished: ((_ mid: Int32, _ reasonCode: Int32) -> Void)?
    /// libmosquitto's log lines; setting it turns `setLogging` on.
    public var onLog: ((String) -> Void)? {
        didSet { setLogging(onLog != nil) }
    }

    private let mosq: OpaquePointer
    private var logging = false

    /// nil when libmosquitto cannot create a client (out of memory, or an
    /// empty client ID with a persistent session).
    ///
    /// `receiveMaximum` (1–65,535; libmosquitto's default 20) is the MQTT 5
    /// Receive Maximum sent in CONNECT: how many QoS 1 messages the broker
    /// may send before their PUBACKs come back. The broker queues the rest
    /// for this client and drops what passes its `max_queued_messages`
    /// (1,000 by default), so a client that must not lose a burst while its
    /// network thread waits for a core asks for more.
    public init?(clientID: String, cleanStart: Bool, receiveMaximum: Int32? = nil) {
        _ = mosquittoLibrary
        guard let m = mosquitto_new(clientID, cleanStart, nil) else { return nil }
        self.clientID = clientID
        self.mosq = m
        mosquitto_int_option(m, MOSQ_OPT_PROTOCOL_VERSION, Int32(MQTT_PROTOCOL_V5))
        if let receiveMaximum {
            mosquitto_int_option(m, MOSQ_OPT_RECEIVE_MAXIMUM, min(max(receiveMaximum, 1), 65_535))
        }
        // Commands and answers are small packets: send them at once rather
        // than let Nagle's algorithm hold them for the peer's delayed ACK.
        mosquitto_int_option(m, MOSQ_OPT_TCP_NODELAY, 1)
        mosquitto_user_data_set(m, Unmanaged.passUnretained(self).toOpaque())
        mosquitto_connect_v5_callback_set(m) { _, obj, rc, _, props in
            guard let client = MqttClient.from(obj) else { return }
            client.onConnectProperties?(rc, props)
            client.onConnect?(rc)
        }
        mosquitto_disconnect_v5_callback_set(m) { _, obj, rc, _ in
            MqttClient.from(obj)?.onDisconnect?(rc)
        }
        mosquitto_subscribe_v5_callback_set(m) { _, obj, mid, count, granted, _ in
            guard let client = MqttClient.from(obj) else { return }
            if let report = client.onSubscribeGranted {
                var codes: [Int32] = []
                if let granted, count > 0 { codes = Array(UnsafeBufferPointer(start: granted, count: Int(count))) }
                report(mid, codes)
            }
            client.onSubscribe?(mid)
        }
        mosquitto_publish_v5_callback_set(m) { _, obj, mid, rc, _ in
            MqttClient.from(obj)?.onPublished?(mid, rc)
        }
        mosquitto_message_v5_callback_set(m) { _, obj, msg, props in
            guard let client = MqttClient.from(obj), let handler = client.onMessage, let msg else { return }
            handler(MqttClient.message(from: msg.pointee, props: props))
        }
    }

    /// Whether libmosquitto's log lines reach `onLog`. libmosquitto formats
    /// each line (vsnprintf) only while a callback is installed, several per
    /// message, so a caller that drops them turns this off. Call it from the
    /// thread that runs the loop.
    public func setLogging(_ on: Bool) {
        guard on != logging else { return }
        logging = on
        if on {
            mosquitto_log_callback_set(mosq) { _, obj, _, text in
                guard let client = MqttClient.from(obj), let log = client.onLog, let text else { return }
                log(String(cString: text))
            }
        } else {
            mosquitto_log_callback_set(mosq, nil)
        }
    }

    deinit { mosquitto_destroy(mosq) }

    private static func from(_ obj: UnsafeMutableRawPointer?) -> MqttClient? {
        obj.map { Unmanaged<MqttClient>.fromOpaque($0).takeUnretainedValue() }
    }

    private static func message(from m: mosquitto_message, props: OpaquePointer?) -> Message {
        let topic = m.topic.map { String(cString: $0) } ?? ""
        var payload: [UInt8] = []
        if let p = m.payload, m.payloadlen > 0 {
            payload = Array(UnsafeRawBufferPointer(start: p, count: Int(m.payloadlen)))
        }
        var responseTopic: String?
        var correlation: [UInt8]?
        if let props {
            var s: UnsafeMutablePointer<CChar>?
            if mosquitto_property_read_string(props, Int32(MQTT_PROP_RESPONSE_TOPIC.rawValue), &s, false) != nil, let s
            {
                responseTopic = String(cString: s)
                free(s)
            }
            var value: UnsafeMutableRawPointer?
            var len: UInt16 = 0
            if mosquitto_property_read_binary(props, Int32(MQTT_PROP_CORRELATION_DATA.rawValue), &value, &len, false)
                != nil
            {
                if let value {
                    correlation = Array(UnsafeRawBufferPointer(start: value, count: Int(len)))
                    free(value)
                } else {
                    correlation = []
                }
            }
        }
        return Message(
            topic: topic, payload: payload, qos: m.qos, retain: m.retain,
            responseTopic: responseTopic, correlationData: correlation)
    }

    public func setCredentials(username: String?, password: String?) -> Int32 {
        mosquitto_username_pw_set(mosq, username, password)
    }

    public func setTLS(cafile: String, certfile: String?, keyfile: String?) -> Int32 {
        mosquitto_tls_set(mosq, cafile, nil, certfile, keyfile, nil)
    }

    /// How long libmosquitto's own thread (startThread) waits before it
    /// reconnects a dropped connection.
    public func setReconnectDelay(minS: UInt32, maxS: UInt32) {
        _ = mosquitto_reconnect_delay_set(mosq, minS, maxS, true)
    }

    /// Sets the Last Will: published by the broker when the connection dies
    /// without a DISCONNECT.
    public func setWill(topic: String, payload: [UInt8], qos: Int32 = 1, retain: Bool = true) -> Int32 {
        payload.withUnsafeBytes { buf in
            mosquitto_will_set_v5(mosq, topic, Int32(buf.count), buf.baseAddress, qos, retain, nil)
        }
    }

    /// Opens the TCP connection and sends CONNECT; CONNACK arrives through
    /// `onConnect` inside a later loop call. `sessionExpiry` (seconds) goes in
    /// the CONNECT properties when given.
    public func connect(host: String, port: Int, keepalive: Int, sessionExpiry: UInt32? = nil) -> Int32 {
        var props: OpaquePointer?
        defer { mosquitto_property_free_all(&props) }
        if let sessionExpiry {
            mosquitto_property_add_int32(&props, Int32(MQTT_PROP_SESSION_EXPIRY_INTERVAL.rawValue), sessionExpiry)
        }
        return mosquitto_connect_bind_v5(mosq, host, Int32(port), Int32(keepalive), nil, props)
    }

    public func disconnect() { _ = mosquitto_disconnect_v5(mosq, 0, nil) }

    /// MQTT 5 reason 0x04: the broker publishes the Will as if the link died.
    public func disconnectWithWill() { _ = mosquitto_disconnect_v5(mosq, 4, nil) }

    /// Subscribes; returns (rc, mid). The SUBACK comes through `onSubscribe`.
    public func subscribe(_ topic: String, qos: Int32 = 1) -> (rc: Int32, mid: Int32) {
        var mid: Int32 = 0
        let rc = mosquitto_subscribe_v5(mosq, &mid, topic, qos, 0, nil)
        return (rc, mid)
    }

    /// Publishes. Thread-safe: may be called while another thread loops.
    public func publish(
        topic: String, payload: [UInt8], qos: Int32 = 1, retain: Bool = false,
        responseTopic: String? = nil, correlationData: [UInt8]? = nil
    ) -> Int32 {
        var props: OpaquePointer?
        defer { mosquitto_property_free_all(&props) }
        if let responseTopic {
            // withCString: no copy of a native string (an implicit String
            // argument is copied into a new array on every call).
            _ = responseTopic.withCString {
                mosquitto_property_add_string(&props, Int32(MQTT_PROP_RESPONSE_TOPIC.rawValue), $0)
            }
        }
        if let correlationData {
            correlationData.withUnsafeBytes { buf in
                _ = mosquitto_property_add_binary(
                    &props, Int32(MQTT_PROP_CORRELATION_DATA.rawValue),
                    buf.baseAddress, UInt16(clamping: buf.count))
            }
        }
        return payload.withUnsafeBytes { buf in
            topic.withCString {
                mosquitto_publish_v5(mosq, nil, $0, Int32(buf.count), buf.baseAddress, qos, retain, props)
            }
        }
    }

    /// Publishes at QoS 1 and returns (rc, mid): the PUBACK's reason code
    /// comes through `onPublished` with that mid. Thread-safe.
    public func publishTracked(topic: String, payload: [UInt8]) -> (rc: Int32, mid: Int32) {
        var mid: Int32 = 0
        let rc = payload.withUnsafeBytes { buf in
            topic.withCString {
                mosquitto_publish_v5(mosq, &mid, $0, Int32(buf.count), buf.baseAddress, 1, false, nil)
            }
        }
        return (rc, mid)
    }

    /// Services the connection for up to `timeoutMs` on the calling thread.
    /// Returns MOSQ_ERR_SUCCESS or the error that ended the connection.
    public func loop(timeoutMs: Int) -> Int32 { mosquitto_loop(mosq, Int32(timeoutMs), 1) }

    /// Whether the socket holds bytes not yet read (no wait).
    public var hasInput: Bool { thingif_sys_readable(mosquitto_socket(mosq)) != 0 }

    /// libmosquitto's own network thread (used by the framework side).
    public func startThread() -> Int32 { mosquitto_loop_start(mosq) }
    public func stopThread(force: Bool) -> Int32 { mosquitto_loop_stop(mosq, force) }

    public static func describe(_ rc: Int32) -> String { String(cString: mosquitto_strerror(rc)) }
    public static func describeConnack(_ rc: Int32) -> String { String(cString: mosquitto_reason_string(rc)) }
}
