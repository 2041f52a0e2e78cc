// SPDX-License-Identifier: Apache-2.0

import Foundation
#if canImport(Glibc)
    import Glibc
#endif

/// The test PKI and the broker's admin identity, made once per test process
/// by deploy/make-broker-config.sh (the same script as the demo's).
enum BrokerSecrets {
    /// The repository's root, found from this file's path.
    static let repoRoot: String = {
        var parts = #filePath.split(separator: "/", omittingEmptySubsequences: false)
        parts.removeLast(4)  // Tests/ThingIFTests/Support/Broker.swift
        return parts.joined(separator: "/")
    }()
    static let script = repoRoot + "/deploy/make-broker-config.sh"
    /// The hub's broker identity in every test broker.
    static let adminUsername = "thingif-hub"
    static let adminPassword = "admin-" + randomHexString(16)
    /// CA, server and client certificates (made at the first broker).
    static let pkiDirectory: String = {
        (try? makeTempDirectory(prefix: "thingif-pki")) ?? "/tmp/thingif-pki-\(getpid())"
    }()
    static var caFile: String { pkiDirectory + "/ca.crt" }
    static var clientCert: String { pkiDirectory + "/client.crt" }
    static var clientKey: String { pkiDirectory + "/client.key" }
    /// The CA with which the hub signs things' certificates (its key is the
    /// hub's --thing-ca-key); the broker's certificate listener trusts it.
    static var thingsCAFile: String { pkiDirectory + "/things-ca.crt" }
    static var thingsCAKey: String { pkiDirectory + "/things-ca.key" }
    /// The CA of claim certificates (thingif-hub claim-certificate
    /// --claim-ca-cert/--claim-ca-key); only the claim listener trusts it.
    static var claimsCAFile: String { pkiDirectory + "/claims-ca.crt" }
    static var claimsCAKey: String { pkiDirectory + "/claims-ca.key" }
}

func randomHexString(_ bytes: Int) -> String {
    var g = SystemRandomNumberGenerator()
    return (0..<bytes).map { _ in String(format: "%02x", UInt8.random(in: 0...255, using: &g)) }.joined()
}

/// A private mosquitto broker on 127.0.0.1, one per test, secured as in
/// production (docs/SECURITY.md): no anonymous clients, the dynamic-security
/// plugin whose admin identity the hub uses (BrokerSecrets), a plain
/// listener on `port`, a TLS listener on `tlsPort`, a mutual-TLS one on
/// `mtlsPort`, one for things with a certificate from the things CA on
/// `certPort` (pattern rules, no records) and one for claim certificates
/// from the claims CA on `claimPort`, with certificates made by openssl at
/// run time.
///
/// It is spawned with posix_spawn and an empty signal mask: Swift Testing's
/// workers block SIGTERM, and a child would inherit that and ignore stop().
final class Broker {
    struct StartError: Error, CustomStringConvertible {
        let description: String
    }

    let port: Int
    let tlsPort: Int
    let mtlsPort: Int
    let certPort: Int
    let claimPort: Int
    let directory: String
    let logPath: String
    private(set) var pid: pid_t
    private var stopped = false

    var adminUsername: String { BrokerSecrets.adminUsername }
    var adminPassword: String { BrokerSecrets.adminPassword }
    var caFile: String { BrokerSecrets.caFile }
    var dynsecFile: String { directory + "/dynamic-security.json" }
    /// The certificate listener's crlfile (an empty CRL of the things CA
    /// from make-broker-config.sh; the hub's --thing-crl), and the pid file
    /// whose process the hub sends SIGHUP after writing it.
    var crlFile: String { directory + "/things-crl.pem" }
    /// The acl_file (make-broker-config.sh's DIR/acl), where the hub keeps gateways' rights (--broker-acl).
    var aclFile: String { directory + "/acl" }
    var pidFile: String { directory + "/mosquitto.pid" }

    /// Starts a broker on free ports, retrying with new ports when a chosen
    /// one was taken meanwhile. With `passwordFile` (made by
    /// mosquitto_passwd), only its users may connect and the
    /// dynamic-security plugin is not loaded.
    static func start(passwordFile: String? = nil) throws -> Broker {
        try start { try Broker(ports: nil, passwordFile: passwordFile, state: nil, filesOnly: false) }
    }

    /// A broker configured by files only (make-broker-config.sh --no-plugin):
    /// the hub's identity and the app's bootstrap identity (Env.appID /
    /// Env.appKey) in a password file, their rules and the things' patterns
    /// in an ACL file; what `thingif-hub --broker-admin none` runs on.
    static func startFilesOnly() throws -> Broker {
        try start { try Broker(ports: nil, passwordFile: nil, state: nil, filesOnly: true) }
    }

    private static func start(_ make: () throws -> Broker) throws -> Broker {
        expectOffPool("Starting a broker")
        var lastError: Error = StartError(description: "no attempt")
        for _ in 0..<3 {
            do { return try make() } catch { lastError = error }
        }
        throw lastError
    }

    /// A broker on the same ports as this stopped one, with its
    /// dynamic-security state (the clients and roles the hub made), or with
    /// `passwordFile` instead; retries while the ports are being released.
    func restarted(passwordFile: String? = nil) throws -> Broker {
        expectOffPool("Restarting a broker")
        var lastError: Error = StartError(description: "no attempt")
        for _ in 0..<10 {
            do {
                return try Broker(
                    ports: (port, tlsPort, mtlsPort, certPort, claimPort), passwordFile: passwordFile,
                    state: passwordFile == nil ? dynsecFile : nil, filesOnly: false)
            } catch { lastError = error }
            usleep(200_000)
        }
        throw lastError
    }

    private init(ports wanted: (Int, Int, Int, Int, Int)?, passwordFile: String?, state: String?, filesOnly: Bool)
        throws
    {
        guard let exe = Broker.executable() else {
            throw StartError(description: "mosquitto not found on PATH or in /usr/sbin")
        }
        guard let ports = wanted ?? Broker.freePorts() else { throw StartError(description: "no free port") }
        let dir = try makeTempDirectory(prefix: "thingif-broker")
        let conf = dir + "/mosquitto.conf"
        let log = dir + "/mosquitto.log"
        do {
            let status = try runChild(
                "/bin/bash",
                [
                    BrokerSecrets.script, dir, "--port", String(ports.0),
                    "--tls-port", String(ports.1), "--mtls-port", String(ports.2),
                    "--cert-port", String(ports.3), "--claim-port", String(ports.4),
                    "--pki", BrokerSecrets.pkiDirectory,
                    "--admin-user", BrokerSecrets.adminUsername,
                    "--admin-password", BrokerSecrets.adminPassword
                ]
                    + (filesOnly
                        ? ["--no-plugin", "--bootstrap-user", Env.appID, "--bootstrap-password", Env.appKey] : []),
                logPath: dir + "/setup.log")
            guard status == 0 else {
                throw StartError(description: "make-broker-config.sh failed: \(readText(dir + "/setup.log"))")
            }
            if let state {
                // The previous broker's clients and roles.
                _ = unlink(dir + "/dynamic-security.json")
                try FileManager.default.copyItem(atPath: state, toPath: dir + "/dynamic-security.json")
            }
            if let passwordFile {
                // The password file where the plugin was (each listener
                // with passwords has its own settings).
                var text = try String(contentsOfFile: conf, encoding: .utf8)
                text = text.split(separator: "\n", omittingEmptySubsequences: false)
                    .filter { !$0.hasPrefix("plugin_opt") }
                    .map { $0.hasPrefix("plugin ") ? "password_file \(passwordFile)" : String($0) }
                    .joined(separator: "\n")
                try text.write(toFile: conf, atomically: true, encoding: .utf8)
            }
        } catch {
            try? FileManager.default.removeItem(atPath: dir)
            throw error
        }

        let child: pid_t
        do {
            child = try spawnChild(exe, ["-c", conf], logPath: log)
        } catch {
            try? FileManager.default.removeItem(atPath: dir)
            throw StartError(description: "\(error)")
        }
        self.port = ports.0
        self.tlsPort = ports.1
        self.mtlsPort = ports.2
        self.certPort = ports.3
        self.claimPort = ports.4
        self.directory = dir
        self.logPath = log
        self.pid = child

        // Wait (bounded) until mosquitto itself listens on every port. A
        // port that accepts is not enough: one taken by another process since
        // freePorts() accepts too, while mosquitto exits with "Address
        // already in use" (seen on CI), and start() then tries other ports.
        let deadline = Date().addingTimeInterval(5)
        while !([ports.0, ports.1, ports.2, ports.3, ports.4].allSatisfy { Broker.listens(pid: child, port: $0) }) {
            var status: Int32 = 0
            if waitpid(child, &status, WNOHANG) == child {
                stopped = true
                throw StartError(description: "mosquitto exited at start: \(self.log)")
            }
            if Date() > deadline {
                stop()
                throw StartError(description: "mosquitto did not listen on \(ports) within 5 s: \(self.log)")
            }
            usleep(20_000)
        }
    }

    /// Whether process `pid` holds a listening TCP socket on `port`: a
    /// LISTEN row of /proc/net/tcp{,6} for the port whose socket inode is
    /// one of the process's file descriptors.
    static func listens(pid: pid_t, port: Int) -> Bool {
        let suffix = ":" + String(port, radix: 16, uppercase: true).leftPadded(to: 4)
        var inodes = Set<String>()
        for table in ["/proc/net/tcp", "/proc/net/tcp6"] {
            guard let text = Broker.readAll(table) else { continue }
            for line in text.split(separator: "\n").dropFirst() {
                let f = line.split(separator: " ")
                if f.count > 9, f[1].hasSuffix(suffix), f[3] == "0A" { inodes.insert(String(f[9])) }
            }
        }
        guard !inodes.isEmpty, let fds = try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/fd")
        else { return false }
        return fds.contains { fd in
            guard let target = try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/\(pid)/fd/\(fd)"),
                target.hasPrefix("socket:[")
            else { return false }
            return inodes.contains(String(target.dropFirst(8).dropLast()))
        }
    }

    /// A whole /proc file, read until end of file: its size reads as 0, and
    /// a single read returns one page (the first rows of a long socket table).
    static func readAll(_ path: String) -> String? {
        let fd = open(path, O_RDONLY)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 65536)
        while true {
            let n = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            if n < 0 && errno == EINTR { continue }
            guard n >= 0 else { return nil }
            if n == 0 { return String(decoding: bytes, as: UTF8.self) }
            bytes += chunk[0..<n]
        }
    }

    /// Five distinct ports that were free a moment ago.
    static func freePorts() -> (Int, Int, Int, Int, Int)? {
        var got: [Int] = []
        for _ in 0..<15 where got.count < 5 {
            if let p = freePort(), !got.contains(p) { got.append(p) }
        }
        return got.count == 5 ? (got[0], got[1], got[2], got[3], got[4]) : nil
    }

    deinit {
        stop()
        removeFiles()
    }

    var log: String { (try? String(contentsOfFile: logPath, encoding: .utf8)) ?? "" }

    /// SIGTERM, up to ~3 s of waiting, then SIGKILL. Idempotent.
    func stop() {
        guard !stopped else { return }
        stopped = true
        endChild(pid)
    }

    /// Removes the broker's config and log.
    func removeFiles() { try? FileManager.default.removeItem(atPath: directory) }

    static func executable() -> String? {
        var dirs = (ProcessInfo.processInfo.environment["PATH"] ?? "").split(separator: ":").map(String.init)
        dirs += ["/usr/sbin", "/usr/local/sbin", "/sbin"]
        for d in dirs where !d.isEmpty {
            let p = d + "/mosquitto"
            if access(p, X_OK) == 0 { return p }
        }
        return nil
    }

    /// A port that was free a moment ago: bind port 0, read it, close.
    static func freePort() -> Int? {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var addr = loopback(port: 0)
        let bound = withUnsafePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard bound == 0 else { return nil }
        var len = socklen_t(MemoryLayout<sockaddr_in>.size)
        let got = withUnsafeMutablePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &len) }
        }
        guard got == 0 else { return nil }
        return Int(UInt16(bigEndian: addr.sin_port))
    }

    /// True when something accepts TCP connections on 127.0.0.1:port.
    static func accepts(port: Int) -> Bool {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        var addr = loopback(port: port)
        let rc = withUnsafePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        return rc == 0
    }

    private static func loopback(port: Int) -> sockaddr_in {
        var addr = sockaddr_in()
        addr.sin_family = sa_family_t(AF_INET)
        addr.sin_port = UInt16(port).bigEndian
        addr.sin_addr.s_addr = inet_addr("127.0.0.1")
        return addr
    }
}

/// A fresh directory under the system's temp directory.
func makeTempDirectory(prefix: String) throws -> String {
    let base = ProcessInfo.processInfo.environment["TMPDIR"].flatMap { $0.isEmpty ? nil : $0 } ?? "/tmp"
    var template = Array("\(base)/\(prefix)-XXXXXX".utf8CString)
    let made = template.withUnsafeMutableBufferPointer { mkdtemp($0.baseAddress!) }
    guard made != nil else {
        throw Broker.StartError(description: "mkdtemp failed: \(String(cString: strerror(errno)))")
    }
    return String(cString: template)
}

extension String {
    /// The string with leading zeros up to `width` characters.
    fileprivate func leftPadded(to width: Int) -> String {
        String(repeating: "0", count: max(0, width - count)) + self
    }
}
