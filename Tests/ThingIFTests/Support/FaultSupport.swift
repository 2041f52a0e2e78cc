// SPDX-License-Identifier: Apache-2.0

import Foundation
#if canImport(Glibc)
    import Glibc
#endif

func readText(_ path: String) -> String { (try? String(contentsOfFile: path, encoding: .utf8)) ?? "" }

/// The last `lines` lines of a log, for failure messages.
func tail(_ text: String, lines: Int = 60) -> String {
    text.split(separator: "\n", omittingEmptySubsequences: false).suffix(lines).joined(separator: "\n")
}

/// A mosquitto broker with persistence in its own directory, so that it can
/// be stopped (SIGTERM: it saves its database; SIGKILL: it saves nothing)
/// and started again on the same port with the sessions it had saved.
final class PersistentBroker {
    let port: Int
    let directory: String
    let logPath: String
    private var pid: pid_t?
    private(set) var restarts = 0

    init() throws {
        guard Broker.executable() != nil else { throw HarnessError("mosquitto not found on PATH or in /usr/sbin") }
        directory = try makeTempDirectory(prefix: "thingif-pbroker")
        logPath = directory + "/mosquitto.log"
        var lastError: Error = HarnessError("no attempt")
        for _ in 0..<3 {
            guard let p = Broker.freePort() else { continue }
            var child: pid_t?
            do {
                try PersistentBroker.launch(port: p, directory: directory, logPath: logPath, pid: &child)
                port = p
                pid = child
                return
            } catch {
                lastError = error
                unlink(directory + "/mosquitto.conf")  // made for that port
            }
        }
        try? FileManager.default.removeItem(atPath: directory)
        throw lastError
    }

    deinit {
        stop(signal: SIGTERM)
        try? FileManager.default.removeItem(atPath: directory)
    }

    var log: String { readText(logPath) }

    var adminUsername: String { BrokerSecrets.adminUsername }
    var adminPassword: String { BrokerSecrets.adminPassword }

    /// The first launch writes the secured configuration (with persistence)
    /// into `directory`; a restart reuses it, with the clients and roles the
    /// hub made since.
    private static func launch(port: Int, directory: String, logPath: String, pid: inout pid_t?) throws {
        let conf = directory + "/mosquitto.conf"
        if access(conf, F_OK) != 0 {
            let status = try runChild(
                "/bin/bash",
                [
                    BrokerSecrets.script, directory, "--port", String(port), "--persistence",
                    "--admin-user", BrokerSecrets.adminUsername,
                    "--admin-password", BrokerSecrets.adminPassword
                ],
                logPath: directory + "/setup.log")
            guard status == 0 else {
                throw HarnessError("make-broker-config.sh failed: \(readText(directory + "/setup.log"))")
            }
        }
        let child = try spawnChild(Broker.executable()!, ["-c", conf], logPath: logPath)
        pid = child
        let deadline = Date().addingTimeInterval(5)
        while !Broker.accepts(port: port) {
            var status: Int32 = 0
            if waitpid(child, &status, WNOHANG) == child {
                pid = nil
                throw HarnessError("mosquitto exited at start: \(tail(readText(logPath), lines: 10))")
            }
            if Date() > deadline {
                endChild(child, signal: SIGKILL)
                pid = nil
                throw HarnessError("mosquitto did not listen on \(port) within 5 s")
            }
            usleep(10_000)
        }
    }

    /// Stops the broker with `signal` (bounded; SIGKILL after 3 s).
    func stop(signal: Int32) {
        guard let p = pid else { return }
        endChild(p, signal: signal)
        pid = nil
    }

    /// Starts the broker again on the same port and directory, retrying
    /// while the port is being released.
    func start() throws {
        guard pid == nil else { return }
        var lastError: Error = HarnessError("no attempt")
        for _ in 0..<20 {
            do {
                try PersistentBroker.launch(port: port, directory: directory, logPath: logPath, pid: &pid)
                restarts += 1
                return
            } catch {
                lastError = error
                usleep(100_000)
            }
        }
        throw lastError
    }
}

/// The C appliance (examples-c/aircon.c, as the test appliance
/// tests-c/aircon_test.c with its test flags), or another program this
/// package builds next to the tests (`program`, e.g. the gateway example
/// examples-c/lamps.c), as a separate process, restartable on the same
/// storage directory; its output goes to one log file.
final class ApplianceProcess {
    let executable: String
    let args: [String]
    let logPath: String
    let stdinPath: String
    private(set) var pid: pid_t?
    private(set) var starts = 0

    init(program: String = "aircon_test", args: [String], logPath: String, stdinPath: String = "/dev/null") throws {
        guard let exe = ApplianceProcess.locate(program) else {
            throw HarnessError(
                "\(program) was not found next to the test bundle (swift build --build-tests builds it)")
        }
        executable = exe
        self.args = args
        self.logPath = logPath
        self.stdinPath = stdinPath
    }

    deinit { stop() }

    /// The programs are built by this package into the same directory as the
    /// test executable (see Package.swift).
    static func locate(_ program: String = "aircon_test") -> String? {
        var candidates: [String] = []
        if let exe = try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe") {
            var dir = (exe as NSString).deletingLastPathComponent
            // On macOS-style bundles the executable sits deeper; walk up a little.
            for _ in 0..<4 {
                candidates.append(dir + "/" + program)
                dir = (dir as NSString).deletingLastPathComponent
            }
        }
        return candidates.first { access($0, X_OK) == 0 }
    }

    func start() throws {
        guard pid == nil else { return }
        pid = try spawnChild(executable, args, logPath: logPath, stdinPath: stdinPath)
        starts += 1
    }

    /// SIGKILL: no clean-up, no will-with-disconnect; the ledger and outbox
    /// stay as the crash left them.
    func kill9() {
        guard let p = pid else { return }
        endChild(p, signal: SIGKILL)
        pid = nil
    }

    /// SIGTERM (aircon stops its loop and destroys the handle), bounded.
    func stop() {
        guard let p = pid else { return }
        endChild(p, signal: SIGTERM)
        pid = nil
    }

    /// True while the child runs (reaps it when it exited).
    var isRunning: Bool {
        guard let p = pid else { return false }
        var status: Int32 = 0
        if waitpid(p, &status, WNOHANG) == p {
            pid = nil
            return false
        }
        return true
    }

    var log: String { readText(logPath) }
}
