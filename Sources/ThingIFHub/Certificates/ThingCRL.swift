// SPDX-License-Identifier: Apache-2.0

import CCrypto
import ThingIF
#if canImport(Glibc)
    import Glibc
#endif

/// The things' certificate revocation list (docs/SECURITY.md): the certificates of
/// deleted things and retired MQTT installations (CertificateStore's revoked list),
/// signed by the things' CA into a PEM file (`--thing-crl`) that the
/// broker's certificate listener reads (`crlfile`), which the hub asks the
/// broker to read again after each change (`--broker-pid-file`: SIGHUP).
///
/// OpenSSL refuses EVERY client certificate of the CA once the CRL's
/// nextUpdate has passed, so the hub signs a new one well before:
/// nextUpdate is `validitySeconds` (7 days) after thisUpdate, and the hub
/// signs again after `resignAfterMs` (1 day) even when nothing changed.
public enum ThingCRL {
    /// thisUpdate to nextUpdate.
    public static let validitySeconds: Int64 = 7 * 86_400
    /// A CRL this old is signed again (and the broker told).
    public static let resignAfterMs: Int64 = 86_400_000
    /// How often the hub reads the store's revoked list to learn of
    /// revocations by other hubs sharing the store.
    public static let checkEveryMs: Int64 = 60_000
    /// How far back thisUpdate is set: a broker whose clock is a little
    /// behind the hub's takes the CRL as valid already (OpenSSL refuses
    /// every client while its CRL is "not yet valid").
    public static let backdatingSeconds: Int64 = 300
    /// The largest pid file read.
    static let maxPidFileBytes = 64

    /// What the hub last wrote (ThingAuthority.crlState).
    struct State {
        /// The serials of the last CRL written, nil before the first.
        var serials: [String]?
        /// When it was written (monotonic ms), and its thisUpdate (epoch s):
        /// each CRL's thisUpdate, and so its cRLNumber, is later than the
        /// one before, so the hub writes at most one a second (a burst of
        /// deletions is one broker reload a second): a change within the
        /// second of the last write is `pending`, for the next tick (250 ms).
        var writtenMs: Int64 = 0
        var thisUpdate: Int64 = 0
        var nextCheckMs: Int64 = 0
        var pending = false
    }

    /// Writes `bytes` to `path` atomically: a new file beside it (mode
    /// 0644: the broker, another user, reads it), synced, then renamed
    /// over `path`, so the broker never reads half a CRL. Returns why not.
    static func writeAtomically(_ bytes: [UInt8], to path: String) -> String? {
        let temp = path + ".tmp-" + Platform.randomHex(bytes: 6)
        let fd = open(temp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o644)
        guard fd >= 0 else { return "cannot create \(temp): \(String(cString: strerror(errno)))" }
        var written = 0
        var problem: String?
        while written < bytes.count {
            let n = bytes.withUnsafeBytes { write(fd, $0.baseAddress! + written, bytes.count - written) }
            if n < 0 && errno == EINTR { continue }
            guard n > 0 else {
                problem = "cannot write \(temp): \(String(cString: strerror(errno)))"
                break
            }
            written += n
        }
        if problem == nil, fchmod(fd, 0o644) != 0 || fsync(fd) != 0 {
            problem = "cannot sync \(temp): \(String(cString: strerror(errno)))"
        }
        close(fd)
        if problem == nil, rename(temp, path) != 0 {
            problem = "cannot rename \(temp) to \(path): \(String(cString: strerror(errno)))"
        }
        if problem != nil { unlink(temp) }
        return problem
    }

    /// Sends SIGHUP to the broker whose pid `pidFile` holds, so that it
    /// reads its crlfile again (mosquitto 2.0.11 does). Only to a process
    /// named mosquitto (/proc/PID/comm): a stale pid file whose number
    /// another process has taken must not get a signal that ends most
    /// programs. Returns why not.
    static func reloadBroker(pidFile: String) -> String? {
        guard let text = readSmall(pidFile, max: maxPidFileBytes) else { return "cannot read \(pidFile)" }
        let digits = text.filter { $0 != "\n" && $0 != " " && $0 != "\r" }
        guard let pid = Int32(digits), pid > 1 else { return "\(pidFile) holds no process ID" }
        guard let comm = readSmall("/proc/\(pid)/comm", max: 64),
            comm.hasPrefix("mosquitto")
        else {
            return "process \(pid) of \(pidFile) is not a running mosquitto; no SIGHUP sent"
        }
        guard kill(pid, SIGHUP) == 0 else {
            return "cannot send SIGHUP to \(pid): \(String(cString: strerror(errno)))"
        }
        return nil
    }

    /// A small file as text; nil when unreadable or larger than `max`.
    static func readSmall(_ path: String, max: Int) -> String? {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var buf = [UInt8](repeating: 0, count: max + 1)
        var got = 0
        while got <= max {
            let n = buf.withUnsafeMutableBytes { read(fd, $0.baseAddress! + got, max + 1 - got) }
            if n < 0 && errno == EINTR { continue }
            guard n >= 0 else { return nil }
            if n == 0 { break }
            got += n
        }
        guard got <= max else { return nil }
        return String(decoding: buf[0..<got], as: UTF8.self)
    }
}

extension ThingCertificates {
    /// The CRL of `revoked` as PEM, signed by this CA (OpenSSL's X509_CRL,
    /// one C call: `thingif_crl_pem` in CCrypto): v2, issuer = the CA's
    /// subject, thisUpdate and nextUpdate (epoch s), authorityKeyIdentifier
    /// (the CA's key identifier, as in the certificates it signs) and
    /// cRLNumber `number`. A serial that is not hex is left out (the store
    /// writes only hex).
    public func revocationList(_ revoked: [RevokedCertificate], thisUpdate: Int64, nextUpdate: Int64, number: Int64)
        -> Result<String, Problem>
    {
        var serials: [UInt8] = []
        var lengths: [Int] = []
        var times: [Int64] = []
        for r in revoked {
            guard let bytes = ThingIFHub.LibCrypto.unhex(r.serial), !bytes.isEmpty, bytes.count <= 20 else { continue }
            serials += bytes
            lengths.append(bytes.count)
            times.append(r.revokedAt / 1000)
        }
        let keyID = Array(keyIdentifier)
        let pem: UnsafeMutablePointer<CChar>? = serials.withUnsafeBufferPointer { s in
            lengths.withUnsafeBufferPointer { l in
                times.withUnsafeBufferPointer { t in
                    keyID.withUnsafeBufferPointer { k in
                        thingif_crl_pem(
                            certificatePEM, keyPEM, k.baseAddress, k.count, s.baseAddress, l.baseAddress,
                            t.baseAddress, lengths.count, thisUpdate, nextUpdate, number)
                    }
                }
            }
        }
        guard let pem else { return .failure(Problem("OpenSSL could not make the CRL with the things' CA")) }
        defer { free(pem) }
        return .success(String(cString: pem))
    }
}
