// SPDX-License-Identifier: Apache-2.0

import CThingIF

/// Small POSIX helpers: time, randomness, files. No Foundation.
public enum Platform {
    /// Calls `body` with `s` as a C string, or with NULL for nil.
    static func withOptionalCString<R>(_ s: String?, _ body: (UnsafePointer<CChar>?) -> R) -> R {
        guard let s else { return body(nil) }
        return s.withCString { body($0) }
    }

    /// A malloc'ed copy of `s` with a NUL (free() it), copied once from the
    /// string's storage: `strdup(s)` with a String argument first builds a
    /// new array of its bytes.
    static func cString(_ s: String) -> UnsafeMutablePointer<CChar> {
        s.withCString { strdup($0) }
    }

    /// Monotonic milliseconds.
    public static func nowMs() -> Int64 {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        return Int64(ts.tv_sec) * 1000 + Int64(ts.tv_nsec) / 1_000_000
    }

    /// Wall-clock milliseconds since the Unix epoch.
    public static func epochMs() -> Int64 {
        var ts = timespec()
        clock_gettime(CLOCK_REALTIME, &ts)
        return Int64(ts.tv_sec) * 1000 + Int64(ts.tv_nsec) / 1_000_000
    }

    public static func sleepMs(_ ms: Int) {
        guard ms > 0 else { return }
        // time_t is 64 bits on armv7 too (_TIME_BITS in shim.h), `Int` is not.
        var req = timespec(tv_sec: time_t(ms / 1000), tv_nsec: numericCast((ms % 1000) * 1_000_000))
        var rem = timespec()
        while nanosleep(&req, &rem) == -1 && thingif_sys_errno() == EINTR { req = rem }
    }

    public static func randomHex(bytes: Int) -> String {
        // One draw of the system's generator (a getrandom call) for each
        // 8 bytes, not for each byte.
        var g = SystemRandomNumberGenerator()
        var raw: [UInt8] = []
        raw.reserveCapacity(max(0, bytes))
        while raw.count < bytes {
            var word: UInt64 = g.next()
            for _ in 0..<min(8, bytes - raw.count) {
                raw.append(UInt8(truncatingIfNeeded: word))
                word >>= 8
            }
        }
        return hex(raw)
    }

    /// `bytes` in lowercase hexadecimal, two digits each.
    public static func hex(_ bytes: [UInt8]) -> String {
        var out: [UInt8] = []
        out.reserveCapacity(bytes.count * 2)
        for b in bytes {
            out.append(hexDigit(b >> 4))
            out.append(hexDigit(b & 15))
        }
        return String(decoding: out, as: UTF8.self)
    }

    private static func hexDigit(_ n: UInt8) -> UInt8 { n < 10 ? UInt8(ascii: "0") + n : UInt8(ascii: "a") + n - 10 }

    /// A regular file's bytes; nil when it does not exist, is not a regular
    /// file, cannot be read or holds more than `limit` bytes.
    public static func readFile(_ path: String, limit: Int) -> [UInt8]? {
        let fd = thingif_sys_open(path, O_RDONLY | O_CLOEXEC, 0)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var st = stat()
        guard fstat(fd, &st) == 0, thingif_sys_is_reg(st.st_mode) != 0 else { return nil }
        var out: [UInt8] = []
        var buf = [UInt8](repeating: 0, count: 4096)
        while true {
            let n = buf.withUnsafeMutableBytes { thingif_sys_read(fd, $0.baseAddress, 4096) }
            if n < 0 {
                if thingif_sys_errno() == EINTR { continue }
                return nil
            }
            if n == 0 { return out }
            out += buf[0..<n]
            if out.count > limit { return nil }
        }
    }

    public static func isReadableFile(_ path: String) -> Bool {
        let fd = thingif_sys_open(path, O_RDONLY, 0)
        guard fd >= 0 else { return false }
        close(fd)
        return true
    }
}

/// The storage directory: small files written atomically (temp file, fsync,
/// rename, fsync of the directory) with mode 0600.
public struct Storage: Sendable {
    public let directory: String

    /// Creates the directory (and its parents) with mode 0700 when missing.
    public init?(directory: String) {
        guard !directory.isEmpty, Storage.makeDirectories(directory) else { return nil }
        self.directory = directory
    }

    private static func makeDirectories(_ path: String) -> Bool {
        var st = stat()
        if stat(path, &st) == 0 { return thingif_sys_is_dir(st.st_mode) != 0 }
        var prefix = path.utf8.first == 0x2F ? "/" : ""
        for part in path.utf8.split(separator: 0x2F) {
            prefix += String(decoding: part, as: UTF8.self)
            if stat(prefix, &st) != 0 {
                if mkdir(prefix, 0o700) != 0 && thingif_sys_errno() != EEXIST { return false }
            }
            prefix += "/"
        }
        return stat(path, &st) == 0 && thingif_sys_is_dir(st.st_mode) != 0
    }

    public func path(_ name: String) -> String { directory + "/" + name }

    /// The file's bytes, or nil when it does not exist or cannot be read.
    public func read(_ name: String, limit: Int = 1 << 20) -> [UInt8]? { Platform.readFile(path(name), limit: limit) }

    /// Replaces the file atomically. False on any I/O error.
    public func write(_ name: String, _ bytes: [UInt8]) -> Bool {
        let final = path(name)
        let tmp = final + ".tmp"
        let fd = thingif_sys_open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
        guard fd >= 0 else { return false }
        fchmod(fd, 0o600)
        var off = 0
        while off < bytes.count {
            let n = bytes.withUnsafeBytes { thingif_sys_write(fd, $0.baseAddress! + off, bytes.count - off) }
            if n < 0 {
                if thingif_sys_errno() == EINTR { continue }
                close(fd); unlink(tmp); return false
            }
            off += n
        }
        guard fsync(fd) == 0 else { close(fd); unlink(tmp); return false }
        close(fd)
        guard rename(tmp, final) == 0 else { unlink(tmp); return false }
        let dfd = thingif_sys_open(directory, O_RDONLY | O_DIRECTORY, 0)
        if dfd >= 0 { fsync(dfd); close(dfd) }
        return true
    }

    public func remove(_ name: String) { unlink(path(name)) }
}
