// SPDX-License-Identifier: Apache-2.0

/// A public key a thing trusts for manifests, by its ID.
public struct TrustedKey: Sendable {
    public let kid: String
    /// PEM text of an EC P-256 public key ("PUBLIC KEY").
    public let pem: [UInt8]

    public init(kid: String, pem: [UInt8]) {
        self.kid = kid
        self.pem = pem
    }

    /// {"kid":…, "publicKey":"-----BEGIN PUBLIC KEY-----…"}: in a trust file and
    /// in a manifest's addKeys.
    static func parse(_ v: JSON, field: String) -> Result<TrustedKey, UpdateRefusal> {
        guard v.isObject, let kid = v["kid"]?.stringValue, UpdateCoding.isName(kid) else {
            return .failure(
                .malformed(
                    field,
                    "each key needs a kid of 1 to 64 letters, digits, '.', '_' or '-', the first a letter or digit"))
        }
        guard let pem = v["publicKey"]?.stringValue, pem.utf8.count <= UpdateLimits.maxKeyPEM,
            UpdateCoding.isP256PublicKey(Array(pem.utf8))
        else { return .failure(.malformed(field, str("key \(kid) is no PEM EC P-256 public key"))) }
        return .success(TrustedKey(kid: kid, pem: Array(pem.utf8)))
    }

    func encode() -> JSON {
        let o = JSON.object()
        o.set("kid", string: kid)
        o.set("publicKey", string: String(decoding: pem, as: UTF8.self))
        return o
    }
}

/// What a release says of its image, signed offline (the hub holds no
/// signing key; docs/UPDATES.md §2). The thing verifies the signatures over
/// `bytes`, the exact bytes it received, never a re-serialisation.
///
///     {"updateID":"aircon-fw","version":"1.2.0","compatible":"AirConditioner",
///      "securityVersion":4,"size":104857600,"sha256":"…","blockSize":32768,
///      "blocks":3200,"blockHashes":"…","addKeys":[…],"revokeKeys":["fw-2024"],
///      "metadata":{…}}
///
/// `blockHashes` is the SHA-256 of the block hash list (32 bytes a block, in
/// order), so each block is checked before it is written; `sha256` is the
/// whole image's.
public struct UpdateManifest {
    public let bytes: [UInt8]
    public let updateID: String
    public let version: String
    /// The thing type the image is for.
    public let compatible: String
    /// Never goes down on a thing (anti-rollback): 0 to 2^32 - 1.
    public let securityVersion: Int64
    public let size: Int64
    public let sha256: [UInt8]
    public let blockSize: Int
    public let blocks: Int
    public let blockHashes: [UInt8]
    /// Trusted, and `revokeKeys` revoked, once this image is confirmed good.
    public let addKeys: [TrustedKey]
    public let revokeKeys: [String]
    /// For the installer, as given; nil when absent.
    public let metadata: JSON?

    private init(
        bytes: [UInt8], updateID: String, version: String, compatible: String, securityVersion: Int64, size: Int64,
        sha256: [UInt8], blockSize: Int, blocks: Int, blockHashes: [UInt8], addKeys: [TrustedKey],
        revokeKeys: [String], metadata: JSON?
    ) {
        self.bytes = bytes
        self.updateID = updateID
        self.version = version
        self.compatible = compatible
        self.securityVersion = securityVersion
        self.size = size
        self.sha256 = sha256
        self.blockSize = blockSize
        self.blocks = blocks
        self.blockHashes = blockHashes
        self.addKeys = addKeys
        self.revokeKeys = revokeKeys
        self.metadata = metadata
    }

    /// The bytes of block `n` (the last may be short), 0 when out of range.
    public func blockLength(_ n: Int) -> Int {
        guard n >= 0, n < blocks else { return 0 }
        return n < blocks - 1 ? blockSize : Int(size - Int64(blocks - 1) * Int64(blockSize))
    }

    public static func parse(_ bytes: [UInt8]) -> Result<UpdateManifest, UpdateRefusal> {
        guard !bytes.isEmpty, bytes.count <= UpdateLimits.maxManifestBytes else {
            return .failure(.malformed("manifest", "1 to 16384 bytes of JSON"))
        }
        let doc: JSON
        switch JSON.parse(bytes) {
        case .success(let d): doc = d
        case .failure(let e): return .failure(.malformed("manifest", str("no JSON: \(e.text)")))
        }
        guard doc.isObject else { return .failure(.malformed("manifest", "not an object")) }
        guard let updateID = doc["updateID"]?.stringValue, UpdateCoding.isName(updateID) else {
            return .failure(
                .malformed("updateID", "1 to 64 letters, digits, '.', '_' or '-', the first a letter or digit"))
        }
        guard let version = doc["version"]?.stringValue, UpdateCoding.isVersion(version) else {
            return .failure(.malformed("version", "1 to 64 printable ASCII characters, no space"))
        }
        guard let compatible = doc["compatible"]?.stringValue, !compatible.utf8.isEmpty,
            compatible.utf8.count <= UpdateLimits.maxThingType
        else { return .failure(.malformed("compatible", "the thing type, 1 to 128 bytes")) }
        guard let sv = doc["securityVersion"]?.int64Value, sv >= 0, sv <= Int64(UInt32.max) else {
            return .failure(.malformed("securityVersion", "an integer from 0 to 4294967295"))
        }
        guard let bs = doc["blockSize"]?.int64Value, bs >= Int64(UpdateLimits.minBlockSize),
            bs <= Int64(UpdateLimits.maxBlockSize), bs & (bs - 1) == 0
        else { return .failure(.malformed("blockSize", "a power of two from 1024 to 32768")) }
        let blockSize = Int(bs)
        let maxSize = Int64(UpdateLimits.maxBlocks) * bs
        guard let size = doc["size"]?.int64Value, size >= 1, size <= maxSize else {
            return .failure(.malformed("size", "an integer from 1 to 1048576 blocks' bytes"))
        }
        let expected = (size + bs - 1) / bs
        guard let blocks = doc["blocks"]?.int64Value, blocks == expected else {
            return .failure(.malformed("blocks", str("must be size / blockSize rounded up, \(expected)")))
        }
        guard let sha = doc["sha256"]?.stringValue.flatMap({ UpdateCoding.hexDecode($0, count: 32) }) else {
            return .failure(.malformed("sha256", "64 hexadecimal digits"))
        }
        guard let list = doc["blockHashes"]?.stringValue.flatMap({ UpdateCoding.hexDecode($0, count: 32) }) else {
            return .failure(.malformed("blockHashes", "64 hexadecimal digits"))
        }
        var added: [TrustedKey] = []
        if let keys = doc["addKeys"] {
            guard keys.isArray, keys.count <= UpdateLimits.maxAddedKeys else {
                return .failure(.malformed("addKeys", "an array of at most 4 keys"))
            }
            for k in keys.elements {
                switch TrustedKey.parse(k, field: "addKeys") {
                case .success(let key):
                    guard !added.contains(where: { $0.kid.equals(key.kid) }) else {
                        return .failure(.malformed("addKeys", str("kid \(key.kid) twice")))
                    }
                    added.append(key)
                case .failure(let e): return .failure(e)
                }
            }
        }
        var revoked: [String] = []
        if let kids = doc["revokeKeys"] {
            guard kids.isArray, kids.count <= UpdateLimits.maxRevokedKeys else {
                return .failure(.malformed("revokeKeys", "an array of at most 16 key IDs"))
            }
            for k in kids.elements {
                guard let kid = k.stringValue, UpdateCoding.isName(kid) else {
                    return .failure(
                        .malformed(
                            "revokeKeys",
                            "each a kid of 1 to 64 letters, digits, '.', '_' or '-', the first a letter or digit"))
                }
                if added.contains(where: { $0.kid.equals(kid) }) {
                    return .failure(.malformed("revokeKeys", str("kid \(kid) is also added")))
                }
                if !revoked.containsBytes(kid) { revoked.append(kid) }
            }
        }
        let metadata = doc["metadata"]
        if let metadata {
            guard metadata.isObject, !UpdateCoding.nestsDeeper(metadata, than: UpdateLimits.maxMetadataDepth) else {
                return .failure(.malformed("metadata", "an object nesting at most 8 levels"))
            }
        }
        return .success(
            UpdateManifest(
                bytes: bytes, updateID: updateID, version: version, compatible: compatible, securityVersion: sv,
                size: size, sha256: sha, blockSize: blockSize, blocks: Int(blocks), blockHashes: list,
                addKeys: added, revokeKeys: revoked, metadata: metadata))
    }
}
