// SPDX-License-Identifier: Apache-2.0

import Foundation
import HTTPTypes
import NIOCore
import NIOHTTPTypes

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
