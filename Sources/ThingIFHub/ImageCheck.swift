// SPDX-License-Identifier: Apache-2.0

import ThingIF

/// Whether a signed manifest describes a stored image: the hub holds no
/// signing key, so it checks consistency only, with the core's parser and
/// block hash rule (UpdateManifest.parse, BlockHashList.verify), the ones a
/// thing applies: one rule in one place.
public enum ImageCheck {
    /// Why a manifest does not describe the image: a stable code and a
    /// message naming the field.
    public struct Mismatch: Error, Equatable, Sendable {
        public let field: String
        public let message: String
    }

    /// What the check established: the manifest's block layout, and the
    /// image's block hash list for it (32 bytes a block).
    public struct Match {
        public let manifest: UpdateManifest
        public let blockHashList: [UInt8]
    }

    /// Parses `manifestBytes` (the exact signed bytes) and checks, in order:
    /// size, sha256, the block count for that size, and the hash list of the
    /// stored bytes against `blockHashes`; when `givenList` is passed (the
    /// list a release ships), it must be the stored bytes' list too.
    public static func check(
        manifestBytes: [UInt8], image: ImageRecord, store: ImageStore, givenList: [UInt8]? = nil
    ) -> Result<Match, Mismatch> {
        let manifest: UpdateManifest
        switch UpdateManifest.parse(manifestBytes) {
        case .success(let m): manifest = m
        case .failure(let r): return .failure(Mismatch(field: "manifest", message: r.message))
        }
        guard manifest.size == image.size else {
            return .failure(
                Mismatch(field: "size", message: "the manifest's size is \(manifest.size), the image's \(image.size)"))
        }
        guard Platform.hex(manifest.sha256) == image.sha256 else {
            return .failure(
                Mismatch(field: "sha256", message: "the manifest's sha256 is not the image's \(image.sha256)"))
        }
        let blocks = Int((image.size + Int64(manifest.blockSize) - 1) / Int64(manifest.blockSize))
        guard manifest.blocks == blocks else {
            return .failure(
                Mismatch(
                    field: "blocks", message: "the manifest says \(manifest.blocks) blocks, the image has \(blocks)"))
        }
        guard let list = store.blockHashList(image, blockSize: manifest.blockSize) else {
            return .failure(Mismatch(field: "image", message: "the image's bytes could not be read"))
        }
        if let givenList, givenList != list {
            return .failure(
                Mismatch(field: "blockHashList", message: "the given block hash list is not the stored image's"))
        }
        switch BlockHashList.verify(list, for: manifest) {
        case .success: return .success(Match(manifest: manifest, blockHashList: list))
        case .failure(let r): return .failure(Mismatch(field: "blockHashes", message: r.message))
        }
    }
}
