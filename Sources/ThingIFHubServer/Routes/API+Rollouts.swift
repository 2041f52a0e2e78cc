// SPDX-License-Identifier: Apache-2.0

// Rollouts, the operator's calls (docs/UPDATES.md §11): thin routes over
// the app door (AppAPI+Rollouts).

import Hummingbird
import ThingIF
import ThingIFHub

extension API {
    /// Every route needs the operator's token (requireAdmin), as the update and image routes do.
    var rolloutRoutes: RouteCollection<APIContext> {
        let r = RouteCollection(context: APIContext.self)
        let u = "/api/apps/{appID}/rollouts"
        r.post(RouterPath(u)) { try await createRollout($0, $1) }
        r.get(RouterPath(u)) { try listRollouts($0, $1) }
        r.get(RouterPath(u + "/{rolloutID}")) { try rollout($0, $1) }
        r.get(RouterPath(u + "/{rolloutID}/things")) { try rolloutThings($0, $1) }
        for change in [AppAPI.RolloutChange.pause, .resume, .cancel] {
            r.post(RouterPath(u + "/{rolloutID}/" + change.rawValue)) { try changeRollout($0, $1, change) }
        }
        return r
    }

    private func rolloutAdmin(_ request: Request, _ context: APIContext) throws {
        try requireAdmin(request, context, route: "…/rollouts", off: "rollouts")
    }

    /// POST …/rollouts: 201, the rollout with its members' counts.
    func createRollout(_ request: Request, _ context: APIContext) async throws -> Response {
        try rolloutAdmin(request, context)
        let body = try await object(request)
        let (r, _) = try hub.app.createRollout(form: body).get()
        let counts = try hub.app.rolloutCounts(id: r.rolloutID).get()
        return Reply.json(201, AppAPI.rolloutJSON(r, counts: counts))
    }

    /// GET …/rollouts: {"rollouts":[…]}, newest first.
    func listRollouts(_ request: Request, _ context: APIContext) throws -> Response {
        try rolloutAdmin(request, context)
        let a = JSON.array()
        for r in try hub.app.rollouts().get() {
            a.append(AppAPI.rolloutJSON(r, counts: try hub.app.rolloutCounts(id: r.rolloutID).get()))
        }
        let o = JSON.object()
        o.set("rollouts", a)
        return Reply.json(200, o)
    }

    /// GET …/rollouts/{rolloutID}: its settings, status and counts by state.
    func rollout(_ request: Request, _ context: APIContext) throws -> Response {
        try rolloutAdmin(request, context)
        let r = try hub.app.rollout(id: try param(context, "rolloutID")).get()
        return Reply.json(200, AppAPI.rolloutJSON(r, counts: try hub.app.rolloutCounts(id: r.rolloutID).get()))
    }

    /// GET …/rollouts/{rolloutID}/things: {"things":[{thingID,state,jobID,releasedAt}]}.
    func rolloutThings(_ request: Request, _ context: APIContext) throws -> Response {
        try rolloutAdmin(request, context)
        let a = JSON.array()
        for m in try hub.app.rolloutMembers(id: try param(context, "rolloutID")).get() {
            a.append(AppAPI.rolloutMemberJSON(m))
        }
        let o = JSON.object()
        o.set("things", a)
        return Reply.json(200, o)
    }

    /// POST …/rollouts/{rolloutID}/pause|resume|cancel: 200 the rollout; 409 ROLLOUT_STATUS.
    func changeRollout(_ request: Request, _ context: APIContext, _ change: AppAPI.RolloutChange) throws -> Response {
        try rolloutAdmin(request, context)
        let r = try hub.app.changeRollout(id: try param(context, "rolloutID"), change).get()
        return Reply.json(200, AppAPI.rolloutJSON(r, counts: try hub.app.rolloutCounts(id: r.rolloutID).get()))
    }
}
