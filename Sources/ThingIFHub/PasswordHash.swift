// SPDX-License-Identifier: Apache-2.0

import ThingIF

/// Password hashes with PBKDF2-HMAC-SHA256 from OpenSSL's libcrypto:
/// "pbkdf2-sha256$ITER$SALT$HASH" (salt 16 random bytes, hash 32 bytes, both
/// hex). The iteration count travels in each hash, so a later change of the
/// setting still verifies older hashes. The hub stores only these, never a
/// password (users' and things' alike).
public enum PasswordHash {
    /// OWASP's current figure for PBKDF2-HMAC-SHA256; the hub refuses fewer
    /// unless a test opts in (HubSecrets.allowFastPasswordHash).
    public static let defaultIterations = 600_000
    /// The most a stored hash may ask for (a corrupt row must not stall login).
    static let maxIterations = 10_000_000
    static let scheme = "pbkdf2-sha256"

    public static func make(_ password: String, iterations: Int = defaultIterations) -> String {
        let n = max(1, min(iterations, maxIterations))
        let salt = LibCrypto.randomBytes(16)
        return
            "\(scheme)$\(n)$\(LibCrypto.hex(salt))$\(LibCrypto.hex(LibCrypto.pbkdf2(password, salt: salt, iterations: n)))"
    }

    /// Whether `password` matches `stored`. Accepts the old hand-made
    /// "sha256$ITER$SALT$HASH" chain too (see `isLegacy`): the caller
    /// re-hashes those after a successful login.
    public static func verify(_ password: String, _ stored: String) -> Bool {
        let parts = stored.split(separator: "$", omittingEmptySubsequences: false).map(String.init)
        guard parts.count == 4, let n = Int(parts[1]), n > 0, n <= maxIterations else { return false }
        switch parts[0] {
        case scheme:
            guard let salt = LibCrypto.unhex(parts[2]), let expected = LibCrypto.unhex(parts[3]), expected.count == 32
            else {
                return false
            }
            return LibCrypto.equal(LibCrypto.pbkdf2(password, salt: salt, iterations: n), expected)
        case "sha256":
            return LibCrypto.equal(
                Array(legacyDerive(password, salt: parts[2], iterations: n).utf8), Array(parts[3].utf8))
        default:
            return false
        }
    }

    /// A hash in the old format, to be replaced after the next good login.
    public static func isLegacy(_ stored: String) -> Bool { stored.hasPrefix("sha256$") }

    /// Work as long as verifying a real hash of `iterations`, for logins of
    /// unknown users, so that their answer takes as long (no timing oracle).
    public static func dummyVerify(_ password: String, iterations: Int) {
        _ = LibCrypto.pbkdf2(
            password, salt: Array(repeating: 0x5a, count: 16), iterations: max(1, min(iterations, maxIterations)))
    }

    /// The hand-made chain of the first hubs: SHA-256 of "salt:password",
    /// then SHA-256 of (digest + salt) ITER - 1 times, hex.
    private static func legacyDerive(_ password: String, salt: String, iterations: Int) -> String {
        var digest = LibCrypto.sha256(Array((salt + ":" + password).utf8))
        for _ in 1..<iterations { digest = LibCrypto.sha256(digest + Array(salt.utf8)) }
        return LibCrypto.hex(digest)
    }
}
