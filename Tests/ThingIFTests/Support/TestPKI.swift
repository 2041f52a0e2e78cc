// SPDX-License-Identifier: Apache-2.0

import Foundation
import Testing

/// A CA and CSRs made with OpenSSL's CLI at run time, in a temp folder
/// (no key is ever committed), and OpenSSL's word on what the hub signs.
final class TestPKI {
    let directory: String
    private var count = 0

    init() throws { directory = try makeTempDirectory(prefix: "thingif-thing-ca") }
    deinit { try? FileManager.default.removeItem(atPath: directory) }

    func path(_ name: String) -> String { directory + "/" + name }

    /// Runs openssl; its stdout and stderr as text, and its status.
    @discardableResult
    func openssl(_ args: [String]) throws -> (status: Int32, output: String) {
        count += 1
        let log = path("openssl-\(count).log")
        let status = try runChild("/usr/bin/openssl", args, logPath: log)
        return (status, (try? String(contentsOfFile: log, encoding: .utf8)) ?? "")
    }

    /// `-newkey` arguments: "P-256", "P-384", "P-521", "rsa:1024", "rsa:2048", "ed25519".
    static func newKey(_ kind: String) -> [String] {
        if kind.hasPrefix("P-") { return ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:\(kind)"] }
        return ["-newkey", kind]
    }

    /// A self-signed CA: (certificate file, key file).
    func makeCA(_ name: String, key kind: String = "P-256", isCA: Bool = true) throws -> (cert: String, key: String) {
        let cert = path(name + ".crt")
        let key = path(name + ".key")
        let constraints = isCA ? "critical,CA:TRUE" : "critical,CA:FALSE"
        let usage = isCA ? "critical,keyCertSign,cRLSign" : "critical,digitalSignature"
        let r = try openssl(
            ["req", "-x509", "-new", "-nodes"] + Self.newKey(kind) + [
                "-keyout", key, "-out", cert, "-days", "36500", "-subj", "/CN=thingif things CA \(name)",
                "-addext", "basicConstraints=\(constraints)", "-addext", "keyUsage=\(usage)"
            ])
        try #require(r.status == 0, "openssl req -x509: \(r.output)")
        return (cert, key)
    }

    /// A CSR (PEM) for a new key; its subject and requested extensions
    /// ask for more than a thing gets.
    func makeCSR(_ name: String, key kind: String = "P-256") throws -> String {
        let r = try openssl(
            ["req", "-new", "-nodes"] + Self.newKey(kind) + [
                "-keyout", path(name + ".key"), "-out", path(name + ".csr"), "-subj", "/CN=evil.example/O=Someone Else",
                "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "extendedKeyUsage=serverAuth"
            ])
        try #require(r.status == 0, "openssl req -new: \(r.output)")
        return try String(contentsOfFile: path(name + ".csr"), encoding: .utf8)
    }

    /// `pem` with one byte of its last DER byte flipped (inside the signature).
    static func brokenSignature(_ pem: String) throws -> String {
        let body = pem.split(separator: "\n").filter { !$0.hasPrefix("-----") }.joined()
        var der = try #require(Data(base64Encoded: body))
        der[der.count - 1] ^= 0x01
        let b64 = der.base64EncodedString(options: [.lineLength64Characters, .endLineWithLineFeed])
        return "-----BEGIN CERTIFICATE REQUEST-----\n\(b64)\n-----END CERTIFICATE REQUEST-----\n"
    }

    /// OpenSSL's verdict on `pem` against the CA, and its text form.
    func inspect(_ pem: String, caFile: String) throws -> (verified: Bool, text: String, verifyOutput: String) {
        count += 1
        let file = path("issued-\(count).pem")
        try pem.write(toFile: file, atomically: true, encoding: .utf8)
        let verify = try openssl(["verify", "-CAfile", caFile, "-purpose", "sslclient", file])
        let text = try openssl(["x509", "-in", file, "-noout", "-text", "-dates"])
        try #require(text.status == 0, "openssl x509: \(text.output)")
        return (verify.status == 0 && verify.output.contains(": OK"), text.output, verify.output)
    }

    /// openssl that must succeed: its output, or a failed expectation that stops the test.
    @discardableResult
    func run(_ args: [String]) throws -> String {
        let r = try openssl(args)
        try #require(r.status == 0, "openssl \(args.joined(separator: " ")): \(r.output)")
        return r.output
    }

    /// A new EC P-256 key and its CSR for subject CN `cn`: (key file, CSR file).
    func keyAndCSR(cn: String) throws -> (key: String, csr: String) {
        count += 1
        let base = path("thing-\(count)")
        try run(
            ["req", "-new", "-nodes"] + Self.newKey("P-256") + [
                "-keyout", base + ".key", "-out", base + ".csr", "-subj", "/CN=\(cn)"
            ])
        return (base + ".key", base + ".csr")
    }

    /// A client certificate for CN `cn` signed by `ca`/`caKey`, valid for
    /// `days` from now (negative: expired that many days ago):
    /// (certificate file, key file).
    func clientCertificate(cn: String, ca: String, caKey: String, days: Int = 30) throws -> (cert: String, key: String)
    {
        let (key, csr) = try keyAndCSR(cn: cn)
        let ext = path("client.ext")
        try "extendedKeyUsage=clientAuth\n".write(toFile: ext, atomically: true, encoding: .utf8)
        let cert = String(csr.dropLast(4)) + ".crt"
        try run([
            "x509", "-req", "-in", csr, "-CA", ca, "-CAkey", caKey, "-set_serial",
            String(UInt32.random(in: 1...UInt32.max)), "-out", cert, "-days", String(days), "-extfile", ext
        ])
        return (cert, key)
    }
}
