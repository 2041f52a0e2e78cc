// SPDX-License-Identifier: Apache-2.0

import CThingIF

/// Routes log lines to the firmware's callback, or to stderr by default.
final class Logger: @unchecked Sendable {
    private struct Sink {
        var callback: thingif_log_cb?
        var maxLevel: Int32
        var userdata: UnsafeMutableRawPointer?
    }

    private let sink = Locked(Sink(callback: nil, maxLevel: Int32(THINGIF_LOG_WARNING.rawValue), userdata: nil))

    func set(callback: thingif_log_cb?, maxLevel: Int32, userdata: UnsafeMutableRawPointer?) {
        sink.withLock {
            $0 = Sink(
                callback: callback, maxLevel: callback == nil ? Int32(THINGIF_LOG_WARNING.rawValue) : maxLevel,
                userdata: userdata)
        }
    }

    func error(_ message: @autoclosure () -> Text) { log(THINGIF_LOG_ERROR, message()) }
    func warning(_ message: @autoclosure () -> Text) { log(THINGIF_LOG_WARNING, message()) }
    func info(_ message: @autoclosure () -> Text) { log(THINGIF_LOG_INFO, message()) }
    func debug(_ message: @autoclosure () -> Text) { log(THINGIF_LOG_DEBUG, message()) }

    /// Whether a line of `level` would be written.
    func enabled(_ level: thingif_log_level) -> Bool { Int32(level.rawValue) <= sink.withLock { $0.maxLevel } }

    /// The message is built only when a line of `level` is kept.
    func log(_ level: thingif_log_level, _ message: @autoclosure () -> Text) {
        guard enabled(level) else { return }
        write(level, message())
    }

    /// A line built already. Out of line, so that `log` stays small where
    /// it is inlined: a message closure passed into the whole function got
    /// a specialized copy of it per call site in the Embedded build.
    @inline(never)
    func write(_ level: thingif_log_level, _ message: Text) {
        let s = sink.withLock { $0 }
        let lv = Int32(level.rawValue)
        guard lv <= s.maxLevel else { return }
        let text = message.string
        if let cb = s.callback {
            cb(lv, text, s.userdata)
        } else {
            let line = "thingif: " + text + "\n"
            _ = line.withCString { fputs($0, stderr) }
        }
    }
}
