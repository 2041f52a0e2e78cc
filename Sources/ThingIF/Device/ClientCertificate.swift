// SPDX-License-Identifier: Apache-2.0

import CThingIF

/// The thing's own TLS client key and certificate (docs/SECURITY.md).
///
/// With TLS set and no client certificate of the user's own, onboarding by
/// the thing, and the installation a handed-over thing makes, send a
/// certificate signing request for an EC P-256 key that the thing keeps in
/// storage_dir/thing-key.pem (made once, then reused).
/// A framework with a CA for things answers with a certificate in
/// mqttEndpoint.clientCertificate; identity.json keeps it, and the library
/// writes it to storage_dir/thing-cert.pem before the thing's own connection
/// uses the pair, with no password. The key never leaves the device.
/// OpenSSL's libcrypto does the work (Sources/CThingIF/crypto.h); Swift
/// moves PEM bytes between it and the storage directory.
enum ClientCertificate {
    static let keyFile = "thing-key.pem"
    static let certificateFile = "thing-cert.pem"
    /// The longest CN a certificate holds (X.520's ub-common-name), in characters.
    static let maxCommonName = 64
}

extension Thing {
    /// thing-key.pem's bytes, empty when it cannot be read: a secret, to
    /// wipe() when done.
    func clientKeyBytes() -> [UInt8] { storage.read(ClientCertificate.keyFile, limit: 64 * 1024) ?? [] }

    /// The certificate signing request (PEM) that onboarding by the thing
    /// (CN = its vendorThingID) or a handed-over thing's new installation
    /// (CN = its thingID) sends: only with TLS set and no client certificate
    /// of the user's own (else nil and OK). Signed with SHA-256 by
    /// thing-key.pem's key, which is made and written (0600, atomically)
    /// when that file is missing or holds no unencrypted EC P-256 key. A
    /// `commonName` longer than a CN can be gets no CSR (a warning), so the
    /// thing gets a password instead. nil and THINGIF_ERR_TLS or
    /// THINGIF_ERR_STORAGE on failure, with a log line.
    func certificateSigningRequest(commonName: String) -> (csr: String?, rc: Int32) {
        guard shared.withLock({ $0.config.tls.map { $0.certfile == nil } ?? false }) else { return (nil, OK) }
        // Characters: UTF-8 bytes that do not continue a sequence.
        var characters = 0
        for b in commonName.utf8 where b & 0xC0 != 0x80 { characters += 1 }
        guard characters <= ClientCertificate.maxCommonName else {
            logger.warning("\(commonName) is too long for a certificate's CN: no certificate request")
            return (nil, OK)
        }
        var newKey: UnsafeMutablePointer<CChar>?
        var key = clientKeyBytes()
        let csr = key.withUnsafeBytes { thingif_crypto_csr($0.baseAddress, $0.count, commonName, &newKey) }
        wipe(&key)
        defer {
            thingif_crypto_free_text(csr)
            thingif_crypto_free_text(newKey)
        }
        guard let csr else {
            logger.error("cannot make a key or a certificate request for \(commonName) (OpenSSL)")
            return (nil, THINGIF_ERR_TLS.code)
        }
        if let newKey {
            let path = storage.path(ClientCertificate.keyFile)
            key = Array(UnsafeRawBufferPointer(start: newKey, count: strlen(newKey)))
            let written = storage.write(ClientCertificate.keyFile, key)
            wipe(&key)
            guard written else {
                logger.error("cannot write \(path)")
                return (nil, THINGIF_ERR_STORAGE.code)
            }
            logger.info("made a new TLS client key (EC P-256) in \(path)")
        }
        return (String(cString: csr), OK)
    }

    /// For an endpoint with a client certificate: checks that it is for
    /// thing-key.pem's key and writes thing-cert.pem (0600, atomically)
    /// when that file is missing or differs. OK when the pair is ready or
    /// the endpoint has no certificate; else THINGIF_ERR_TLS or
    /// THINGIF_ERR_STORAGE, and a line at `level` that says why.
    func prepareClientCertificate(_ ep: MQTTEndpoint, level: thingif_log_level = THINGIF_LOG_ERROR) -> Int32 {
        guard let certificate = ep.clientCertificate else { return OK }
        let bytes = Array(certificate.utf8)
        var key = clientKeyBytes()
        let check = key.withUnsafeBytes { k in
            bytes.withUnsafeBytes { thingif_crypto_pair_check($0.baseAddress, $0.count, k.baseAddress, k.count) }
        }
        wipe(&key)
        guard check == 1 else {
            let keyPath = storage.path(ClientCertificate.keyFile)
            let identityPath = storage.path(Thing.identityFile)
            let why: Text =
                check == -2
                ? "\(keyPath) is missing or holds no EC P-256 key"
                : check == 0 ? "the certificate is not for the key in \(keyPath)" : "the certificate is not PEM"
            logger.write(
                level,
                "the onboarding in \(identityPath) has a client certificate, but \(why.string): the thing cannot connect (it has no password). Delete \(identityPath) and onboard again"
            )
            return THINGIF_ERR_TLS.code
        }
        if storage.read(ClientCertificate.certificateFile, limit: 64 * 1024) == bytes { return OK }
        let certPath = storage.path(ClientCertificate.certificateFile)
        guard storage.write(ClientCertificate.certificateFile, bytes) else {
            logger.write(level, "cannot write \(certPath)")
            return THINGIF_ERR_STORAGE.code
        }
        logger.info("wrote the thing's client certificate to \(certPath)")
        return OK
    }
}

extension Thing {
    /// thingif_set_claim_certificate: the CN of the claim certificate in
    /// `certfile`, which names the claim topics; nil (and an error line)
    /// when a file cannot be read or the CN is no topic level beginning
    /// with claim. (the framework checks the rest: Topics.claimParts).
    func claimName(certfile: String, keyfile: String) -> String? {
        let cn = Platform.isReadableFile(keyfile) ? thingif_crypto_cert_cn(certfile, Topics.claimPrefix) : nil
        defer { thingif_crypto_free_text(cn) }
        guard let cn, let name = String(validatingCString: cn), Topics.isSafeLevel(name) else {
            logger.error("\(certfile): no readable claim certificate (CN claim.APPID.BATCH) with a readable key")
            return nil
        }
        return name
    }
}

/// Overwrites a secret's bytes with zeros (memset, which the optimizer
/// keeps: it cannot see into the C call).
func wipe(_ bytes: inout [UInt8]) {
    bytes.withUnsafeMutableBytes { b in _ = b.baseAddress.map { memset($0, 0, b.count) } }
}
