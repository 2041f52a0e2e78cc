// SPDX-License-Identifier: Apache-2.0

import HTTPTypes
import Hummingbird
import NIOCore
import ThingIF
import ThingIFHub

// Request and response plumbing of the REST API: JSON replies, the error
// body, bearer tokens, and reading a JSON request body with its limits.

/// Limits of the HTTP layer (documented in docs/openapi.yaml). Body sizes
/// are settings: HubLimits (ThingIFHub), in HubServer.Security.
public enum HTTPLimits {
    /// Seconds between two keepalive comments on an event stream.
    public static let sseKeepaliveSeconds = 15
}

enum Reply {
    static func json(_ status: Int, _ body: JSON) -> Response {
        json(status, text: body.dump())
    }

    static func json(_ status: Int, text: String) -> Response {
        var headers = HTTPFields()
        headers[.contentType] = "application/json"
        return Response(
            status: .init(code: status), headers: headers,
            body: .init(byteBuffer: ByteBuffer(string: text)))
    }

    static func error(_ e: HubError) -> Response { json(e.status, e.body) }

    static func noContent() -> Response { Response(status: .noContent) }

    /// A framework answer (status, headers, body) as an HTTP response.
    static func kii(_ r: KiiResponse) -> Response {
        var headers = HTTPFields()
        for (name, value) in r.headers {
            if let n = HTTPField.Name(name) { headers[n] = value }
        }
        return Response(
            status: .init(code: r.status), headers: headers, body: .init(byteBuffer: ByteBuffer(bytes: r.body)))
    }

    /// An object of string members.
    static func object(_ members: [(String, String)]) -> JSON {
        let o = JSON.object()
        for (k, v) in members { o.set(k, string: v) }
        return o
    }
}

extension HubError {
    static let unsupportedMediaType = HubError(
        415, "UNSUPPORTED_MEDIA_TYPE",
        "the body must be JSON: Content-Type application/json or application/…+json")
    static let tooLarge = HubError(413, "REQUEST_TOO_LARGE", "the body is larger than the hub accepts")
    static func tooLarge(_ limit: Int) -> HubError {
        HubError(413, "REQUEST_TOO_LARGE", "the body is larger than \(limit) bytes")
    }
    static let appNotFound = HubError(404, "APP_NOT_FOUND", "no such app on this hub")
    /// Kii's answer for a token that is unknown, expired, revoked or not a
    /// user's (a missing Authorization header stays 401 UNAUTHORIZED).
    /// The message is Kii's (thing-if-JSSDK's recorded 403).
    static let invalidToken = HubError(403, "WRONG_TOKEN", "The provided token is not valid")
}

/// A spent rate budget: 429 with Retry-After and a Kii-style body.
struct RateLimited: Error {
    var retryAfterSeconds: Int
}

/// Turns every error into Thing-IF's {"errorCode","message"} body: the
/// API's HubErrors, the router's 404/405, an oversized body, and anything
/// unexpected (500).
struct ErrorBodyMiddleware<Context: RequestContext>: RouterMiddleware {
    let log: @Sendable (String) -> Void

    func handle(
        _ request: Request, context: Context,
        next: (Request, Context) async throws -> Response
    ) async throws -> Response {
        do {
            return try await next(request, context)
        } catch let e as HubError {
            return Reply.error(e)
        } catch let e as RateLimited {
            var r = Reply.error(
                HubError(
                    429, "TOO_MANY_REQUESTS",
                    "too many requests; retry after \(e.retryAfterSeconds) s"))
            r.headers[.retryAfter] = String(e.retryAfterSeconds)
            return r
        } catch let e as CostlyWork.Busy {
            // The costly work's queue is full: at once, not after a wait.
            var r = Reply.error(
                HubError(
                    503, "SERVICE_BUSY",
                    "the hub is busy with password and credential work; retry after \(e.retryAfterSeconds) s"))
            r.headers[.retryAfter] = String(e.retryAfterSeconds)
            return r
        } catch is NIOTooManyBytesError {
            return Reply.error(.tooLarge)
        } catch let e as HTTPError {
            let code: String
            switch e.status.code {
            case 404: code = "NOT_FOUND"
            case 405: code = "METHOD_NOT_ALLOWED"
            case 413: return Reply.error(.tooLarge)
            default: code = e.status.code < 500 ? "BAD_REQUEST" : "INTERNAL_ERROR"
            }
            let message =
                e.body ?? (e.status.code == 404 ? "no \(request.method) \(request.uri.path)" : e.status.reasonPhrase)
            return Reply.error(HubError(e.status.code, code, message))
        } catch {
            log("error on \(request.method) \(request.uri.path): \(error)")
            return Reply.error(HubError(500, "INTERNAL_ERROR", "the hub failed to answer this request"))
        }
    }
}

enum Body {
    /// True for application/json and application/…+json (parameters such
    /// as charset are ignored).
    static func isJSONMediaType(_ value: String) -> Bool {
        let type = value.split(separator: ";", maxSplits: 1).first.map(String.init) ?? ""
        let t = type.trimmingSpaces().lowercased()
        return t == "application/json" || (t.hasPrefix("application/") && t.hasSuffix("+json"))
    }

    /// The request body as a JSON object: 415 for a non-JSON Content-Type,
    /// 413 above `limit` bytes, 400 for malformed JSON or a non-object.
    static func object(_ request: Request, limit: Int) async throws -> JSON {
        guard let ct = request.headers[.contentType], isJSONMediaType(ct) else { throw HubError.unsupportedMediaType }
        switch JSON.parse(try await bytes(request, limit: limit)) {
        case .failure(let e):
            throw HubError.invalid("the body is not valid JSON: \(e)")
        case .success(let j):
            guard j.isObject else { throw HubError.invalid("the body must be a JSON object, not \(j.typeName)") }
            return j
        }
    }

    /// The raw request body: 413 above `limit` bytes, declared or streamed.
    static func bytes(_ request: Request, limit: Int) async throws -> [UInt8] {
        if let declared = request.headers[.contentLength].flatMap({ Int($0) }), declared > limit {
            throw HubError.tooLarge(limit)
        }
        do {
            return Array(buffer: try await request.body.collect(upTo: limit))
        } catch is NIOTooManyBytesError {
            throw HubError.tooLarge(limit)
        }
    }
}

extension String {
    /// Decodes %XX escapes; nil for a malformed escape or invalid UTF-8.
    func percentDecoded() -> String? {
        guard contains("%") else { return self }
        var out: [UInt8] = []
        var it = Array(utf8)[...]
        while let b = it.popFirst() {
            if b == UInt8(ascii: "%") {
                guard it.count >= 2, let v = UInt8(String(decoding: it.prefix(2), as: UTF8.self), radix: 16) else {
                    return nil
                }
                out.append(v)
                it = it.dropFirst(2)
            } else {
                out.append(b)
            }
        }
        return String(validating: out, as: UTF8.self)
    }
}
