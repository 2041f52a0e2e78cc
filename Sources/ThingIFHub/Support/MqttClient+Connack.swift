// SPDX-License-Identifier: Apache-2.0

import CThingIF
import ThingIF

extension MqttClient {
    /// Whether a CONNACK's properties (`onConnectProperties`) say that the
    /// broker has shared subscriptions: its Shared Subscription Available
    /// (0x2A) is 1, or absent, which MQTT 5 reads as available (mosquitto
    /// sends none; ejabberd sends 0).
    static func sharedSubscriptionsAvailable(_ properties: OpaquePointer?) -> Bool {
        var value: UInt8 = 1
        guard let properties,
            mosquitto_property_read_byte(
                properties, Int32(MQTT_PROP_SHARED_SUB_AVAILABLE.rawValue), &value, false) != nil
        else { return true }
        return value != 0
    }
}
