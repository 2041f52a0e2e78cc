// SPDX-License-Identifier: Apache-2.0

/// A thing's report of its update job (docs/UPDATES.md §7), the body of
/// `PUT things/{thingID}/updates/{jobID}`, sent through the outbox:
///
///     {"attempt":1,"seq":6144,"status":"DOWNLOADING","bytes":65536,"of":200000,
///      "step":"…","reason":"BAD_HASH","version":"1.2.0"}
///
/// `seq` grows for one job on one thing (UpdateJob.sequence), so the hub
/// keeps the report with the highest and drops one that arrives late.
/// `version` is the version the thing runs; a SUCCEEDED report must carry it,
/// and only then does the hub take it as the thing's firmware version. The
/// thing writes it and the hub reads it with this one codec.
public struct UpdateReport: Equatable {
    /// The body's bytes at most: a report is small, and the hub reads it
    /// before it knows the job.
    public static let maxBytes = 2048
    /// `step`: what the installer is doing, for people.
    public static let maxStep = 256
    /// `reason`: a code of capitals, digits and '_'.
    public static let maxReason = 64
    /// `seq` at most: JSON's exact integers.
    public static let maxSequence: Int64 = 1 << 53

    public let attempt: Int
    public let seq: Int64
    public let status: UpdateStatus
    /// Image bytes held, of `of` (DOWNLOADING), or the installer's progress.
    public let bytes: Int64?
    public let of: Int64?
    public let step: String?
    public let reason: String?
    public let version: String?

    public init(
        attempt: Int, seq: Int64, status: UpdateStatus, bytes: Int64? = nil, of: Int64? = nil, step: String? = nil,
        reason: String? = nil, version: String? = nil
    ) {
        self.attempt = attempt
        self.seq = seq
        self.status = status
        self.bytes = bytes
        self.of = of
        self.step = step
        self.reason = reason
        self.version = version
    }

    public static func parse(_ body: [UInt8]) -> Result<UpdateReport, UpdateRefusal> {
        guard body.count <= maxBytes else { return .failure(.malformed("report", "more than 2048 bytes")) }
        guard case .success(let o) = JSON.parse(body), o.isObject else {
            return .failure(.malformed("report", "not a JSON object"))
        }
        guard let attempt = o["attempt"]?.intValue, attempt >= 1, attempt <= UpdateOffer.maxAttempt else {
            return .failure(.malformed("attempt", "an integer from 1 to 1000"))
        }
        guard let seq = o["seq"]?.int64Value, seq >= 0, seq <= maxSequence else {
            return .failure(.malformed("seq", "an integer from 0 to 2^53"))
        }
        guard let name = o["status"]?.stringValue, let status = UpdateStatus(named: name) else {
            return .failure(.malformed("status", "one of the statuses of docs/UPDATES.md"))
        }
        let maxImage = Int64(UpdateLimits.maxBlocks) * Int64(UpdateLimits.maxBlockSize)
        var bytes: Int64?
        var of: Int64?
        if let v = o["of"] {
            guard let n = v.int64Value, n >= 0, n <= maxImage else {
                return .failure(.malformed("of", "an integer from 0 to the largest image's size"))
            }
            of = n
        }
        if let v = o["bytes"] {
            guard let n = v.int64Value, n >= 0, n <= (of ?? maxImage) else {
                return .failure(.malformed("bytes", "an integer from 0 to of"))
            }
            bytes = n
        }
        var step: String?
        if let v = o["step"] {
            guard let s = v.stringValue, s.utf8.count <= maxStep else {
                return .failure(.malformed("step", "a string of at most 256 bytes"))
            }
            step = s
        }
        var reason: String?
        if let v = o["reason"] {
            guard let s = v.stringValue, isReason(s) else {
                return .failure(.malformed("reason", "1 to 64 capitals, digits or '_'"))
            }
            reason = s
        }
        var version: String?
        if let v = o["version"] {
            guard let s = v.stringValue, UpdateCoding.isVersion(s) else {
                return .failure(.malformed("version", "1 to 64 bytes of printable ASCII, no space"))
            }
            version = s
        }
        if status == .succeeded && version == nil {
            return .failure(.malformed("version", "a SUCCEEDED report names the version the thing runs"))
        }
        return .success(
            UpdateReport(
                attempt: attempt, seq: seq, status: status, bytes: bytes, of: of, step: step, reason: reason,
                version: version))
    }

    static func isReason(_ s: String) -> Bool {
        let u = s.utf8
        return !u.isEmpty && u.count <= maxReason
            && u.allSatisfy { (0x41...0x5A).contains($0) || (0x30...0x39).contains($0) || $0 == 0x5F }
    }

    public func encode() -> [UInt8] {
        let o = JSON.object()
        o.set("attempt", .int(attempt))
        o.set("seq", .int64(seq))
        o.set("status", string: status.rawValue)
        if let bytes { o.set("bytes", .int64(bytes)) }
        if let of { o.set("of", .int64(of)) }
        if let step, let s = JSON.string(step) { o.set("step", s) }
        if let reason { o.set("reason", string: reason) }
        if let version { o.set("version", string: version) }
        return o.dumpBytes()
    }

    public static func == (a: UpdateReport, b: UpdateReport) -> Bool {
        a.attempt == b.attempt && a.seq == b.seq && a.status == b.status && a.bytes == b.bytes && a.of == b.of
            && a.step.equals(b.step) && a.reason.equals(b.reason) && a.version.equals(b.version)
    }
}

/// What a thing asks of its update job, after `things/{thingID}/` in a
/// request's path (docs/UPDATES.md §7): its report, a page of the block
/// hash list, a block. The hub reads the path with `parse` before it looks
/// at the job; the thing builds it with `path`.
public enum UpdatePath: Equatable {
    /// `updates/{jobID}`: PUT, an UpdateReport.
    case report(jobID: String)
    /// `updates/{jobID}/hashes/{page}`: GET, `hashesPerPage` hashes of 32
    /// bytes (fewer in the last page).
    case hashes(jobID: String, page: Int)
    /// `updates/{jobID}/blocks/{n}`: GET, the block's bytes.
    case block(jobID: String, n: Int)

    /// 32 KiB of hashes a page: one page and the reply's headers fit the
    /// payload limit, as one block does.
    public static let hashesPerPage = 1024

    public var jobID: String {
        switch self {
        case .report(let j), .hashes(let j, _), .block(let j, _): return j
        }
    }

    /// The path after `things/{thingID}/`.
    public var suffix: String {
        switch self {
        case .report(let j): return str("updates/\(j)")
        case .hashes(let j, let p): return str("updates/\(j)/hashes/\(p)")
        case .block(let j, let n): return str("updates/\(j)/blocks/\(n)")
        }
    }

    public func path(thingID: String) -> String { str("things/\(thingID)/\(suffix)") }

    /// Reads `updates/{jobID}[/hashes/{page}|/blocks/{n}]`; nil for any
    /// other form: a job ID that is not a name, a number with a sign, a
    /// leading zero or past the largest image, another segment, a query.
    public static func parse(_ suffix: String) -> UpdatePath? {
        let parts = Array(suffix.utf8).split(separator: 0x2F, omittingEmptySubsequences: false)
        guard parts.count == 2 || parts.count == 4, parts[0].elementsEqual("updates".utf8) else { return nil }
        let job = String(decoding: parts[1], as: UTF8.self)
        guard UpdateCoding.isName(job) else { return nil }
        if parts.count == 2 { return .report(jobID: job) }
        guard let n = number(parts[3]) else { return nil }
        if parts[2].elementsEqual("blocks".utf8) {
            return n < UpdateLimits.maxBlocks ? .block(jobID: job, n: n) : nil
        }
        if parts[2].elementsEqual("hashes".utf8) {
            return n < UpdateLimits.maxBlocks / hashesPerPage ? .hashes(jobID: job, page: n) : nil
        }
        return nil
    }

    /// Decimal digits, no sign and no leading zero, at most 7 of them.
    private static func number(_ digits: ArraySlice<UInt8>) -> Int? {
        guard !digits.isEmpty, digits.count <= 7, digits.allSatisfy({ (0x30...0x39).contains($0) }),
            digits.count == 1 || digits.first != 0x30
        else { return nil }
        return digits.reduce(0) { $0 * 10 + Int($1 - 0x30) }
    }
}
