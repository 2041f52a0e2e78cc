// SPDX-License-Identifier: Apache-2.0

import Crypto
import Foundation
import Testing
import ThingIF

/// An offline signer's keys and manifests, as a release's would be made.
struct TestSigner {
    let kid: String
    let key = P256.Signing.PrivateKey()

    var trusted: TrustedKey { TrustedKey(kid: kid, pem: Array(key.publicKey.pemRepresentation.utf8)) }

    var keyJSON: String {
        let pem = key.publicKey.pemRepresentation.replacingOccurrences(of: "\n", with: "\\n")
        return #"{"kid":"\#(kid)","publicKey":"\#(pem)"}"#
    }

    func sign(_ bytes: [UInt8]) -> ManifestSignature {
        ManifestSignature(kid: kid, der: Array(try! key.signature(for: Data(bytes)).derRepresentation))
    }

    /// A manifest for `image` in blocks of `blockSize`, and its block hash list.
    static func manifest(
        for image: [UInt8], blockSize: Int = 1024, thingType: String = "AirConditioner", securityVersion: Int = 1,
        extra: String = ""
    ) -> (bytes: [UInt8], hashList: [UInt8]) {
        var list: [UInt8] = []
        var at = 0
        while at < image.count {
            list += Array(SHA256.hash(data: Data(image[at..<min(image.count, at + blockSize)])))
            at += blockSize
        }
        func hex(_ b: [UInt8]) -> String { b.map { String(format: "%02x", $0) }.joined() }
        let blocks = (image.count + blockSize - 1) / blockSize
        let text =
            #"{"updateID":"aircon-fw","version":"1.2.0","compatible":"\#(thingType)","securityVersion":\#(securityVersion),"#
            + #""size":\#(image.count),"sha256":"\#(hex(Array(SHA256.hash(data: Data(image)))))","blockSize":\#(blockSize),"#
            + #""blocks":\#(blocks),"blockHashes":"\#(hex(Array(SHA256.hash(data: Data(list)))))""# + extra + "}"
        return (Array(text.utf8), list)
    }
}

@Suite("Update manifests, signatures and trust (codec)")
struct UpdateManifestTests {
    let image: [UInt8] = (0..<5000).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ 7) }

    func ring(_ signers: TestSigner...) -> TrustRing { TrustRing(keys: signers.map(\.trusted)) }

    func offer(_ manifest: [UInt8], _ sigs: [ManifestSignature]) -> Result<UpdateOffer, UpdateRefusal> {
        UpdateOffer.parse(UpdateOffer.encode(jobID: "r-1.th.1", attempt: 1, manifest: manifest, signatures: sigs))
    }

    @Test("A signed offer decodes what it encodes; its blocks check, the short last one too")
    func roundTrip() throws {
        let signer = TestSigner(kid: "fw-2026")
        let (bytes, list) = TestSigner.manifest(for: image)
        let o = try offer(bytes, [signer.sign(bytes)]).get()
        #expect(o.jobID == "r-1.th.1" && o.attempt == 1 && o.trialSeconds == UpdateOffer.defaultTrialSeconds)
        #expect(o.manifest.bytes == bytes && o.manifest.blocks == 5 && o.manifest.blockLength(4) == 904)
        #expect(o.manifest.version == "1.2.0" && o.manifest.securityVersion == 1 && o.manifest.size == 5000)
        #expect(try ring(signer).verify(o.manifest, o.signatures).get() == "fw-2026")
        #expect((try? ring(signer).check(o.manifest, thingType: "AirConditioner").get()) != nil)
        let hashes = try BlockHashList.verify(list, for: o.manifest).get()
        for n in 0..<5 {
            let block = Array(image[n * 1024..<min(5000, n * 1024 + 1024)])
            #expect((try? hashes.check(block: n, block, of: o.manifest).get()) != nil, "block \(n)")
        }
    }

    @Test("A tampered manifest, block or hash list, an unknown, revoked or failing key are refused")
    func tampering() throws {
        let signer = TestSigner(kid: "fw-2026")
        let other = TestSigner(kid: "fw-other")
        let (bytes, list) = TestSigner.manifest(for: image)
        let sig = signer.sign(bytes)
        // One byte of the signed bytes changed: "1.2.0" → "1.2.1".
        var tampered = bytes
        let at = tampered.firstIndex(of: UInt8(ascii: "0"))!
        tampered[at] = UInt8(ascii: "1")
        let t = try offer(tampered, [sig]).get()
        #expect(ring(signer).verify(t.manifest, t.signatures).failureCode == .untrusted)
        let m = try offer(bytes, [sig]).get().manifest
        #expect(ring(other).verify(m, [sig]).failureCode == .untrusted, "an unknown key")
        #expect(ring(signer).verify(m, [other.sign(bytes)]).failureCode == .untrusted, "signed by another key")
        // A key the thing revoked: a confirmed manifest revoked it, also when the trust file names it again.
        let revoking = try offer(
            TestSigner.manifest(for: image, extra: #","addKeys":[\#(other.keyJSON)],"revokeKeys":["fw-2026"]"#).bytes,
            [sig]
        ).get().manifest
        let after = ring(signer).confirming(revoking).merged(with: ring(signer))
        #expect(after.isRevoked("fw-2026") && after.key("fw-2026") == nil && after.key("fw-other") != nil)
        let refused = after.verify(m, [sig])
        #expect(refused.failureCode == .untrusted && refused.failureMessage.contains("revoked"))
        // Two signatures, one by an unknown key: the trusted one suffices.
        #expect(try ring(signer).verify(m, [other.sign(bytes), sig]).get() == "fw-2026")
        // A block or a hash list that is not the manifest's.
        let hashes = try BlockHashList.verify(list, for: m).get()
        var block = Array(image[0..<1024])
        block[7] ^= 1
        #expect(hashes.check(block: 0, block, of: m).failureCode == .badHash)
        #expect(hashes.check(block: 0, Array(image[0..<1000]), of: m).failureCode == .badHash, "short")
        #expect(hashes.check(block: 5, Array(image[0..<904]), of: m).failureCode == .badHash, "past the end")
        var badList = list
        badList[3] ^= 1
        #expect(BlockHashList.verify(badList, for: m).failureCode == .badHash)
        #expect(BlockHashList.verify(Array(list.dropLast()), for: m).failureCode == .badHash)
    }

    @Test("Rotation, anti-rollback, the thing type, and no trust left are checked before any block")
    func trustRules() throws {
        let old = TestSigner(kid: "fw-2025")
        let new = TestSigner(kid: "fw-2026")
        // A release signed by both keys, adding the new one, rotates trust once confirmed.
        let rotate = TestSigner.manifest(for: image, securityVersion: 4, extra: #","addKeys":[\#(new.keyJSON)]"#).bytes
        let r = try offer(rotate, [old.sign(rotate), new.sign(rotate)]).get()
        #expect(try ring(old).verify(r.manifest, r.signatures).get() == "fw-2025")
        let rotated = ring(old).confirming(r.manifest)
        #expect(rotated.key("fw-2026") != nil && rotated.securityVersion == 4)
        // Not before it is confirmed: the ring that verified it is unchanged.
        #expect(ring(old).key("fw-2026") == nil)
        let lower = try offer(TestSigner.manifest(for: image, securityVersion: 3).bytes, [old.sign([])]).get()
        #expect(rotated.check(lower.manifest, thingType: "AirConditioner").failureCode == .securityVersion)
        #expect(rotated.check(r.manifest, thingType: "Lamp").failureCode == .wrongThingType)
        let revokeAll = TestSigner.manifest(for: image, extra: #","revokeKeys":["fw-2025"]"#).bytes
        let ra = try offer(revokeAll, [old.sign(revokeAll)]).get()
        #expect(ring(old).check(ra.manifest, thingType: "AirConditioner").failureCode == .noKeyLeft)
        // The record reads back what it wrote.
        let back = try TrustRing.parse(rotated.encode()).get()
        #expect(back.keys.map(\.kid) == ["fw-2025", "fw-2026"] && back.securityVersion == 4)
    }

    @Test("Malformed, wrong-typed, missing, oversized, deep and non-UTF-8 offers, manifests and trust files")
    func badInput() throws {
        let signer = TestSigner(kid: "fw-2026")
        let good = TestSigner.manifest(for: image).bytes
        let sig = signer.sign(good)
        func manifest(_ text: String) -> UpdateRefusal.Code? { UpdateManifest.parse(Array(text.utf8)).failureCode }
        let goodText = String(decoding: good, as: UTF8.self)
        #expect(UpdateManifest.parse([]).failureCode == .malformed)
        #expect(UpdateManifest.parse([0x7B, 0xFF, 0x7D]).failureCode == .malformed, "not UTF-8")
        #expect(UpdateManifest.parse(Array(repeating: 0x20, count: 16385)).failureCode == .malformed, "oversized")
        #expect(manifest("[]") == .malformed)
        for (field, value) in [
            ("updateID", #""a/b""#), ("version", #""1 2""#), ("compatible", #""""#), ("securityVersion", "-1"),
            ("securityVersion", "4294967296"), ("size", "0"), ("size", #""5000""#), ("blockSize", "1000"),
            ("blockSize", "65536"), ("blocks", "4"), ("sha256", #""abc""#), ("blockHashes", "7")
        ] {
            let text = goodText.replacingOccurrences(
                of: #"(\"\#(field)\":)(\"[^\"]*\"|-?[0-9]+)"#, with: "$1\(value)", options: .regularExpression)
            #expect(text != goodText && manifest(text) == .malformed, "\(field): \(value)")
        }
        let deep = String(repeating: #"{"a":"#, count: 9) + "1" + String(repeating: "}", count: 9)
        #expect(manifest(String(goodText.dropLast()) + #","metadata":\#(deep)}"#) == .malformed, "deep metadata")
        #expect(manifest(String(goodText.dropLast()) + #","metadata":{"a":{"b":1}}}"#) == nil)
        #expect(manifest(String(goodText.dropLast()) + #","addKeys":[{"kid":"k","publicKey":"x"}]}"#) == .malformed)
        #expect(manifest(String(goodText.dropLast()) + #","revokeKeys":[1]}"#) == .malformed)
        #expect(manifest(goodText.replacingOccurrences(of: #""updateID""#, with: #""x":1,"updateID""#)) == nil)
        // The offer around it.
        let enc = UpdateOffer.encode(jobID: "j1", attempt: 1, manifest: good, signatures: [sig])
        func offer(_ mutate: (JSON) -> Void) -> UpdateRefusal.Code? {
            let o = enc.deepCopy()!
            mutate(o)
            return UpdateOffer.parse(o).failureCode
        }
        #expect(offer { _ in } == nil)
        #expect(UpdateOffer.parse(.array()).failureCode == .malformed)
        #expect(offer { $0.set("jobID", string: "../x") } == .malformed)
        #expect(offer { $0.set("attempt", .int(0)) } == .malformed)
        #expect(offer { $0.set("attempt", string: "1") } == .malformed)
        #expect(offer { $0.set("manifest", string: "not base64!") } == .malformed)
        #expect(offer { $0.set("manifest", string: " " + UpdateCoding.base64Encode(good)) } == .malformed)
        #expect(offer { $0.set("manifest", string: String(repeating: "A", count: 21_848)) } == .malformed)
        #expect(offer { $0.set("signatures", .array()) } == .malformed)
        #expect(offer { $0["signatures"]!.elements[0].set("alg", string: "RS256") } == .malformed)
        #expect(offer { $0["signatures"]!.elements[0].set("sig", string: "") } == .malformed)
        #expect(offer { $0.set("trialS", .int(4)) } == .malformed)
        // Trust files.
        #expect(TrustRing.parse(Array("{".utf8)).failureCode == .badTrustFile)
        #expect(TrustRing.parse(Array(#"{"keys":{}}"#.utf8)).failureCode == .badTrustFile)
        #expect(
            TrustRing.parse(Array(#"{"keys":[\#(signer.keyJSON),\#(signer.keyJSON)]}"#.utf8)).failureCode
                == .badTrustFile)
        #expect(TrustRing.parse(Array(repeating: 0x20, count: 32769)).failureCode == .badTrustFile)
        #expect((try? TrustRing.parse(Array(#"{"keys":[\#(signer.keyJSON)]}"#.utf8)).get())?.keys.count == 1)
        // base64 and hex edge cases.
        #expect(UpdateCoding.base64Decode("")! == [])
        #expect(UpdateCoding.base64Decode("QQ==")! == [0x41] && UpdateCoding.base64Decode("QUI=")! == [0x41, 0x42])
        #expect(UpdateCoding.base64Decode("Q=Q=") == nil && UpdateCoding.base64Decode("QQ=") == nil)
        #expect(UpdateCoding.base64Encode([1, 2, 3, 4]) == "AQIDBA==")
        #expect(
            UpdateCoding.hexDecode("0aFf", count: 2)! == [0x0A, 0xFF] && UpdateCoding.hexDecode("0g", count: 1) == nil)
    }
}

extension Result where Failure == UpdateRefusal {
    var failureCode: UpdateRefusal.Code? {
        if case .failure(let e) = self { return e.code }
        return nil
    }
    var failureMessage: String {
        if case .failure(let e) = self { return e.message }
        return ""
    }
}
