// SPDX-License-Identifier: Apache-2.0

import Testing

@testable import ThingIF

@Suite("Update reports and request paths (codec)")
struct UpdateReportTests {
    func parse(_ text: String) -> Result<UpdateReport, UpdateRefusal> { UpdateReport.parse(Array(text.utf8)) }

    func field(_ text: String) -> String? {
        if case .failure(let e) = parse(text) { return String(e.message.split(separator: ":").first ?? "") }
        return nil
    }

    @Test("A report reads back what it wrote, for every status; the sequence numbers of a job order its reports")
    func roundTrip() throws {
        for status in UpdateStatus.allCases {
            let r = UpdateReport(
                attempt: 2, seq: 6145, status: status, bytes: 65_536, of: 200_000, step: "writing \"slot B\" ✓",
                reason: status.isFinal ? "BAD_HASH" : nil, version: "1.2.0")
            let back = try UpdateReport.parse(r.encode()).get()
            #expect(back == r, "\(status)")
        }
        let minimal = try parse(#"{"attempt":1,"seq":0,"status":"ACCEPTED"}"#).get()
        #expect(minimal.bytes == nil && minimal.step == nil && minimal.version == nil && minimal.status == .accepted)
        // A job's reports: each record's report and its progress reports after it are in order.
        var job = UpdateJob(
            offer: try UpdateOffer.parse(
                UpdateOffer.encode(
                    jobID: "j1", attempt: 1, manifest: TestSigner.manifest(for: [1, 2, 3]).bytes,
                    signatures: [ManifestSignature(kid: "k", der: [1])])
            ).get(), commandID: "c", previousVersion: "1.0.0")
        let first = job.sequence()
        let progress = job.sequence(progress: 5000)
        job.records += 1
        #expect(first < progress && progress < job.sequence() && progress == first + 1023)
    }

    @Test(
        "Malformed, wrong-typed, missing, out-of-range, oversized and non-UTF-8 reports are refused, naming the field")
    func badReports() {
        let good = #"{"attempt":1,"seq":3,"status":"DOWNLOADING","bytes":10,"of":20}"#
        #expect(field(good) == nil)
        #expect(field("") == "report" && field("[]") == "report" && field(#"{"attempt":1"#) == "report")
        #expect(UpdateReport.parse([0x7B, 0xFF, 0x7D]).failureCode == .malformed, "not UTF-8")
        #expect(
            field(#"{"attempt":1,"seq":3,"status":"ACCEPTED","step":"\#(String(repeating: "x", count: 2100))"}"#)
                == "report")
        for (text, name) in [
            (#"{"seq":3,"status":"ACCEPTED"}"#, "attempt"), (#"{"attempt":0,"seq":3,"status":"ACCEPTED"}"#, "attempt"),
            (#"{"attempt":"1","seq":3,"status":"ACCEPTED"}"#, "attempt"),
            (#"{"attempt":1,"status":"ACCEPTED"}"#, "seq"), (#"{"attempt":1,"seq":-1,"status":"ACCEPTED"}"#, "seq"),
            (#"{"attempt":1,"seq":1.5,"status":"ACCEPTED"}"#, "seq"),
            (#"{"attempt":1,"seq":9007199254740993,"status":"ACCEPTED"}"#, "seq"),
            (#"{"attempt":1,"seq":3}"#, "status"), (#"{"attempt":1,"seq":3,"status":"accepted"}"#, "status"),
            (#"{"attempt":1,"seq":3,"status":7}"#, "status"),
            (#"{"attempt":1,"seq":3,"status":"DOWNLOADING","bytes":30,"of":20}"#, "bytes"),
            (#"{"attempt":1,"seq":3,"status":"DOWNLOADING","bytes":-1}"#, "bytes"),
            (#"{"attempt":1,"seq":3,"status":"DOWNLOADING","of":99999999999999}"#, "of"),
            (#"{"attempt":1,"seq":3,"status":"ACCEPTED","step":{"a":{"b":{}}}}"#, "step"),
            (#"{"attempt":1,"seq":3,"status":"ACCEPTED","step":"\#(String(repeating: "x", count: 257))"}"#, "step"),
            (#"{"attempt":1,"seq":3,"status":"FAILED","reason":"bad hash"}"#, "reason"),
            (#"{"attempt":1,"seq":3,"status":"FAILED","reason":""}"#, "reason"),
            (#"{"attempt":1,"seq":3,"status":"SUCCEEDED"}"#, "version"),
            (#"{"attempt":1,"seq":3,"status":"SUCCEEDED","version":"1 2"}"#, "version")
        ] {
            #expect(field(text) == name, "\(text)")
        }
        // Fields it does not know are passed over.
        #expect(field(#"{"attempt":1,"seq":3,"status":"ACCEPTED","extra":[1,2]}"#) == nil)
    }

    @Test("Request paths: built and read back; hostile ones are not read")
    func paths() {
        let all: [UpdatePath] = [
            .report(jobID: "r-42.th.1234"), .hashes(jobID: "r-42.th.1234", page: 0), .hashes(jobID: "j", page: 1023),
            .block(jobID: "j", n: 0), .block(jobID: "j", n: 1_048_575)
        ]
        for p in all {
            #expect(UpdatePath.parse(p.suffix) == p, "\(p.suffix)")
            #expect(p.path(thingID: "th.1") == "things/th.1/" + p.suffix)
        }
        for hostile in [
            "", "updates", "updates/", "updates//blocks/1", "updates/../blocks/1", "updates/./blocks/1", "updates/.x",
            "updates/j/blocks", "updates/j/blocks/", "updates/j/blocks/-1", "updates/j/blocks/+1",
            "updates/j/blocks/01",
            "updates/j/blocks/1048576", "updates/j/blocks/99999999999", "updates/j/blocks/1/x",
            "updates/j/blocks/1?x=1",
            "updates/j/hashes/1024", "updates/j/other/1", "updates/j%2F..", "updates/j k", "Updates/j",
            "updates/" + String(repeating: "a", count: 65), "updates/j/blocks/1\u{0}", "updates/j/blocks/١"
        ] {
            #expect(UpdatePath.parse(hostile) == nil, "\(hostile)")
        }
    }
}
