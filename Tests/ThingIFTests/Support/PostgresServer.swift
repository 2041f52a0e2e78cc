// SPDX-License-Identifier: Apache-2.0

import Foundation
import ThingIFHub
#if canImport(Glibc)
    import Glibc
#endif

/// A private PostgreSQL server for the tests, one per test process: initdb
/// in a temp directory, `postgres` on 127.0.0.1 on a free port (its unix
/// socket in that directory too), trust authentication for the `thingif`
/// superuser, fsync off. Each test takes a fresh database from it
/// (`createDatabase`). initdb and postgres refuse to run as root: as root
/// they run as the `postgres` system user (setpriv, so the PID is
/// postgres' own), the directory chowned to it.
///
/// It stops (SIGINT: fast shutdown, by its PID) when the test process
/// exits, and a watchdog stops it if the process dies without exiting.
/// Where PostgreSQL is not installed the tests that need it are skipped,
/// except in CI (CI=true), where that is a failure.
final class PostgresServer: @unchecked Sendable {
    struct Unavailable: Error, CustomStringConvertible {
        let description: String
    }

    let port: Int
    let directory: String
    private let bin: String
    private let pid: pid_t
    private let stopped = NSLock()
    private var isStopped = false
    static let user = "thingif"

    /// The folder of initdb and postgres: $THINGIF_PG_BIN, the newest
    /// /usr/lib/postgresql/N/bin (Debian, Ubuntu), or PATH.
    static let binDirectory: String? = {
        let env = ProcessInfo.processInfo.environment
        var candidates: [String] = []
        if let d = env["THINGIF_PG_BIN"], !d.isEmpty { candidates.append(d) }
        let versions = (try? FileManager.default.contentsOfDirectory(atPath: "/usr/lib/postgresql")) ?? []
        candidates += versions.compactMap(Int.init).sorted(by: >).map { "/usr/lib/postgresql/\($0)/bin" }
        candidates += (env["PATH"] ?? "").split(separator: ":").map(String.init)
        return candidates.first { access($0 + "/initdb", X_OK) == 0 && access($0 + "/postgres", X_OK) == 0 }
    }()

    /// CI must test PostgreSQL: there a missing server fails the tests.
    static let required = ProcessInfo.processInfo.environment["CI"] == "true"

    /// Whether the PostgreSQL tests run here (installed, or required).
    static let enabled = binDirectory != nil || required

    /// The process's server, started at the first use.
    static let shared: Result<PostgresServer, Error> = {
        let r = Result { try start() }
        if case .success = r { atexit { PostgresServer.stopShared() } }
        return r
    }()

    private static func stopShared() {
        if case .success(let s) = shared { s.stop() }
    }

    /// The shared server, or the reason it is missing.
    static func get() throws -> PostgresServer {
        expectOffPool("PostgreSQL")
        return try shared.get()
    }

    private static func start() throws -> PostgresServer {
        guard let bin = binDirectory else {
            throw Unavailable(
                description: "PostgreSQL is not installed (no initdb and postgres; scripts/install-deps.sh installs it)"
            )
        }
        var last: Error = Unavailable(description: "no attempt")
        for _ in 0..<3 {
            do { return try PostgresServer(bin: bin) } catch { last = error }
        }
        throw last
    }

    /// As root: run `exe` as the postgres user; otherwise as is.
    private static func command(_ exe: String, _ args: [String]) -> (String, [String]) {
        guard getuid() == 0 else { return (exe, args) }
        return ("/usr/bin/setpriv", ["--reuid=postgres", "--regid=postgres", "--init-groups", "--", exe] + args)
    }

    private init(bin: String) throws {
        guard let port = Broker.freePort() else { throw Unavailable(description: "no free port") }
        let dir = try makeTempDirectory(prefix: "thingif-pg")
        if getuid() == 0 {
            guard let pw = getpwnam("postgres") else {
                throw Unavailable(description: "running as root and there is no postgres user to run PostgreSQL as")
            }
            chown(dir, pw.pointee.pw_uid, pw.pointee.pw_gid)
        }
        chmod(dir, 0o700)
        let data = dir + "/data"
        let (initdb, initArgs) = Self.command(
            bin + "/initdb",
            ["-D", data, "-U", Self.user, "--auth=trust", "-E", "UTF8", "--no-locale", "--no-sync"])
        let status = try runChild(initdb, initArgs, logPath: dir + "/initdb.log", timeoutMs: 60_000)
        guard status == 0 else {
            let log = readText(dir + "/initdb.log")
            try? FileManager.default.removeItem(atPath: dir)
            throw Unavailable(description: "initdb failed (\(status)): \(log)")
        }
        let (postgres, args) = Self.command(
            bin + "/postgres",
            [
                "-D", data, "-h", "127.0.0.1", "-p", String(port), "-k", dir, "-c", "fsync=off",
                "-c", "synchronous_commit=off", "-c", "full_page_writes=off", "-c", "max_connections=200"
            ])
        let child = try spawnChild(postgres, args, logPath: dir + "/postgres.log")
        self.port = port
        self.bin = bin
        self.directory = dir
        self.pid = child
        // Up when it answers a query (bounded: 20 s).
        let up = poll(timeoutMs: 30_000) { [self] in
            var status: Int32 = 0
            if waitpid(child, &status, WNOHANG) == child { return true }
            return (try? psql("SELECT 1")) != nil
        }
        guard up, (try? psql("SELECT 1")) != nil else {
            let log = readText(dir + "/postgres.log")
            stop()
            throw Unavailable(description: "postgres did not start on port \(port): \(log)")
        }
        // If this process dies without running atexit, the server goes too.
        _ = try? spawnChild(
            "/bin/sh",
            ["-c", "while kill -0 \(getpid()) 2>/dev/null; do sleep 1; done; kill -INT \(child) 2>/dev/null"],
            logPath: "/dev/null")
    }

    /// The URL of a database on this server, as --db takes it. Its
    /// connect_timeout (30 s, over the hub's 5 s default) is for a CI machine
    /// whose two cores run the whole suite: a connection once took over 5 s.
    func url(_ database: String) -> String {
        "postgres://\(Self.user)@127.0.0.1:\(port)/\(database)?connect_timeout=30"
    }

    /// Runs one SQL statement with psql in `database`; returns its output
    /// (unaligned, tuples only).
    @discardableResult
    func psql(_ sql: String, database: String = "postgres") throws -> String {
        let out = directory + "/psql-\(randomHexString(6)).out"
        defer { unlink(out) }
        let status = try runChild(
            bin + "/psql", [url(database), "-v", "ON_ERROR_STOP=1", "-XAtq", "-c", sql], logPath: out,
            timeoutMs: 30_000)
        guard status == 0 else { throw Unavailable(description: "psql \(sql): \(readText(out))") }
        return readText(out)
    }

    /// A new empty database; returns its URL.
    func createDatabase() throws -> (name: String, url: String) {
        let name = "t_" + randomHexString(8)
        try psql("CREATE DATABASE \(name)")
        return (name, url(name))
    }

    /// Drops a database made by createDatabase (closing its connections).
    func dropDatabase(_ name: String) { _ = try? psql("DROP DATABASE IF EXISTS \(name) WITH (FORCE)") }

    /// Fast shutdown by PID, then the directory is removed. Idempotent.
    func stop() {
        stopped.lock()
        defer { stopped.unlock() }
        guard !isStopped else { return }
        isStopped = true
        endChild(pid, signal: SIGINT, timeoutMs: 10_000)
        try? FileManager.default.removeItem(atPath: directory)
    }
}

extension PostgresServer {
    /// A store on a fresh database, closed and the database dropped after `body`.
    func withStore<T>(_ body: (PostgresStore) throws -> T) throws -> T {
        let (name, url) = try createDatabase()
        defer { dropDatabase(name) }
        let store = try PostgresStore(url: url, secrets: .fastForTests)
        defer { store.close() }
        return try body(store)
    }

    /// Two stores on one fresh database, as two hubs sharing PostgreSQL
    /// have; both closed and the database dropped after `body`.
    func withTwoStores<T>(_ body: (PostgresStore, PostgresStore) throws -> T) throws -> T {
        let (name, url) = try createDatabase()
        defer { dropDatabase(name) }
        let a = try PostgresStore(url: url, secrets: .fastForTests)
        defer { a.close() }
        let b = try PostgresStore(url: url, secrets: .fastForTests)
        defer { b.close() }
        return try body(a, b)
    }
}
