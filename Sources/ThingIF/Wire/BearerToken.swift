// SPDX-License-Identifier: Apache-2.0

/// The one reader of an `Authorization: Bearer <token>` value, for every
/// path that takes a token: the app's REST routes, the thing's requests over
/// HTTP and over MQTT, `/metrics` and the operator's import.
///
/// The scheme is compared in any case (RFC 9110 §11.1: "bearer", "Bearer"
/// and "BEARER" are one scheme; Kii's thing-if-ThingSDK sends it in lower
/// case). Spaces and tabs around the token are not part of it. A value with
/// another scheme, or with nothing after the scheme, carries no token.
public enum BearerToken {
    /// The token of `value`, or nil when `value` carries none.
    public static func parse(_ value: String) -> String? {
        let bytes = Array(value.utf8)
        let scheme = Array("bearer".utf8)
        var i = 0
        while i < bytes.count, isBlank(bytes[i]) { i += 1 }
        guard bytes.count - i > scheme.count else { return nil }
        for (k, c) in scheme.enumerated() where fold(bytes[i + k]) != c { return nil }
        i += scheme.count
        guard isBlank(bytes[i]) else { return nil }
        while i < bytes.count, isBlank(bytes[i]) { i += 1 }
        var end = bytes.count
        while end > i, isBlank(bytes[end - 1]) { end -= 1 }
        guard end > i else { return nil }
        return String(decoding: bytes[i..<end], as: UTF8.self)
    }

    private static func isBlank(_ c: UInt8) -> Bool { c == 0x20 || c == 0x09 }
    private static func fold(_ c: UInt8) -> UInt8 { c >= 65 && c <= 90 ? c + 32 : c }
}
