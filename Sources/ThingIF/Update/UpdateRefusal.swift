// SPDX-License-Identifier: Apache-2.0

/// Why a thing refuses an update's offer, a manifest, a trust file or a
/// block. `code` is the stable word a report carries (`reason`); `message`
/// says what was wrong, for the log line and the report's `step`.
public struct UpdateRefusal: Error, Equatable, Sendable {
    public enum Code: String, CaseIterable, Sendable {
        /// The offer or the manifest is not the form docs/UPDATES.md gives.
        case malformed = "MALFORMED"
        /// No signature of a trusted, unrevoked key verifies.
        case untrusted = "UNTRUSTED"
        /// The manifest is for another thing type.
        case wrongThingType = "WRONG_THING_TYPE"
        /// The manifest's security version is below the thing's.
        case securityVersion = "SECURITY_VERSION"
        /// Confirming the image would leave the thing no trusted key.
        case noKeyLeft = "NO_KEY_LEFT"
        /// A hash list or block does not match the signed manifest.
        case badHash = "BAD_HASH"
        /// The trust file cannot be read or is not its form.
        case badTrustFile = "BAD_TRUST_FILE"
    }

    public let code: Code
    public let message: String

    public init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
    }

    public static func == (a: UpdateRefusal, b: UpdateRefusal) -> Bool {
        a.code == b.code && a.message.equals(b.message)
    }

    static func malformed(_ field: String, _ why: String) -> UpdateRefusal {
        UpdateRefusal(.malformed, str("\(field): \(why)"))
    }
}
