// SPDX-License-Identifier: Apache-2.0

// Date is the only thing taken from Foundation here: swift-certificates
// speaks it for a certificate's validity (the rest of ThingIFHub has none).
#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif
import Crypto
import X509
import _CryptoExtras
import ThingIF
#if canImport(Glibc)
    import Glibc
#endif

/// The things' CA (docs/SECURITY.md): a CA certificate and its private key, read
/// from PEM files at the hub's start, that signs a client certificate for
/// each thing that sends a CSR at onboarding. The broker authenticates the
/// thing by that certificate on a listener of its own (CN = the
/// installation's `mqttTopic`, its username there), so a new thing changes
/// nothing in the broker. The thing makes its key and keeps it: the hub sees
/// only the CSR's public key (docs/DECISIONS.md).
///
/// Threads: a value; `request` and `issue` may run on any thread at once.
public struct ThingCertificates: Sendable {
    /// Why a CA or a CSR cannot be used: one sentence for a log or a 400.
    public struct Problem: Error, Sendable, Equatable, CustomStringConvertible {
        public var message: String
        public var description: String { message }
        init(_ message: String) { self.message = message }
    }

    /// A CSR whose signature verified and whose key is one the hub accepts.
    public struct CheckedRequest: Sendable {
        let publicKey: Certificate.PublicKey
    }

    /// A certificate `issue` made: its PEM, and what the store records to
    /// revoke it (CertificateStore.recordCertificate).
    public struct Issued: Sendable {
        public var pem: String
        /// Its serial number's DER bytes as lowercase hex.
        public var serial: String
        /// Its notAfter, in epoch ms.
        public var notAfterMs: Int64
    }

    /// The largest CA certificate or key file read (a PEM chain is small).
    static let maxFileBytes = 1 << 20
    /// One day, in seconds.
    static let day: Double = 86_400
    /// How far back notBefore is set, in seconds: a device whose clock is a
    /// little behind the hub's takes the certificate as valid already.
    public static let backdating: Double = 300

    public let certificate: Certificate
    let privateKey: Certificate.PrivateKey
    /// The CA's subject key identifier (its own extension, else the SHA-1
    /// of its public key): the authority key identifier of what it signs.
    let keyIdentifier: ArraySlice<UInt8>
    /// The PEM blocks read, for OpenSSL's CRL signing (ThingCRL.swift).
    let certificatePEM: String
    let keyPEM: String

    // MARK: the CA

    /// Reads the CA from its PEM files and checks that it can sign (see `init(certificatePEM:keyPEM:now:)`).
    public static func load(certFile: String, keyFile: String) -> Result<ThingCertificates, Problem> {
        guard let cert = readText(certFile) else { return .failure(Problem("cannot read \(certFile)")) }
        guard let key = readText(keyFile) else { return .failure(Problem("cannot read \(keyFile)")) }
        do {
            return .success(try ThingCertificates(certificatePEM: cert, keyPEM: key))
        } catch let p as Problem {
            return .failure(Problem("\(certFile) and \(keyFile): \(p.message)"))
        } catch {
            return .failure(Problem("\(certFile) and \(keyFile): \(error)"))
        }
    }

    /// The CA from PEM text: the first CERTIFICATE block of `certificatePEM`
    /// (a file may hold a chain) and the first private key block of `keyPEM`
    /// (PKCS#8, SEC1 "EC PRIVATE KEY" or PKCS#1 "RSA PRIVATE KEY"; not an
    /// encrypted one). Throws a Problem unless the certificate is a CA
    /// (basicConstraints CA:TRUE, keyCertSign when keyUsage is there), valid
    /// `now`, with an EC P-256, P-384 or RSA (2048 bits or more) key, and
    /// the private key is the certificate's.
    public init(certificatePEM: String, keyPEM: String, now: Date = Date()) throws {
        guard let certBlock = Self.firstBlock(of: certificatePEM, where: { $0 == "CERTIFICATE" }) else {
            throw Problem("no PEM CERTIFICATE block in the CA certificate")
        }
        let cert: Certificate
        do { cert = try Certificate(pemEncoded: certBlock) } catch {
            throw Problem("the CA certificate does not parse: \(error)")
        }
        if Self.firstBlock(of: keyPEM, where: { $0.hasPrefix("ENCRYPTED") }) != nil {
            throw Problem("the CA key is encrypted; the hub reads only an unencrypted key (keep its file 0600)")
        }
        guard let keyBlock = Self.firstBlock(of: keyPEM, where: { $0.hasSuffix("PRIVATE KEY") }) else {
            throw Problem("no PEM PRIVATE KEY block in the CA key")
        }
        let key: Certificate.PrivateKey
        do { key = try Certificate.PrivateKey(pemEncoded: keyBlock) } catch {
            throw Problem("the CA key does not parse: \(error)")
        }
        if let refused = Self.refusal(of: cert.publicKey) { throw Problem("the CA's key: \(refused)") }
        guard key.publicKey == cert.publicKey else {
            throw Problem("the CA key does not match the CA certificate (another key pair)")
        }
        let constraints: BasicConstraints?
        let usage: KeyUsage?
        do {
            constraints = try cert.extensions.basicConstraints
            usage = try cert.extensions.keyUsage
        } catch {
            throw Problem("the CA certificate's extensions do not parse: \(error)")
        }
        guard case .isCertificateAuthority = constraints else {
            throw Problem("the certificate is not a CA (it needs basicConstraints CA:TRUE)")
        }
        if let usage, !usage.keyCertSign {
            throw Problem("the CA certificate's keyUsage lacks keyCertSign")
        }
        guard now >= cert.notValidBefore, now < cert.notValidAfter else {
            throw Problem(
                "the CA certificate is not valid now (from \(cert.notValidBefore) to \(cert.notValidAfter))")
        }
        certificate = cert
        privateKey = key
        self.certificatePEM = certBlock
        self.keyPEM = keyBlock
        let own = try? cert.extensions.subjectKeyIdentifier
        keyIdentifier = own?.keyIdentifier ?? SubjectKeyIdentifier(hash: cert.publicKey).keyIdentifier
    }

    // MARK: signing

    /// Parses a thing's PEM PKCS#10 request and checks it: its own
    /// signature must verify with its public key (the thing holds that
    /// key's private half), and the key must be EC P-256, P-384 or RSA of
    /// 2048 bits or more. Its subject and attributes (requested extensions)
    /// are not read: `issue` decides what the certificate says.
    public static func request(_ pem: String) -> Result<CheckedRequest, Problem> {
        // OpenSSL's older label for the same block.
        let text =
            pem.contains("-----BEGIN NEW CERTIFICATE REQUEST-----")
            ? pem.replacing("NEW CERTIFICATE REQUEST", with: "CERTIFICATE REQUEST") : pem
        let csr: CertificateSigningRequest
        do { csr = try CertificateSigningRequest(pemEncoded: text) } catch {
            return .failure(
                Problem(
                    "certificateSigningRequest is not a PEM PKCS#10 request with an EC P-256, P-384 or RSA (2048 bits"
                        + " or more) key"))
        }
        if let refused = refusal(of: csr.publicKey) {
            return .failure(Problem("certificateSigningRequest: \(refused)"))
        }
        guard csr.publicKey.isValidSignature(csr.signature, for: csr) else {
            return .failure(Problem("the signature of certificateSigningRequest does not verify with its key"))
        }
        return .success(CheckedRequest(publicKey: csr.publicKey))
    }

    /// A client certificate for the thing installation `topic`, as PEM:
    /// subject CN = topic, issuer = the CA's subject, a random positive
    /// serial of 16 bytes, valid from `now` − 5 min for `days` days (never
    /// past the CA's own end), basicConstraints CA:FALSE and keyUsage
    /// digitalSignature (both critical), extendedKeyUsage clientAuth, and
    /// the subject and authority key identifiers.
    public func issue(_ request: CheckedRequest, topic: String, days: Int, now: Date = Date()) -> Result<
        Issued, Problem
    > {
        issue(request, commonName: topic, days: days, now: now)
    }

    /// A claim certificate (fleet provisioning, docs/SECURITY.md) for the
    /// batch `batch` of app `appID`: what `issue` writes for a thing, with
    /// CN = claim.{appID}.{batch} (Topics.claimParts's form) instead of a
    /// topic, signed by this CA: the claims CA (ClaimCertificateCommand),
    /// which only the broker's claim listener trusts. The broker lets it
    /// publish only onboardings on c/{CN}/{clientID}/onboardings; the hub
    /// takes them for `appID` only.
    public func issueClaim(_ request: CheckedRequest, appID: String, batch: String, days: Int, now: Date = Date())
        -> Result<String, Problem>
    {
        let cn = Self.claimName(appID: appID, batch: batch)
        guard Topics.claimParts(cn).map({ $0.appID == appID && $0.batch == batch }) ?? false else {
            return .failure(
                Problem(
                    "a claim's name is claim.APPID.BATCH, at most 64 bytes, without / + # or NUL, the batch 1 to"
                        + " \(Topics.maxClaimBatch) of A-Z a-z 0-9 - _: not \(cn)"))
        }
        return issue(request, commonName: cn, days: days, now: now).map(\.pem)
    }

    /// The CN of a claim certificate.
    public static func claimName(appID: String, batch: String) -> String { Topics.claimPrefix + appID + "." + batch }

    /// A new EC P-256 key, as an unencrypted PKCS#8 PEM, and its request, checked.
    public static func newKey() -> (pem: String, request: CheckedRequest) {
        let key = P256.Signing.PrivateKey()
        return (key.pemRepresentation, CheckedRequest(publicKey: Certificate.PublicKey(key.publicKey)))
    }

    /// The one place that writes what a certificate of this CA says.
    func issue(_ request: CheckedRequest, commonName topic: String, days: Int, now: Date) -> Result<Issued, Problem> {
        guard !topic.isEmpty, topic.utf8.count <= 64 else {
            return .failure(Problem("a certificate's CN is 1 to 64 bytes, not \(topic.utf8.count)"))
        }
        let notAfter = min(now.addingTimeInterval(Double(max(1, days)) * Self.day), certificate.notValidAfter)
        do {
            let extensions = try Certificate.Extensions {
                Critical(BasicConstraints.notCertificateAuthority)
                Critical(KeyUsage(digitalSignature: true))
                try ExtendedKeyUsage([.clientAuth])
                SubjectKeyIdentifier(hash: request.publicKey)
                AuthorityKeyIdentifier(keyIdentifier: keyIdentifier)
            }
            let serial = Self.serialNumber()
            let issued = try Certificate(
                version: .v3, serialNumber: serial, publicKey: request.publicKey,
                notValidBefore: now.addingTimeInterval(-Self.backdating), notValidAfter: notAfter,
                issuer: certificate.subject, subject: try DistinguishedName { CommonName(topic) },
                extensions: extensions, issuerPrivateKey: privateKey)
            return .success(
                Issued(
                    pem: try issued.serializeAsPEM().pemString, serial: ThingIFHub.LibCrypto.hex(Array(serial.bytes)),
                    notAfterMs: Int64((notAfter.timeIntervalSince1970 * 1000).rounded(.down))))
        } catch {
            return .failure(Problem("the certificate for \(topic) could not be made: \(error)"))
        }
    }

    /// 16 random bytes, positive (the top bit clear) and of full length (the
    /// first byte not zero), so that DER keeps all 16.
    static func serialNumber() -> Certificate.SerialNumber {
        var g = SystemRandomNumberGenerator()
        var bytes = (0..<16).map { _ in UInt8.random(in: 0...255, using: &g) }
        bytes[0] = UInt8.random(in: 1...0x7F, using: &g)
        return Certificate.SerialNumber(bytes: bytes)
    }

    /// Why the hub refuses a key (nil: EC P-256, P-384, RSA ≥ 2048 bits).
    static func refusal(of key: Certificate.PublicKey) -> String? {
        if P256.Signing.PublicKey(key) != nil || P384.Signing.PublicKey(key) != nil { return nil }
        if let rsa = _RSA.Signing.PublicKey(key) {
            return rsa.keySizeInBits >= 2048
                ? nil : "an RSA key of \(rsa.keySizeInBits) bits is refused (2048 or more)"
        }
        return "a \(key) is refused (EC P-256, P-384 or RSA of 2048 bits or more)"
    }

    // MARK: PEM text

    /// The first PEM block whose label passes `wanted`, markers included.
    static func firstBlock(of text: String, where wanted: (String) -> Bool) -> String? {
        var label: String?
        var lines: [Substring] = []
        for line in text.split(whereSeparator: \.isNewline) {
            let l = line.trimmedLine()
            if label == nil, l.hasPrefix("-----BEGIN "), l.hasSuffix("-----") {
                let name = String(l.dropFirst(11).dropLast(5))
                if wanted(name) {
                    label = name
                    lines = [l]
                }
            } else if let name = label {
                lines.append(l)
                if l == "-----END \(name)-----" { return lines.joined(separator: "\n") + "\n" }
            }
        }
        return nil
    }

    /// A whole small file as UTF-8 text; nil when unreadable or too large.
    static func readText(_ path: String) -> String? {
        guard let f = fopen(path, "rb") else { return nil }
        defer { fclose(f) }
        var out: [UInt8] = []
        var buf = [UInt8](repeating: 0, count: 4096)
        while true {
            let n = buf.withUnsafeMutableBytes { fread($0.baseAddress, 1, 4096, f) }
            if n == 0 { break }
            out += buf[0..<n]
            if out.count > maxFileBytes { return nil }
        }
        guard ferror(f) == 0 else { return nil }
        return String(decoding: out, as: UTF8.self)
    }
}

extension Substring {
    /// The line without the spaces, tabs and CR around it.
    fileprivate func trimmedLine() -> Substring {
        var s = self
        while let c = s.first, c == " " || c == "\t" || c == "\r" { s = s.dropFirst() }
        while let c = s.last, c == " " || c == "\t" || c == "\r" { s = s.dropLast() }
        return s
    }
}
