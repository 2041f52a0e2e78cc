// SPDX-License-Identifier: Apache-2.0

import CThingIF

/// Whether this build carries firmware updates. CMake's
/// -DTHINGIF_UPDATES=OFF compiles with THINGIF_NO_UPDATES: the facade's
/// update calls answer THINGIF_ERR_UNSUPPORTED and no agent is ever made, so
/// --gc-sections drops the update code.
enum Updates {
    @inline(__always) static var built: Bool {
        #if THINGIF_NO_UPDATES
            return false
        #else
            return true
        #endif
    }
}

/// The firmware's installer (thingif_set_installer): its C callbacks and
/// the facts the checks need. The calls into C live here, and the file
/// mode's sink (no write callback: the library writes `update.img` in the
/// storage directory itself).
final class UpdateInstaller {
    static let imageFile = "update.img"

    let callbacks: thingif_installer
    let userdata: UnsafeMutableRawPointer?
    let thingType: String
    let runningVersion: String
    /// The firmware's trust file, read at thingif_set_installer().
    let factoryTrust: TrustRing
    let maxTrialBoots: Int
    private let storage: Storage
    private var fd: Int32 = -1

    init(
        callbacks: thingif_installer, userdata: UnsafeMutableRawPointer?, thingType: String, runningVersion: String,
        factoryTrust: TrustRing, maxTrialBoots: Int, storage: Storage
    ) {
        self.callbacks = callbacks
        self.userdata = userdata
        self.thingType = thingType
        self.runningVersion = runningVersion
        self.factoryTrust = factoryTrust
        self.maxTrialBoots = maxTrialBoots
        self.storage = storage
    }

    deinit { if fd >= 0 { close(fd) } }

    /// No write callback: the library keeps the image in its storage directory.
    var fileMode: Bool { callbacks.write == nil }

    var imagePath: String { storage.path(UpdateInstaller.imageFile) }

    /// Calls `body` with the job's thingif_update_info; its strings live for
    /// the call only.
    func withInfo<R>(_ job: UpdateJob, _ body: (UnsafePointer<thingif_update_info>) -> R) -> R {
        let m = job.manifest
        let strings = [
            Platform.cString(job.jobID), Platform.cString(m.updateID), Platform.cString(m.version),
            Platform.cString(m.compatible)
        ]
        let metadata = m.metadata.map { Platform.cString(String(decoding: $0.dumpBytes(), as: UTF8.self)) }
        let path = fileMode ? Platform.cString(imagePath) : nil
        defer {
            for s in strings { free(s) }
            free(metadata)
            free(path)
        }
        return m.sha256.withUnsafeBufferPointer { sha in
            var info = thingif_update_info(
                job_id: strings[0], update_id: strings[1], version: strings[2], compatible: strings[3],
                size: UInt64(m.size), sha256: sha.baseAddress, metadata_json: metadata, image_path: path)
            return withUnsafePointer(to: &info) { body($0) }
        }
    }

    enum Decision: Equatable {
        case accept
        case later(String)
        case refuse(String)
    }

    func offer(_ t: OpaquePointer, _ job: UpdateJob) -> Decision {
        var message = [CChar](repeating: 0, count: 257)
        let rc = withInfo(job) { info in
            message.withUnsafeMutableBufferPointer { callbacks.offer!(t, info, $0.baseAddress, 256, userdata) }
        }
        message[256] = 0
        let text = message.withUnsafeBufferPointer { String(cString: $0.baseAddress!) }
        switch rc {
        case Int32(THINGIF_UPDATE_ACCEPT.rawValue): return .accept
        case Int32(THINGIF_UPDATE_DEFER.rawValue): return .later(text.isEmpty ? "the installer deferred it" : text)
        default: return .refuse(text.isEmpty ? "the installer refused it" : text)
        }
    }

    /// A new job's image starts empty (file mode).
    func prepare(size: Int64) -> Bool {
        guard fileMode else { return true }
        guard open() else { return false }
        return ftruncate(fd, off_t(size)) == 0
    }

    func write(_ t: OpaquePointer, offset: Int64, _ bytes: UnsafeRawBufferPointer) -> Bool {
        if let w = callbacks.write { return w(t, UInt64(offset), bytes.baseAddress, bytes.count, userdata) == 0 }
        guard open() else { return false }
        var done = 0
        while done < bytes.count {
            let n = pwrite(fd, bytes.baseAddress! + done, bytes.count - done, off_t(offset) + off_t(done))
            if n < 0 {
                if thingif_sys_errno() == EINTR { continue }
                return false
            }
            done += n
        }
        return true
    }

    func flush(_ t: OpaquePointer) -> Bool {
        if let f = callbacks.flush { return f(t, userdata) == 0 }
        guard open() else { return false }
        return fdatasync(fd) == 0
    }

    func install(_ t: OpaquePointer, _ job: UpdateJob) -> Bool {
        if fd >= 0 {
            close(fd)
            fd = -1
        }
        return withInfo(job) { callbacks.install!(t, $0, userdata) } == 0
    }

    func reboot(_ t: OpaquePointer) { callbacks.reboot!(t, userdata) }
    func commit(_ t: OpaquePointer) -> Bool { callbacks.commit!(t, userdata) == 0 }
    func rollback(_ t: OpaquePointer) { callbacks.rollback!(t, userdata) }

    private func open() -> Bool {
        if fd >= 0 { return true }
        fd = thingif_sys_open(imagePath, O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
        return fd >= 0
    }
}
