// SPDX-License-Identifier: Apache-2.0

/// The keys a thing trusts for manifests, those it has revoked, and its
/// security version (docs/UPDATES.md §4).
///
/// The firmware's trust file gives the keys it ships with:
///
///     {"keys":[{"kid":"fw-2026","publicKey":"-----BEGIN PUBLIC KEY-----…"}]}
///
/// The thing's own record (storage_dir/update-trust.json) has the same form
/// plus "revoked" (key IDs) and "securityVersion": what confirmed images
/// changed. Trust changes only when an image is confirmed good (verify
/// first, revoke after): a release signed by the old and the new key, adding
/// the new one, rotates trust; a later release revokes the old one. A
/// revoked key is never trusted again, also when a trust file names it.
public struct TrustRing {
    public private(set) var keys: [TrustedKey]
    public private(set) var revoked: [String]
    public private(set) var securityVersion: Int64

    public init(keys: [TrustedKey] = [], revoked: [String] = [], securityVersion: Int64 = 0) {
        self.keys = keys
        self.revoked = revoked
        self.securityVersion = securityVersion
    }

    public static func parse(_ bytes: [UInt8]) -> Result<TrustRing, UpdateRefusal> {
        guard bytes.count <= UpdateLimits.maxTrustFile else {
            return .failure(UpdateRefusal(.badTrustFile, "over 32768 bytes"))
        }
        let doc: JSON
        switch JSON.parse(bytes) {
        case .success(let d): doc = d
        case .failure(let e): return .failure(UpdateRefusal(.badTrustFile, str("no JSON: \(e.text)")))
        }
        guard doc.isObject, let list = doc["keys"], list.isArray, list.count <= UpdateLimits.maxTrustedKeys else {
            return .failure(UpdateRefusal(.badTrustFile, "needs \"keys\": an array of at most 16 keys"))
        }
        var ring = TrustRing()
        for k in list.elements {
            switch TrustedKey.parse(k, field: "keys") {
            case .success(let key):
                guard ring.key(key.kid) == nil else {
                    return .failure(UpdateRefusal(.badTrustFile, str("kid \(key.kid) twice")))
                }
                ring.keys.append(key)
            case .failure(let e): return .failure(UpdateRefusal(.badTrustFile, e.message))
            }
        }
        if let r = doc["revoked"] {
            guard r.isArray, r.count <= UpdateLimits.maxTrustedKeys * UpdateLimits.maxRevokedKeys else {
                return .failure(UpdateRefusal(.badTrustFile, "\"revoked\" must be an array of key IDs"))
            }
            for k in r.elements {
                guard let kid = k.stringValue, UpdateCoding.isName(kid) else {
                    return .failure(UpdateRefusal(.badTrustFile, "\"revoked\" must be an array of key IDs"))
                }
                ring.revoke(kid)
            }
        }
        if let sv = doc["securityVersion"] {
            guard let v = sv.int64Value, v >= 0, v <= Int64(UInt32.max) else {
                return .failure(UpdateRefusal(.badTrustFile, "securityVersion: an integer from 0 to 4294967295"))
            }
            ring.securityVersion = v
        }
        return .success(ring)
    }

    /// The thing's record, which parse() reads back.
    public func encode() -> [UInt8] {
        let o = JSON.object()
        let list = JSON.array()
        for k in keys { list.append(k.encode()) }
        o.set("keys", list)
        let r = JSON.array()
        for kid in revoked { r.append(JSON.string(kid) ?? .null()) }
        o.set("revoked", r)
        o.set("securityVersion", .int64(securityVersion))
        return o.dumpBytes()
    }

    /// The thing's record with the firmware's trust file: keys of either that
    /// neither revoked, the higher security version.
    public func merged(with factory: TrustRing) -> TrustRing {
        var out = self
        for kid in factory.revoked { out.revoke(kid) }
        for k in factory.keys where out.key(k.kid) == nil && !out.isRevoked(k.kid) {
            out.keys.append(k)
        }
        out.securityVersion = max(securityVersion, factory.securityVersion)
        return out
    }

    public func key(_ kid: String) -> TrustedKey? { keys.first { $0.kid.equals(kid) } }

    public func isRevoked(_ kid: String) -> Bool { revoked.containsBytes(kid) }

    private mutating func revoke(_ kid: String) {
        if !isRevoked(kid) { revoked.append(kid) }
        keys.removeAll { $0.kid.equals(kid) }
    }

    /// The kid of the first signature that verifies the manifest's bytes by
    /// a trusted key. Signatures by keys the thing does not know are passed
    /// over (a release signed for a fleet's newer keys too).
    public func verify(_ manifest: UpdateManifest, _ signatures: [ManifestSignature]) -> Result<String, UpdateRefusal> {
        var revokedSigner: String? = nil
        var failed: String? = nil
        for s in signatures {
            if isRevoked(s.kid) {
                revokedSigner = s.kid
                continue
            }
            guard let k = key(s.kid) else { continue }
            if UpdateCoding.verifyES256(publicKeyPEM: k.pem, message: manifest.bytes, signature: s.der) == true {
                return .success(s.kid)
            }
            failed = s.kid
        }
        if let failed {
            return .failure(UpdateRefusal(.untrusted, str("the signature of key \(failed) does not verify")))
        }
        if let revokedSigner {
            return .failure(UpdateRefusal(.untrusted, str("signed by key \(revokedSigner), which is revoked")))
        }
        return .failure(UpdateRefusal(.untrusted, "signed by no key this thing trusts"))
    }

    /// What the thing checks of a verified manifest before it fetches a
    /// block: its thing type, its security version, and that confirming it
    /// leaves a trusted key and re-trusts no revoked one.
    public func check(_ manifest: UpdateManifest, thingType: String) -> Result<Void, UpdateRefusal> {
        guard manifest.compatible.equals(thingType) else {
            return .failure(
                UpdateRefusal(.wrongThingType, str("for thing type \(manifest.compatible), this thing is \(thingType)"))
            )
        }
        guard manifest.securityVersion >= securityVersion else {
            return .failure(
                UpdateRefusal(
                    .securityVersion,
                    str("security version \(manifest.securityVersion) is below this thing's \(securityVersion)")))
        }
        if let k = manifest.addKeys.first(where: { isRevoked($0.kid) }) {
            return .failure(UpdateRefusal(.malformed, str("addKeys: key \(k.kid) is revoked")))
        }
        let after = confirming(manifest)
        guard !after.keys.isEmpty else {
            return .failure(UpdateRefusal(.noKeyLeft, "confirming it would leave no trusted key"))
        }
        guard after.keys.count <= UpdateLimits.maxTrustedKeys else {
            return .failure(UpdateRefusal(.malformed, "addKeys: confirming it would trust more than 16 keys"))
        }
        return .success(())
    }

    /// Trust once the manifest's image is confirmed good.
    public func confirming(_ manifest: UpdateManifest) -> TrustRing {
        var out = self
        for kid in manifest.revokeKeys { out.revoke(kid) }
        for k in manifest.addKeys where !out.isRevoked(k.kid) {
            out.keys.removeAll { $0.kid.equals(k.kid) }
            out.keys.append(k)
        }
        out.securityVersion = max(securityVersion, manifest.securityVersion)
        return out
    }
}
