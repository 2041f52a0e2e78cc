// SPDX-License-Identifier: Apache-2.0

/// Which blocks of an image a job holds, one bit a block (at most
/// `UpdateLimits.maxBlocks`, 128 KiB for the largest image). The journal
/// writes them as ranges, `[[first, last], …]` with both ends included.
public struct UpdateBlocks: Equatable {
    public let count: Int
    private var words: [UInt64]
    public private(set) var held = 0

    public init(count: Int) {
        self.count = max(0, count)
        words = [UInt64](repeating: 0, count: (self.count + 63) / 64)
    }

    public func contains(_ n: Int) -> Bool {
        n >= 0 && n < count && words[n >> 6] & (1 << UInt64(n & 63)) != 0
    }

    /// Marks block `n`; false when it is out of range or held already.
    @discardableResult
    public mutating func insert(_ n: Int) -> Bool {
        guard n >= 0, n < count, !contains(n) else { return false }
        words[n >> 6] |= 1 << UInt64(n & 63)
        held += 1
        return true
    }

    public var isComplete: Bool { held == count }

    /// The lowest block from `n` on that is not held, or nil.
    public func firstMissing(from n: Int) -> Int? {
        var i = max(0, n)
        while i < count {
            let word = words[i >> 6] >> UInt64(i & 63)
            if word == ~0 >> UInt64(i & 63) {
                i = (i | 63) + 1
                continue
            }
            if !contains(i) { return i }
            i += 1
        }
        return nil
    }

    /// The held blocks as ranges, lowest first.
    public var ranges: [(first: Int, last: Int)] { UpdateBlocks.ranges(of: (0..<count).lazy.filter { contains($0) }) }

    /// `blocks` (ascending) as ranges of consecutive blocks.
    static func ranges<S: Sequence<Int>>(of blocks: S) -> [(first: Int, last: Int)] {
        var out: [(first: Int, last: Int)] = []
        for b in blocks {
            if let last = out.last, last.last + 1 == b {
                out[out.count - 1].last = b
            } else {
                out.append((b, b))
            }
        }
        return out
    }

    /// `blocks` in ascending order: an insertion sort, since a checkpoint
    /// holds a few blocks, mostly in order already (the standard library's
    /// stable sort costs 2 KB of code for this one call).
    static func ascending(_ blocks: [Int]) -> [Int] {
        var out = blocks
        var i = 1
        while i < out.count {
            let v = out[i]
            var j = i
            while j > 0 && out[j - 1] > v {
                out[j] = out[j - 1]
                j -= 1
            }
            out[j] = v
            i += 1
        }
        return out
    }

    /// `[[first, last], …]`, for the journal.
    static func encode(_ ranges: [(first: Int, last: Int)]) -> JSON {
        let list = JSON.array()
        for r in ranges {
            let pair = JSON.array()
            pair.append(.int(r.first))
            pair.append(.int(r.last))
            list.append(pair)
        }
        return list
    }

    /// Marks the blocks of `[[first, last], …]`; false (and nothing marked)
    /// when it is not that form within `count`.
    mutating func insert(ranges v: JSON) -> Bool {
        guard v.isArray, v.count <= count else { return false }
        var parsed: [(Int, Int)] = []
        for pair in v.elements {
            guard pair.isArray, pair.count == 2, let a = pair.elements[0].intValue, let b = pair.elements[1].intValue,
                a >= 0, a <= b, b < count
            else { return false }
            parsed.append((a, b))
        }
        for (a, b) in parsed { for n in a...b { insert(n) } }
        return true
    }

    public static func == (a: UpdateBlocks, b: UpdateBlocks) -> Bool { a.count == b.count && a.words == b.words }
}
