// SPDX-License-Identifier: Apache-2.0

import CPostgres
import ThingIF
#if canImport(Glibc)
    import Glibc
#endif

/// A failed PostgreSQL call: the SQLSTATE (empty when there is none, e.g.
/// the server cannot be reached) and the server's or libpq's message.
public struct PostgresError: Error, Sendable, CustomStringConvertible {
    public var sqlState: String
    public var message: String
    public var description: String {
        sqlState.isEmpty ? "PostgreSQL: \(message)" : "PostgreSQL error \(sqlState): \(message)"
    }

    /// 23505: a UNIQUE or PRIMARY KEY constraint refused the row.
    var isUniqueViolation: Bool { sqlState == "23505" }
}

/// A row of a PostgreSQL result (text format): columns by index.
struct PGRow: StoreRow {
    let result: OpaquePointer
    let row: Int32

    func isNull(_ i: Int32) -> Bool { PQgetisnull(result, row, i) != 0 }

    func text(_ i: Int32) -> String? {
        guard !isNull(i), let p = PQgetvalue(result, row, i) else { return nil }
        return String(cString: p)
    }

    func int(_ i: Int32) -> Int64 { text(i).flatMap { Int64($0) } ?? 0 }

    /// BYTEA in the text format's hex form (`\\x` then two digits a byte,
    /// PostgreSQL's default bytea_output), decoded without a copy as text.
    func bytes(_ i: Int32) -> [UInt8] {
        guard !isNull(i), let p = PQgetvalue(result, row, i) else { return [] }
        let n = Int(PQgetlength(result, row, i))
        return p.withMemoryRebound(to: UInt8.self, capacity: n) { u in
            guard n >= 2, u[0] == UInt8(ascii: "\\"), u[1] == UInt8(ascii: "x") else { return [] }
            var out = [UInt8](repeating: 0, count: (n - 2) / 2)
            for k in 0..<out.count { out[k] = PGRow.nibble(u[2 + 2 * k]) << 4 | PGRow.nibble(u[3 + 2 * k]) }
            return out
        }
    }

    private static func nibble(_ c: UInt8) -> UInt8 {
        switch c {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): return c - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): return c - UInt8(ascii: "a") + 10
        default: return c &- UInt8(ascii: "A") &+ 10
        }
    }
}

/// The notice processor: the server's NOTICEs ("relation exists, skipping")
/// are not the hub's output.
private let ignoreNotices: PQnoticeProcessor = { _, _ in }

/// One libpq connection. Not thread-safe by itself: PostgresStore keeps it
/// behind a lock. SQL text is always a constant with `$1…` placeholders;
/// values travel only as parameters, never inside the text. Each distinct
/// statement is prepared once per connection (parsed and analysed once) and
/// then only executed (PQexecPrepared): a command's dozen statements cost
/// PostgreSQL a parse each otherwise.
final class PostgresConnection: SQLConnection {
    private var conn: OpaquePointer?
    /// The statements prepared on this connection: SQL text → name.
    private var prepared: [String: String] = [:]
    /// The number in the next prepared statement's name.
    private var nextName = 0
    /// Beyond this many distinct statements (e.g. IN lists of every length)
    /// the rest run unprepared, so the cache stays bounded.
    static let maxPrepared = 256
    /// host:port/dbname, for messages (never the password).
    let target: String
    /// The statements sent and waited for (LISTEN's wait aside): a round
    /// trip each.
    private(set) var roundTrips = 0
    /// How many of them the last `sharedTransaction` took, its COMMIT or
    /// ROLLBACK included (and the first use's PQprepare of a statement).
    private(set) var lastSharedRoundTrips = 0
    /// How many statements are prepared on this connection.
    var preparedCount: Int { prepared.count }
    /// The server process of this connection (no round trip).
    var backendPID: Int32 { conn.map { PQbackendPID($0) } ?? 0 }

    /// Connects to `url` (postgres://user[:password]@host[:port]/dbname[?…],
    /// or any libpq connection string), waiting at most `timeout` seconds.
    init(url: String, timeout: Int = 5) throws {
        // The URL is expanded by libpq (expand_dbname); connect_timeout comes
        // first so that a URL's own connect_timeout wins.
        let keys = ["connect_timeout", "application_name", "dbname"]
        let values = [String(timeout), "thingif-hub", url]
        let c = Self.withCStrings(keys) { k in
            Self.withCStrings(values) { v in PQconnectdbParams(k, v, 1) }
        }
        let host = c.flatMap { PQhost($0) }.map { String(cString: $0) } ?? "?"
        let port = c.flatMap { PQport($0) }.map { String(cString: $0) } ?? "?"
        let db = c.flatMap { PQdb($0) }.map { String(cString: $0) } ?? "?"
        target = "\(host):\(port)/\(db)"
        guard let c, PQstatus(c) == CONNECTION_OK else {
            let message = c.map { Self.trimmed(PQerrorMessage($0)) } ?? "out of memory"
            if let c { PQfinish(c) }
            throw PostgresError(sqlState: "", message: "cannot connect to \(target): \(message)")
        }
        PQsetNoticeProcessor(c, ignoreNotices, nil)
        conn = c
    }

    deinit { close() }

    func close() {
        if let conn { PQfinish(conn) }
        conn = nil
        prepared = [:]
    }

    /// Whether the connection is closed or known to be broken.
    var isBroken: Bool { conn.map { PQstatus($0) == CONNECTION_BAD } ?? true }

    /// Re-establishes a connection that broke (the server restarted, the
    /// network dropped). A statement that failed is not repeated: the caller
    /// gets its error, the next call works again.
    func resetIfBroken() {
        if let conn, PQstatus(conn) == CONNECTION_BAD {
            PQreset(conn)
            prepared = [:]  // a new session has none of them
        }
    }

    private static func trimmed(_ p: UnsafePointer<CChar>?) -> String {
        guard let p else { return "" }
        var s = String(cString: p)
        while s.last == "\n" || s.last == " " { s.removeLast() }
        return s
    }

    private static func withCStrings<R>(_ strings: [String?], _ body: ([UnsafePointer<CChar>?]) -> R) -> R {
        var pointers: [UnsafeMutablePointer<CChar>?] = strings.map { $0.map { strdup($0) } ?? nil }
        defer { for p in pointers { free(p) } }
        pointers.append(nil)
        return body(pointers.map { $0.map { UnsafePointer($0) } })
    }

    /// `sql` with each `?` placeholder (the statements SQLStore shares
    /// with SQLite) numbered as PostgreSQL wants them: $1, $2 … Question
    /// marks inside quotes are left alone; SQL without any is returned as is.
    static func numbered(_ sql: String) -> String {
        guard sql.utf8.contains(UInt8(ascii: "?")) else { return sql }
        var out = ""
        var n = 0
        var quote: Character?
        for ch in sql {
            if let q = quote {
                if ch == q { quote = nil }
                out.append(ch)
            } else if ch == "'" || ch == "\"" {
                quote = ch
                out.append(ch)
            } else if ch == "?" {
                n += 1
                out += "$\(n)"
            } else {
                out.append(ch)
            }
        }
        return out
    }

    /// Runs `sql` with its parameters (text format; nil is NULL) and hands
    /// the result to `body` while it is alive.
    private func execute<R>(_ sql: String, _ values: [SQLValue], _ body: (OpaquePointer) throws -> R) throws -> R {
        guard let conn else { throw PostgresError(sqlState: "", message: "the connection is closed") }
        let texts: [String?] = values.map {
            switch $0 {
            case .text(let s): return s
            case .int(let i): return i.map { String($0) }
            case .bytes(let b): return "\\x" + LibCrypto.hex(b)
            }
        }
        let name = try statement(sql, conn)
        let begin = shared.beginPending
        roundTrips += 1
        defer { if begin { begun(conn) } }
        let result = Self.withCStrings(texts) { params in
            if let name {
                if begin {
                    return afterBegin(conn) {
                        PQsendQueryPrepared(conn, name, Int32(values.count), params, nil, nil, 0)
                    }
                }
                return PQexecPrepared(conn, name, Int32(values.count), params, nil, nil, 0)
            }
            if begin {
                return afterBegin(conn) {
                    PQsendQueryParams(conn, Self.numbered(sql), Int32(values.count), nil, params, nil, nil, 0)
                }
            }
            return PQexecParams(conn, Self.numbered(sql), Int32(values.count), nil, params, nil, nil, 0)
        }
        do {
            return try checked(result, conn, body)
        } catch let e as PostgresError where name != nil && Self.voidsPlan(e.sqlState) {
            // Another hub changed the schema under a prepared statement: prepare it anew next time.
            prepared[sql] = nil
            roundTrips += 1
            PQclear(PQexec(conn, "DEALLOCATE " + name!))
            throw e
        }
    }

    /// The prepared statement's name for `sql`, preparing it on first use;
    /// nil when the cache is full (the statement then runs unprepared).
    private func statement(_ sql: String, _ conn: OpaquePointer) throws -> String? {
        if let name = prepared[sql] { return name }
        guard prepared.count < Self.maxPrepared else { return nil }
        // A name never used on this connection (a plan voided and dropped
        // leaves the count lower than the names taken).
        let name = "thingif_\(nextName)"
        nextName += 1
        roundTrips += 1
        _ = try checked(PQprepare(conn, name, Self.numbered(sql), 0, nil), conn) { _ in () }
        prepared[sql] = name
        return name
    }

    /// 0A000: "cached plan must not change result type"; 26000: the
    /// statement is gone (DEALLOCATE ALL, a pooler).
    private static func voidsPlan(_ state: String) -> Bool { state == "0A000" || state == "26000" }

    /// The result when it succeeded, handed to `body` and cleared after;
    /// else the server's error.
    private func checked<R>(_ result: OpaquePointer?, _ conn: OpaquePointer, _ body: (OpaquePointer) throws -> R)
        throws -> R
    {
        guard let result else {
            throw PostgresError(sqlState: "", message: Self.trimmed(PQerrorMessage(conn)))
        }
        defer { PQclear(result) }
        let status = PQresultStatus(result)
        guard status == PGRES_COMMAND_OK || status == PGRES_TUPLES_OK else {
            let state = PQresultErrorField(result, Int32(UInt8(ascii: "C"))).map { String(cString: $0) } ?? ""
            let message = Self.trimmed(PQresultErrorMessage(result))
            throw PostgresError(
                sqlState: state, message: message.isEmpty ? Self.trimmed(PQerrorMessage(conn)) : message)
        }
        return try body(result)
    }

    /// Runs SQL without parameters or results (schema, BEGIN/COMMIT), in
    /// the simple protocol: one round trip, nothing prepared.
    func exec(_ sql: String) throws {
        guard let conn else { throw PostgresError(sqlState: "", message: "the connection is closed") }
        // A shared transaction's first statement: its BEGIN in the same string.
        let begin = shared.beginPending
        roundTrips += 1
        defer { if begin { begun(conn) } }
        _ = try checked(PQexec(conn, begin ? "BEGIN; " + sql : sql), conn) { _ in () }
    }

    /// BEGIN and the one statement `send` queues, in one round trip
    /// (libpq's pipeline mode, then back to the usual one): the statement's
    /// result, or BEGIN's when BEGIN failed; nil when the connection did.
    private func afterBegin(_ conn: OpaquePointer, _ send: () -> Int32) -> OpaquePointer? {
        guard PQenterPipelineMode(conn) == 1 else { return nil }
        var begin: OpaquePointer?
        var statement: OpaquePointer?
        if PQsendQueryParams(conn, "BEGIN", 0, nil, nil, nil, nil, 0) == 1 {
            let sent = send() == 1
            if PQpipelineSync(conn) == 1 {
                // BEGIN's result, a NULL, the statement's (or PIPELINE_ABORTED
                // after a failed BEGIN), a NULL, then the sync's.
                var ends = 0
                while ends <= 2 {
                    guard let r = PQgetResult(conn) else {
                        ends += 1
                        if PQstatus(conn) == CONNECTION_BAD { break }
                        continue
                    }
                    if PQresultStatus(r) == PGRES_PIPELINE_SYNC {
                        PQclear(r)
                        break
                    }
                    if begin == nil {
                        begin = r
                    } else if statement == nil && sent {
                        statement = r
                    } else {
                        PQclear(r)
                    }
                }
            }
        }
        if PQexitPipelineMode(conn) != 1 {
            // Something is still queued: the session cannot be trusted.
            PQreset(conn)
            prepared = [:]
            if let begin { PQclear(begin) }
            if let statement { PQclear(statement) }
            return nil
        }
        if let begin, PQresultStatus(begin) != PGRES_COMMAND_OK {
            if let statement { PQclear(statement) }
            return begin
        }
        if let begin { PQclear(begin) }
        return statement
    }

    /// Runs a statement with bound values, calling `row` for every result row.
    func query(_ sql: String, _ values: [SQLValue] = [], row: (PGRow) throws -> Void = { _ in }) throws {
        try execute(sql, values) { result in
            for i in 0..<PQntuples(result) { try row(PGRow(result: result, row: i)) }
        }
    }

    /// Runs a statement; returns the rows it changed.
    @discardableResult
    func run(_ sql: String, _ values: [SQLValue] = []) throws -> Int {
        try execute(sql, values) { result in PQcmdTuples(result).flatMap { Int(String(cString: $0)) } ?? 0 }
    }

    /// The payloads of the notifications (LISTEN) that arrived, waiting up
    /// to `timeoutMs` for the first; throws when the connection broke.
    func notifications(timeoutMs: Int32) throws -> [String] {
        guard let conn else { throw PostgresError(sqlState: "", message: "the connection is closed") }
        var out = Self.drain(conn)
        if out.isEmpty {
            var p = pollfd(fd: PQsocket(conn), events: Int16(POLLIN), revents: 0)
            guard p.fd >= 0 else { throw PostgresError(sqlState: "", message: "the connection has no socket") }
            if Glibc.poll(&p, 1, timeoutMs) > 0, PQconsumeInput(conn) == 0 {
                throw PostgresError(sqlState: "", message: Self.trimmed(PQerrorMessage(conn)))
            }
            out = Self.drain(conn)
        }
        if out.isEmpty, PQstatus(conn) == CONNECTION_BAD {
            throw PostgresError(sqlState: "", message: "the connection broke")
        }
        return out
    }

    private static func drain(_ conn: OpaquePointer) -> [String] {
        var out: [String] = []
        while let n = PQnotifies(conn) {
            out.append(n.pointee.extra.map { String(cString: $0) } ?? "")
            PQfreemem(n)
        }
        return out
    }

    /// Runs `body` in a transaction; rolls back when it throws. Inside
    /// `sharedTransaction` it is part of that one, with no statement of its
    /// own, and a throw spoils the whole of it.
    func transaction<R>(_ body: () throws -> R) throws -> R {
        if shared.open {
            do { return try body() } catch {
                spoil()
                throw error
            }
        }
        try exec("BEGIN")
        do {
            let r = try body()
            try exec("COMMIT")
            return r
        } catch {
            rollbackIfOpen()
            throw error
        }
    }

    /// Whether `sharedTransaction` runs, whether a call in it failed, and
    /// whether its BEGIN is still to be sent (with its first statement).
    private var shared: (open: Bool, spoiled: Bool, beginPending: Bool) = (false, false, false)

    /// After a shared transaction's first statement, which carried its
    /// BEGIN: the transaction is open, or the run is spoiled and the next
    /// statement carries BEGIN again, so that none runs outside it (and the
    /// run is undone at its end).
    private func begun(_ conn: OpaquePointer) {
        let status = PQtransactionStatus(conn)
        if status == PQTRANS_INTRANS || status == PQTRANS_INERROR {
            shared.beginPending = false
        } else {
            spoil()
        }
    }

    /// Runs `body` in one transaction that each `transaction` in it joins.
    /// They take no savepoints (a round trip each), so a call in it that
    /// fails (`spoil()`, or any statement the server refused) undoes all of
    /// it: `.undone`, and nothing is stored. BEGIN goes with the first
    /// statement, in its round trip; a body that ran none has nothing to
    /// commit. Throws when the connection is closed.
    func sharedTransaction(_ body: () -> Void) throws -> OneTransaction {
        guard conn != nil else { throw PostgresError(sqlState: "", message: "the connection is closed") }
        let start = roundTrips
        defer { lastSharedRoundTrips = roundTrips - start }
        shared = (true, false, true)
        body()
        let (spoiled, unsent) = (shared.spoiled, shared.beginPending)
        shared = (false, false, false)
        if unsent && !spoiled { return .committed }
        guard let conn, !spoiled, PQtransactionStatus(conn) == PQTRANS_INTRANS else {
            rollbackIfOpen()
            return .undone
        }
        // A COMMIT that fails (a deferred constraint, the connection) rolls back.
        roundTrips += 1
        let result = PQexec(conn, "COMMIT")
        defer { PQclear(result) }
        let committed =
            result != nil && PQresultStatus(result) == PGRES_COMMAND_OK
            && PQcmdStatus(result).map { String(cString: $0) } == "COMMIT"
        if !committed { rollbackIfOpen() }
        return committed ? .committed : .failed
    }

    /// Marks the `sharedTransaction` this connection runs as failed (no-op outside one).
    func spoil() {
        if shared.open { shared.spoiled = true }
    }

    private func rollbackIfOpen() {
        if let conn, PQtransactionStatus(conn) != PQTRANS_IDLE {
            roundTrips += 1
            PQclear(PQexec(conn, "ROLLBACK"))
        }
    }
}

/// A connection of its own that LISTENs and a thread that hands every
/// notification's payload to `handler`, until stop(). A broken connection
/// is re-established (and LISTENs again); notifications sent meanwhile are
/// lost.
final class PostgresListener: @unchecked Sendable {
    private let connection: PostgresConnection
    private let listenSQL: String
    private let handler: @Sendable (String) -> Void
    private let state = Locked<(stop: Bool, thread: pthread_t?)>((false, nil))

    /// `listenSQL` is a constant `LISTEN channel` statement.
    init(url: String, listenSQL: String, handler: @escaping @Sendable (String) -> Void) throws {
        connection = try PostgresConnection(url: url)
        self.listenSQL = listenSQL
        self.handler = handler
        try connection.exec(listenSQL)
    }

    /// Starts the thread; false when it cannot.
    func start() -> Bool {
        state.withLock { s -> Bool in
            guard let tid = startThread({ self.run() }) else { return false }
            s.thread = tid
            return true
        }
    }

    private func run() {
        while !state.withLock({ $0.stop }) {
            do {
                for payload in try connection.notifications(timeoutMs: 100) { handler(payload) }
            } catch {
                usleep(200_000)
                connection.resetIfBroken()
                try? connection.exec(listenSQL)
            }
        }
        connection.close()
    }

    /// Stops the thread and waits for it (at most one wait of 100 ms, or a
    /// reconnection's timeout). Idempotent.
    func stop() {
        let t = state.withLock { s -> pthread_t? in
            s.stop = true
            defer { s.thread = nil }
            return s.thread
        }
        if let t { pthread_join(t, nil) }
    }
}
