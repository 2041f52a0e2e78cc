// SPDX-License-Identifier: Apache-2.0

import Testing
@testable import ThingIF

/// The handler registry's lookup order, without a broker.
@Suite("Handler registry (fast)")
struct FastHandlerRegistryTests {
    /// Handlers told apart by their userdata.
    private static func handler(_ tag: Int) -> HandlerRegistry.Handler {
        HandlerRegistry.Handler(callback: { _, _ in }, userdata: UnsafeMutableRawPointer(bitPattern: tag))
    }

    private static func tag(_ h: HandlerRegistry.Handler?) -> Int? { h.map { Int(bitPattern: $0.userdata) } }

    @Test("Schema and version, then the schema at any version, then any schema, then the catch-all; aliases apart")
    func lookupOrder() {
        var r = HandlerRegistry()
        #expect(r.lookup(schema: "S", version: 1, alias: nil, action: "a") == nil)
        r.setCatchAll(Self.handler(1))
        #expect(Self.tag(r.lookup(schema: "S", version: 1, alias: nil, action: "a")) == 1)
        r.setSchema(nil, version: 0, action: "a", Self.handler(2))
        #expect(Self.tag(r.lookup(schema: "S", version: 1, alias: nil, action: "a")) == 2)
        #expect(Self.tag(r.lookup(schema: nil, version: 0, alias: "AC", action: "a")) == 2)
        r.setSchema("S", version: 0, action: "a", Self.handler(3))
        #expect(Self.tag(r.lookup(schema: "S", version: 7, alias: nil, action: "a")) == 3)
        r.setSchema("S", version: 1, action: "a", Self.handler(4))
        #expect(Self.tag(r.lookup(schema: "S", version: 1, alias: nil, action: "a")) == 4)
        #expect(Self.tag(r.lookup(schema: "S", version: 2, alias: nil, action: "a")) == 3)
        #expect(Self.tag(r.lookup(schema: "T", version: 1, alias: nil, action: "a")) == 2)
        #expect(
            Self.tag(r.lookup(schema: "S", version: 1, alias: nil, action: "b")) == 1, "another action: the catch-all")
        // An alias never sees schema handlers, only its own, any-schema and the catch-all.
        r.setAlias("AC", action: "a", Self.handler(5))
        #expect(Self.tag(r.lookup(schema: nil, version: 0, alias: "AC", action: "a")) == 5)
        #expect(Self.tag(r.lookup(schema: nil, version: 0, alias: "S", action: "a")) == 2)
        // Removing handlers falls back again.
        r.setSchema("S", version: 1, action: "a", nil)
        #expect(Self.tag(r.lookup(schema: "S", version: 1, alias: nil, action: "a")) == 3)
        r.setSchema("S", version: 0, action: "a", nil)
        r.setSchema(nil, version: 0, action: "a", nil)
        r.setCatchAll(nil)
        #expect(r.lookup(schema: "S", version: 1, alias: nil, action: "a") == nil)
        #expect(Self.tag(r.lookup(schema: nil, version: 0, alias: "AC", action: "a")) == 5)
    }
}
