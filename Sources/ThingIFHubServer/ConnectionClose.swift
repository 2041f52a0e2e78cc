// SPDX-License-Identifier: Apache-2.0

import Foundation
import HTTPTypes
import NIOCore
import NIOHTTP1
import NIOHTTPTypes
import NIOHTTPTypesHTTP1

/// Makes Hummingbird honour `Connection: Close` whatever its case.
///
/// Connection options are case-insensitive tokens (RFC 9110 §7.6.1), but
/// Hummingbird 2 (HTTPChannelHandler.handleHTTP) ends a connection after the
/// response only when the header is exactly `close`. Kii's C SDK (ebisu's
/// khc) sends `Connection: Close` and reads the body until the server closes,
/// so without this it waits out its socket timeout (15 s) on every call.
/// This handler sits after the HTTP/1 decoder (HTTP1Channel's
/// additionalChannelHandlers) and rewrites such a header to the `close`
/// Hummingbird looks for. Remove it once Hummingbird compares the token
/// case-insensitively (docs/DECISIONS.md).
final class ConnectionCloseNormalizer: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPRequestPart
    typealias InboundOut = HTTPRequestPart

    /// Puts `HTTP10Close` in front of the HTTP/1-to-HTTPTypes codec, the
    /// last place where a request's version is known.
    func handlerAdded(context: ChannelHandlerContext) {
        let ops = context.pipeline.syncOperations
        if let codec = try? ops.handler(type: HTTP1ToHTTPServerCodec.self) {
            try? ops.addHandler(HTTP10Close(), position: .before(codec))
        }
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard case .head(var head) = unwrapInboundIn(data),
            let value = head.headerFields[.connection], value != "close",
            Self.asksToClose(value)
        else {
            context.fireChannelRead(data)
            return
        }
        head.headerFields[.connection] = "close"
        context.fireChannelRead(wrapInboundOut(.head(head)))
    }

    /// Whether a Connection header value holds the `close` option, in any
    /// case, alone or in a comma-separated list.
    static func asksToClose(_ value: String) -> Bool {
        value.split(separator: ",").contains {
            $0.trimmingCharacters(in: .whitespaces).lowercased() == "close"
        }
    }
}

/// Ends an HTTP/1.0 connection after the answer unless the request asked to
/// keep it (RFC 9112 §9.3). HTTPTypes has no version, so Hummingbird 2 keeps
/// every connection open; Kii's thing-if-ThingSDK (kii_core.c) sends
/// HTTP/1.0 without a Connection header and, for an answer without a body
/// (204), reads until the server closes: without this it waited out the
/// hub's idle timeout (60 s) after every action result and state upload,
/// with its command thread blocked. The version is read here, before
/// HTTP1ToHTTPServerCodec drops it, as a `Connection: close` that the
/// handlers after it understand.
final class HTTP10Close: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias InboundOut = HTTPServerRequestPart

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard case .head(var head) = unwrapInboundIn(data), head.version == .http1_0, !head.isKeepAlive else {
            context.fireChannelRead(data)
            return
        }
        head.headers.replaceOrAdd(name: "Connection", value: "close")
        context.fireChannelRead(wrapInboundOut(.head(head)))
    }
}
