// SPDX-License-Identifier: Apache-2.0

/// Which blocks of a job's image to ask for, and what to do with each that
/// arrives (docs/UPDATES.md §6): at most `window` requests in flight, the
/// lowest missing blocks first; each block checked against the signed hash
/// list before a byte of it reaches the sink; a bad one asked for again, at
/// most `maxBadCopies` times before the job fails; the blocks written since
/// the last checkpoint made durable (the sink's flush, then the journal's
/// record) every `checkpointBlocks` blocks. So a power cut costs at most one
/// checkpoint's blocks plus the window's, fetched again after the restart.
///
/// No I/O of its own: the caller sends the requests, writes the sink,
/// flushes it and records the checkpoint. Not thread-safe: the loop thread
/// owns it.
struct UpdateDownload {
    /// A bad copy of one block this many times fails the job (BAD_HASH).
    static let maxBadCopies = 3

    let manifest: UpdateManifest
    let hashes: BlockHashList
    let window: Int
    let checkpointBlocks: Int
    /// Durable (recorded in the journal) or written since the last checkpoint.
    private(set) var written: UpdateBlocks
    /// Written to the sink, not yet durable.
    private(set) var unflushed: [Int] = []
    private(set) var inFlight: [Int] = []
    /// Blocks that came bad, and how often (rare: a list, not a dictionary).
    private var badCopies: [(block: Int, copies: Int)] = []
    /// No block below it is missing.
    private var cursor = 0

    init(manifest: UpdateManifest, hashes: BlockHashList, durable: UpdateBlocks, window: Int, checkpointBlocks: Int) {
        self.manifest = manifest
        self.hashes = hashes
        self.window = max(1, window)
        self.checkpointBlocks = max(1, checkpointBlocks)
        written = durable
    }

    var isComplete: Bool { written.isComplete }

    /// The blocks to ask for now (marked in flight): the lowest missing ones
    /// not yet asked for, up to the window.
    mutating func requests() -> [Int] {
        var out: [Int] = []
        var n = cursor
        while inFlight.count < window, let next = written.firstMissing(from: n) {
            if !inFlight.contains(next) {
                inFlight.append(next)
                out.append(next)
            }
            n = next + 1
        }
        if let first = written.firstMissing(from: cursor) { cursor = first } else { cursor = written.count }
        return out
    }

    enum Arrival: Equatable {
        /// Write these bytes at `offset` of the image, then call `wrote`.
        case write(offset: Int64)
        /// The copy was bad; it is asked for again (in `requests()`).
        case refetch(UpdateRefusal)
        /// One block came bad `maxBadCopies` times: the job fails.
        case fail(UpdateRefusal)
        /// Not asked for, or held already: dropped.
        case ignore
    }

    /// Block `n` arrived with `bytes`: checked against its hash before
    /// anything is written.
    mutating func arrived(block n: Int, _ bytes: UnsafeRawBufferPointer) -> Arrival {
        guard let at = inFlight.firstIndex(of: n), !written.contains(n) else { return .ignore }
        inFlight.remove(at: at)
        switch hashes.check(block: n, bytes, of: manifest) {
        case .success:
            return .write(offset: Int64(n) * Int64(manifest.blockSize))
        case .failure(let refusal):
            var copies = 1
            if let i = badCopies.firstIndex(where: { $0.block == n }) {
                copies = badCopies[i].copies + 1
                badCopies[i].copies = copies
            } else {
                badCopies.append((n, 1))
            }
            return copies >= UpdateDownload.maxBadCopies ? .fail(refusal) : .refetch(refusal)
        }
    }

    /// A request went unanswered: it may be asked for again.
    mutating func timedOut(block n: Int) {
        if let at = inFlight.firstIndex(of: n) { inFlight.remove(at: at) }
    }

    /// Block `n`'s bytes are in the sink (not yet flushed). True when a
    /// checkpoint is due: flush the sink, then record `takeCheckpoint()`.
    mutating func wrote(block n: Int) -> Bool {
        if written.insert(n) { unflushed.append(n) }
        return unflushed.count >= checkpointBlocks || (written.isComplete && !unflushed.isEmpty)
    }

    /// The blocks to record as durable (the sink's flush has returned).
    mutating func takeCheckpoint() -> [Int] {
        defer { unflushed.removeAll(keepingCapacity: true) }
        return unflushed
    }
}
