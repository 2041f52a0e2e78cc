// SPDX-License-Identifier: Apache-2.0

import Foundation
import ThingIF
import ThingIFHub
#if canImport(Glibc)
    import Glibc
#endif

/// `thingif-hub claim-certificate`: the operator's command that makes a
/// claim certificate for a batch of devices (fleet provisioning by claim,
/// docs/SECURITY.md) with the claims CA: not the things CA, and not one
/// the hub holds (the broker's claim listener trusts it and nothing else).
/// A device with it onboards without the app key. The signing is
/// ThingCertificates' (one rule for what a CA's certificates say); only
/// the CN and the validity differ from a thing's.
public enum ClaimCertificateCommand {
    public static let name = "claim-certificate"
    public static let defaultDays = 365

    public static let usage = """
        usage: thingif-hub claim-certificate --claim-ca-cert FILE --claim-ca-key FILE --app APPID --name BATCH
                 [--days N] (--out DIR | --csr FILE --out DIR)
          Signs a claim certificate, CN claim.APPID.BATCH, with the claims CA, the one the broker's claim
          listener trusts (not the things CA; clientAuth, valid N days, default \(defaultDays), never past
          the CA's end). Without --csr it makes an EC P-256 key:
          DIR/claim.key (0600) and DIR/claim.crt; with --csr (a PEM PKCS#10 request whose key the
          devices hold) it writes DIR/claim.crt only. Existing files are not overwritten.
          BATCH: 1 to \(Topics.maxClaimBatch) of A-Z a-z 0-9 - _. Retire a batch with the hub's
          --refused-claims BATCH.
        """

    public struct Failure: Error, CustomStringConvertible, Equatable {
        public let description: String
        /// 2: a usage error; 1: the work failed.
        public let status: Int32
    }

    /// Runs the command with `arguments` (after the command's name); the
    /// lines it prints go to `say`. The files written, or a Failure.
    @discardableResult
    public static func run(_ arguments: [String], say: (String) -> Void = { _ in }) throws -> [String] {
        var values: [String: String] = [:]
        let known = ["--claim-ca-cert", "--claim-ca-key", "--app", "--name", "--days", "--out", "--csr"]
        var args = arguments[...]
        while let a = args.popFirst() {
            if a == "-h" || a == "--help" {
                say(usage)
                return []
            }
            guard known.contains(a) else { throw Failure(description: "unknown argument \(a)", status: 2) }
            guard let v = args.popFirst(), !v.isEmpty else {
                throw Failure(description: "\(a) needs a value", status: 2)
            }
            guard values[a] == nil else { throw Failure(description: "\(a) given twice", status: 2) }
            values[a] = v
        }
        for required in ["--claim-ca-cert", "--claim-ca-key", "--app", "--name", "--out"] where values[required] == nil
        {
            throw Failure(description: "\(required) is required", status: 2)
        }
        let days =
            try values["--days"].map { v -> Int in
                guard let n = Int(v), (1...FrameworkSide.ThingCAFiles.maxDays).contains(n) else {
                    throw Failure(
                        description: "--days must be 1 to \(FrameworkSide.ThingCAFiles.maxDays), not \(v)", status: 2)
                }
                return n
            } ?? defaultDays
        let app = values["--app"]!, batch = values["--name"]!, out = values["--out"]!
        let cn = ThingCertificates.claimName(appID: app, batch: batch)
        guard Topics.claimParts(cn).map({ $0.appID == app && $0.batch == batch }) ?? false else {
            throw Failure(
                description:
                    "--app and --name make the CN \(cn): it must be at most 64 bytes without / + # or NUL, the"
                    + " name 1 to \(Topics.maxClaimBatch) of A-Z a-z 0-9 - _", status: 2)
        }
        let ca: ThingCertificates
        switch ThingCertificates.load(certFile: values["--claim-ca-cert"]!, keyFile: values["--claim-ca-key"]!) {
        case .failure(let p): throw Failure(description: "the claims CA cannot be used: \(p.message)", status: 1)
        case .success(let c): ca = c
        }
        var key: String?
        let request: ThingCertificates.CheckedRequest
        if let csrFile = values["--csr"] {
            guard let data = FileManager.default.contents(atPath: csrFile), data.count <= 64 * 1024 else {
                throw Failure(description: "cannot read \(csrFile)", status: 1)
            }
            switch ThingCertificates.request(String(decoding: data, as: UTF8.self)) {
            case .failure(let p): throw Failure(description: "\(csrFile): \(p.message)", status: 1)
            case .success(let r): request = r
            }
        } else {
            let made = ThingCertificates.newKey()
            key = made.pem
            request = made.request
        }
        let certificate: String
        switch ca.issueClaim(request, appID: app, batch: batch, days: days) {
        case .failure(let p): throw Failure(description: p.message, status: 1)
        case .success(let pem): certificate = pem
        }
        do {
            try FileManager.default.createDirectory(
                atPath: out, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        } catch {
            throw Failure(description: "cannot make \(out): \(error)", status: 1)
        }
        let keyPath = out + "/claim.key", certPath = out + "/claim.crt"
        for p in (key != nil ? [keyPath, certPath] : [certPath]) where FileManager.default.fileExists(atPath: p) {
            throw Failure(description: "\(p) exists: not overwritten", status: 1)
        }
        var written: [String] = []
        if let key {
            try write(key, to: keyPath, mode: 0o600)
            written.append(keyPath)
        }
        try write(certificate, to: certPath, mode: 0o644)
        written.append(certPath)
        say("claim certificate \(cn), valid \(days) days: \(written.joined(separator: ", "))")
        return written
    }

    /// Writes a new file with `mode` (O_EXCL: never over an existing one).
    static func write(_ text: String, to path: String, mode: mode_t) throws {
        let fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode)
        guard fd >= 0 else {
            throw Failure(description: "cannot create \(path): \(String(cString: strerror(errno)))", status: 1)
        }
        defer { close(fd) }
        _ = fchmod(fd, mode)  // whatever the umask
        let bytes = Array(text.utf8)
        var done = 0
        while done < bytes.count {
            let n = bytes[done...].withUnsafeBytes { Glibc.write(fd, $0.baseAddress, $0.count) }
            if n < 0 && errno == EINTR { continue }
            guard n > 0 else {
                throw Failure(description: "cannot write \(path): \(String(cString: strerror(errno)))", status: 1)
            }
            done += n
        }
        guard fsync(fd) == 0 else { throw Failure(description: "cannot sync \(path)", status: 1) }
    }
}
