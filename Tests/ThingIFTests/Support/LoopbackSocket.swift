// SPDX-License-Identifier: Apache-2.0

import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// A raw TCP connection to 127.0.0.1:`port` for the tests that speak HTTP
/// byte by byte (a client's exact requests, slow clients): close-on-exec,
/// so brokers and hubs that parallel tests spawn do not inherit it and keep
/// it open, and with a receive timeout (if given) so that reads return to
/// the caller's own deadline. Nil when it cannot connect; the caller closes
/// the fd.
func connectLoopback(port: Int, receiveTimeoutMs: Int? = nil) -> Int32? {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
    guard fd >= 0 else { return nil }
    var addr = sockaddr_in()
    addr.sin_family = sa_family_t(AF_INET)
    addr.sin_port = UInt16(port).bigEndian
    addr.sin_addr.s_addr = inet_addr("127.0.0.1")
    let rc = withUnsafePointer(to: &addr) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
            connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
        }
    }
    guard rc == 0 else {
        close(fd)
        return nil
    }
    if let ms = receiveTimeoutMs {
        var tv = timeval(tv_sec: ms / 1000, tv_usec: Int(ms % 1000) * 1000)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
    }
    return fd
}
