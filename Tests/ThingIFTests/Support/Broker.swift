import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// A private mosquitto broker on 127.0.0.1, one per test.
///
/// It is spawned with posix_spawn and an empty signal mask: Swift Testing's
/// workers block SIGTERM, and a child would inherit that and ignore stop().
final class Broker {
    struct StartError: Error, CustomStringConvertible {
        let description: String
    }

    let port: Int
    let directory: String
    let logPath: String
    private(set) var pid: pid_t
    private var stopped = false

    /// Starts a broker on a free port, retrying with a new port when the
    /// chosen one was taken meanwhile; or on `port` (e.g. to restart a
    /// stopped broker), retrying while the port is still being released.
    /// With `passwordFile` (made by mosquitto_passwd), only its users may
    /// connect.
    static func start(port: Int? = nil, passwordFile: String? = nil) throws -> Broker {
        var lastError: Error = StartError(description: "no attempt")
        for _ in 0..<3 {
            do { return try Broker(port: port, passwordFile: passwordFile) } catch { lastError = error }
            if port != nil { usleep(200_000) }
        }
        throw lastError
    }

    private init(port wanted: Int?, passwordFile: String?) throws {
        guard let exe = Broker.executable() else {
            throw StartError(description: "mosquitto not found on PATH or in /usr/sbin")
        }
        guard let port = wanted ?? Broker.freePort() else { throw StartError(description: "no free port") }
        let dir = try makeTempDirectory(prefix: "thingif-broker")
        let conf = dir + "/mosquitto.conf"
        let log = dir + "/mosquitto.log"
        let text = """
            listener \(port) 127.0.0.1
            \(passwordFile.map { "allow_anonymous false\npassword_file \($0)" } ?? "allow_anonymous true")
            persistence false
            log_dest stdout
            log_type error
            log_type warning
            log_type notice

            """
        do {
            try text.write(toFile: conf, atomically: true, encoding: .utf8)
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
        self.port = port
        self.directory = dir
        self.logPath = log
        self.pid = child

        // Wait (bounded) until the port accepts connections.
        let deadline = Date().addingTimeInterval(5)
        while !Broker.accepts(port: port) {
            var status: Int32 = 0
            if waitpid(child, &status, WNOHANG) == child {
                stopped = true
                throw StartError(description: "mosquitto exited at start: \(self.log)")
            }
            if Date() > deadline {
                stop()
                throw StartError(description: "mosquitto did not listen on \(port) within 5 s: \(self.log)")
            }
            usleep(20_000)
        }
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
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
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
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
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
    guard made != nil else { throw Broker.StartError(description: "mkdtemp failed: \(String(cString: strerror(errno)))") }
    return String(cString: template)
}
