// SPDX-License-Identifier: Apache-2.0

// Kii's trait registry on Kii's paths (docs/decisions/kii-trait-registry.md):
// thing types and their firmware versions under /api/apps/{appID}/configuration,
// trait versions and aliases under /thing-if/apps/{appID}. Writes are the
// operator's (the adminToken, requireAdmin: Kii's app admin token); reads
// take the adminToken or any user's token; a thing's own entry
// (…/targets/thing:{thingID}/traits) is its owner's.

import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdCore
import NIOCore
import ThingIF
import ThingIFHub
import ThingIFRules

extension API {
    var traitRoutes: RouteCollection<APIContext> {
        let r = RouteCollection(context: APIContext.self)
        let types = "/api/apps/{appID}/configuration/thing-types"
        r.get(RouterPath(types)) { try traitRead($0, $1) { $0.thingTypeList() } }
        r.put(RouterPath("\(types)/{thingType}")) { try await defineThingType($0, $1) }
        r.get(RouterPath("\(types)/{thingType}/firmware-versions")) { request, context in
            let tt = try param(context, "thingType")
            return try traitRead(request, context) { $0.firmwareVersionList(thingType: tt) }
        }
        r.put(RouterPath("\(types)/{thingType}/firmware-versions/{firmwareVersion}")) {
            try defineFirmwareVersion($0, $1)
        }
        let traits = "/thing-if/apps/{appID}/traits"
        r.get(RouterPath(traits)) { try traitRead($0, $1) { $0.traitList() } }
        r.get(RouterPath("\(traits)/{trait}/versions")) { request, context in
            let trait = try param(context, "trait")
            return try traitRead(request, context) { $0.traitVersionList(trait: trait) }
        }
        r.post(RouterPath("\(traits)/{trait}/versions")) { try await defineTraitVersion($0, $1, numbered: false) }
        r.put(RouterPath("\(traits)/{trait}/versions/{traitVersion}")) {
            try await defineTraitVersion($0, $1, numbered: true)
        }
        r.get(RouterPath("\(traits)/{trait}/versions/{traitVersion}")) { request, context in
            let trait = try param(context, "trait")
            let version = try traitVersionParam(context)
            return try traitRead(request, context) { $0.traitVersion(trait: trait, version: version) }
        }
        let aliases =
            "/thing-if/apps/{appID}/configuration/thing-types/{thingType}/firmware-versions/{firmwareVersion}/aliases"
        r.get(RouterPath(aliases)) { request, context in
            let (tt, fw) = (try param(context, "thingType"), try param(context, "firmwareVersion"))
            return try traitRead(request, context) { $0.traitAliasList(thingType: tt, firmwareVersion: fw) }
        }
        r.get(RouterPath("\(aliases)/{alias}")) { request, context in
            let (tt, fw, alias) = (
                try param(context, "thingType"), try param(context, "firmwareVersion"), try param(context, "alias")
            )
            return try traitRead(request, context) { $0.traitAlias(thingType: tt, firmwareVersion: fw, alias: alias) }
        }
        r.put(RouterPath("\(aliases)/{alias}")) { try await defineTraitAlias($0, $1) }
        // A thing's own entry, for its owner: the dashboard's controls and the CLI's checks.
        r.owned(self, .target).get(RouterPath("/thing-if/apps/{appID}/targets/{target}/traits")) { _, context in
            Reply.json(200, try value(hub.app.traitEntry(of: try context.owner())))
        }
        return r
    }

    /// A read of the registry: the adminToken or a user's token of the app.
    func traitRead(_ request: Request, _ context: APIContext, _ body: (AppAPI) -> Result<JSON, HubError>) throws
        -> Response
    {
        try checkApp(context)
        let given = request.headers[.authorization].flatMap(BearerToken.parse)
        let isAdmin = security.adminToken.map { a in
            given.map { LibCrypto.equal(Array($0.utf8), Array(a.utf8)) } ?? false
        }
        if isAdmin != true { _ = try user(request, context) }
        return Reply.json(200, try value(body(hub.app)))
    }

    func requireRegistryAdmin(_ request: Request, _ context: APIContext) throws {
        try requireAdmin(request, context, route: "the trait registry's writes", off: "defining the trait registry")
    }

    func traitVersionParam(_ context: APIContext) throws -> Int {
        let s = try param(context, "traitVersion")
        guard let v = TraitNames.version(s) else {
            throw HubError.invalid("a trait version is a number from 1 to \(TraitLimits.maxVersion), not \(s)")
        }
        return v
    }

    /// A JSON body (415 for another media type) as bytes, for the registry's parsers.
    func jsonBytes(_ request: Request) async throws -> [UInt8] {
        guard let ct = request.headers[.contentType], Body.isJSONMediaType(ct) else {
            throw HubError.unsupportedMediaType
        }
        return try await Body.bytes(request, limit: security.limits.maxBody)
    }

    func status(_ code: Int) -> Response {
        code == 204 ? Reply.noContent() : Response(status: HTTPResponse.Status(code: code))
    }

    func defineThingType(_ request: Request, _ context: APIContext) async throws -> Response {
        try requireRegistryAdmin(request, context)
        let tt = try param(context, "thingType")
        let body = try await Body.bytes(request, limit: security.limits.maxBody)
        return status(try value(hub.app.defineThingType(tt, body: body)))
    }

    func defineFirmwareVersion(_ request: Request, _ context: APIContext) throws -> Response {
        try requireRegistryAdmin(request, context)
        let (tt, fw) = (try param(context, "thingType"), try param(context, "firmwareVersion"))
        return status(try value(hub.app.defineFirmwareVersion(thingType: tt, firmwareVersion: fw)))
    }

    /// 201 or 200 {"traitVersion":n} (Kii's answer to its POST).
    func defineTraitVersion(_ request: Request, _ context: APIContext, numbered: Bool) async throws -> Response {
        try requireRegistryAdmin(request, context)
        let trait = try param(context, "trait")
        let version = numbered ? try traitVersionParam(context) : nil
        let body = try await jsonBytes(request)
        let (code, n) = try value(hub.app.defineTraitVersion(trait: trait, version: version, body: body))
        let o = JSON.object()
        o.set("traitVersion", .int(n))
        return Reply.json(code, o)
    }

    func defineTraitAlias(_ request: Request, _ context: APIContext) async throws -> Response {
        try requireRegistryAdmin(request, context)
        let (tt, fw, alias) = (
            try param(context, "thingType"), try param(context, "firmwareVersion"), try param(context, "alias")
        )
        let body = try await jsonBytes(request)
        return status(
            try value(hub.app.defineTraitAlias(thingType: tt, firmwareVersion: fw, alias: alias, body: body)))
    }
}
