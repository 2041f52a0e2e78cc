// SPDX-License-Identifier: Apache-2.0

/// How the hubs split the things' requests (thingif-hub `--subscriptions`;
/// docs/decisions/cluster-hub-partitions.md).
public enum SubscriptionMode: String, Sendable, CaseIterable {
    /// By the broker's CONNACK: `shared` where the broker has shared
    /// subscriptions (its Shared Subscription Available property is 1 or
    /// absent, as on mosquitto), `partitioned` where it says 0 (ejabberd).
    case auto
    /// One MQTT 5 shared subscription (`$share/thingif-hub/…`): the broker
    /// gives each request to one hub.
    case shared
    /// Plain subscriptions: every hub receives every request and serves
    /// those of the partitions it holds (HubPartitions).
    case partitioned

    /// Whether the hub partitions, when the broker's CONNACK said
    /// `sharedAvailable`.
    func partitions(sharedAvailable: Bool) -> Bool {
        switch self {
        case .auto: return !sharedAvailable
        case .shared: return false
        case .partitioned: return true
        }
    }
}
