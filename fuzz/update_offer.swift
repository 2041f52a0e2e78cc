// SPDX-License-Identifier: Apache-2.0

// What a thing reads of a firmware update before a byte of the image is
// written (docs/UPDATES.md): the `update` action's parameters
// (UpdateOffer.parse, with the signed manifest inside), a manifest's bytes
// (UpdateManifest.parse, which the hub and the CLI use too) and a trust file
// (TrustRing.parse).
//
// Properties, beyond "no crash":
//  1. A parsed manifest is within UpdateLimits: blocks is size / blockSize
//     rounded up, the block lengths add up to size, and the last is not empty.
//  2. An offer encodes and parses back to the same manifest bytes, job and
//     signatures.
//  3. A trust file parses back from its own encoding with the same keys,
//     revocations and security version, and trusts no key it revoked.
//  4. The input as a job's journal (UpdateJournal, update.jsonl) reads
//     back a job within its manifest, and compacted it reads back the same
//     job: status, durable blocks, install starts, trial boots, and a
//     record count (report sequence numbers) that does not go down.
//  5. jansson's memory returns to its baseline after each input.
import CThingIF
@testable import ThingIF

let journalStorage: Storage = {
    var template = Array("/tmp/thingif-fuzz-update.XXXXXX".utf8CString)
    let dir = template.withUnsafeMutableBufferPointer { String(cString: mkdtemp($0.baseAddress!)!) }
    return Storage(directory: dir)!
}()

func checkJournal(_ input: [UInt8]) {
    guard journalStorage.write(UpdateJournal.fileName, input) else {
        fuzzFail("the journal file cannot be written", input)
    }
    let journal = UpdateJournal(storage: journalStorage)
    guard let job = journal.job else { return }
    if job.durable.count != job.manifest.blocks || job.durable.held > job.durable.count {
        fuzzFail("a job holds \(job.durable.held) of \(job.durable.count) blocks for \(job.manifest.blocks)", input)
    }
    guard journal.compact() else { fuzzFail("the journal cannot be compacted", input) }
    guard let back = UpdateJournal(storage: journalStorage).job else { fuzzFail("a compacted job is lost", input) }
    if back.status != job.status || back.durable != job.durable || back.installStarts != job.installStarts
        || (job.status == .trial && back.trialBoots != job.trialBoots) || back.records < job.records
        || !back.jobID.equals(job.jobID)
    {
        fuzzFail("a compacted job reads back as another", input)
    }
}

func checkManifest(_ m: UpdateManifest, _ input: [UInt8]) {
    if m.bytes.count > UpdateLimits.maxManifestBytes { fuzzFail("an oversized manifest taken", input) }
    let bs = Int64(m.blockSize)
    if m.blocks < 1 || m.blocks > UpdateLimits.maxBlocks || Int64(m.blocks) != (m.size + bs - 1) / bs {
        fuzzFail("a manifest with \(m.blocks) blocks of \(m.blockSize) for \(m.size) bytes", input)
    }
    let last = m.blockLength(m.blocks - 1)
    if last < 1 || last > m.blockSize || Int64(m.blocks - 1) * bs + Int64(last) != m.size {
        fuzzFail("the block lengths do not add up to the size", input)
    }
}

func fuzzCheck(_ input: [UInt8]) {
    checkJournal(input)
    if case .success(let m) = UpdateManifest.parse(input) { checkManifest(m, input) }
    if case .success(let params) = JSON.parse(input), case .success(let o) = UpdateOffer.parse(params) {
        checkManifest(o.manifest, input)
        let again = UpdateOffer.encode(
            jobID: o.jobID, attempt: o.attempt, manifest: o.manifest.bytes, signatures: o.signatures,
            trialSeconds: o.trialSeconds)
        guard case .success(let back) = UpdateOffer.parse(again) else {
            fuzzFail("an offer does not parse back from its encoding", input)
            return
        }
        if back.manifest.bytes != o.manifest.bytes || !back.jobID.equals(o.jobID)
            || back.signatures.map({ $0.der }) != o.signatures.map({ $0.der })
        {
            fuzzFail("an offer parses back as another", input)
        }
    }
    if case .success(let ring) = TrustRing.parse(input) {
        guard case .success(let back) = TrustRing.parse(ring.encode()) else {
            fuzzFail("a trust record does not parse back", input)
            return
        }
        if back.keys.map({ $0.pem }) != ring.keys.map({ $0.pem }) || back.revoked.count != ring.revoked.count
            || back.securityVersion != ring.securityVersion
        {
            fuzzFail("a trust record parses back as another", input)
        }
        if ring.keys.contains(where: { ring.isRevoked($0.kid) }) { fuzzFail("a revoked key is trusted", input) }
    }
}
