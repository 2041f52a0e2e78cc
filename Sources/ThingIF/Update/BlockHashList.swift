// SPDX-License-Identifier: Apache-2.0

/// An image's block hashes (32 bytes a block, in order), checked against
/// the signed manifest's `blockHashes`: each block is then checked before a
/// byte of it reaches the installer's sink, and a bad one is fetched again.
public struct BlockHashList {
    public let hashes: [UInt8]
    public let blocks: Int

    /// The list when it is the manifest's: 32 × blocks bytes whose SHA-256
    /// is `blockHashes`.
    public static func verify(_ list: [UInt8], for manifest: UpdateManifest) -> Result<BlockHashList, UpdateRefusal> {
        guard list.count == manifest.blocks * UpdateCoding.sha256Bytes else {
            return .failure(
                UpdateRefusal(
                    .badHash, str("the hash list has \(list.count) bytes, the manifest's \(manifest.blocks * 32)")))
        }
        guard UpdateCoding.sha256(list) == manifest.blockHashes else {
            return .failure(UpdateRefusal(.badHash, "the hash list is not the manifest's"))
        }
        return .success(BlockHashList(hashes: list, blocks: manifest.blocks))
    }

    /// Whether `bytes` are block `n` of the manifest's image: its length
    /// and its hash.
    public func check(block n: Int, _ bytes: UnsafeRawBufferPointer, of manifest: UpdateManifest) -> Result<
        Void, UpdateRefusal
    > {
        guard n >= 0, n < blocks else { return .failure(UpdateRefusal(.badHash, str("no block \(n)"))) }
        guard bytes.count == manifest.blockLength(n) else {
            return .failure(
                UpdateRefusal(.badHash, str("block \(n) has \(bytes.count) bytes, not \(manifest.blockLength(n))")))
        }
        let digest = UpdateCoding.sha256(bytes)
        let at = n * UpdateCoding.sha256Bytes
        guard digest.count == UpdateCoding.sha256Bytes, hashes[at..<at + UpdateCoding.sha256Bytes].elementsEqual(digest)
        else { return .failure(UpdateRefusal(.badHash, str("block \(n) does not match its hash"))) }
        return .success(())
    }

    public func check(block n: Int, _ bytes: [UInt8], of manifest: UpdateManifest) -> Result<Void, UpdateRefusal> {
        bytes.withUnsafeBytes { check(block: n, $0, of: manifest) }
    }
}
