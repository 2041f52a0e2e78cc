// SPDX-License-Identifier: Apache-2.0

import ThingIF

/// Things' state: the last upload and the history, its pages and
/// aggregations. One part of HubStore (its conventions hold: times in milliseconds since the
/// Unix epoch, JSON as compact text, every method safe to call from any
/// thread).
public protocol StateStore: AnyObject, Sendable {
    /// Stores an upload: PUT replaces the state, PATCH merges the object's
    /// members into it. Returns the whole state after it, nil for an unknown thing.
    func applyState(thingID: String, method: String, upload: String, at: Int64) -> String?
    /// Uploads with from <= at < to, oldest first.
    func stateHistory(thingID: String, from: Int64, to: Int64) -> [StateSample]
    /// At most `limit` uploads with from <= at < to that pass every range
    /// of `ranges` (each on a field of `state[alias]`, of the state
    /// without an alias: StateRange's rule), oldest first, starting after
    /// the sample whose cursor is `after` (0: from the first) and past the
    /// first `skip` of those. Returns the cursor of the last sample when
    /// more may follow.
    func stateHistoryPage(
        thingID: String, from: Int64, to: Int64, after: Int64, skip: Int, limit: Int, alias: String?,
        ranges: [StateRange]
    ) -> (samples: [StateSample], next: Int64?)
    /// One aggregation of a field of the uploads with from <= at < to:
    /// `state[alias][field]` (`state[field]` without an alias), per bucket
    /// of `bucketMs` counted from the epoch (nil: the range is one bucket),
    /// for the buckets that have uploads, oldest first. COUNT counts values
    /// other than null; the others take the numbers and pass over the rest;
    /// MIN and MAX also give the upload holding the value (the earliest on
    /// ties). One statement on the SQL stores (StateAggregates.swift). nil:
    /// the store failed.
    /// Only the uploads that pass every range of `ranges` count.
    func aggregateStates(
        thingID: String, alias: String?, field: String, kind: AggregationKind, from: Int64, to: Int64,
        bucketMs: Int64?, ranges: [StateRange]
    ) -> [AggregateBucket]?
}
