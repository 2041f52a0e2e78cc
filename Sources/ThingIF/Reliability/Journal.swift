import CThingIF

/// An append-only file of JSON lines in the storage directory, one record a
/// line, each append fsync'd before it returns. A torn last line (power lost
/// mid-write) is skipped when the file is read back. `rewrite` compacts it
/// atomically.
public final class Journal {
    let storage: Storage
    let name: String
    private var fd: Int32 = -1
    /// Records appended since the last rewrite (or load), for compaction.
    private(set) var lineCount = 0

    public init(storage: Storage, name: String) {
        self.storage = storage
        self.name = name
    }

    deinit { if fd >= 0 { close(fd) } }

    /// Every well-formed record, in order.
    public func load() -> [JSON] {
        guard let bytes = storage.read(name, limit: 64 << 20) else { return [] }
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

    /// Appends one record and fsyncs. False on an I/O error.
    public func append(_ record: JSON) -> Bool {
        guard openForAppend() else { return false }
        var line = record.dumpBytes()
        line.append(10)
        var off = 0
        while off < line.count {
            let n = line.withUnsafeBytes { thingif_sys_write(fd, $0.baseAddress! + off, line.count - off) }
            if n < 0 {
                if thingif_sys_errno() == EINTR { continue }
                return false
            }
            off += n
        }
        guard fdatasync(fd) == 0 else { return false }
        lineCount += 1
        return true
    }

    /// Replaces the whole file with `records`, atomically.
    public func rewrite(_ records: [JSON]) -> Bool {
        var bytes: [UInt8] = []
        for r in records {
            bytes += r.dumpBytes()
            bytes.append(10)
        }
        if fd >= 0 {
            close(fd)
            fd = -1
        }
        guard storage.write(name, bytes) else { return false }
        lineCount = records.count
        return true
    }
}
