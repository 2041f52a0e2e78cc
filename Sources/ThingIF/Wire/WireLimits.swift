// SPDX-License-Identifier: Apache-2.0

/// Limits of the wire protocol that both sides must agree on.
public enum WireLimits {
    /// The largest message a thing takes by default (THINGIF_OPT_MAX_PAYLOAD;
    /// it drops anything larger before parsing). The hub refuses with 413 a
    /// command whose payload, as the thing will receive it, is larger, so no
    /// command is stored that the thing could never run.
    public static let maxPayload = 65536
}
