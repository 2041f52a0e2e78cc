// SPDX-License-Identifier: Apache-2.0

import CThingIF

extension thingif_status {
    /// The status as the C API returns it.
    var code: Int32 { Int32(bitPattern: rawValue) }
}

let OK = THINGIF_OK.code

/// One line per status for thingif_strerror().
func statusText(_ status: Int32) -> StaticString {
    switch UInt32(bitPattern: status) {
    case THINGIF_OK.rawValue: return "success"
    case THINGIF_ERR_INVALID.rawValue: return "invalid argument"
    case THINGIF_ERR_NOMEM.rawValue: return "out of memory"
    case THINGIF_ERR_STATE.rawValue: return "not allowed in the current state (is the loop thread running?)"
    case THINGIF_ERR_NOT_ONBOARDED.rawValue: return "the thing is not onboarded"
    case THINGIF_ERR_IN_CALLBACK.rawValue: return "not allowed from inside a thingif callback"
    case THINGIF_ERR_CONNECT.rawValue: return "could not connect to the broker"
    case THINGIF_ERR_NO_CONN.rawValue: return "not connected to the broker"
    case THINGIF_ERR_TIMEOUT.rawValue: return "the framework did not answer in time"
    case THINGIF_ERR_REJECTED.rawValue: return "the framework rejected the request"
    case THINGIF_ERR_PROTOCOL.rawValue: return "the framework's answer was malformed"
    case THINGIF_ERR_STORAGE.rawValue: return "storage directory error"
    case THINGIF_ERR_JSON.rawValue: return "invalid JSON argument"
    case THINGIF_ERR_TLS.rawValue: return "TLS files could not be used, or the TLS handshake failed"
    case THINGIF_ERR_MQTT.rawValue: return "MQTT library error"
    case THINGIF_ERR_FULL.rawValue: return "the outbox is full"
    case THINGIF_ERR_EXISTS.rawValue: return "an action set, timer trigger or end node of that name exists already"
    case THINGIF_ERR_NOT_FOUND.rawValue: return "no action set, timer trigger or end node of that name"
    case THINGIF_ERR_TOO_MANY.rawValue: return "the gateway holds THINGIF_OPT_MAX_END_NODES end nodes already"
    case THINGIF_ERR_UNSUPPORTED.rawValue: return "this build of the library leaves that feature out"
    default: return "unknown status"
    }
}

/// A status code carried as an Error.
struct StatusError: Error {
    let code: Int32
    init(_ code: Int32) { self.code = code }
}
