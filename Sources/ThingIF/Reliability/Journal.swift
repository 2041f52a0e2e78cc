// SPDX-License-Identifier: Apache-2.0

import CThingIF

/// An append-only file of JSON lines in the storage directory, one record a
/// line. An append is durable once `sync()` has returned (or at once, with
/// `append(_:sync: true)`); several appends can share one `write` and one
/// `fdatasync` (group commit): an unsynced append waits in memory until
/// `sync()` or `writeOut()`, or until `bufferLimit` bytes wait. With
/// `durable` false nothing is synced (THINGIF_OPT_DURABILITY none), but
/// `sync()` still writes, so what it covered survives the process. A torn
/// last line (power lost mid-write) is skipped when the file is read back.
/// `rewrite` compacts it atomically.
public final class Journal {
    let storage: Storage
    let name: String
    private var fd: Int32 = -1
    /// Records appended since the last rewrite (or load), for compaction.
    private(set) var lineCount = 0
    /// Appended bytes written but not yet synced.
    private var dirty = false
    /// Appended lines not yet written.
    private var pending: [UInt8] = []
    static let bufferLimit = 16 << 10
    /// False: appends are never synced (the device's storage is volatile,
    /// or must not wear).
    var durable = true

    public init(storage: Storage, name: String) {
        self.storage = storage
        self.name = name
    }

    deinit {
        writeOut()
        if fd >= 0 { close(fd) }
    }

    /// Every well-formed record, in order.
    public func load() -> [JSON] {
        guard let bytes = storage.read(name, limit: 64 << 20) else { return [] }
        // A torn last line (no newline after it): the next append starts a
        // line of its own, else it would join the torn one and be lost with it.
        if let last = bytes.last, last != 10, pending.isEmpty { pending = [10] }
        var out: [JSON] = []
        var start = 0
        for i in 0..<bytes.count where bytes[i] == 10 {
            if i > start, case .success(let j) = JSON.parse(Array(bytes[start..<i])), j.isObject { out.append(j) }
            start = i + 1
        }
        lineCount = out.count
        return out
    }

    private func openForAppend() -> Bool {
        if fd >= 0 { return true }
        fd = thingif_sys_open(storage.path(name), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0o600)
        return fd >= 0
    }

    /// Appends one record; with `sync`, makes it (and every earlier append)
    /// durable before returning. False on an I/O error.
    public func append(_ record: JSON, sync: Bool = true) -> Bool {
        var line = record.dumpBytes()
        line.append(10)
        return append(line: line, sync: sync)
    }

    /// Appends one line (ending with a newline) as written.
    public func append(line: [UInt8], sync: Bool) -> Bool {
        pending += line
        lineCount += 1
        if sync { return self.sync() }
        return pending.count < Journal.bufferLimit || writeOut()
    }

    /// Writes the appends that wait in memory (no sync). False on an I/O
    /// error (they stay in memory for the next attempt).
    @discardableResult
    public func writeOut() -> Bool {
        guard !pending.isEmpty else { return true }
        guard openForAppend() else { return false }
        var off = 0
        while off < pending.count {
            let n = pending.withUnsafeBytes { thingif_sys_write(fd, $0.baseAddress! + off, pending.count - off) }
            if n < 0 {
                if thingif_sys_errno() == EINTR { continue }
                // What was written stays written; the rest waits.
                pending.removeFirst(off)
                return false
            }
            off += n
        }
        pending.removeAll(keepingCapacity: true)
        dirty = true
        return true
    }

    /// Makes every append so far durable: one write and one fdatasync, none
    /// when nothing was appended since the last one. False on an I/O error.
    public func sync() -> Bool {
        guard writeOut() else { return false }
        guard dirty, fd >= 0 else { return true }
        if durable {
            guard fdatasync(fd) == 0 else { return false }
        }
        dirty = false
        return true
    }

    /// Replaces the whole file with `records`, atomically.
    public func rewrite(_ records: [JSON]) -> Bool {
        rewrite(lines: records.map { $0.dumpBytes() + [10] })
    }

    /// Replaces the whole file with `lines` (each ending with a newline).
    public func rewrite(lines: [[UInt8]]) -> Bool {
        var bytes: [UInt8] = []
        for l in lines { bytes += l }
        if fd >= 0 {
            // What was appended is in `records` too, written durably below.
            close(fd)
            fd = -1
        }
        dirty = false
        pending.removeAll(keepingCapacity: true)
        guard storage.write(name, bytes) else { return false }
        lineCount = lines.count
        return true
    }
}
