// SPDX-License-Identifier: Apache-2.0

// Users, tokens and groups (Kii's /api/apps/{appID}/users, oauth2, groups).

import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdCore
import Logging
import NIOCore
import ThingIF
import ThingIFHub

extension API {
    /// POST …/users, oauth2/token, oauth2/revoke, groups; GET users/me and
    /// users/me/things (the dashboard's).
    var userRoutes: RouteCollection<APIContext> {
        let r = RouteCollection(context: APIContext.self)
        r.post("/api/apps/{appID}/users") { try await createUser($0, $1) }
        r.get("/api/apps/{appID}/users/me") { try await me($0, $1) }
        r.delete("/api/apps/{appID}/users/{userID}") { try await deleteUser($0, $1) }
        r.delete("/api/apps/{appID}/users/me") { try await deleteUser($0, $1) }
        r.get("/api/apps/{appID}/users/me/things") { try await myThings($0, $1) }
        r.post("/api/apps/{appID}/oauth2/token") { try await token($0, $1) }
        r.post("/api/oauth2/token") { try await token($0, $1, appInHeader: true) }
        r.post("/api/apps/{appID}/oauth2/revoke") { try await revoke($0, $1) }
        r.post("/api/apps/{appID}/groups") { try await createGroup($0, $1) }
        return r
    }

    // MARK: users and groups

    func createUser(_ request: Request, _ context: APIContext) async throws -> Response {
        try checkApp(context)
        try spendAnonymous(request)
        let body = try await object(request)
        let loginName = try FormFields.optionalString(body, "loginName")
        let password = try FormFields.optionalString(body, "password")
        let u = try value(try await costly { [hub] in hub.app.createUser(loginName: loginName, password: password) })
        // "_accessToken" is the field Kii's clients read; "accessToken" stays for ours.
        let o = Reply.object([("userID", u.userID), ("accessToken", u.accessToken), ("_accessToken", u.accessToken)])
        if let l = u.loginName { o.set("loginName", string: l) }
        return Reply.json(201, o)
    }

    /// Kii's user deletion: DELETE …/users/{userID} (or …/users/me) with
    /// the user's own token, 204. Any other userID is 404 USER_NOT_FOUND,
    /// whether or not it is another user's (one user cannot tell another
    /// exists). What goes and what stays: docs/PROTOCOL.md §12.
    func deleteUser(_ request: Request, _ context: APIContext) async throws -> Response {
        let user = try user(request, context)
        let id = context.parameters.get("userID").map { String($0) } ?? "me"
        guard id == "me" || id == user.userID else { throw HubError.userNotFound(id) }
        for i in try value(hub.app.deleteUser(user)) { hub.notifications.streams.closeInstallation(i.installationID) }
        return Reply.noContent()
    }

    /// POST …/oauth2/token: a user's login, or Kii's app token. Kii Cloud's
    /// own path, POST /api/oauth2/token, names the app in `X-Kii-AppID`
    /// instead (`appInHeader`; thing-if-ThingSDK's script/owner.sh logs in so).
    func token(_ request: Request, _ context: APIContext, appInHeader: Bool = false) async throws
        -> Response
    {
        if appInHeader {
            guard request.headers[Self.appIDHeader] == hub.options.appID else { throw HubError.appNotFound }
        } else {
            try checkApp(context)
        }
        try spendAnonymous(request)
        let body = try await object(request)
        if body["grant_type"]?.stringValue == "client_credentials" { return try appToken(body) }
        let name = try FormFields.requiredString(body, "username")
        let password = try FormFields.requiredString(body, "password")
        // Password guessing spends the login name's budget.
        try spend("login:" + name)
        let u = try value(try await costly { [hub] in hub.app.login(loginName: name, password: password) })
        let o = Reply.object([("access_token", u.accessToken), ("token_type", "Bearer"), ("id", u.userID)])
        let lifetime = hub.app.userTokenLifetime
        if lifetime > 0 { o.set("expires_in", .int(Int(lifetime))) }
        return Reply.json(200, o)
    }

    /// Kii's app ("anonymous") token, which Kii's thing SDKs fetch before
    /// onboarding by the thing: {"grant_type":"client_credentials",
    /// "client_id": appID, "client_secret": anything}. Kii no longer uses the
    /// app key and lets it be any value, and ebisu sends "dummy"; the token
    /// is random and stored nowhere, so it opens no route (onboarding by the
    /// thing, the one call it is for, takes the thing's password as the
    /// credential and ignores the bearer; every other route answers 403
    /// WRONG_TOKEN). Refusing a secret would protect nothing, so only the
    /// app ID is checked (docs/DECISIONS.md).
    func appToken(_ body: JSON) throws -> Response {
        let clientID = try FormFields.requiredString(body, "client_id")
        _ = try FormFields.requiredString(body, "client_secret")
        try spend("client:" + clientID)
        guard clientID == hub.options.appID else {
            throw HubError(400, "invalid_client", "client_id is not this app's appID")
        }
        return Reply.json(
            200, Reply.object([("access_token", "app." + HubIDs.token()), ("token_type", "Bearer")]))
    }

    /// Revokes a token of the caller's own (RFC 7009 style): {"token": …};
    /// without "token", the one the request carries. 204 either way for a
    /// token of the caller's; 400 for another's or an unknown one.
    func revoke(_ request: Request, _ context: APIContext) async throws -> Response {
        let user = try user(request, context)
        let body = try await object(request)
        let token = try FormFields.optionalString(body, "token") ?? bearer(request)
        guard hub.app.revoke(token: token, by: user) else {
            throw HubError.invalid(
                "the token is not a valid token of the caller", field: body["token"] != nil ? "token" : nil)
        }
        return Reply.noContent()
    }

    func createGroup(_ request: Request, _ context: APIContext) async throws -> Response {
        let user = try user(request, context)
        let body = try await object(request)
        let name = try FormFields.requiredString(body, "name")
        var members: [String] = []
        if let m = body["members"], !m.isNull {
            guard m.isArray else {
                throw HubError.invalid("\"members\" must be an array of userIDs, not \(m.typeName)", field: "members")
            }
            for e in m.elements {
                guard let s = e.stringValue else {
                    throw HubError.invalid("\"members\" must hold userID strings", field: "members")
                }
                members.append(s)
            }
        }
        let g = try value(hub.app.createGroup(name: name, owner: user, members: members))
        return Reply.json(201, Reply.object([("groupID", g.groupID)]))
    }

}
