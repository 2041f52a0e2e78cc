// SPDX-License-Identifier: Apache-2.0

// The hub's state merge (StateMerge.apply, every store's PUT and PATCH of a
// thing's state). Input: one byte whose low bit picks PUT or PATCH, then the
// stored state, a NUL byte, then the upload.
//
// Properties, beyond "no crash":
//  1. PUT gives the upload (as compact JSON when it parses).
//  2. PATCH of two objects gives an object holding every member of the
//     upload with its value, and every member of the old state the upload
//     does not name, with its value; nothing else.
//  3. jansson's memory returns to its baseline after each input.
import CThingIF
import ThingIF

func fuzzCheck(_ input: [UInt8]) {
    guard let first = input.first else { return }
    let method = first & 1 == 0 ? "PUT" : "PATCH"
    let rest = input.dropFirst()
    let cut = rest.firstIndex(of: 0) ?? rest.endIndex
    let old = String(decoding: rest[..<cut], as: UTF8.self)
    let upload = String(decoding: cut < rest.endIndex ? rest[(cut + 1)...] : [], as: UTF8.self)
    let merged = StateMerge.apply(method: method, upload: upload, to: old)
    let u = JSON.parse(upload)
    guard case .success(let uj) = u else {
        if merged != upload { fuzzFail("an upload that is not JSON was changed", input) }
        return
    }
    guard case .success(let m) = JSON.parse(merged) else { fuzzFail("the merged state is not JSON", input) }
    if method == "PUT" || !uj.isObject {
        if json_equal(m.raw, uj.raw) == 0 { fuzzFail("PUT did not give the upload", input) }
        return
    }
    guard case .success(let oj) = JSON.parse(old), oj.isObject else {
        if json_equal(m.raw, uj.raw) == 0 { fuzzFail("PATCH over a non-object did not give the upload", input) }
        return
    }
    if !m.isObject { fuzzFail("PATCH of two objects is not an object", input) }
    for (k, v) in uj.members {
        guard let got = m[k], json_equal(got.raw, v.raw) != 0 else { fuzzFail("PATCH lost the upload's \(k)", input) }
    }
    var expected = uj.count
    for (k, v) in oj.members where uj[k] == nil {
        expected += 1
        guard let got = m[k], json_equal(got.raw, v.raw) != 0 else { fuzzFail("PATCH lost the old \(k)", input) }
    }
    if m.count != expected { fuzzFail("PATCH gave \(m.count) members, expected \(expected)", input) }
}
