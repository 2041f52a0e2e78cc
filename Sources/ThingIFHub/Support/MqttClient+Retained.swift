// SPDX-License-Identifier: Apache-2.0

import CThingIF
import ThingIF

extension MqttClient {
    /// Publishes a retained message (QoS 1): the broker keeps it for
    /// subscribers that come later. The components that publish retained
    /// topics (the automation configs, Home Assistant) are given the client,
    /// not the hub, and publish through this.
    func publishRetained(topic: String, payload: [UInt8]) -> Bool {
        publish(topic: topic, payload: payload, qos: 1, retain: true) == MOSQ_ERR_SUCCESS.rawValue
    }
}
