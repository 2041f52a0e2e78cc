// SPDX-License-Identifier: Apache-2.0

import Crypto
import Foundation
import Testing
import ThingIF
import ThingIFHub
import ThingIFHubServer
#if canImport(Glibc)
    import Glibc
#endif

/// The hub's firmware images over REST, on every store (memory, SQLite and
/// PostgreSQL where installed, always in CI): the operator's upload,
/// idempotent, capped while it streams; metadata, list, delete; block hash
/// lists; a manifest checked against a stored image; the refusals.
@Suite("Hub images", .offPool)
struct HubImageTests {
    static let admin = "operator-secret"
    static let octets = "application/octet-stream"

    func withImages(
        _ factory: StoreFactory, maxImageBytes: Int64 = 4 * 1024 * 1024, _ body: (HubAPIEnv) async throws -> Void
    ) async throws {
        var security = HubServer.Security()
        security.adminToken = Self.admin
        security.limits.maxImageBytes = maxImageBytes
        let (store, cleanup) = try factory.make(.fastForTests, StateRetention())
        defer { cleanup() }
        try await withHubAPI(security: security, store: store, body)
    }

    static func image(_ n: Int, seed: UInt8 = 7) -> [UInt8] {
        var x = UInt32(seed) | 0x9e37_0000
        return (0..<n).map { _ in
            x = x &* 1_664_525 &+ 1_013_904_223
            return UInt8(truncatingIfNeeded: x >> 24)
        }
    }

    static func hex(_ b: some Sequence<UInt8>) -> String { b.map { String(format: "%02x", $0) }.joined() }
    static func sha(_ b: [UInt8]) -> String { hex(SHA256.hash(data: b)) }

    static func hashList(_ b: [UInt8], blockSize: Int) -> [UInt8] {
        stride(from: 0, to: b.count, by: blockSize).flatMap {
            Array(SHA256.hash(data: b[$0..<min($0 + blockSize, b.count)]))
        }
    }

    /// A manifest of the form a release signs (docs/UPDATES.md §1).
    static func manifest(
        size: Int, sha256: String, blockSize: Int = 4096, blocks: Int? = nil, blockHashes: String
    ) -> String {
        let n = blocks ?? (size + blockSize - 1) / blockSize
        return #"{"updateID":"aircon-fw","version":"1.2.0","compatible":"AirConditioner","securityVersion":4,"#
            + #""size":\#(size),"sha256":"\#(sha256)","blockSize":\#(blockSize),"blocks":\#(n),"#
            + #""blockHashes":"\#(blockHashes)"}"#
    }

    func check(_ e: HubAPIEnv, _ sha: String, _ manifest: String, list: [UInt8]? = nil) async throws -> HTTPReply {
        var body: [String: Any] = ["manifest": Data(manifest.utf8).base64EncodedString()]
        if let list { body["blockHashList"] = Data(list).base64EncodedString() }
        return try await e.call("POST", "\(e.api)/images/\(sha)/manifest-check", token: Self.admin, json: body)
    }

    @Test("Upload, re-upload, metadata, list, HEAD, block hashes, delete", arguments: StoreFactory.all)
    func lifecycle(_ factory: StoreFactory) async throws {
        try await withImages(factory) { e in
            // Not a multiple of the chunk: the last chunk is short.
            let bytes = Self.image(100_000)
            let sha = Self.sha(bytes)
            let first = try await e.call(
                "POST", "\(e.api)/images", token: Self.admin, body: Data(bytes), contentType: Self.octets)
            #expect(first.status == 201, "\(first.text)")
            #expect(first.string("sha256") == sha && first.json["size"] as? Int == bytes.count)
            let again = try await e.call(
                "PUT", "\(e.api)/images", token: Self.admin, body: Data(bytes), contentType: Self.octets)
            #expect(again.status == 200 && again.string("sha256") == sha, "\(again.text)")
            #expect(again.json["createdAt"] as? Int == first.json["createdAt"] as? Int)
            #expect(e.hub.store.stagedImageChunks() == 0, "the re-upload's chunks were dropped")

            let meta = try await e.get("\(e.api)/images/\(sha)", token: Self.admin)
            #expect(meta.status == 200 && meta.json["size"] as? Int == 100_000, "\(meta.text)")
            let upper = try await e.get("\(e.api)/images/\(sha.uppercased())", token: Self.admin)
            #expect(upper.status == 200 && upper.string("sha256") == sha)
            let head = try await e.call("HEAD", "\(e.api)/images/\(sha)", token: Self.admin)
            #expect(head.status == 200)
            let list = try await e.get("\(e.api)/images", token: Self.admin)
            let images = list.json["images"] as? [[String: Any]] ?? []
            #expect(images.count == 1 && images.first?["sha256"] as? String == sha, "\(list.text)")

            for bs in [1024, 4096, 32768] {
                let r = try await e.get("\(e.api)/images/\(sha)/block-hashes?blockSize=\(bs)", token: Self.admin)
                let expected = Self.hashList(bytes, blockSize: bs)
                #expect(r.status == 200 && Array(r.data) == expected, "blockSize \(bs): \(r.status)")
                let record = try #require(e.hub.store.image(sha256: sha).value)
                // Block n read from one chunk is the image's bytes.
                let last = (bytes.count - 1) / bs
                for n in [0, 1, last] {
                    let block = e.hub.store.imageBlock(record, blockSize: bs, n: n)
                    #expect(block.map { Array($0) } == Array(bytes[n * bs..<min((n + 1) * bs, bytes.count)]))
                }
                #expect(e.hub.store.imageBlock(record, blockSize: bs, n: last + 1) == nil)
            }
            // The lists were kept, and are the stored bytes' lists.
            let record = try #require(e.hub.store.image(sha256: sha).value)
            for bs in [1024, 4096, 32768] {
                let kept = e.hub.store.keptBlockHashList(sha256: sha, blockSize: bs)
                #expect(kept == Self.hashList(bytes, blockSize: bs), "kept for \(bs)")
                #expect(e.hub.store.computeBlockHashList(record, blockSize: bs) == kept)
            }
            let badSize = try await e.get("\(e.api)/images/\(sha)/block-hashes?blockSize=3000", token: Self.admin)
            #expect(badSize.status == 400 && badSize.isErrorBody, "\(badSize.text)")

            #expect(try await e.call("DELETE", "\(e.api)/images/\(sha)", token: Self.admin).status == 204)
            #expect(try await e.get("\(e.api)/images/\(sha)", token: Self.admin).status == 404)
            #expect(try await e.call("DELETE", "\(e.api)/images/\(sha)", token: Self.admin).status == 404)
            #expect(e.hub.store.imageChunk(sha256: sha, n: 0) == nil, "the chunks went with the image")
            #expect(e.hub.store.keptBlockHashList(sha256: sha, blockSize: 4096) == nil, "so did its lists")
        }
    }

    @Test("Over the cap: 413, declared or streamed, and nothing kept", arguments: StoreFactory.all)
    func cap(_ factory: StoreFactory) async throws {
        try await withImages(factory, maxImageBytes: 100_000) { e in
            let over = Self.image(100_001)
            let r = try await e.call(
                "POST", "\(e.api)/images", token: Self.admin, body: Data(over), contentType: Self.octets)
            #expect(r.status == 413 && r.errorCode == "IMAGE_TOO_LARGE", "\(r.status) \(r.text)")
            // Streamed (chunked, no Content-Length): refused as it crosses the cap.
            let streamed = try RawHTTP.upload(
                port: e.port, path: "\(e.api)/images", token: Self.admin, chunks: [over[..<70_000], over[70_000...]])
            #expect(streamed.hasPrefix("HTTP/1.1 413"), "\(streamed.prefix(200))")
            #expect(e.hub.store.images()?.isEmpty == true)
            #expect(e.hub.store.stagedImageChunks() == 0, "no staged chunk is left")
            // Exactly the cap is taken.
            let at = Self.image(100_000)
            let ok = try await e.call(
                "POST", "\(e.api)/images", token: Self.admin, body: Data(at), contentType: Self.octets)
            #expect(ok.status == 201, "\(ok.text)")
        }
    }

    @Test(
        "A 20 MiB upload is staged chunk by chunk while it arrives, never held whole", .timeLimit(.minutes(3)),
        arguments: StoreFactory.all)
    func streamed(_ factory: StoreFactory) async throws {
        try await withImages(factory, maxImageBytes: 32 * 1024 * 1024) { e in
            let size = 20 * 1024 * 1024
            let bytes = Self.image(size, seed: 3)
            let before = e.hub.imageUploads.current.chunksStaged
            // All but the last byte, with Content-Length: the request is not
            // complete, so a handler that collected the body would have
            // staged nothing yet.
            let client = try RawHTTP(port: e.port)
            try client.send(
                "POST \(e.api)/images HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer \(Self.admin)\r\n"
                    + "Content-Type: \(Self.octets)\r\nContent-Length: \(size)\r\n\r\n")
            let sender = Task.detached { try client.send(bytes: bytes[..<(size - 1)]) }
            let chunks = size / ImageChunks.size
            // Every full chunk but the last is in the store before the body ends.
            await e.hub.imageUploads.waitForStagedChunks(before + chunks - 1)
            try await sender.value
            #expect(e.hub.store.images()?.isEmpty == true, "no image before the last byte")
            try client.send(bytes: bytes[(size - 1)...])
            let reply = try client.readResponse()
            #expect(reply.hasPrefix("HTTP/1.1 201"), "\(reply.prefix(300))")
            #expect(reply.contains(Self.sha(bytes)))
            let f = e.hub.imageUploads.current
            #expect(f.lastSize == Int64(size) && f.lastChunks == chunks)
            #expect(f.peakBuffered <= ImageChunks.size, "the upload held \(f.peakBuffered) bytes at most")
            print("image upload: \(size) bytes in \(f.lastChunks) chunks, \(f.peakBuffered) bytes buffered at most")
            let sha = Self.sha(bytes)
            let r = try await e.get("\(e.api)/images/\(sha)/block-hashes?blockSize=32768", token: Self.admin)
            #expect(r.status == 200 && Array(r.data) == Self.hashList(bytes, blockSize: 32768))
        }
    }

    @Test("A manifest that matches the image, and ones that do not", arguments: StoreFactory.all)
    func manifests(_ factory: StoreFactory) async throws {
        try await withImages(factory) { e in
            let bytes = Self.image(10_000)
            let sha = Self.sha(bytes)
            let put = try await e.call(
                "POST", "\(e.api)/images", token: Self.admin, body: Data(bytes), contentType: Self.octets)
            try #require(put.status == 201)
            let list = Self.hashList(bytes, blockSize: 4096)
            let listSHA = Self.sha(list)
            let good = Self.manifest(size: 10_000, sha256: sha, blockHashes: listSHA)
            let ok = try await check(e, sha, good, list: list)
            #expect(ok.status == 200 && ok.json["blocks"] as? Int == 3, "\(ok.text)")
            #expect(ok.string("blockHashes") == listSHA)
            #expect(try await check(e, sha, good).status == 200, "the hub computes the list itself")

            func mismatch(_ m: String, list: [UInt8]? = nil, _ field: String) async throws {
                let r = try await check(e, sha, m, list: list)
                #expect(r.status == 422 && r.errorCode == "MANIFEST_MISMATCH", "\(field): \(r.status) \(r.text)")
                #expect(r.string("message")?.hasPrefix(field + ":") == true, "\(r.text)")
            }
            // Size (its block count follows it, so it parses).
            try await mismatch(Self.manifest(size: 10_001, sha256: sha, blockHashes: listSHA), "size")
            try await mismatch(Self.manifest(size: 10_000, sha256: Self.sha([1]), blockHashes: listSHA), "sha256")
            // Block hashes: another image's list, or a tampered block's.
            try await mismatch(Self.manifest(size: 10_000, sha256: sha, blockHashes: Self.sha([2])), "blockHashes")
            var tampered = list
            tampered[40] ^= 1
            try await mismatch(Self.manifest(size: 10_000, sha256: sha, blockHashes: Self.sha(tampered)), "blockHashes")
            try await mismatch(good, list: tampered, "blockHashList")
            // The same bytes hashed in other blocks: the manifest's layout decides.
            let other = Self.manifest(size: 10_000, sha256: sha, blockSize: 1024, blockHashes: listSHA)
            try await mismatch(other, "blockHashes")
            // A block count that does not follow from the size is no manifest a thing takes: 400.
            let blocks = try await check(
                e, sha, Self.manifest(size: 10_000, sha256: sha, blocks: 4, blockHashes: listSHA))
            #expect(blocks.status == 400 && blocks.isErrorBody, "\(blocks.text)")
            #expect(blocks.string("message")?.contains("blocks") == true, "\(blocks.text)")
            // Malformed: not JSON, not base64, absent.
            #expect(try await check(e, sha, "{not json").status == 400)
            let notBase64 = try await e.call(
                "POST", "\(e.api)/images/\(sha)/manifest-check", token: Self.admin, json: ["manifest": "***"])
            #expect(notBase64.status == 400 && notBase64.isErrorBody)
            let absent = try await e.call(
                "POST", "\(e.api)/images/\(sha)/manifest-check", token: Self.admin, json: [String: Any]())
            #expect(absent.status == 400)
            // An image not stored.
            #expect(try await check(e, Self.sha([9]), good).status == 404)
        }
    }

    @Test("Refused: no token, a user's token, a wrong one; bad input", arguments: StoreFactory.all)
    func refusals(_ factory: StoreFactory) async throws {
        try await withImages(factory) { e in
            let bytes = Self.image(2000)
            let sha = Self.sha(bytes)
            let (_, user) = try await e.user()
            for token in [nil, user, "not-the-admin-token"] as [String?] {
                let up = try await e.call(
                    "POST", "\(e.api)/images", token: token, body: Data(bytes), contentType: Self.octets)
                #expect(up.status == 403 && up.errorCode == "WRONG_TOKEN", "\(up.status) \(up.text)")
                #expect(try await e.get("\(e.api)/images", token: token).status == 403)
                #expect(try await e.get("\(e.api)/images/\(sha)", token: token).status == 403)
                #expect(try await e.call("DELETE", "\(e.api)/images/\(sha)", token: token).status == 403)
                let m = try await e.call(
                    "POST", "\(e.api)/images/\(sha)/manifest-check", token: token, json: ["manifest": "e30="])
                #expect(m.status == 403)
            }
            #expect(e.hub.store.images()?.isEmpty == true && e.hub.store.stagedImageChunks() == 0)
            // Another app's path.
            #expect(
                try await e.call(
                    "POST", "/api/apps/other/images", token: Self.admin, body: Data(bytes), contentType: Self.octets
                ).status == 404)

            let empty = try await e.call(
                "POST", "\(e.api)/images", token: Self.admin, body: Data(), contentType: Self.octets)
            #expect(empty.status == 400 && empty.isErrorBody, "\(empty.status) \(empty.text)")
            let json = try await e.call(
                "POST", "\(e.api)/images", token: Self.admin, body: Data(bytes), contentType: "application/json")
            #expect(json.status == 415, "\(json.text)")
            for bad in [String(sha.dropLast()), sha + "0", String(sha.dropLast()) + "g", "not-a-sha"] {
                let r = try await e.get("\(e.api)/images/\(bad)", token: Self.admin)
                #expect(r.status == 400 && r.isErrorBody, "\(bad): \(r.status) \(r.text)")
                #expect(try await e.call("DELETE", "\(e.api)/images/\(bad)", token: Self.admin).status == 400)
            }
            #expect(e.hub.store.images()?.isEmpty == true && e.hub.store.stagedImageChunks() == 0)
        }
    }

    @Test(
        "Two hubs on one PostgreSQL commit the same image at once: one creates it, the other finds it",
        .enabled(if: PostgresServer.enabled))
    func twoHubsOneImage() throws {
        try PostgresServer.get().withTwoStores { a, b in
            let bytes = Self.image(200_000, seed: 11)
            let uploads = [ImageUpload(store: a, maxBytes: 1 << 20), ImageUpload(store: b, maxBytes: 1 << 20)]
            for u in uploads { try u.append(bytes) }
            let commits = Locked<[ImageCommit]>([])
            DispatchQueue.concurrentPerform(iterations: 2) { i in
                if let c = try? uploads[i].finish() { commits.withLock { $0.append(c) } }
            }
            let all = commits.withLock { $0 }
            #expect(all.count == 2)
            #expect(all.filter { if case .created = $0 { return true } else { return false } }.count == 1, "\(all)")
            #expect(Set(all.map(\.record.sha256)) == [Self.sha(bytes)])
            #expect(a.stagedImageChunks() == 0, "the second copy was dropped")
            let record = try #require(b.image(sha256: Self.sha(bytes)).value)
            #expect(b.computeBlockHashList(record, blockSize: 1024) == Self.hashList(bytes, blockSize: 1024))
        }
    }

    @Test("Without an adminToken the image routes are off")
    func off() async throws {
        try await withHubAPI { e in
            let r = try await e.call(
                "POST", "\(e.api)/images", token: "x", body: Data([1, 2, 3]), contentType: Self.octets)
            #expect(r.status == 404, "\(r.text)")
        }
    }
}

/// A blocking HTTP/1.1 client on a loopback socket, for requests
/// URLSession does not make: a body sent in parts with a pause the test
/// decides, or chunked.
final class RawHTTP: @unchecked Sendable {
    private let fd: Int32

    init(port: Int) throws {
        // The harness's loopback connection: close-on-exec, with a receive timeout.
        guard let fd = connectLoopback(port: port, receiveTimeoutMs: 60_000) else {
            throw HarnessError("connect to \(port)")
        }
        self.fd = fd
    }

    deinit { close(fd) }

    func send(_ text: String) throws { try send(bytes: Array(text.utf8)[...]) }

    func send(bytes: ArraySlice<UInt8>) throws {
        try bytes.withUnsafeBytes { b in
            var at = 0
            while at < b.count {
                let n = Glibc.send(fd, b.baseAddress! + at, b.count - at, Int32(MSG_NOSIGNAL))
                guard n > 0 else { throw HarnessError("send: errno \(errno)") }
                at += n
            }
        }
    }

    /// The response's head and body, read until the peer has sent its
    /// Content-Length (or closed).
    func readResponse() throws -> String {
        var got: [UInt8] = []
        var buf = [UInt8](repeating: 0, count: 65536)
        while true {
            let text = String(decoding: got, as: UTF8.self)
            if let r = text.range(of: "\r\n\r\n") {
                let head = text[..<r.lowerBound].lowercased()
                if let l = head.split(separator: "\r\n").first(where: { $0.hasPrefix("content-length:") }),
                    let n = Int(l.dropFirst(15).trimmingCharacters(in: .whitespaces)),
                    text.utf8.count - text.utf8.distance(from: text.utf8.startIndex, to: r.upperBound) >= n
                {
                    return text
                }
            }
            let n = recv(fd, &buf, buf.count, 0)
            guard n > 0 else { return text }
            got += buf[0..<n]
        }
    }

    /// A chunked upload of `chunks`; the response.
    static func upload(port: Int, path: String, token: String, chunks: [ArraySlice<UInt8>]) throws -> String {
        let c = try RawHTTP(port: port)
        try c.send(
            "POST \(path) HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer \(token)\r\n"
                + "Content-Type: application/octet-stream\r\nTransfer-Encoding: chunked\r\n\r\n")
        for part in chunks {
            try c.send(String(part.count, radix: 16) + "\r\n")
            try c.send(bytes: part)
            try c.send("\r\n")
        }
        try c.send("0\r\n\r\n")
        return try c.readResponse()
    }
}
