// SPDX-License-Identifier: Apache-2.0

import CCrypto
import ThingIF

/// libcrypto's primitives the hub uses (OpenSSL's, through CCrypto; not
/// swift-crypto's `Crypto` module, which signs the things' certificates).
public enum LibCrypto {
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
