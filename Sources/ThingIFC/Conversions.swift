// SPDX-License-Identifier: Apache-2.0

import CThingIF

// C <-> Swift conversions shared by the facade. No logic lives here.

/// The Thing behind a `thingif_t *`.
@inline(__always)
func thing(_ t: OpaquePointer?) -> Thing? {
    t.map { Unmanaged<Thing>.fromOpaque(UnsafeRawPointer($0)).takeUnretainedValue() }
}

/// The ActionContext behind a `thingif_action_t *`.
@inline(__always)
func action(_ a: OpaquePointer?) -> ActionContext? {
    a.map { Unmanaged<ActionContext>.fromOpaque(UnsafeRawPointer($0)).takeUnretainedValue() }
}

/// A C string as Swift; nil for NULL or invalid UTF-8.
@inline(__always)
func string(_ p: UnsafePointer<CChar>?) -> String? {
    p.flatMap { String(validatingCString: $0) }
}

/// A required non-empty C string.
@inline(__always)
func nonEmpty(_ p: UnsafePointer<CChar>?) -> String? {
    guard let s = string(p), !s.isEmpty else { return nil }
    return s
}

/// The text of a JSON object, or NULL (nil); a failure for anything else.
func objectText(_ p: UnsafePointer<CChar>?) -> Result<JSON?, StatusError> {
    guard let p else { return .success(nil) }
    guard case .success(let j) = JSON.parse(Array(UnsafeRawBufferPointer(start: p, count: strlen(p)))), j.isObject
    else { return .failure(StatusError(THINGIF_ERR_JSON.code)) }
    return .success(j)
}

let INVALID = THINGIF_ERR_INVALID.code
