// SPDX-License-Identifier: Apache-2.0

/// The newest `capacity` entries, oldest first: a ring, so that an entry
/// added to a full log replaces the oldest in place (an Array's
/// removeFirst moved the whole log on every request).
struct RecentLog<Entry> {
    let capacity: Int
    private var entries: [Entry] = []
    /// Where the next entry goes once the log is full (its oldest).
    private var next = 0

    init(capacity: Int) {
        self.capacity = max(1, capacity)
        entries.reserveCapacity(self.capacity)
    }

    /// Adds `e`; returns the entry it pushed out of a full log.
    @discardableResult
    mutating func append(_ e: Entry) -> Entry? {
        guard entries.count == capacity else {
            entries.append(e)
            return nil
        }
        let oldest = entries[next]
        entries[next] = e
        next = (next + 1) % capacity
        return oldest
    }

    /// Every entry kept, oldest first.
    var all: [Entry] { Array(entries[next...] + entries[..<next]) }
}
