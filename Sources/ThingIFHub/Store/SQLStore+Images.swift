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

    /// One transaction: the image's row, then its staged chunks renamed to
    /// it; when the image is there already (the same bytes uploaded again,
    /// here or by another hub), the staged chunks are dropped instead. The
    /// INSERT … ON CONFLICT DO NOTHING makes two hubs committing the same
    /// image at once agree: one creates it, the other finds it.
    public func commitImage(upload: String, sha256: String, size: Int64, now: Int64) -> ImageCommit? {
        use(nil) { c in
            try c.transaction { () throws -> ImageCommit in
                let inserted = try c.run(
                    "INSERT INTO images (sha256, size, created_at) VALUES (?, ?, ?) ON CONFLICT (sha256) DO NOTHING",
                    [.text(sha256), .int(size), .int(now)])
                if inserted == 1 {
                    try c.run("UPDATE image_chunks SET image = ? WHERE image = ?", [.text(sha256), .text(upload)])
                    return .created(ImageRecord(sha256: sha256, size: size, createdAt: now))
                }
                try c.run("DELETE FROM image_chunks WHERE image = ?", [.text(upload)])
                let existing = try c.first(
                    "SELECT sha256, size, created_at FROM images WHERE sha256 = ?", [.text(sha256)], Self.imageRow)
                return .existing(existing ?? ImageRecord(sha256: sha256, size: size, createdAt: now))
            }
        }
    }

    public func discardImageUpload(_ upload: String) {
        _ = attempt { c in try c.run("DELETE FROM image_chunks WHERE image = ?", [.text(upload)]) }
    }

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

    public func deleteImage(sha256: String) -> Bool? {
        try? attempt { c in
            try c.transaction { () throws -> Bool in
                try c.run("DELETE FROM image_chunks WHERE image = ?", [.text(sha256)])
                try c.run("DELETE FROM image_block_hashes WHERE image = ?", [.text(sha256)])
                return try c.run("DELETE FROM images WHERE sha256 = ?", [.text(sha256)]) == 1
            }
        }.get()
    }

    /// One row by its key: serving a block reads one chunk, never the image.
    public func imageChunk(sha256: String, n: Int) -> [UInt8]? {
        try? attempt { c in
            try c.first(
                "SELECT bytes FROM image_chunks WHERE image = ? AND n = ?", [.text(sha256), .int(Int64(n))]
            ) { $0.bytes(0) }
        }.get() ?? nil
    }

    public func stagedImageChunks() -> Int {
        Int(
            (try? attempt { c in
                try c.first("SELECT COUNT(*) FROM image_chunks WHERE image LIKE 'upload:%'", []) { $0.int(0) }
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
