// SPDX-License-Identifier: Apache-2.0

import ThingIF

/// Firmware images, the operator's calls (docs/UPDATES.md §8), behind the
/// app door as every other route's: the REST routes authenticate the
/// operator and read the HTTP request; what is stored and checked is here.
extension AppAPI {
    /// A new upload into the store, counted in the hub's upload figures;
    /// the route feeds it the body's pieces, then `finishUpload`.
    public func imageUpload(maxBytes: Int64) -> ImageUpload {
        ImageUpload(store: store, maxBytes: maxBytes, stats: imageUploads)
    }

    /// Commits an upload fed whole: the image made (or found), or the
    /// refusal (413 over the cap, 400 empty, 503 the store failed).
    public func finishUpload(_ upload: ImageUpload) -> Result<ImageCommit, HubError> {
        let commit: ImageCommit
        do {
            commit = try upload.finish()
        } catch let e as ImageUploadError {
            return .failure(Self.uploadRefusal(e))
        } catch {
            upload.discard()
            return .failure(Self.imageStorage("write the image"))
        }
        imageUploads.record(upload)
        return .success(commit)
    }

    /// What an upload's refusal answers.
    public static func uploadRefusal(_ e: ImageUploadError) -> HubError {
        switch e {
        case .tooLarge(let limit):
            return HubError(413, "IMAGE_TOO_LARGE", "the image is larger than \(limit) bytes (maxImageBytes)")
        case .empty: return HubError.invalid("the image's body is empty")
        case .storage: return imageStorage("write the image")
        }
    }

    /// Every image, by SHA-256.
    public func images() -> Result<[ImageRecord], HubError> {
        store.images().map { .success($0) } ?? .failure(Self.imageStorage("read the images"))
    }

    /// The image `sha256` (64 hex digits, either case); 400 for another
    /// form, 404 IMAGE_NOT_FOUND for none.
    public func image(sha256: String) -> Result<ImageRecord, HubError> {
        let sha = sha256.lowercased()
        guard ImageDigest.isValid(sha) else {
            return .failure(.invalid("the image's sha256 must be 64 hex digits", field: "sha256"))
        }
        switch store.image(sha256: sha) {
        case .found(let r): return .success(r)
        case .notFound: return .failure(.notFound("IMAGE_NOT_FOUND", "no image \(sha)"))
        case .failed: return .failure(Self.imageStorage("read the image"))
        }
    }

    /// Deletes the image with its chunks and lists; the refusals of `image`.
    public func deleteImage(sha256: String) -> Result<Void, HubError> {
        let sha = sha256.lowercased()
        guard ImageDigest.isValid(sha) else {
            return .failure(.invalid("the image's sha256 must be 64 hex digits", field: "sha256"))
        }
        switch store.deleteImage(sha256: sha) {
        case true?: return .success(())
        case false?: return .failure(.notFound("IMAGE_NOT_FOUND", "no image \(sha)"))
        case nil: return .failure(Self.imageStorage("delete the image"))
        }
    }

    /// The image's block hash list for `blockSize` (a power of two from
    /// UpdateLimits.minBlockSize to maxBlockSize, else 400): computed from
    /// the stored chunks one at a time the first time, then kept.
    public func blockHashList(_ image: ImageRecord, blockSize bs: Int64) -> Result<[UInt8], HubError> {
        guard bs >= Int64(UpdateLimits.minBlockSize), bs <= Int64(UpdateLimits.maxBlockSize), bs & (bs - 1) == 0
        else {
            return .failure(
                .invalid(
                    "blockSize must be a power of two from \(UpdateLimits.minBlockSize) to \(UpdateLimits.maxBlockSize)",
                    field: "blockSize"))
        }
        return store.blockHashList(image, blockSize: Int(bs)).map { .success($0) }
            ?? .failure(Self.imageStorage("read the image"))
    }

    /// Whether the signed manifest's exact bytes describe the image
    /// (ImageCheck): 400 when it is not a manifest a thing would parse,
    /// 422 MANIFEST_MISMATCH naming the field, 503 when the bytes could not
    /// be read. No signature is checked: the hub holds no key.
    public func checkManifest(_ manifestBytes: [UInt8], image: ImageRecord, givenList: [UInt8]? = nil) -> Result<
        ImageCheck.Match, HubError
    > {
        switch ImageCheck.check(manifestBytes: manifestBytes, image: image, store: store, givenList: givenList) {
        case .success(let m): return .success(m)
        case .failure(let e) where e.field == "manifest":
            return .failure(.invalid("the manifest is malformed: \(e.message)", field: "manifest"))
        case .failure(let e) where e.field == "image":
            return .failure(HubError(503, "STORAGE_UNAVAILABLE", e.message))
        case .failure(let e):
            return .failure(HubError(422, "MANIFEST_MISMATCH", e.field + ": " + e.message))
        }
    }

    /// 503 STORAGE_UNAVAILABLE: the store could not do `what`.
    static func imageStorage(_ what: String) -> HubError {
        HubError(503, "STORAGE_UNAVAILABLE", "the store could not \(what)")
    }
}
