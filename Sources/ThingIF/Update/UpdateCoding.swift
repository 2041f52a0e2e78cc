// SPDX-License-Identifier: Apache-2.0

import CThingIF

/// The encodings and digests of an update's wire forms, on the libcrypto the
/// library already links (Sources/CThingIF/crypto.h): SHA-256, ES256
/// verification, base64 and hexadecimal.
public enum UpdateCoding {
    public static let sha256Bytes = 32

    public static func sha256(_ bytes: UnsafeRawBufferPointer) -> [UInt8] {
        var out = [UInt8](repeating: 0, count: sha256Bytes)
        let ok = out.withUnsafeMutableBufferPointer {
            thingif_crypto_sha256(bytes.baseAddress, bytes.count, $0.baseAddress)
        }
        return ok == 1 ? out : []
    }

    public static func sha256(_ bytes: [UInt8]) -> [UInt8] { bytes.withUnsafeBytes { sha256($0) } }

    /// Whether `signature` (ECDSA, DER) is one of `message` with SHA-256 by
    /// the P-256 public key in `publicKeyPEM`: nil when that holds no such key.
    public static func verifyES256(publicKeyPEM: [UInt8], message: [UInt8], signature: [UInt8]) -> Bool? {
        let rc = publicKeyPEM.withUnsafeBytes { key in
            message.withUnsafeBytes { msg in
                signature.withUnsafeBytes { sig in
                    thingif_crypto_verify_es256(
                        key.baseAddress, key.count, msg.baseAddress, msg.count, sig.baseAddress, sig.count)
                }
            }
        }
        return rc < 0 ? nil : rc == 1
    }

    /// Whether `pem` holds an EC P-256 public key.
    public static func isP256PublicKey(_ pem: [UInt8]) -> Bool {
        verifyES256(publicKeyPEM: pem, message: [], signature: []) != nil
    }

    /// Standard padded base64 (RFC 4648 §4) without line breaks, or nil.
    public static func base64Decode(_ text: String) -> [UInt8]? {
        var text = text
        return text.withUTF8 { t -> [UInt8]? in
            var out = [UInt8](repeating: 0, count: t.count / 4 * 3 + 1)
            let n = out.withUnsafeMutableBufferPointer {
                thingif_crypto_base64_decode(t.baseAddress, t.count, $0.baseAddress)
            }
            guard n >= 0 else { return nil }
            out.removeSubrange(Int(n)...)
            return out
        }
    }

    public static func base64Encode(_ bytes: [UInt8]) -> String {
        var out = [UInt8](repeating: 0, count: (bytes.count + 2) / 3 * 4 + 1)
        let n = bytes.withUnsafeBytes { b in
            out.withUnsafeMutableBufferPointer { thingif_crypto_base64_encode(b.baseAddress, b.count, $0.baseAddress) }
        }
        return String(decoding: out[0..<max(0, Int(n))], as: UTF8.self)
    }

    /// `count` bytes written as 2 × count hexadecimal digits (either case), or nil.
    public static func hexDecode(_ text: String, count: Int) -> [UInt8]? {
        let utf8 = text.utf8
        guard utf8.count == count * 2 else { return nil }
        var out: [UInt8] = []
        out.reserveCapacity(count)
        var high: UInt8? = nil
        for c in utf8 {
            let v: UInt8
            switch c {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): v = c - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): v = c - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): v = c - UInt8(ascii: "A") + 10
            default: return nil
            }
            if let h = high {
                out.append(h << 4 | v)
                high = nil
            } else {
                high = v
            }
        }
        return out
    }

    /// A key ID, an updateID or a jobID: 1 to UpdateLimits.maxName bytes of
    /// letters, digits, '.', '_' and '-', the first a letter or a digit (a
    /// safe file, path and topic name: never "." or "..").
    public static func isName(_ s: String) -> Bool {
        let u = s.utf8
        guard let first = u.first, u.count <= UpdateLimits.maxName else { return false }
        let alnum = { (c: UInt8) in
            (c >= UInt8(ascii: "a") && c <= UInt8(ascii: "z")) || (c >= UInt8(ascii: "A") && c <= UInt8(ascii: "Z"))
                || (c >= UInt8(ascii: "0") && c <= UInt8(ascii: "9"))
        }
        guard alnum(first) else { return false }
        return u.allSatisfy { c in
            (c >= UInt8(ascii: "a") && c <= UInt8(ascii: "z")) || (c >= UInt8(ascii: "A") && c <= UInt8(ascii: "Z"))
                || (c >= UInt8(ascii: "0") && c <= UInt8(ascii: "9")) || c == UInt8(ascii: ".")
                || c == UInt8(ascii: "_") || c == UInt8(ascii: "-")
        }
    }

    /// A version: 1 to UpdateLimits.maxName bytes of printable ASCII, no space.
    public static func isVersion(_ s: String) -> Bool {
        let u = s.utf8
        return !u.isEmpty && u.count <= UpdateLimits.maxName && u.allSatisfy { $0 > 0x20 && $0 < 0x7F }
    }

    /// Whether `v` nests containers more than `levels` deep ({} is one level).
    static func nestsDeeper(_ v: JSON, than levels: Int) -> Bool {
        guard v.isObject || v.isArray else { return false }
        guard levels > 0 else { return true }
        let children = v.isObject ? v.members.map { $0.value } : v.elements
        return children.contains { nestsDeeper($0, than: levels - 1) }
    }
}
