// SPDX-License-Identifier: Apache-2.0

import ThingIF

/// Kii's grouped state queries: whole grouping intervals, and aggregations.
extension AppAPI {
    /// The thing's grouping interval in ms: the one it was onboarded with,
    /// else Kii's default (AppLimits.defaultGroupingInterval).
    static func interval(of thing: ThingRecord) -> Int64 {
        thing.dataGroupingInterval.flatMap { AppLimits.groupingIntervals[$0] }
            ?? AppLimits.groupingIntervals[AppLimits.defaultGroupingInterval]!
    }

    /// [from, to) grown to the whole grouping intervals it touches (Kii's
    /// live tests: a query of TimeRange(now, now) aggregates the samples of
    /// now's interval, uploaded before now).
    static func wholeIntervals(from: Int64, to: Int64, of thing: ThingRecord) -> (from: Int64, to: Int64) {
        let i = interval(of: thing)
        guard from < to else { return (from, to) }
        let last = to - 1
        let (end, overflow) = (last - last % i).addingReportingOverflow(i)
        return (from - from % i, overflow ? Int64.max : end)
    }

    /// Kii's limit on a grouped query: its range, widened to whole
    /// intervals, may touch at most AppLimits.maxGroupingIntervals of the
    /// thing's grouping intervals (more is a 400, as Kii's SDKs document).
    static func intervalLimit(from: Int64, to: Int64, of thing: ThingRecord) -> HubError? {
        let i = interval(of: thing)
        guard from < to, (to - from) / i > AppLimits.maxGroupingIntervals else { return nil }
        return .invalid(
            "a grouped query's time range spans more than \(AppLimits.maxGroupingIntervals) grouping intervals of \(i / 1000) s",
            field: "clause")
    }

    /// One aggregation over the thing's samples in [from, to) widened to
    /// whole grouping intervals, one bucket per interval with samples (the
    /// groups of the grouped query without aggregations).
    /// Kii's grouped state query with an aggregation: one bucket per
    /// grouping interval with samples in [from, to) widened to whole
    /// intervals, oldest first; of `alias`'s state when given.
    public func aggregateStates(
        on owned: OwnedThing, alias: String?, aggregation a: StateAggregation, from: Int64, to: Int64,
        ranges: [StateRange] = []
    ) -> Result<[AggregateBucket], HubError> {
        let (thing, thingID) = (owned.thing, owned.thingID)
        guard from >= 0, from < to else { return .failure(.invalid("from must be less than to (milliseconds)")) }
        if let alias {
            do { try StateAggregation.checkName(alias, "alias") } catch { return .failure(error) }
        }
        let range = Self.wholeIntervals(from: from, to: to, of: thing)
        if let e = Self.intervalLimit(from: range.from, to: range.to, of: thing) { return .failure(e) }
        guard
            let buckets = store.aggregateStates(
                thingID: thingID, alias: alias, field: a.field, kind: a.kind, from: range.from, to: range.to,
                bucketMs: Self.interval(of: thing), ranges: ranges)
        else { return .failure(.storage) }
        return .success(buckets)
    }
}

extension AppAPI {
    /// Kii's grouped state query: as `stateHistory`, over the whole
    /// grouping intervals the range touches.
    public func groupedStateHistory(
        on owned: OwnedThing, from: Int64, to: Int64, paginationKey: String? = nil,
        limit: Int? = nil, maxPage: Int = HubLimits.defaultMaxHistoryPage, alias: String? = nil,
        ranges: [StateRange] = []
    )
        -> Result<(groups: [StateGroup], next: String?), HubError>
    {
        stateHistory(
            on: owned, from: from, to: to, paginationKey: paginationKey,
            limit: limit, maxPage: maxPage, wholeIntervals: true, alias: alias, ranges: ranges)
    }

}
