// SPDX-License-Identifier: Apache-2.0

import CThingIF
import ThingIF

/// How a state upload changes the stored state, the same for every store.
public enum StateMerge {
    /// PUT replaces; PATCH sets the upload's members on the old state.
    public static func apply(method: String, upload: String, to old: String?) -> String {
        guard method == "PATCH", let old, case .success(let o) = JSON.parse(old),
            case .success(let u) = JSON.parse(upload), o.isObject, u.isObject
        else {
            return (try? JSON.parse(upload).get().dump()) ?? upload
        }
        json_object_update(o.raw, u.raw)
        return o.dump()
    }
}
