// SPDX-License-Identifier: Apache-2.0

import Foundation
#if canImport(Glibc)
    import Glibc
#endif

/// The saved credentials: $THINGIF_CONFIG, else ~/.config/thingif/cli.json,
/// written with mode 0600 (the folder 0700).
struct SavedConfig: Codable, Equatable {
    var hub: String
    var appID: String
    var userID: String
    var token: String
    var loginName: String?
    /// The SSE installation `thingif watch` uses; `command send` names it as
    /// the issuing installation so that a pseudo user is notified there.
    var installationID: String?

    struct Error: Swift.Error, CustomStringConvertible {
        var description: String
    }

    /// The file's path for an environment.
    static func path(environment: [String: String] = ProcessInfo.processInfo.environment) -> String {
        if let p = environment["THINGIF_CONFIG"], !p.isEmpty { return p }
        let home = environment["HOME"].flatMap { $0.isEmpty ? nil : $0 } ?? NSHomeDirectory()
        return home + "/.config/thingif/cli.json"
    }

    /// The saved config, nil when there is no file.
    static func load(from path: String) throws -> SavedConfig? {
        guard FileManager.default.fileExists(atPath: path) else { return nil }
        do {
            let data = try Data(contentsOf: URL(fileURLWithPath: path))
            return try JSONDecoder().decode(SavedConfig.self, from: data)
        } catch {
            throw Error(description: "cannot read \(path): \(error)")
        }
    }

    /// Writes the file atomically (a temporary file in the same folder,
    /// created 0600, then renamed over the old one).
    func save(to path: String) throws {
        let dir = (path as NSString).deletingLastPathComponent
        if !dir.isEmpty, !FileManager.default.fileExists(atPath: dir) {
            do {
                try FileManager.default.createDirectory(
                    atPath: dir, withIntermediateDirectories: true,
                    attributes: [.posixPermissions: 0o700])
            } catch { throw Error(description: "cannot create \(dir): \(error)") }
        }
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
        var data = try encoder.encode(self)
        data.append(0x0A)
        let tmp = path + ".tmp.\(getpid())"
        let fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw Error(description: "cannot write \(tmp): \(String(cString: strerror(errno)))") }
        fchmod(fd, 0o600)
        let ok = data.withUnsafeBytes { buf -> Bool in
            var off = 0
            while off < buf.count {
                let n = write(fd, buf.baseAddress! + off, buf.count - off)
                if n < 0 { if errno == EINTR { continue }; return false }
                off += n
            }
            return fsync(fd) == 0
        }
        close(fd)
        guard ok, rename(tmp, path) == 0 else {
            let why = String(cString: strerror(errno))
            unlink(tmp)
            throw Error(description: "cannot write \(path): \(why)")
        }
    }
}
