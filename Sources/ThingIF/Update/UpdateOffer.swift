// SPDX-License-Identifier: Apache-2.0

/// One signature on a manifest: ES256 (ECDSA P-256 with SHA-256) by key `kid`.
public struct ManifestSignature: Sendable {
    public let kid: String
    /// DER, as OpenSSL writes it.
    public let der: [UInt8]

    public init(kid: String, der: [UInt8]) {
        self.kid = kid
        self.der = der
    }

    public static let algorithm = "ES256"
}

/// The parameters of the `update` action that offers a thing an update
/// job (docs/UPDATES.md §3): an ordinary command, so it is held while the
/// thing is offline, expires, and runs at most once.
///
///     {"jobID":"r-42.th.1234","attempt":1,"manifest":"<base64 of the signed bytes>",
///      "signatures":[{"kid":"fw-2026","alg":"ES256","sig":"<base64 of DER>"}],"trialS":300}
public struct UpdateOffer {
    public static let actionName = "update"
    /// The trial's deadline when the offer gives none, and its range.
    public static let defaultTrialSeconds = 300
    public static let trialSecondsRange = 5...86_400
    public static let maxAttempt = 1000

    public let jobID: String
    public let attempt: Int
    public let manifest: UpdateManifest
    public let signatures: [ManifestSignature]
    public let trialSeconds: Int

    public static func parse(_ params: JSON) -> Result<UpdateOffer, UpdateRefusal> {
        guard params.isObject else { return .failure(.malformed("update", "the parameters are not an object")) }
        guard let jobID = params["jobID"]?.stringValue, UpdateCoding.isName(jobID) else {
            return .failure(
                .malformed("jobID", "1 to 64 letters, digits, '.', '_' or '-', the first a letter or digit"))
        }
        guard let attempt = params["attempt"]?.intValue, attempt >= 1, attempt <= maxAttempt else {
            return .failure(.malformed("attempt", "an integer from 1 to 1000"))
        }
        guard let text = params["manifest"]?.stringValue,
            text.utf8.count <= (UpdateLimits.maxManifestBytes + 2) / 3 * 4,
            let bytes = UpdateCoding.base64Decode(text)
        else { return .failure(.malformed("manifest", "base64 of at most 16384 bytes")) }
        let manifest: UpdateManifest
        switch UpdateManifest.parse(bytes) {
        case .success(let m): manifest = m
        case .failure(let e): return .failure(e)
        }
        guard let list = params["signatures"], list.isArray, list.count >= 1, list.count <= UpdateLimits.maxSignatures
        else { return .failure(.malformed("signatures", "an array of 1 to 4 signatures")) }
        var signatures: [ManifestSignature] = []
        for s in list.elements {
            guard s.isObject, let kid = s["kid"]?.stringValue, UpdateCoding.isName(kid) else {
                return .failure(
                    .malformed(
                        "signatures",
                        "each needs a kid of 1 to 64 letters, digits, '.', '_' or '-', the first a letter or digit"))
            }
            guard let alg = s["alg"]?.stringValue, alg.equals(ManifestSignature.algorithm) else {
                return .failure(.malformed("signatures", str("signature \(kid): alg must be ES256")))
            }
            guard let sig = s["sig"]?.stringValue, sig.utf8.count <= (UpdateLimits.maxSignatureBytes + 2) / 3 * 4,
                let der = UpdateCoding.base64Decode(sig), !der.isEmpty
            else { return .failure(.malformed("signatures", str("signature \(kid): sig must be base64 of DER"))) }
            signatures.append(ManifestSignature(kid: kid, der: der))
        }
        var trial = defaultTrialSeconds
        if let t = params["trialS"] {
            guard let v = t.intValue, trialSecondsRange.contains(v) else {
                return .failure(.malformed("trialS", "an integer from 5 to 86400"))
            }
            trial = v
        }
        return .success(
            UpdateOffer(jobID: jobID, attempt: attempt, manifest: manifest, signatures: signatures, trialSeconds: trial)
        )
    }

    /// The parameters as the hub sends them, for `manifest` (its exact bytes).
    public static func encode(
        jobID: String, attempt: Int, manifest: [UInt8], signatures: [ManifestSignature], trialSeconds: Int? = nil
    ) -> JSON {
        let o = JSON.object()
        o.set("jobID", string: jobID)
        o.set("attempt", .int(attempt))
        o.set("manifest", string: UpdateCoding.base64Encode(manifest))
        let list = JSON.array()
        for s in signatures {
            let e = JSON.object()
            e.set("kid", string: s.kid)
            e.set("alg", string: ManifestSignature.algorithm)
            e.set("sig", string: UpdateCoding.base64Encode(s.der))
            list.append(e)
        }
        o.set("signatures", list)
        if let trialSeconds { o.set("trialS", .int(trialSeconds)) }
        return o
    }
}
