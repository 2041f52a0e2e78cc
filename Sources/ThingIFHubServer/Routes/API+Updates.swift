// SPDX-License-Identifier: Apache-2.0

// A single thing's update jobs, the operator's calls (docs/UPDATES.md §9):
// thin routes over the app door (AppAPI+Updates).

import Hummingbird
import ThingIF
import ThingIFHub

extension API {
    /// Every route needs the operator's token (requireAdmin), as the image routes do.
    var updateRoutes: RouteCollection<APIContext> {
        let r = RouteCollection(context: APIContext.self)
        let u = "/api/apps/{appID}/things/{thingID}/updates"
        r.post(RouterPath(u)) { try await createUpdateJob($0, $1) }
        r.get(RouterPath(u)) { try listUpdateJobs($0, $1) }
        r.get(RouterPath(u + "/{jobID}")) { try updateJob($0, $1) }
        r.post(RouterPath(u + "/{jobID}/cancel")) { try cancelUpdateJob($0, $1) }
        return r
    }

    /// POST …/things/{thingID}/updates: 201 {"jobID","commandID","attempt"}.
    func createUpdateJob(_ request: Request, _ context: APIContext) async throws -> Response {
        try requireAdmin(request, context, route: "…/updates", off: "update jobs")
        let thingID = try param(context, "thingID")
        let body = try await object(request)
        let job = try hub.app.createUpdateJob(thingID: thingID, form: body).get()
        let o = JSON.object()
        o.set("jobID", string: job.jobID)
        o.set("commandID", string: job.commandID)
        o.set("attempt", .int(job.attempt))
        return Reply.json(201, o)
    }

    /// GET …/things/{thingID}/updates: {"updates":[…]}, newest first.
    func listUpdateJobs(_ request: Request, _ context: APIContext) throws -> Response {
        try requireAdmin(request, context, route: "…/updates", off: "update jobs")
        let jobs = try hub.app.updateJobs(thingID: try param(context, "thingID")).get()
        let a = JSON.array()
        for j in jobs { a.append(AppAPI.updateJobJSON(j)) }
        let o = JSON.object()
        o.set("updates", a)
        return Reply.json(200, o)
    }

    /// GET …/things/{thingID}/updates/{jobID}: the job; 404 for none.
    func updateJob(_ request: Request, _ context: APIContext) throws -> Response {
        try requireAdmin(request, context, route: "…/updates", off: "update jobs")
        let job = try hub.app.updateJob(thingID: try param(context, "thingID"), jobID: try param(context, "jobID"))
            .get()
        return Reply.json(200, AppAPI.updateJobJSON(job))
    }

    /// POST …/things/{thingID}/updates/{jobID}/cancel: 200 the job, CANCELLED;
    /// 409 UPDATE_TOO_LATE (installing) or UPDATE_JOB_ENDED; 404 for none.
    func cancelUpdateJob(_ request: Request, _ context: APIContext) throws -> Response {
        try requireAdmin(request, context, route: "…/updates", off: "update jobs")
        let job = try hub.app.cancelUpdateJob(
            thingID: try param(context, "thingID"), jobID: try param(context, "jobID")
        ).get()
        return Reply.json(200, AppAPI.updateJobJSON(job))
    }
}
