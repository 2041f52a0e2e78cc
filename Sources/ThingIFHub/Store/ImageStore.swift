// SPDX-License-Identifier: Apache-2.0

import ThingIF

/// A firmware image as the hub keeps it: content-addressed by its SHA-256
/// (lowercase hex), its size in bytes and when it was first stored (epoch ms).
public struct ImageRecord: Sendable, Equatable {
    public let sha256: String
    public let size: Int64
    public let createdAt: Int64

    public init(sha256: String, size: Int64, createdAt: Int64) {
        self.sha256 = sha256
        self.size = size
        self.createdAt = createdAt
    }
}

/// What committing a staged upload did: a new image, or one stored already
/// (the staged chunks are then dropped: the bytes are the same).
public enum ImageCommit: Sendable, Equatable {
    case created(ImageRecord)
    case existing(ImageRecord)

    public var record: ImageRecord {
        switch self {
        case .created(let r), .existing(let r): return r
        }
    }
}

/// The bytes are kept in chunks of this size (the last may be short): the
/// largest block a manifest may name (UpdateLimits.maxBlockSize), and every
/// block size is a power of two no larger, so a block always lies inside
/// one chunk and serving block n reads one row.
public enum ImageChunks {
    public static let size = UpdateLimits.maxBlockSize
}

/// Firmware images (docs/UPDATES.md, "The hub: images"). One part of
/// HubStore (its conventions hold). An upload is staged chunk by chunk under
/// an upload key while it is hashed (ImageUpload), and made the image of
/// its SHA-256 in one transaction at the end, so a failed or oversized
/// upload leaves no image, and no image ever has part of its bytes.
public protocol ImageStore: AnyObject, Sendable {
    /// Stores chunk `n` of the upload `upload` (a key of ImageUpload's).
    /// False when the store cannot write.
    func stageImageChunk(upload: String, n: Int, bytes: [UInt8]) -> Bool
    /// Makes the staged chunks the image `sha256` of `size` bytes, or drops
    /// them when that image is stored already. nil when the store cannot write.
    func commitImage(upload: String, sha256: String, size: Int64, now: Int64) -> ImageCommit?
    /// Drops an upload's staged chunks (an upload refused or failed).
    func discardImageUpload(_ upload: String)
    func image(sha256: String) -> StoreRead<ImageRecord>
    /// Every image, by SHA-256; nil when the store cannot read.
    func images() -> [ImageRecord]?
    /// True when it deleted the image, false when there was none, nil when
    /// the store cannot write.
    func deleteImage(sha256: String) -> Bool?
    /// Chunk `n` of a stored image (ImageChunks.size bytes, the last may be
    /// short); nil when there is none or the store cannot read.
    func imageChunk(sha256: String, n: Int) -> [UInt8]?
    /// Chunks staged by uploads not yet committed or discarded (for tests
    /// and the docs' figures: what an upload keeps while it runs).
    func stagedImageChunks() -> Int
    /// The block hash list kept for the image and block size, nil when none
    /// is (or the store cannot read).
    func keptBlockHashList(sha256: String, blockSize: Int) -> [UInt8]?
    /// Keeps a block hash list computed from the image's chunks (dropped
    /// with the image). False when the store cannot write.
    func keepBlockHashList(sha256: String, blockSize: Int, list: [UInt8]) -> Bool
}

extension ImageStore {
    /// Block `n` of `blockSize` bytes of the image, read from one chunk.
    public func imageBlock(_ image: ImageRecord, blockSize: Int, n: Int) -> [UInt8]? {
        guard blockSize > 0, ImageChunks.size % blockSize == 0, n >= 0, Int64(n) * Int64(blockSize) < image.size
        else { return nil }
        let offset = n * blockSize
        guard let chunk = imageChunk(sha256: image.sha256, n: offset / ImageChunks.size) else { return nil }
        let at = offset % ImageChunks.size
        guard at < chunk.count else { return nil }
        return Array(chunk[at..<min(at + blockSize, chunk.count)])
    }

    /// The image's block hash list for `blockSize` (32 bytes a block, in
    /// order: what a manifest's `blockHashes` is the SHA-256 of): the one
    /// kept, or computed from the stored bytes one chunk at a time and then
    /// kept. nil when a chunk is missing, the store cannot read or the
    /// block size is not one a manifest may name.
    public func blockHashList(_ image: ImageRecord, blockSize: Int) -> [UInt8]? {
        guard blockSize >= UpdateLimits.minBlockSize, blockSize <= UpdateLimits.maxBlockSize,
            blockSize & (blockSize - 1) == 0
        else { return nil }
        let blocks = Int((image.size + Int64(blockSize) - 1) / Int64(blockSize))
        if let kept = keptBlockHashList(sha256: image.sha256, blockSize: blockSize), kept.count == blocks * 32 {
            return kept
        }
        guard let list = computeBlockHashList(image, blockSize: blockSize) else { return nil }
        // Kept when the store can write; a list not kept is computed again next time.
        _ = keepBlockHashList(sha256: image.sha256, blockSize: blockSize, list: list)
        return list
    }

    /// The list from the stored chunks, one at a time (never kept).
    public func computeBlockHashList(_ image: ImageRecord, blockSize: Int) -> [UInt8]? {
        guard blockSize >= UpdateLimits.minBlockSize, blockSize <= UpdateLimits.maxBlockSize,
            blockSize & (blockSize - 1) == 0
        else { return nil }
        let chunks = Int((image.size + Int64(ImageChunks.size) - 1) / Int64(ImageChunks.size))
        var list: [UInt8] = []
        list.reserveCapacity(Int((image.size + Int64(blockSize) - 1) / Int64(blockSize)) * 32)
        var total: Int64 = 0
        for c in 0..<chunks {
            guard let chunk = imageChunk(sha256: image.sha256, n: c) else { return nil }
            total += Int64(chunk.count)
            let ok = chunk.withUnsafeBytes { all -> Bool in
                var at = 0
                while at < all.count {
                    let end = min(at + blockSize, all.count)
                    list += UpdateCoding.sha256(UnsafeRawBufferPointer(rebasing: all[at..<end]))
                    at = end
                }
                return true
            }
            guard ok else { return nil }
        }
        return total == image.size ? list : nil
    }
}

/// An image's SHA-256 as the API names it: 64 lowercase hex digits.
public enum ImageDigest {
    public static func isValid(_ s: String) -> Bool {
        s.utf8.count == 64
            && s.utf8.allSatisfy {
                ($0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9"))
                    || ($0 >= UInt8(ascii: "a") && $0 <= UInt8(ascii: "f"))
            }
    }
}
