// SPDX-License-Identifier: Apache-2.0

import ArgumentParser
import Crypto
import Foundation
import ThingIF

// MARK: - update (the operator's firmware updates, docs/UPDATES.md)

struct UpdateGroup: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "update",
        abstract: "Firmware updates: make and sign a manifest, push the image, start a thing's job, follow it.",
        discussion: """
            A release: `thingif update manifest fw.img --version 1.2.0 --thing-type AirConditioner --out fw.json`, \
            `thingif update sign fw.json --key fw-2026.pem --kid fw-2026` (offline: the hub holds no key), then \
            `thingif update start THING_ID --image fw.img --manifest fw.json` and \
            `thingif update show THING_ID JOB_ID --wait SUCCEEDED`; many things at once: `thingif update rollout \
            create --image fw.img --manifest fw.json --thing-type AirConditioner --rate 10 --max-in-flight 5`. \
            Every call to the hub needs its adminToken: --admin-token or THINGIF_ADMIN_TOKEN.
            """,
        subcommands: [
            Manifest.self, Sign.self, Push.self, Start.self, Show.self, List.self, Cancel.self, Rollout.self
        ])

    static func signaturesPath(_ manifest: String) -> String { manifest + ".sigs.json" }

    static func read(_ path: String) throws -> Data {
        guard let d = FileManager.default.contents(atPath: path) else { throw ValidationError("cannot read \(path)") }
        return d
    }

    static func hex(_ bytes: some Sequence<UInt8>) -> String { bytes.map { String(format: "%02x", $0) }.joined() }

    /// The operator's client: the adminToken from the option or the environment.
    static func admin(_ global: GlobalOptions, _ token: String?, timeout: TimeInterval = 600) throws -> (
        HubClient, Context
    ) {
        let ctx = try Context(global)
        guard let admin = token ?? ProcessInfo.processInfo.environment["THINGIF_ADMIN_TOKEN"], !admin.isEmpty else {
            throw ValidationError("give the hub's adminToken: --admin-token or THINGIF_ADMIN_TOKEN")
        }
        return (try HubClient(hub: ctx.hub, appID: ctx.appID, token: admin, timeout: timeout), ctx)
    }

    static func jobsPath(_ client: HubClient, _ thingID: String, _ jobID: String? = nil) -> String {
        var p = client.app + "/things/" + HubClient.pathComponent(thingID) + "/updates"
        if let jobID { p += "/" + HubClient.pathComponent(jobID) }
        return p
    }

    /// The offer's part of a job's or a rollout's body: the image pushed
    /// first (its sha256), the manifest's bytes, its signatures file's
    /// signatures, the trial's seconds if given.
    static func offer(_ client: HubClient, image: String, manifest: String, signatures: String?, trialS: Int?) throws
        -> [(String, JSONValue)]
    {
        let manifestBytes = try read(manifest)
        let sigPath = signatures ?? signaturesPath(manifest)
        guard
            case .array(let sigs)? = try? JSONValue.parse(String(decoding: try read(sigPath), as: UTF8.self)),
            !sigs.isEmpty
        else { throw ValidationError("\(sigPath) holds no signatures: run `thingif update sign` first") }
        let pushed = try client.call(
            "POST", client.app + "/images", contentType: "application/octet-stream", data: try read(image))
        guard let sha = pushed["sha256"]?.stringValue else {
            throw HubClientError(description: "the hub's image answer has no sha256: \(pushed.text)")
        }
        var body: [(String, JSONValue)] = [
            ("image", .string(sha)), ("manifest", .string(manifestBytes.base64EncodedString())),
            ("signatures", .array(sigs))
        ]
        if let trialS { body.append(("trialS", .number(String(trialS)))) }
        return body
    }

    /// Polls `get` until its `status` is `wait` or one of `finals` (or the
    /// deadline passes): the last answer.
    static func waiting(
        for wait: String?, finals: Set<String>, timeout: Double, _ get: () throws -> JSONValue
    ) throws -> JSONValue {
        let deadline = Date().addingTimeInterval(timeout)
        var answer = try get()
        guard let wait else { return answer }
        while answer["status"]?.stringValue != wait {
            if let s = answer["status"]?.stringValue, finals.contains(s) { break }
            if Date() > deadline { break }
            Thread.sleep(forTimeInterval: 0.2)
            answer = try get()
        }
        return answer
    }

    /// One job as rows of `name  value`.
    static func describe(_ job: JSONValue) -> String {
        rows(
            job,
            [
                "jobID", "thingID", "version", "attempt", "status", "bytes", "of", "reason", "step", "reportedVersion",
                "commandID", "image", "updatedAt"
            ])
    }

    /// The given keys of an answer as rows of `name  value` (nulls left out).
    static func rows(_ answer: JSONValue, _ keys: [String]) -> String {
        var out: [String] = []
        for k in keys {
            guard let v = answer[k], v != .null else { continue }
            let text: String
            switch v {
            case .string(let s): text = s
            case .number(let n): text = n
            default: text = v.text
            }
            out.append(k.padding(toLength: 16, withPad: " ", startingAt: 0) + text)
        }
        return out.joined(separator: "\n")
    }

    struct AdminOption: ParsableArguments {
        @Option(
            name: .customLong("admin-token"),
            help: ArgumentHelp("The hub's adminToken (env THINGIF_ADMIN_TOKEN).", valueName: "token"))
        var adminToken: String?
    }

    struct Manifest: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Write the manifest of an image (its size, SHA-256, block size and block hashes).",
            discussion: """
                The manifest is what the release's keys sign and what the thing checks every block against \
                (docs/UPDATES.md §1). It is checked with the thing's own parser before it is written.
                """)

        @OptionGroup var global: GlobalOptions
        @Argument(help: "The image file.") var image: String
        @Option(help: ArgumentHelp("The version the image brings.", valueName: "version")) var version: String
        @Option(
            name: .customLong("thing-type"),
            help: ArgumentHelp("The thing type it is for (the manifest's compatible).", valueName: "type"))
        var thingType: String
        @Option(
            name: .customLong("update-id"),
            help: ArgumentHelp("The release line's name (default: the thing type + -fw).", valueName: "id"))
        var updateID: String?
        @Option(
            name: .customLong("security-version"),
            help: ArgumentHelp("Things never take a lower one (default 0).", valueName: "n"))
        var securityVersion: Int64 = 0
        @Option(
            name: .customLong("block-size"),
            help: ArgumentHelp("A power of two from 1024 to 32768 (default 32768).", valueName: "bytes"))
        var blockSize: Int = 32768
        @Option(help: ArgumentHelp("A JSON object for the installer.", valueName: "json")) var metadata: String?
        @Option(help: ArgumentHelp("Where to write it (default: stdout).", valueName: "file")) var out: String?

        func run() throws {
            let bytes = [UInt8](try UpdateGroup.read(image))
            guard blockSize > 0 else { throw ValidationError("--block-size must be positive") }
            var list: [UInt8] = []
            var at = 0
            while at < bytes.count {
                list += SHA256.hash(data: bytes[at..<min(bytes.count, at + blockSize)])
                at += blockSize
            }
            func quoted(_ s: String) -> String { JSONValue.string(s).text }
            var text =
                "{\"updateID\":\(quoted(updateID ?? thingType + "-fw")),\"version\":\(quoted(version)),"
                + "\"compatible\":\(quoted(thingType)),\"securityVersion\":\(securityVersion),"
                + "\"size\":\(bytes.count),\"sha256\":\"\(UpdateGroup.hex(SHA256.hash(data: bytes)))\","
                + "\"blockSize\":\(blockSize),\"blocks\":\((bytes.count + blockSize - 1) / blockSize),"
                + "\"blockHashes\":\"\(UpdateGroup.hex(SHA256.hash(data: list)))\""
            if let metadata {
                guard let m = try? JSONValue.parse(metadata), case .object = m else {
                    throw ValidationError("--metadata must be a JSON object")
                }
                text += ",\"metadata\":" + m.text
            }
            text += "}"
            // The thing's rules, in one place: what it would refuse is refused here.
            if case .failure(let e) = UpdateManifest.parse(Array(text.utf8)) {
                throw ValidationError("not a manifest a thing takes: \(e.code.rawValue): \(e.message)")
            }
            if let out {
                try Data(text.utf8).write(to: URL(fileURLWithPath: out))
                print("manifest of \(bytes.count) bytes in \((bytes.count + blockSize - 1) / blockSize) blocks: \(out)")
            } else {
                print(text)
            }
        }
    }

    struct Sign: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Sign a manifest's exact bytes with an EC P-256 key (ES256), offline.",
            discussion: """
                The signature is added to the manifest's signatures file (MANIFEST.sigs.json unless \
                --signatures names another): sign with the old and the new key to rotate trust.
                """)

        @Argument(help: "The manifest file.") var manifest: String
        @Option(help: ArgumentHelp("The private key, PEM (PKCS#8 or SEC1).", valueName: "file")) var key: String
        @Option(help: ArgumentHelp("The key's ID in the things' trust files.", valueName: "kid")) var kid: String
        @Option(help: ArgumentHelp("The signatures file.", valueName: "file")) var signatures: String?

        func run() throws {
            let bytes = try UpdateGroup.read(manifest)
            guard case .success = UpdateManifest.parse([UInt8](bytes)) else {
                throw ValidationError("\(manifest) is not a manifest a thing takes")
            }
            guard UpdateCoding.isName(kid) else {
                throw ValidationError("--kid: 1 to 64 letters, digits, '.', '_' or '-', the first a letter or digit")
            }
            let pem = String(decoding: try UpdateGroup.read(key), as: UTF8.self)
            let privateKey: P256.Signing.PrivateKey
            do {
                privateKey = try P256.Signing.PrivateKey(pemRepresentation: pem)
            } catch {
                throw ValidationError("\(key) is not an EC P-256 private key in PEM")
            }
            let sig = try privateKey.signature(for: bytes).derRepresentation
            let path = signatures ?? UpdateGroup.signaturesPath(manifest)
            var list: [JSONValue] = []
            if let old = FileManager.default.contents(atPath: path) {
                guard case .array(let a)? = try? JSONValue.parse(String(decoding: old, as: UTF8.self)) else {
                    throw ValidationError("\(path) is not a JSON array of signatures")
                }
                list = a.filter { $0["kid"]?.stringValue != kid }
            }
            list.append(
                .object([("kid", .string(kid)), ("alg", .string("ES256")), ("sig", .string(sig.base64EncodedString()))])
            )
            try Data(JSONValue.array(list).text.utf8).write(to: URL(fileURLWithPath: path))
            print("signed by \(kid): \(path) (\(list.count) signature\(list.count == 1 ? "" : "s"))")
        }
    }

    struct Push: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Upload an image to the hub; prints its SHA-256 (the same bytes again: the same image).")

        @OptionGroup var global: GlobalOptions
        @OptionGroup var admin: AdminOption
        @Argument(help: "The image file.") var image: String

        func run() throws {
            try guarded {
                let (client, ctx) = try UpdateGroup.admin(global, admin.adminToken)
                let answer = try client.call(
                    "POST", client.app + "/images", contentType: "application/octet-stream",
                    data: try UpdateGroup.read(image))
                if ctx.json { print(answer.text) } else { print(answer["sha256"]?.stringValue ?? answer.text) }
            }
        }
    }

    struct Start: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Offer a thing an update: pushes the image, then creates the job; prints its jobID.")

        @OptionGroup var global: GlobalOptions
        @OptionGroup var admin: AdminOption
        @Argument(help: "The thingID.") var thingID: String
        @Option(help: ArgumentHelp("The image file (pushed first).", valueName: "file")) var image: String
        @Option(help: ArgumentHelp("The signed manifest file.", valueName: "file")) var manifest: String
        @Option(
            help: ArgumentHelp("The signatures file (default MANIFEST.sigs.json).", valueName: "file"))
        var signatures: String?
        @Option(
            name: .customLong("trial"),
            help: ArgumentHelp("Seconds the new image has to be confirmed (default 300).", valueName: "s"))
        var trialS: Int?

        func run() throws {
            try guarded {
                let (client, ctx) = try UpdateGroup.admin(global, admin.adminToken)
                let body = try UpdateGroup.offer(
                    client, image: image, manifest: manifest, signatures: signatures, trialS: trialS)
                let job = try client.call("POST", UpdateGroup.jobsPath(client, thingID), body: .object(body))
                if ctx.json { print(job.text) } else { print(job["jobID"]?.stringValue ?? job.text) }
            }
        }
    }

    struct Show: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "A thing's update job: its last report (status, bytes, reason, the version reported).",
            discussion: """
                --wait STATUS polls until the job reports it (or ends otherwise: exit 1), at most --timeout seconds.
                """)

        @OptionGroup var global: GlobalOptions
        @OptionGroup var admin: AdminOption
        @Argument(help: "The thingID.") var thingID: String
        @Argument(help: "The jobID.") var jobID: String
        @Option(help: ArgumentHelp("A status to wait for (e.g. SUCCEEDED).", valueName: "status")) var wait: String?
        @Option(help: ArgumentHelp("Seconds to wait at most (default 60).", valueName: "s")) var timeout: Double = 60

        func run() throws {
            try guarded {
                let (client, ctx) = try UpdateGroup.admin(global, admin.adminToken)
                let finals: Set<String> = ["REJECTED", "SUCCEEDED", "ROLLED_BACK", "FAILED", "CANCELLED"]
                let job = try UpdateGroup.waiting(for: wait, finals: finals, timeout: timeout) {
                    try client.call("GET", UpdateGroup.jobsPath(client, thingID, jobID))
                }
                print(ctx.json ? job.text : UpdateGroup.describe(job))
                if let wait, job["status"]?.stringValue != wait { throw ExitCode.failure }
            }
        }
    }

    struct List: ParsableCommand {
        static let configuration = CommandConfiguration(abstract: "A thing's update jobs, newest first.")

        @OptionGroup var global: GlobalOptions
        @OptionGroup var admin: AdminOption
        @Argument(help: "The thingID.") var thingID: String

        func run() throws {
            try guarded {
                let (client, ctx) = try UpdateGroup.admin(global, admin.adminToken)
                let answer = try client.call("GET", UpdateGroup.jobsPath(client, thingID))
                if ctx.json {
                    print(answer.text)
                    return
                }
                for j in answer["updates"]?.arrayValue ?? [] {
                    print(
                        [
                            j["jobID"]?.stringValue ?? "?", j["version"]?.stringValue ?? "?",
                            j["status"]?.stringValue ?? "OFFERED"
                        ].joined(separator: "  "))
                }
            }
        }
    }
}
