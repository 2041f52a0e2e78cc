// SPDX-License-Identifier: Apache-2.0

import CCrypto
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
        let salt = Crypto.randomBytes(16)
        return "\(scheme)$\(n)$\(Crypto.hex(salt))$\(Crypto.hex(Crypto.pbkdf2(password, salt: salt, iterations: n)))"
    }

    /// Whether `password` matches `stored`. Accepts the old hand-made
    /// "sha256$ITER$SALT$HASH" chain too (see `isLegacy`): the caller
    /// re-hashes those after a successful login.
    public static func verify(_ password: String, _ stored: String) -> Bool {
        let parts = stored.split(separator: "$", omittingEmptySubsequences: false).map(String.init)
        guard parts.count == 4, let n = Int(parts[1]), n > 0, n <= maxIterations else { return false }
        switch parts[0] {
        case scheme:
            guard let salt = Crypto.unhex(parts[2]), let expected = Crypto.unhex(parts[3]), expected.count == 32 else {
                return false
            }
            return Crypto.equal(Crypto.pbkdf2(password, salt: salt, iterations: n), expected)
        case "sha256":
            return Crypto.equal(Array(legacyDerive(password, salt: parts[2], iterations: n).utf8), Array(parts[3].utf8))
        default:
            return false
        }
    }

    /// A hash in the old format, to be replaced after the next good login.
    public static func isLegacy(_ stored: String) -> Bool { stored.hasPrefix("sha256$") }

    /// Work as long as verifying a real hash of `iterations`, for logins of
    /// unknown users, so that their answer takes as long (no timing oracle).
    public static func dummyVerify(_ password: String, iterations: Int) {
        _ = Crypto.pbkdf2(
            password, salt: Array(repeating: 0x5a, count: 16), iterations: max(1, min(iterations, maxIterations)))
    }

    /// The hand-made chain of the first hubs: SHA-256 of "salt:password",
    /// then SHA-256 of (digest + salt) ITER - 1 times, hex.
    private static func legacyDerive(_ password: String, salt: String, iterations: Int) -> String {
        var digest = Crypto.sha256(Array((salt + ":" + password).utf8))
        for _ in 1..<iterations { digest = Crypto.sha256(digest + Array(salt.utf8)) }
        return Crypto.hex(digest)
    }
}

/// libcrypto's primitives the hub uses.
public enum Crypto {
    public static func sha256(_ bytes: [UInt8]) -> [UInt8] {
        var out = [UInt8](repeating: 0, count: 32)
        let ok = bytes.withUnsafeBufferPointer { b in EVP_Digest(b.baseAddress, b.count, &out, nil, sha256MD, nil) }
        // Only a failed allocation makes it fail; a zero hash then matches no stored token.
        precondition(ok == 1, "EVP_Digest failed")
        return out
    }

    /// SHA-256 fetched once: OpenSSL 3's SHA256() fetches the algorithm on
    /// every call, which showed in the profile of every authenticated call.
    nonisolated(unsafe) private static let sha256MD: OpaquePointer? = EVP_MD_fetch(nil, "SHA256", nil)

    /// SHA-256 of the UTF-8 text, as 64 lowercase hex digits: how tokens are stored.
    public static func sha256Hex(_ text: String) -> String { hex(sha256(Array(text.utf8))) }

    public static func pbkdf2(_ password: String, salt: [UInt8], iterations: Int) -> [UInt8] {
        var out = [UInt8](repeating: 0, count: 32)
        let pw = Array(password.utf8)
        let ok = pw.withUnsafeBufferPointer { p in
            p.withMemoryRebound(to: CChar.self) { pc in
                PKCS5_PBKDF2_HMAC(
                    pc.baseAddress, Int32(pc.count), salt, Int32(salt.count), Int32(iterations),
                    EVP_sha256(), Int32(out.count), &out)
            }
        }
        // Only a failed allocation makes it fail; a zero key then matches nothing stored.
        precondition(ok == 1, "PKCS5_PBKDF2_HMAC failed")
        return out
    }

    public static func randomBytes(_ n: Int) -> [UInt8] {
        var out = [UInt8](repeating: 0, count: n)
        guard RAND_bytes(&out, Int32(n)) == 1 else {
            // The system's generator is not seeded: never hand out a guessable value.
            fatalError("RAND_bytes failed")
        }
        return out
    }

    /// Constant time for equal lengths.
    public static func equal(_ a: [UInt8], _ b: [UInt8]) -> Bool {
        guard a.count == b.count else { return false }
        return a.withUnsafeBufferPointer { pa in
            b.withUnsafeBufferPointer { pb in CRYPTO_memcmp(pa.baseAddress, pb.baseAddress, a.count) == 0 }
        }
    }

    public static func hex(_ bytes: [UInt8]) -> String { Platform.hex(bytes) }

    public static func unhex(_ s: String) -> [UInt8]? {
        let u = Array(s.utf8)
        guard u.count % 2 == 0 else { return nil }
        func v(_ c: UInt8) -> UInt8? {
            switch c {
            case 48...57: return c - 48
            case 97...102: return c - 87
            case 65...70: return c - 55
            default: return nil
            }
        }
        var out = [UInt8]()
        out.reserveCapacity(u.count / 2)
        var i = 0
        while i < u.count {
            guard let h = v(u[i]), let l = v(u[i + 1]) else { return nil }
            out.append(h << 4 | l)
            i += 2
        }
        return out
    }
}
