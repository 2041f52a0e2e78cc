// SPDX-License-Identifier: Apache-2.0

import ThingIF

/// SQLStore's firmware images (the statements SQLite and PostgreSQL
/// share): a row per image, its bytes in rows of ImageChunks.size
/// (BLOB/BYTEA), staged under the upload's key until the hash is known.
extension SQLStore {
    public func stageImageChunk(upload: String, n: Int, bytes: [UInt8]) -> Bool {
        use(false) { c in
            try c.run(
                "INSERT INTO image_chunks (image, n, bytes) VALUES (?, ?, ?)",
                [.text(upload), .int(Int64(n)), .bytes(bytes)]) == 1
        }
    }

    /// The image's row, naming the key its staged chunks are under, so no
    /// chunk row is rewritten: renaming them to the hash (a change of the
    /// primary key) rewrote the whole image in one write transaction and
    /// held every other writer, commands included, for its length (1.5 s
    /// for 64 MiB on SQLite; docs/decisions/update-hub-images.md). When the
    /// image is there already (the same bytes uploaded again, here or by
    /// another hub), the staged chunks are dropped instead. The INSERT …
    /// ON CONFLICT DO NOTHING makes two hubs committing the same image at
    /// once agree: one creates it, the other finds it.
    public func commitImage(upload: String, sha256: String, size: Int64, now: Int64) -> ImageCommit? {
        let inserted = use(nil as Int?) { c in
            try c.run(
                "INSERT INTO images (sha256, size, created_at, chunks) VALUES (?, ?, ?, ?)"
                    + " ON CONFLICT (sha256) DO NOTHING",
                [.text(sha256), .int(size), .int(now), .text(upload)])
        }
        guard let inserted else { return nil }
        if inserted == 1 { return .created(ImageRecord(sha256: sha256, size: size, createdAt: now)) }
        discardImageUpload(upload)
        let existing = use(nil as ImageRecord?) { c in
            try c.first("SELECT sha256, size, created_at FROM images WHERE sha256 = ?", [.text(sha256)], Self.imageRow)
        }
        return .existing(existing ?? ImageRecord(sha256: sha256, size: size, createdAt: now))
    }

    public func discardImageUpload(_ upload: String) { deleteChunks(under: upload) }

    /// The rows under one key, a batch per transaction: each lasts a few
    /// milliseconds (2 MiB), so the commands' writes go on between them.
    func deleteChunks(under key: String) {
        while case .success(let n) = attempt({ c in
            try c.run(
                "DELETE FROM image_chunks WHERE image = ? AND n IN"
                    + " (SELECT n FROM image_chunks WHERE image = ? ORDER BY n LIMIT \(Self.chunkBatch))",
                [.text(key), .text(key)])
        }), n > 0 {}
    }

    /// Chunk rows a delete takes at a time.
    static var chunkBatch: Int { 64 }

    /// The key an image's chunks are under (its row's `chunks`, or its
    /// SHA-256 for one committed before that column).
    static var chunkKeySQL: String { "SELECT COALESCE(chunks, sha256) FROM images WHERE sha256 = ?" }

    static func imageRow(_ r: Connection.Row) -> ImageRecord {
        ImageRecord(sha256: r.string(0), size: r.int(1), createdAt: r.int(2))
    }

    public func image(sha256: String) -> StoreRead<ImageRecord> {
        read { c in
            try c.first("SELECT sha256, size, created_at FROM images WHERE sha256 = ?", [.text(sha256)], Self.imageRow)
        }
    }

    public func images() -> [ImageRecord]? {
        try? attempt { c in
            try c.rows(
                "SELECT sha256, size, created_at FROM images ORDER BY sha256" + Self.dialect.byteOrder, [],
                Self.imageRow)
        }.get()
    }

    /// The row and its hash lists in one transaction (the image is gone),
    /// then its chunks in batches.
    public func deleteImage(sha256: String) -> Bool? {
        let found = attempt { c in
            try c.transaction { () throws -> String? in
                guard let key = try c.first(Self.chunkKeySQL, [.text(sha256)], { $0.string(0) }) else { return nil }
                try c.run("DELETE FROM image_block_hashes WHERE image = ?", [.text(sha256)])
                try c.run("DELETE FROM images WHERE sha256 = ?", [.text(sha256)])
                return key
            }
        }
        guard case .success(let key) = found else { return nil }
        guard let key else { return false }
        deleteChunks(under: key)
        return true
    }

    /// One row by its key: serving a block reads one chunk, never the image.
    public func imageChunk(sha256: String, n: Int) -> [UInt8]? {
        try? attempt { c in
            try c.first(
                "SELECT bytes FROM image_chunks WHERE image = (\(Self.chunkKeySQL)) AND n = ?",
                [.text(sha256), .int(Int64(n))]
            ) { $0.bytes(0) }
        }.get() ?? nil
    }

    public func stagedImageChunks() -> Int {
        Int(
            (try? attempt { c in
                try c.first(
                    "SELECT COUNT(*) FROM image_chunks WHERE image LIKE 'upload:%'"
                        + " AND image NOT IN (SELECT chunks FROM images WHERE chunks IS NOT NULL)", []
                ) { $0.int(0) }
            }.get() ?? nil) ?? 0)
    }

    public func keptBlockHashList(sha256: String, blockSize: Int) -> [UInt8]? {
        try? attempt { c in
            try c.first(
                "SELECT hashes FROM image_block_hashes WHERE image = ? AND block_size = ?",
                [.text(sha256), .int(Int64(blockSize))]
            ) { $0.bytes(0) }
        }.get() ?? nil
    }

    /// ON CONFLICT DO NOTHING: two hubs computing the same list keep one.
    public func keepBlockHashList(sha256: String, blockSize: Int, list: [UInt8]) -> Bool {
        use(false) { c in
            try c.run(
                "INSERT INTO image_block_hashes (image, block_size, hashes) VALUES (?, ?, ?)"
                    + " ON CONFLICT (image, block_size) DO NOTHING",
                [.text(sha256), .int(Int64(blockSize)), .bytes(list)])
            return true
        }
    }
}
