// SPDX-License-Identifier: Apache-2.0

import CThingIF

/// Action handlers by scope. Lookup order for a schema command: exact schema
/// and version, the schema at any version, any schema (schema NULL), the
/// catch-all. For a trait command: the alias, any schema, the catch-all.
struct HandlerRegistry {
    struct Handler {
        var callback: thingif_action_cb
        var userdata: UnsafeMutableRawPointer?
    }

    private enum Scope: Hashable {
        case schema(ByteKey, Int)
        case alias(ByteKey)
        case any
    }

    private struct Key: Hashable {
        var scope: Scope
        var action: ByteKey
    }

    private var table: [Key: Handler] = [:]
    private(set) var catchAll: Handler?

    mutating func setSchema(_ schema: String?, version: Int, action: String, _ handler: Handler?) {
        let scope: Scope = schema.map { .schema(ByteKey($0), version) } ?? .any
        table[Key(scope: scope, action: ByteKey(action))] = handler
    }

    mutating func setAlias(_ alias: String, action: String, _ handler: Handler?) {
        table[Key(scope: .alias(ByteKey(alias)), action: ByteKey(action))] = handler
    }

    mutating func setCatchAll(_ handler: Handler?) { catchAll = handler }

    func lookup(schema: String?, version: Int, alias: String?, action: String) -> Handler? {
        var scopes: [Scope] = []
        if let alias {
            scopes.append(.alias(ByteKey(alias)))
        } else if let schema {
            scopes.append(.schema(ByteKey(schema), version))
            if version != 0 { scopes.append(.schema(ByteKey(schema), 0)) }
        }
        scopes.append(.any)
        let name = ByteKey(action)
        for s in scopes {
            if let h = table[Key(scope: s, action: name)] { return h }
        }
        return catchAll
    }
}
