// SPDX-License-Identifier: Apache-2.0

/// A store that several hubs share and that tells each of them of the
/// results another one recorded, so that a hub can notify its own event
/// streams (SSE) of commands another hub finished. PostgresStore is one
/// (LISTEN/NOTIFY).
public protocol SharedResultsFeed: AnyObject {
    /// Calls `handler` with the commandID of every command whose results
    /// another store on the same data records, from a thread of its own.
    func listenForResults(_ handler: @escaping @Sendable (_ commandID: String) -> Void) throws
}
