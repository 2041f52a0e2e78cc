// SPDX-License-Identifier: Apache-2.0

/// The bounds of a firmware update's wire forms (docs/UPDATES.md): what a
/// thing takes from the network before a byte of the image is written. The
/// hub and the CLI check manifests with the same parser, so all three agree.
public enum UpdateLimits {
    /// The signed manifest's bytes, decoded.
    public static let maxManifestBytes = 16 * 1024
    /// A block: a power of two in this range, so that one block and the
    /// reply's headers fit the thing's payload limit (WireLimits.maxPayload).
    public static let minBlockSize = 1024
    public static let maxBlockSize = 32 * 1024
    /// Blocks in one image: 32 GiB at 32 KiB a block. The hash list a thing
    /// fetches is 32 bytes a block.
    public static let maxBlocks = 1 << 20
    /// updateID, version, a key's ID: bytes.
    public static let maxName = 64
    /// The thing type the manifest is for (Kii's thingType).
    public static let maxThingType = 128
    /// Signatures on one manifest; keys one manifest adds or revokes.
    public static let maxSignatures = 4
    public static let maxAddedKeys = 4
    public static let maxRevokedKeys = 16
    /// Keys a thing trusts at once (its trust file and those manifests added).
    public static let maxTrustedKeys = 16
    /// An ES256 signature in DER is at most 72 bytes.
    public static let maxSignatureBytes = 80
    /// A public key's PEM text.
    public static let maxKeyPEM = 1024
    /// The manifest's free-form `metadata` object, for the installer: nesting.
    public static let maxMetadataDepth = 8
    /// The trust file and the thing's persisted trust.
    public static let maxTrustFile = 32 * 1024
}
