// SPDX-License-Identifier: Apache-2.0

/// What the device core needs from an MQTT connection to move commands and
/// results: publish a message, read what the connection already holds, and
/// name an error code. It is the core's narrow I/O interface, as coreMQTT's
/// transport interface is its: `CommandPipeline` is generic over it, so the
/// pipeline runs against `MqttClient` (libmosquitto) in the library and
/// against a fake in the fast tests, without a broker.
///
/// Inbound messages go the other way: the owner of the connection hands each
/// one to `CommandPipeline.received(_:)` from the transport's message callback.
/// Connecting, subscribing, the Will and TLS stay with the connection state
/// machine (Thing+Connection.swift), which owns the concrete client.
///
/// A generic parameter, not an existential (`any Transport`): Embedded Swift
/// specialises it, and the library has one conformer.
protocol Transport: AnyObject {
    /// The MQTT client ID: the thing's `mqttTopic` once onboarded.
    var clientID: String { get }

    /// Publishes one message; 0 when it was queued for sending. Thread-safe:
    /// called while another thread loops.
    func publish(
        topic: String, payload: [UInt8], qos: Int32, retain: Bool,
        responseTopic: String?, correlationData: [UInt8]?
    ) -> Int32

    /// Services the connection for up to `timeoutMs` on the calling thread
    /// (0: what is there, no wait); received messages arrive through the
    /// owner's callback inside this call. 0 on success.
    func loop(timeoutMs: Int) -> Int32

    /// Whether bytes wait to be read (no wait).
    var hasInput: Bool { get }

    /// A readable name for a return code of `publish` or `loop`.
    static func describe(_ rc: Int32) -> String
}

/// A message as a transport delivers it (topic, payload, QoS, MQTT 5
/// response topic and correlation data).
typealias TransportMessage = MqttClient.Message

extension MqttClient: Transport {}
