// SPDX-License-Identifier: Apache-2.0

/// Whether this build carries gateways (docs/GATEWAYS.md §8). CMake's
/// -DTHINGIF_GATEWAYS=OFF compiles with THINGIF_NO_GATEWAYS: every path into
/// the gateway code is then a constant false, so --gc-sections drops it, and
/// the gateway calls answer THINGIF_ERR_UNSUPPORTED
/// ([gateway-c-api.md](../../../docs/decisions/gateway-c-api.md), Figures).
///
/// Read only in Gateway/ (the target resolver and the pipeline's gateway
/// requests) and in the C facade (ThingIFC/EndNodeFacade.swift): the rest of
/// the core asks the resolver, which answers "not a gateway" in such a build.
enum Gateways {
    @inline(__always) static var built: Bool {
        #if THINGIF_NO_GATEWAYS
            return false
        #else
            return true
        #endif
    }
}
