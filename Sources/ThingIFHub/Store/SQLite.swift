// SPDX-License-Identifier: Apache-2.0

import CSQLite

/// A failed SQLite call: the result code and the connection's message.
public struct SQLiteError: Error, Sendable, CustomStringConvertible {
    public var code: Int32
    public var message: String
    public var description: String { "SQLite error \(code): \(message)" }
}

/// SQLITE_TRANSIENT: SQLite copies bound text before the call returns.
private let transient = unsafeBitCast(-1, to: sqlite3_destructor_type.self)

/// A value bound to a `?` parameter.
enum SQLValue {
    case text(String?)
    case int(Int64?)
    /// A BLOB (SQLite) or BYTEA (PostgreSQL, sent as its hex text form).
    case bytes([UInt8])
}

/// A row being read: columns by index.
struct SQLRow: StoreRow {
    let stmt: OpaquePointer

    func text(_ i: Int32) -> String? {
        guard sqlite3_column_type(stmt, i) != SQLITE_NULL, let p = sqlite3_column_text(stmt, i) else { return nil }
        let n = Int(sqlite3_column_bytes(stmt, i))
        return String(decoding: UnsafeBufferPointer(start: p, count: n), as: UTF8.self)
    }

    func int(_ i: Int32) -> Int64 { sqlite3_column_int64(stmt, i) }

    func isNull(_ i: Int32) -> Bool { sqlite3_column_type(stmt, i) == SQLITE_NULL }

    func bytes(_ i: Int32) -> [UInt8] {
        guard let p = sqlite3_column_blob(stmt, i) else { return [] }
        let n = Int(sqlite3_column_bytes(stmt, i))
        return Array(UnsafeRawBufferPointer(start: p, count: n))
    }
}

/// One SQLite connection with its prepared statements. Not thread-safe by
/// itself: SQLiteStore keeps it behind a lock. SQL text is always a constant;
/// values travel only as bound parameters.
final class SQLiteConnection: SQLConnection {
    private var db: OpaquePointer?
    private var statements: [String: OpaquePointer] = [:]
    private var checkpointer: SQLiteCheckpointer?

    init(path: String, busyTimeoutMs: Int32 = 5000) throws {
        let flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_FULLMUTEX
        var handle: OpaquePointer?
        let rc = sqlite3_open_v2(path, &handle, flags, nil)
        guard rc == SQLITE_OK, let handle else {
            let message = handle.map { String(cString: sqlite3_errmsg($0)) } ?? String(cString: sqlite3_errstr(rc))
            sqlite3_close_v2(handle)
            throw SQLiteError(code: rc, message: "cannot open \(path): \(message)")
        }
        db = handle
        sqlite3_extended_result_codes(handle, 1)
        sqlite3_busy_timeout(handle, busyTimeoutMs)
    }

    deinit { close() }

    func close() {
        for (_, s) in statements { sqlite3_finalize(s) }
        statements = [:]
        if let db { sqlite3_close_v2(db) }
        db = nil
        checkpointer = nil
    }

    private func error(_ rc: Int32, _ context: String) -> SQLiteError {
        let message = db.map { String(cString: sqlite3_errmsg($0)) } ?? String(cString: sqlite3_errstr(rc))
        return SQLiteError(code: rc, message: "\(context): \(message)")
    }

    /// Runs SQL without parameters or results (schema, pragmas).
    func exec(_ sql: String) throws {
        guard let db else { throw SQLiteError(code: SQLITE_MISUSE, message: "the connection is closed") }
        let rc = sqlite3_exec(db, sql, nil, nil, nil)
        guard rc == SQLITE_OK else { throw error(rc, sql) }
    }

    private func prepared(_ sql: String) throws -> OpaquePointer {
        if let s = statements[sql] { return s }
        guard let db else { throw SQLiteError(code: SQLITE_MISUSE, message: "the connection is closed") }
        var stmt: OpaquePointer?
        let rc = sqlite3_prepare_v3(db, sql, -1, UInt32(SQLITE_PREPARE_PERSISTENT), &stmt, nil)
        guard rc == SQLITE_OK, let stmt else { throw error(rc, "prepare \(sql)") }
        statements[sql] = stmt
        return stmt
    }

    private func bind(_ stmt: OpaquePointer, _ values: [SQLValue]) throws {
        for (n, v) in values.enumerated() {
            let i = Int32(n + 1)
            let rc: Int32
            switch v {
            case .text(nil), .int(nil):
                rc = sqlite3_bind_null(stmt, i)
            case .int(let x?):
                rc = sqlite3_bind_int64(stmt, i, x)
            case .bytes(let b):
                // A zero-length BLOB, not NULL, for an empty array.
                rc = b.withUnsafeBytes { buf in
                    sqlite3_bind_blob(
                        stmt, i, buf.baseAddress ?? UnsafeRawPointer(bitPattern: 1), Int32(buf.count), transient)
                }
            case .text(var s?):
                rc = s.withUTF8 { buf in
                    // An empty buffer may have no address, which SQLite would bind as NULL.
                    guard let base = buf.baseAddress, buf.count > 0 else {
                        return sqlite3_bind_text(stmt, i, "", 0, transient)
                    }
                    return base.withMemoryRebound(to: CChar.self, capacity: buf.count) {
                        sqlite3_bind_text(stmt, i, $0, Int32(buf.count), transient)
                    }
                }
            }
            guard rc == SQLITE_OK else { throw error(rc, "bind") }
        }
    }

    /// Runs a statement with bound values, calling `row` for every result row.
    func query(_ sql: String, _ values: [SQLValue] = [], row: (SQLRow) throws -> Void = { _ in }) throws {
        let stmt = try prepared(sql)
        defer {
            sqlite3_reset(stmt)
            sqlite3_clear_bindings(stmt)
        }
        try bind(stmt, values)
        while true {
            let rc = sqlite3_step(stmt)
            if rc == SQLITE_DONE { return }
            guard rc == SQLITE_ROW else { throw error(rc, sql) }
            try row(SQLRow(stmt: stmt))
        }
    }

    /// Runs a statement; returns the rows it changed.
    @discardableResult
    func run(_ sql: String, _ values: [SQLValue] = []) throws -> Int {
        try query(sql, values)
        return Int(sqlite3_changes(db))
    }

    /// Runs `body` in a write transaction (BEGIN IMMEDIATE takes the write
    /// lock up front, so the busy timeout applies here rather than mid-way);
    /// rolls back when it throws. Inside a transaction already (a request
    /// lane's, SQLiteStore.inOneTransaction) it is a savepoint of it, and
    /// rolls back to that.
    func transaction<R>(_ body: () throws -> R) throws -> R {
        let nested = db.map { sqlite3_get_autocommit($0) == 0 } ?? false
        // Prepared once like any statement (sqlite3_exec parses its text
        // on every call, and a lane's run takes two of these a message).
        try run(nested ? "SAVEPOINT call" : "BEGIN IMMEDIATE")
        do {
            let r = try body()
            try run(nested ? "RELEASE call" : "COMMIT")
            return r
        } catch {
            if nested {
                _ = try? run("ROLLBACK TO call")
                _ = try? run("RELEASE call")
            } else if let db, sqlite3_get_autocommit(db) == 0 {
                _ = try? run("ROLLBACK")
            }
            throw error
        }
    }

    /// Hands the WAL's checkpoints to `checkpointer` (SQLiteCheckpointer):
    /// SQLite's automatic checkpoint in the committing call is replaced by
    /// the hook, which only notes the log's size, unless the checkpointer's
    /// backstop says to copy here. The connection keeps the checkpointer
    /// alive for as long as the hook may call it.
    func checkpoint(by checkpointer: SQLiteCheckpointer) {
        guard let db else { return }
        self.checkpointer = checkpointer
        sqlite3_wal_hook(
            db,
            { context, db, name, frames in
                let c = Unmanaged<SQLiteCheckpointer>.fromOpaque(context!).takeUnretainedValue()
                if c.committed(frames: frames), let db {
                    c.checkpointAtBackstop { try? SQLiteConnection.passive(db, name) }
                }
                // The commit has happened either way; an error here would
                // only make its statement report one.
                return SQLITE_OK
            }, Unmanaged.passUnretained(checkpointer).toOpaque())
    }

    /// A PASSIVE checkpoint of the main database: copies what no reader
    /// still needs, waits for nobody. Returns the frames of the log copied.
    func checkpointPassive() throws -> Int32 {
        guard let db else { throw SQLiteError(code: SQLITE_MISUSE, message: "the connection is closed") }
        return try Self.passive(db, nil)
    }

    /// The checkpoint itself, for checkpointPassive and the WAL hook (which
    /// has only the handle).
    fileprivate static func passive(_ db: OpaquePointer, _ name: UnsafePointer<CChar>?) throws -> Int32 {
        var log: Int32 = 0
        var copied: Int32 = 0
        let rc = sqlite3_wal_checkpoint_v2(db, name, SQLITE_CHECKPOINT_PASSIVE, &log, &copied)
        guard rc == SQLITE_OK else {
            throw SQLiteError(code: rc, message: "checkpoint: " + String(cString: sqlite3_errmsg(db)))
        }
        // -1: the connection does not see a WAL (it has not read the file
        // yet, or the file is not in WAL mode); nothing was copied.
        guard copied >= 0 else { throw SQLiteError(code: SQLITE_MISUSE, message: "checkpoint: no write-ahead log") }
        return copied
    }

    var userVersion: Int64 {
        get throws { try first("PRAGMA user_version") { $0.int(0) } ?? 0 }
    }
}
