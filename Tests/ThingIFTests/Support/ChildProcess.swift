// SPDX-License-Identifier: Apache-2.0

import Foundation
#if canImport(Glibc)
    import Glibc
#endif

/// Starts a child process with posix_spawn, an empty signal mask and default
/// SIGTERM/SIGINT handling (Swift Testing's workers block SIGTERM, and a
/// child would inherit that), stdin from `stdinPath` (/dev/null unless
/// given: a FIFO the test writes to) and stdout + stderr appended to
/// `logPath`. With `environment`, the child gets exactly those
/// variables plus PATH, HOME and LD_LIBRARY_PATH; without, this process's.
func spawnChild(
    _ exe: String, _ args: [String], environment: [String: String]? = nil,
    logPath: String, stdinPath: String = "/dev/null"
) throws -> pid_t {
    var attr = posix_spawnattr_t()
    posix_spawnattr_init(&attr)
    defer { posix_spawnattr_destroy(&attr) }
    var empty = sigset_t()
    sigemptyset(&empty)
    posix_spawnattr_setsigmask(&attr, &empty)
    var defaults = sigset_t()
    sigemptyset(&defaults)
    sigaddset(&defaults, SIGTERM)
    sigaddset(&defaults, SIGINT)
    sigaddset(&defaults, SIGPIPE)
    posix_spawnattr_setsigdefault(&attr, &defaults)
    posix_spawnattr_setflags(&attr, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF))

    var actions = posix_spawn_file_actions_t()
    posix_spawn_file_actions_init(&actions)
    defer { posix_spawn_file_actions_destroy(&actions) }
    posix_spawn_file_actions_addopen(&actions, 0, stdinPath, O_RDONLY, 0)
    posix_spawn_file_actions_addopen(&actions, 1, logPath, O_WRONLY | O_CREAT | O_APPEND, 0o644)
    posix_spawn_file_actions_adddup2(&actions, 1, 2)

    var argv: [UnsafeMutablePointer<CChar>?] = ([exe] + args).map { strdup($0) } + [nil]
    var envp: [UnsafeMutablePointer<CChar>?] = []
    if var env = environment {
        let inherited = ProcessInfo.processInfo.environment
        for key in ["PATH", "HOME", "LD_LIBRARY_PATH"] where env[key] == nil { env[key] = inherited[key] }
        envp = env.map { strdup("\($0.key)=\($0.value)") } + [nil]
    }
    defer { for p in argv + envp { free(p) } }
    var child: pid_t = 0
    let rc =
        envp.isEmpty
        ? posix_spawn(&child, exe, &actions, &attr, &argv, environ)
        : posix_spawn(&child, exe, &actions, &attr, &argv, &envp)
    guard rc == 0 else { throw HarnessError("posix_spawn \(exe) failed: \(String(cString: strerror(rc)))") }
    return child
}

/// Sends `signal` and waits up to `timeoutMs` for the child to exit; then
/// SIGKILL and another bounded wait. True when the child was reaped.
@discardableResult
func endChild(_ pid: pid_t, signal: Int32 = SIGTERM, timeoutMs: Int = 3000) -> Bool {
    expectOffPool("Ending a child process")
    var status: Int32 = 0
    if waitpid(pid, &status, WNOHANG) == pid { return true }
    kill(pid, signal)
    for _ in 0..<max(1, timeoutMs / 10) {
        if waitpid(pid, &status, WNOHANG) == pid { return true }
        usleep(10_000)
    }
    kill(pid, SIGKILL)
    for _ in 0..<300 {
        if waitpid(pid, &status, WNOHANG) == pid { return true }
        usleep(10_000)
    }
    return false
}

/// Runs a child to its end (bounded by `timeoutMs`; killed after that) and
/// returns its exit status, or -1 when it did not exit normally.
func runChild(_ exe: String, _ args: [String], logPath: String, timeoutMs: Int = 30_000) throws -> Int32 {
    expectOffPool("Running a child process")
    let pid = try spawnChild(exe, args, logPath: logPath)
    var status: Int32 = 0
    for _ in 0..<max(1, timeoutMs / 5) {
        if waitpid(pid, &status, WNOHANG) == pid {
            // WIFEXITED / WEXITSTATUS, which Swift does not import.
            return (status & 0x7f) == 0 ? (status >> 8) & 0xff : -1
        }
        usleep(5_000)
    }
    endChild(pid, signal: SIGKILL)
    return -1
}

/// What an end-to-end test starts: a broker, a scratch folder and child
/// processes (hub, appliances, CLI watchers). `end()`, from a `defer`, ends
/// the children newest first, then stops the broker and removes the files.
final class ProcessScene {
    let broker: Broker
    let root: String
    var children: [pid_t] = []

    init(prefix: String) throws {
        broker = try Broker.start()
        do {
            root = try makeTempDirectory(prefix: prefix)
        } catch {
            broker.stop()
            broker.removeFiles()
            throw error
        }
    }

    func end() {
        for pid in children.reversed() { _ = endChild(pid) }
        broker.stop()
        broker.removeFiles()
        try? FileManager.default.removeItem(atPath: root)
    }
}
