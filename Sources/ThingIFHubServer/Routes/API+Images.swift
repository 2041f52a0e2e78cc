// SPDX-License-Identifier: Apache-2.0

// Firmware images: the operator's upload (streamed, hashed on the way,
// capped), their metadata, block hash lists, and a manifest's check against
// one (docs/UPDATES.md, "The hub: images").

import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdCore
import NIOCore
import ThingIF
import ThingIFHub

extension API {
    static let blockHashesHeader = HTTPField.Name("X-Thingif-Block-Hashes")!
    static let blocksHeader = HTTPField.Name("X-Thingif-Blocks")!
    static let imageSizeHeader = HTTPField.Name("X-Thingif-Image-Size")!

    /// Every route needs the operator's token (requireAdmin), as the
    /// enrollment import does.
    var imageRoutes: RouteCollection<APIContext> {
        let r = RouteCollection(context: APIContext.self)
        r.post("/api/apps/{appID}/images") { try await uploadImage($0, $1) }
        r.put("/api/apps/{appID}/images") { try await uploadImage($0, $1) }
        r.get("/api/apps/{appID}/images") { try listImages($0, $1) }
        r.get("/api/apps/{appID}/images/{sha256}") { try imageMetadata($0, $1, head: false) }
        r.head("/api/apps/{appID}/images/{sha256}") { try imageMetadata($0, $1, head: true) }
        r.delete("/api/apps/{appID}/images/{sha256}") { try deleteImage($0, $1) }
        r.get("/api/apps/{appID}/images/{sha256}/block-hashes") { try blockHashes($0, $1) }
        r.post("/api/apps/{appID}/images/{sha256}/manifest-check") { try await checkManifest($0, $1) }
        return r
    }

    /// POST or PUT …/images, application/octet-stream: each piece of the
    /// body goes to the upload as it arrives (never collected whole); 201
    /// {"sha256","size","createdAt"} for a new image, 200 for one stored
    /// already, 413 over maxImageBytes (declared or streamed; nothing kept).
    func uploadImage(_ request: Request, _ context: APIContext) async throws -> Response {
        try requireAdmin(request, context, route: "…/images", off: "firmware images")
        let ct = request.headers[.contentType]?.split(separator: ";").first.map {
            String($0).trimmingSpaces().lowercased()
        }
        guard ct == "application/octet-stream" else {
            throw HubError(415, "UNSUPPORTED_MEDIA_TYPE", "an image's body must be application/octet-stream")
        }
        let cap = security.limits.maxImageBytes
        if let declared = request.headers[.contentLength].flatMap({ Int64($0) }), declared > cap {
            throw HubError(413, "IMAGE_TOO_LARGE", "the image is larger than \(cap) bytes (maxImageBytes)")
        }
        let upload = hub.app.imageUpload(maxBytes: cap)
        do {
            for try await piece in request.body {
                try piece.withUnsafeReadableBytes { try upload.append($0) }
            }
        } catch let e as ImageUploadError {
            throw AppAPI.uploadRefusal(e)
        } catch {
            upload.discard()
            throw error
        }
        switch hub.app.finishUpload(upload) {
        case .success(.created(let r)): return Reply.json(201, Self.imageJSON(r))
        case .success(.existing(let r)): return Reply.json(200, Self.imageJSON(r))
        case .failure(let e): throw e
        }
    }

    func listImages(_ request: Request, _ context: APIContext) throws -> Response {
        try requireAdmin(request, context, route: "…/images", off: "firmware images")
        let list = try hub.app.images().get()
        let a = JSON.array()
        for r in list { a.append(Self.imageJSON(r)) }
        let o = JSON.object()
        o.set("images", a)
        return Reply.json(200, o)
    }

    func imageMetadata(_ request: Request, _ context: APIContext, head: Bool) throws -> Response {
        try requireAdmin(request, context, route: "…/images", off: "firmware images")
        let r = try storedImage(context)
        if head {
            var h = HTTPFields()
            h[Self.imageSizeHeader] = String(r.size)
            return Response(status: .ok, headers: h)
        }
        return Reply.json(200, Self.imageJSON(r))
    }

    func deleteImage(_ request: Request, _ context: APIContext) throws -> Response {
        try requireAdmin(request, context, route: "…/images", off: "firmware images")
        try hub.app.deleteImage(sha256: try param(context, "sha256")).get()
        return Reply.noContent()
    }

    /// GET …/images/{sha256}/block-hashes?blockSize=N: the image's block
    /// hash list for that block size (32 bytes a block, in order), computed
    /// from the stored bytes a chunk at a time; X-Thingif-Block-Hashes is its
    /// SHA-256 (a manifest's `blockHashes`), X-Thingif-Blocks the count.
    func blockHashes(_ request: Request, _ context: APIContext) throws -> Response {
        try requireAdmin(request, context, route: "…/images", off: "firmware images")
        let r = try storedImage(context)
        guard let bs = try int64Query(request, "blockSize") else {
            throw HubError.invalid("blockSize is required", field: "blockSize")
        }
        let list = try hub.app.blockHashList(r, blockSize: bs).get()
        var h = HTTPFields()
        h[.contentType] = "application/octet-stream"
        h[Self.blockHashesHeader] = Platform.hex(UpdateCoding.sha256(list))
        h[Self.blocksHeader] = String(list.count / UpdateCoding.sha256Bytes)
        return Response(status: .ok, headers: h, body: .init(byteBuffer: ByteBuffer(bytes: list)))
    }

    /// POST …/images/{sha256}/manifest-check with {"manifest": base64 of
    /// the signed bytes, "blockHashList"?: base64 of the list a release
    /// ships}: 200 with the manifest's layout when it describes the stored
    /// image, 422 MANIFEST_MISMATCH naming the field when not, 400 when the
    /// manifest is not one a thing would parse. No signature is checked:
    /// the hub holds no key (ImageCheck).
    func checkManifest(_ request: Request, _ context: APIContext) async throws -> Response {
        try requireAdmin(request, context, route: "…/images", off: "firmware images")
        let r = try storedImage(context)
        let body = try await object(request)
        guard let text = body["manifest"]?.stringValue, let bytes = UpdateCoding.base64Decode(text) else {
            throw HubError.invalid("\"manifest\" must be the signed manifest's bytes in base64", field: "manifest")
        }
        var given: [UInt8]?
        if let v = body["blockHashList"] {
            guard let t = v.stringValue, let list = UpdateCoding.base64Decode(t) else {
                throw HubError.invalid("\"blockHashList\" must be base64", field: "blockHashList")
            }
            given = list
        }
        let m = try hub.app.checkManifest(bytes, image: r, givenList: given).get()
        let o = Self.imageJSON(r)
        o.set("updateID", string: m.manifest.updateID)
        o.set("version", string: m.manifest.version)
        o.set("blockSize", .int(m.manifest.blockSize))
        o.set("blocks", .int(m.manifest.blocks))
        o.set("blockHashes", string: Platform.hex(m.manifest.blockHashes))
        return Reply.json(200, o)
    }

    // MARK: helpers

    /// The image the path's sha256 names (64 hex digits, either case).
    func storedImage(_ context: APIContext) throws -> ImageRecord {
        try hub.app.image(sha256: try param(context, "sha256")).get()
    }

    static func imageJSON(_ r: ImageRecord) -> JSON {
        let o = JSON.object()
        o.set("sha256", string: r.sha256)
        o.set("size", .int64(r.size))
        o.set("createdAt", .int64(r.createdAt))
        return o
    }
}
