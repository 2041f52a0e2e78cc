// SPDX-License-Identifier: Apache-2.0

import Crypto
import ThingIF

/// Why an upload stored no image.
public enum ImageUploadError: Error, Equatable, Sendable {
    /// The body crossed the cap (bytes): nothing is kept.
    case tooLarge(Int64)
    /// No bytes at all.
    case empty
    /// The store could not write.
    case storage
}

/// One image upload, streamed: each piece of the body is hashed on the way
/// and goes into a buffer of one chunk (ImageChunks.size); each full chunk
/// is staged in the store at once, so the upload holds at most one chunk
/// plus the piece being added, whatever the image's size. The cap is
/// checked before a piece is taken: crossing it discards what was staged.
/// Not thread-safe: one request's handler feeds it in order.
public final class ImageUpload {
    public let key: String
    public let maxBytes: Int64
    private let store: ImageStore
    private var hasher = SHA256()
    private var pending: [UInt8] = []
    private var chunks = 0
    private var done = false
    /// Bytes taken so far.
    public private(set) var size: Int64 = 0
    /// The most bytes the upload held at once (its buffer): the figure that
    /// shows the upload's memory is bounded by a chunk, not the image.
    public private(set) var peakBuffered = 0
    /// Chunks staged so far, each as soon as it was full.
    public var chunksStaged: Int { chunks }

    private let stats: ImageUploadStats?

    public init(store: ImageStore, maxBytes: Int64, stats: ImageUploadStats? = nil) {
        self.store = store
        self.stats = stats
        self.maxBytes = maxBytes
        self.key = "upload:" + HubIDs.token()
        pending.reserveCapacity(ImageChunks.size)
    }

    /// Takes the next piece of the body.
    public func append(_ piece: UnsafeRawBufferPointer) throws {
        precondition(!done, "an upload takes no bytes after finish or discard")
        guard size + Int64(piece.count) <= maxBytes else {
            discard()
            throw ImageUploadError.tooLarge(maxBytes)
        }
        size += Int64(piece.count)
        hasher.update(bufferPointer: piece)
        var at = 0
        while at < piece.count {
            let n = min(ImageChunks.size - pending.count, piece.count - at)
            pending += UnsafeRawBufferPointer(rebasing: piece[at..<at + n])
            peakBuffered = max(peakBuffered, pending.count)
            at += n
            if pending.count == ImageChunks.size { try stage() }
        }
    }

    public func append(_ bytes: [UInt8]) throws {
        try bytes.withUnsafeBytes { try append($0) }
    }

    private func stage() throws {
        guard store.stageImageChunk(upload: key, n: chunks, bytes: pending) else {
            discard()
            throw ImageUploadError.storage
        }
        chunks += 1
        pending.removeAll(keepingCapacity: true)
        stats?.staged()
    }

    /// Stages the last chunk and makes the upload the image of its hash.
    public func finish() throws -> ImageCommit {
        precondition(!done, "an upload finishes once")
        guard size > 0 else {
            discard()
            throw ImageUploadError.empty
        }
        if !pending.isEmpty { try stage() }
        let sha = Platform.hex(Array(hasher.finalize()))
        done = true
        guard let commit = store.commitImage(upload: key, sha256: sha, size: size, now: Platform.epochMs()) else {
            store.discardImageUpload(key)
            throw ImageUploadError.storage
        }
        return commit
    }

    /// Drops what was staged (the request failed or was refused).
    public func discard() {
        guard !done else { return }
        done = true
        pending = []
        store.discardImageUpload(key)
    }
}

/// The figures of uploads, for the docs and the tests that show an
/// upload's memory is bounded: the largest buffer any finished upload held,
/// the last one's size and chunks, and the chunks staged by every upload as
/// they are written (with waiters, so a test waits on the event, not a
/// time). Thread-safe.
public final class ImageUploadStats: Sendable {
    public struct Figures: Sendable, Equatable {
        public var uploads = 0
        public var peakBuffered = 0
        public var lastSize: Int64 = 0
        public var lastChunks = 0
        /// Chunks staged so far by all uploads, counted as each is written.
        public var chunksStaged = 0
    }

    private struct State {
        var figures = Figures()
        var waiters: [(Int, CheckedContinuation<Void, Never>)] = []
    }

    private let state = Locked(State())

    public init() {}

    public func record(_ u: ImageUpload) {
        state.withLock { s in
            s.figures.uploads += 1
            s.figures.peakBuffered = max(s.figures.peakBuffered, u.peakBuffered)
            s.figures.lastSize = u.size
            s.figures.lastChunks = u.chunksStaged
        }
    }

    func staged() {
        let ready = state.withLock { s -> [CheckedContinuation<Void, Never>] in
            s.figures.chunksStaged += 1
            let n = s.figures.chunksStaged
            let due = s.waiters.filter { $0.0 <= n }.map(\.1)
            s.waiters.removeAll { $0.0 <= n }
            return due
        }
        for c in ready { c.resume() }
    }

    /// Returns once `n` chunks in all have been staged.
    public func waitForStagedChunks(_ n: Int) async {
        await withCheckedContinuation { (c: CheckedContinuation<Void, Never>) in
            let now = state.withLock { s -> Bool in
                if s.figures.chunksStaged >= n { return true }
                s.waiters.append((n, c))
                return false
            }
            if now { c.resume() }
        }
    }

    public var current: Figures { state.withLock { $0.figures } }
}
