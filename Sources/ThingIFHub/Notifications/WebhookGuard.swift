// SPDX-License-Identifier: Apache-2.0

import Foundation
#if canImport(Glibc)
    import Glibc
#endif

/// Where webhooks may go: only to public addresses, unless the operator's
/// allow-list names the host and port. Checked when an installation is made
/// (a literal address in the URL) and again at each delivery, after the
/// host name is resolved.
public struct WebhookGuard: Sendable, Equatable {
    /// "host:port" entries ("[::1]:8080" for IPv6), compared with the URL's
    /// host (lowercased) and port (80/443 when absent).
    public var allow: [String]

    public init(allow: [String] = []) { self.allow = allow }

    public enum Verdict: Equatable {
        case allowed
        case refused(String)
    }

    /// The URL's host (without brackets), lowercased, and port.
    static func hostAndPort(_ url: URL) -> (host: String, port: Int)? {
        guard let scheme = url.scheme?.lowercased(), scheme == "http" || scheme == "https",
            var host = url.host?.lowercased(), !host.isEmpty
        else { return nil }
        if host.hasPrefix("[") && host.hasSuffix("]") { host = String(host.dropFirst().dropLast()) }
        return (host, url.port ?? (scheme == "https" ? 443 : 80))
    }

    func allowListed(host: String, port: Int) -> Bool {
        let forms = host.contains(":") ? ["[\(host)]:\(port)", "\(host):\(port)"] : ["\(host):\(port)"]
        return allow.contains { forms.contains($0.lowercased()) }
    }

    /// At installation: refuses a URL whose host is a literal non-public address.
    public func checkAtInstallation(_ text: String) -> Verdict {
        guard let url = URL(string: text), let (host, port) = Self.hostAndPort(url) else {
            return .refused("webhookURL must be an http:// or https:// URL with a host")
        }
        if allowListed(host: host, port: port) { return .allowed }
        if let bytes = Self.literalAddress(host), let why = Self.nonPublic(bytes) {
            return .refused("webhookURL points at a \(why) address; only public addresses are allowed")
        }
        return .allowed
    }

    /// At delivery: resolves the host and refuses when any address is not public.
    public func checkAtDelivery(_ url: URL) -> Verdict {
        guard let (host, port) = Self.hostAndPort(url) else { return .refused("not an http(s) URL with a host") }
        if allowListed(host: host, port: port) { return .allowed }
        let addresses = Self.resolve(host)
        guard !addresses.isEmpty else { return .refused("\(host) does not resolve") }
        for a in addresses {
            if let why = Self.nonPublic(a) { return .refused("\(host) resolves to a \(why) address") }
        }
        return .allowed
    }

    /// The bytes of a literal IPv4 (4) or IPv6 (16) address, nil for a name.
    public static func literalAddress(_ host: String) -> [UInt8]? {
        var v4 = in_addr()
        if inet_pton(AF_INET, host, &v4) == 1 { return withUnsafeBytes(of: &v4) { Array($0) } }
        var v6 = in6_addr()
        if inet_pton(AF_INET6, host, &v6) == 1 { return withUnsafeBytes(of: &v6) { Array($0) } }
        return nil
    }

    /// Every address the name resolves to (getaddrinfo), as bytes.
    static func resolve(_ host: String) -> [[UInt8]] {
        if let literal = literalAddress(host) { return [literal] }
        var hints = addrinfo()
        hints.ai_family = AF_UNSPEC
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        var res: UnsafeMutablePointer<addrinfo>?
        guard getaddrinfo(host, nil, &hints, &res) == 0 else { return [] }
        defer { freeaddrinfo(res) }
        var out: [[UInt8]] = []
        var p = res
        while let ai = p {
            if ai.pointee.ai_family == AF_INET, let sa = ai.pointee.ai_addr {
                sa.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { s in
                    var a = s.pointee.sin_addr
                    out.append(withUnsafeBytes(of: &a) { Array($0) })
                }
            } else if ai.pointee.ai_family == AF_INET6, let sa = ai.pointee.ai_addr {
                sa.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { s in
                    var a = s.pointee.sin6_addr
                    out.append(withUnsafeBytes(of: &a) { Array($0) })
                }
            }
            p = ai.pointee.ai_next
        }
        return out
    }

    /// Why an address is not public (loopback, private, …), nil when it is.
    public static func nonPublic(_ a: [UInt8]) -> String? {
        if a.count == 4 { return nonPublicV4(a) }
        guard a.count == 16 else { return "malformed" }
        if a.allSatisfy({ $0 == 0 }) { return "unspecified" }
        if a[0..<15].allSatisfy({ $0 == 0 }) && a[15] == 1 { return "loopback" }
        // IPv4-mapped ::ffff:a.b.c.d and IPv4-compatible ::a.b.c.d.
        if a[0..<10].allSatisfy({ $0 == 0 }) && a[10] == 0xff && a[11] == 0xff { return nonPublicV4(Array(a[12..<16])) }
        if a[0..<12].allSatisfy({ $0 == 0 }) { return nonPublicV4(Array(a[12..<16])) ?? "IPv4-compatible" }
        // NAT64 well-known prefix 64:ff9b::/96 carries an IPv4 address too.
        if a[0] == 0x00 && a[1] == 0x64 && a[2] == 0xff && a[3] == 0x9b && a[4..<12].allSatisfy({ $0 == 0 }) {
            return nonPublicV4(Array(a[12..<16]))
        }
        if a[0] & 0xfe == 0xfc { return "unique-local" }
        if a[0] == 0xfe && a[1] & 0xc0 == 0x80 { return "link-local" }
        if a[0] == 0xfe && a[1] & 0xc0 == 0xc0 { return "site-local" }
        if a[0] == 0xff { return "multicast" }
        return nil
    }

    static func nonPublicV4(_ a: [UInt8]) -> String? {
        switch (a[0], a[1]) {
        case (0, _): return "unspecified"
        case (127, _): return "loopback"
        case (10, _): return "private"
        case (172, 16...31): return "private"
        case (192, 168): return "private"
        case (100, 64...127): return "shared (carrier-grade NAT)"
        case (169, 254): return "link-local"
        case (224...239, _): return "multicast"
        case (240...255, _): return "reserved"
        case (192, 0) where a[2] == 0: return "reserved"
        case (198, 18...19): return "benchmarking"
        default: return nil
        }
    }
}
