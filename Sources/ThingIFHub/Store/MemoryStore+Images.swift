// SPDX-License-Identifier: Apache-2.0

import ThingIF

/// MemoryStore's firmware images: the chunks in memory (a MemoryStore keeps
/// everything there; the SQL stores keep them on disk).
extension MemoryStore {
    public func stageImageChunk(upload: String, n: Int, bytes: [UInt8]) -> Bool {
        data.withLock { d in
            guard (d.imageChunks[upload]?.count ?? 0) == n else { return false }
            d.imageChunks[upload, default: []].append(bytes)
            return true
        }
    }

    public func commitImage(upload: String, sha256: String, size: Int64, now: Int64) -> ImageCommit? {
        data.withLock { d in
            let staged = d.imageChunks.removeValue(forKey: upload) ?? []
            if let existing = d.images[sha256] { return .existing(existing) }
            let r = ImageRecord(sha256: sha256, size: size, createdAt: now)
            d.images[sha256] = r
            d.imageChunks[sha256] = staged
            return .created(r)
        }
    }

    public func discardImageUpload(_ upload: String) {
        data.withLock { d in d.imageChunks[upload] = nil }
    }

    public func image(sha256: String) -> StoreRead<ImageRecord> {
        data.withLock { d in d.images[sha256].map { .found($0) } ?? .notFound }
    }

    public func images() -> [ImageRecord]? {
        data.withLock { d in d.images.values.sorted { $0.sha256 < $1.sha256 } }
    }

    public func deleteImage(sha256: String) -> Bool? {
        data.withLock { d in
            guard d.images.removeValue(forKey: sha256) != nil else { return false }
            d.imageChunks[sha256] = nil
            d.blockHashLists[sha256] = nil
            return true
        }
    }

    public func imageChunk(sha256: String, n: Int) -> [UInt8]? {
        data.withLock { d in
            guard d.images[sha256] != nil, let chunks = d.imageChunks[sha256], n >= 0, n < chunks.count else {
                return nil
            }
            return chunks[n]
        }
    }

    public func stagedImageChunks() -> Int {
        data.withLock { d in
            d.imageChunks.filter { $0.key.hasPrefix("upload:") }.reduce(0) { $0 + $1.value.count }
        }
    }

    public func keptBlockHashList(sha256: String, blockSize: Int) -> [UInt8]? {
        data.withLock { d in d.blockHashLists[sha256]?[blockSize] }
    }

    public func keepBlockHashList(sha256: String, blockSize: Int, list: [UInt8]) -> Bool {
        data.withLock { d in
            guard d.images[sha256] != nil else { return false }
            d.blockHashLists[sha256, default: [:]][blockSize] = list
            return true
        }
    }
}
