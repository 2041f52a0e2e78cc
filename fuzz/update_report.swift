// SPDX-License-Identifier: Apache-2.0

// What the hub reads of a thing's update job before it looks the job up
// (docs/UPDATES.md §7): a report's body (UpdateReport.parse) and a
// request's path after things/{thingID}/ (UpdatePath.parse).
//
// Properties, beyond "no crash":
//  1. A parsed report is within its bounds (seq, attempt, bytes ≤ of, a
//     SUCCEEDED one names its version) and parses back from its encoding
//     as itself.
//  2. A parsed path names a job that is a name (never "." or ".."), a
//     block or page within the largest image, and builds back to the
//     input.
//  3. jansson's memory returns to its baseline after each input.
import CThingIF
@testable import ThingIF

func fuzzCheck(_ input: [UInt8]) {
    if case .success(let r) = UpdateReport.parse(input) {
        if r.seq < 0 || r.seq > UpdateReport.maxSequence || r.attempt < 1 || r.attempt > UpdateOffer.maxAttempt {
            fuzzFail("a report out of its bounds taken", input)
        }
        if let b = r.bytes, let of = r.of, b > of { fuzzFail("bytes above of taken", input) }
        if r.status == .succeeded && r.version == nil { fuzzFail("a SUCCEEDED report without its version", input) }
        guard case .success(let back) = UpdateReport.parse(r.encode()), back == r else {
            fuzzFail("a report does not parse back as itself", input)
        }
    }
    let text = String(decoding: input, as: UTF8.self)
    if let p = UpdatePath.parse(text) {
        if !UpdateCoding.isName(p.jobID) || p.jobID.utf8.first == UInt8(ascii: ".") {
            fuzzFail("a path with job \(p.jobID) read", input)
        }
        switch p {
        case .block(_, let n) where n < 0 || n >= UpdateLimits.maxBlocks: fuzzFail("block \(n) read", input)
        case .hashes(_, let page) where page < 0 || page * UpdatePath.hashesPerPage >= UpdateLimits.maxBlocks:
            fuzzFail("page \(page) read", input)
        default: break
        }
        if !p.suffix.equals(text) { fuzzFail("a path does not build back to its input", input) }
    }
}
