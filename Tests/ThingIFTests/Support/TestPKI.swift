import Foundation
import Testing

/// Keys and certificates for the certificate tests, made with the openssl
/// CLI at run time in a private temp folder (nothing is committed).
struct TestPKI {
    let directory: String

    init() throws {
        directory = try makeTempDirectory(prefix: "thingif-test-pki")
    }

    func remove() { try? FileManager.default.removeItem(atPath: directory) }

    /// Runs openssl with `args` in the folder; throws with its output when it fails.
    @discardableResult
    func openssl(_ args: [String]) throws -> String {
        let log = directory + "/openssl-\(randomHexString(4)).log"
        let status = try runChild("/usr/bin/env", ["openssl"] + args, logPath: log)
        let out = readText(log)
        guard status == 0 else { throw Broker.StartError(description: "openssl \(args.joined(separator: " ")): \(out)") }
        return out
    }

    /// A new EC P-256 key and its CSR for subject CN `cn`: (key path, CSR path).
    func keyAndCSR(cn: String) throws -> (key: String, csr: String) {
        let base = directory + "/" + randomHexString(6)
        try openssl([
            "req", "-new", "-nodes", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-keyout",
            base + ".key", "-out", base + ".csr", "-subj", "/CN=\(cn)"
        ])
        return (base + ".key", base + ".csr")
    }

    /// A client certificate for CN `cn` signed by `ca`/`caKey`, valid for
    /// `days` from now (a negative number: expired that many days ago):
    /// (certificate path, key path).
    func clientCertificate(cn: String, ca: String, caKey: String, days: Int = 30) throws -> (cert: String, key: String) {
        let (key, csr) = try keyAndCSR(cn: cn)
        let ext = directory + "/client.ext"
        try "extendedKeyUsage=clientAuth\n".write(toFile: ext, atomically: true, encoding: .utf8)
        let cert = csr.replacingOccurrences(of: ".csr", with: ".crt")
        try openssl([
            "x509", "-req", "-in", csr, "-CA", ca, "-CAkey", caKey, "-set_serial",
            String(UInt32.random(in: 1...UInt32.max)), "-out", cert, "-days", String(days), "-extfile", ext
        ])
        return (cert, key)
    }

    /// A self-signed CA of its own: (certificate path, key path).
    func otherCA() throws -> (cert: String, key: String) {
        let base = directory + "/other-ca-" + randomHexString(4)
        try openssl([
            "req", "-x509", "-new", "-nodes", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-keyout",
            base + ".key", "-out", base + ".crt", "-days", "30", "-subj", "/CN=another CA", "-addext",
            "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign,cRLSign"
        ])
        return (base + ".crt", base + ".key")
    }
}
