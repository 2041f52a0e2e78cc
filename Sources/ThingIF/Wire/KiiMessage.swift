// SPDX-License-Identifier: Apache-2.0

/// Kii's "API via MQTT" framing, used in both directions: a request is a
/// method line, header lines, an empty line and a body, all CRLF-separated;
/// a response is the same with a status code in place of the method.
public struct KiiRequest: Equatable, Sendable {
    public var method: String
    public var headers: [(name: String, value: String)]
    public var body: [UInt8]

    public init(method: String, headers: [(name: String, value: String)] = [], body: [UInt8] = []) {
        self.method = method
        self.headers = headers
        self.body = body
    }

    public static func == (a: KiiRequest, b: KiiRequest) -> Bool {
        a.method == b.method && a.body == b.body
            && a.headers.map { str("\($0.name):\($0.value)") } == b.headers.map { str("\($0.name):\($0.value)") }
    }

    public func header(_ name: String) -> String? { KiiFraming.header(name, in: headers) }

    /// The bearer token of the Authorization header, if any.
    public var bearerToken: String? { header("Authorization").flatMap(BearerToken.parse) }

    public var requestID: String? { header(KiiFraming.requestIDHeader) }

    public func encode() -> [UInt8] { KiiFraming.encode(firstLine: method, headers: headers, body: body) }

    public static func decode(_ bytes: [UInt8]) -> KiiRequest? {
        guard let (first, headers, body) = KiiFraming.decode(bytes) else { return nil }
        let allowed = ["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD"]
        guard allowed.contains(first) else { return nil }
        return KiiRequest(method: first, headers: headers, body: body)
    }
}

public struct KiiResponse: Sendable {
    public var status: Int
    public var headers: [(name: String, value: String)]
    public var body: [UInt8]

    public init(status: Int, headers: [(name: String, value: String)] = [], body: [UInt8] = []) {
        self.status = status
        self.headers = headers
        self.body = body
    }

    public var isSuccess: Bool { (200..<300).contains(status) }
    /// Whether the same request may succeed later: a 5xx (the framework
    /// failed) or a 429 (too many requests: slow down). Any other status
    /// says the request itself is wrong, and sending it again cannot help.
    public var isWorthRetrying: Bool { status >= 500 || status == 429 }
    public func header(_ name: String) -> String? { KiiFraming.header(name, in: headers) }
    public var requestID: String? { header(KiiFraming.requestIDHeader) }
    public var bodyText: String { String(decoding: body, as: UTF8.self) }

    public func encode() -> [UInt8] { KiiFraming.encode(firstLine: String(status), headers: headers, body: body) }

    public static func decode(_ bytes: [UInt8]) -> KiiResponse? {
        guard let (first, headers, body) = KiiFraming.decode(bytes),
            let status = Int(first), (100...599).contains(status)
        else { return nil }
        return KiiResponse(status: status, headers: headers, body: body)
    }
}

public enum KiiFraming {
    public static let requestIDHeader = "X-Kii-RequestID"

    /// Header names compare ASCII-case-insensitively, byte by byte (HTTP's
    /// rule; no Unicode case tables in the device library).
    static func header(_ name: String, in headers: [(name: String, value: String)]) -> String? {
        headers.first { sameASCIIIgnoringCase($0.name, name) }?.value
    }

    static func sameASCIIIgnoringCase(_ a: String, _ b: String) -> Bool {
        func fold(_ c: UInt8) -> UInt8 { c >= 65 && c <= 90 ? c + 32 : c }
        return a.utf8.count == b.utf8.count && zip(a.utf8, b.utf8).allSatisfy { fold($0) == fold($1) }
    }

    static func encode(firstLine: String, headers: [(name: String, value: String)], body: [UInt8]) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(
            firstLine.utf8.count + headers.reduce(0) { $0 + $1.name.utf8.count + $1.value.utf8.count + 4 } + body.count
                + 4)
        out.append(contentsOf: firstLine.utf8)
        out.append(13)
        out.append(10)
        for h in headers {
            out.append(contentsOf: h.name.utf8)
            out.append(0x3A)
            out.append(0x20)
            out.append(contentsOf: h.value.utf8)
            out.append(13)
            out.append(10)
        }
        out.append(13)
        out.append(10)
        out += body
        return out
    }

    /// Splits framing. Accepts CRLF (the standard) and bare LF line ends.
    /// Parsed as bytes: the separators and the spaces trimmed are ASCII.
    static func decode(_ bytes: [UInt8]) -> (String, [(name: String, value: String)], [UInt8])? {
        var lines: [Range<Int>] = []
        var i = 0
        var lineStart = 0
        var bodyStart = bytes.count
        while i < bytes.count {
            if bytes[i] == 10 {
                var end = i
                if end > lineStart && bytes[end - 1] == 13 { end -= 1 }
                if end == lineStart && !lines.isEmpty {
                    bodyStart = i + 1
                    break
                }
                lines.append(lineStart..<end)
                lineStart = i + 1
                if lines.count > 64 { return nil }
            }
            i += 1
        }
        // No empty line: a bare first line (with optional headers) and no body.
        if i == bytes.count && lineStart < bytes.count {
            lines.append(lineStart..<bytes.count)
            // The same 64-line limit as for terminated lines, so a message
            // decodes the same way before and after encode() (fuzzing).
            if lines.count > 64 { return nil }
        }
        guard let firstRange = lines.first, let first = text(bytes[trimmed(bytes, firstRange)]), !first.isEmpty
        else { return nil }
        var headers: [(name: String, value: String)] = []
        for r in lines.dropFirst() {
            guard let colon = bytes[r].firstIndex(of: 58),
                let name = text(bytes[trimmed(bytes, r.lowerBound..<colon)]), !name.isEmpty,
                let value = text(bytes[trimmed(bytes, colon + 1..<r.upperBound)])
            else { return nil }
            headers.append((name, value))
        }
        return (first, headers, Array(bytes[bodyStart...]))
    }

    private static func text(_ b: ArraySlice<UInt8>) -> String? { String(validating: b, as: UTF8.self) }

    /// `r` without leading and trailing spaces and tabs.
    private static func trimmed(_ b: [UInt8], _ r: Range<Int>) -> Range<Int> {
        var lo = r.lowerBound
        var hi = r.upperBound
        while lo < hi, b[lo] == 32 || b[lo] == 9 { lo += 1 }
        while hi > lo, b[hi - 1] == 32 || b[hi - 1] == 9 { hi -= 1 }
        return lo..<hi
    }
}

extension String {
    /// The string without leading and trailing spaces and tabs.
    public func trimmingSpaces() -> String {
        let u = Array(utf8)
        var lo = 0
        var hi = u.count
        while lo < hi, u[lo] == 32 || u[lo] == 9 { lo += 1 }
        while hi > lo, u[hi - 1] == 32 || u[hi - 1] == 9 { hi -= 1 }
        return lo == 0 && hi == u.count ? self : String(decoding: u[lo..<hi], as: UTF8.self)
    }
}

/// MQTT topic names of the protocol (docs/PROTOCOL.md).
public enum Topics {
    public enum API: String, Sendable, CaseIterable { case thingIF = "thing-if", kii = "api" }

    /// Where a client publishes a request: p/{clientID}/thing-if/apps/{appID}/{path}
    /// or p/{clientID}/api/apps/{appID}/{path}.
    public static func request(clientID: String, api: API = .thingIF, appID: String, path: String) -> String {
        str("p/\(clientID)/\(api.rawValue)/apps/\(appID)/\(path)")
    }

    /// Where the framework answers: p/{clientID}/resp (MQTT 5 Response Topic).
    public static func response(clientID: String) -> String { str("p/\(clientID)/resp") }

    /// Where the framework hands a thing its remote configuration (retained).
    public static func config(clientID: String) -> String { str("p/\(clientID)/config") }

    /// The thing's availability topic: retained "online" / "offline".
    public static func status(clientID: String) -> String { str("p/\(clientID)/status") }

    // MARK: a gateway's end nodes (docs/GATEWAYS.md §4.1)

    /// Where the hub sends the gateway `clientID` the commands and cancels
    /// of its end node `endNode`: p/{clientID}/end-nodes/{endNode}/commands.
    /// `endNode` "+" names every end node, as in a subscription or a broker rule.
    public static func endNodeCommands(clientID: String, endNode: String) -> String {
        str("p/\(clientID)/end-nodes/\(endNode)/commands")
    }

    /// Where the hub tells the gateway `clientID` of membership events about
    /// its end node `endNode` (added, changed, removed: EndNodeEvent):
    /// p/{clientID}/end-nodes/{endNode}/events. A topic of their own, so
    /// that the topic says what a message is and a payload on the command
    /// topic is never taken for an event (docs/GATEWAYS.md §4.2). `endNode`
    /// "+" names every end node, as in a subscription or a broker rule.
    public static func endNodeEvents(clientID: String, endNode: String) -> String {
        str("p/\(clientID)/end-nodes/\(endNode)/events")
    }

    /// Where the gateway `clientID` says, retained, whether its end node
    /// `endNode` is reachable: p/{clientID}/end-nodes/{endNode}/status.
    public static func endNodeStatus(clientID: String, endNode: String) -> String {
        str("p/\(clientID)/end-nodes/\(endNode)/status")
    }

    /// Every gateway's end-node statuses, as every hub subscribes to them
    /// (not shared: each hub keeps which end nodes are reachable).
    public static let endNodeStatusSubscription = "p/+/end-nodes/+/status"

    /// Whether `topic` is one that `endNodeStatusSubscription` matches:
    /// p/{any}/end-nodes/{any}/status, whatever its two free levels hold
    /// (empty, over 256 bytes, any bytes). Every such message reaches the
    /// hub, so it is the hub's to take or to clear (docs/GATEWAYS.md §7).
    public static func isEndNodeStatusTopic(_ topic: String) -> Bool {
        guard let parts = levels(topic, exactly: 5) else { return false }
        return parts[0].equals("p") && parts[2].equals("end-nodes") && parts[4].equals("status")
    }

    /// The gateway's client ID and the end node of a status topic
    /// p/{clientID}/end-nodes/{endNode}/status, both safe single levels;
    /// nil for anything else.
    public static func parseEndNodeStatus(_ topic: String) -> (clientID: String, endNode: String)? {
        parseEndNode(topic, leaf: "status")
    }

    /// The gateway's client ID and the end node of a command topic
    /// p/{clientID}/end-nodes/{endNode}/commands, both safe single levels;
    /// nil for anything else.
    public static func parseEndNodeCommands(_ topic: String) -> (clientID: String, endNode: String)? {
        parseEndNode(topic, leaf: "commands")
    }

    /// The gateway's client ID and the end node of an events topic
    /// p/{clientID}/end-nodes/{endNode}/events, both safe single levels;
    /// nil for anything else.
    public static func parseEndNodeEvents(_ topic: String) -> (clientID: String, endNode: String)? {
        parseEndNode(topic, leaf: "events")
    }

    private static func parseEndNode(_ topic: String, leaf: String) -> (clientID: String, endNode: String)? {
        guard let parts = levels(topic, exactly: 5), parts[0].equals("p"), parts[2].equals("end-nodes"),
            parts[4].equals(leaf), isSafeLevel(parts[1]), isSafeLevel(parts[3])
        else { return nil }
        return (parts[1], parts[3])
    }

    // MARK: fleet provisioning by claim (docs/PROTOCOL.md §4.3)

    /// A claim certificate's CN begins so: `claim.{appID}.{batch}`. No
    /// thing topic (`t` + hex) and no bootstrap username (an appID without
    /// dots) begins so.
    public static let claimPrefix = "claim."
    /// The longest batch name; its bytes are A-Z a-z 0-9 - _ (no dot, so the
    /// batch is what follows the CN's last dot).
    public static let maxClaimBatch = 32

    /// Where a device with a claim certificate whose CN is `name` sends its
    /// onboarding: c/{CN}/{clientID}/onboardings. The broker lets a
    /// certificate client write only there and read only claimResponse, by
    /// its CN (%u) and its client ID (%c).
    public static func claimRequest(name: String, clientID: String) -> String {
        str("c/\(name)/\(clientID)/onboardings")
    }

    /// Where the framework answers it: c/{CN}/{clientID}/resp.
    public static func claimResponse(name: String, clientID: String) -> String { str("c/\(name)/\(clientID)/resp") }

    /// True for a claim certificate's CN: claim.{appID}.{batch}, at most 64
    /// bytes (a CN's bound), a safe topic level, the batch 1 to 32 of
    /// A-Z a-z 0-9 - _ and the appID not empty.
    public static func isClaimName(_ cn: String) -> Bool { claimParts(cn) != nil }

    /// The appID and batch of a claim certificate's CN, nil when it is none.
    public static func claimParts(_ cn: String) -> (appID: String, batch: String)? {
        let b = Array(cn.utf8)
        let prefix = Array(claimPrefix.utf8)
        guard b.count <= 64, b.count > prefix.count + 2, b.starts(with: prefix), isSafeLevel(cn),
            let dot = b.lastIndex(of: 0x2E), dot > prefix.count, b.count - dot - 1 <= maxClaimBatch, dot < b.count - 1
        else { return nil }
        let batch = b[(dot + 1)...]
        guard batch.allSatisfy({ isClaimBatchByte($0) }) else { return nil }
        return (String(decoding: b[prefix.count..<dot], as: UTF8.self), String(decoding: batch, as: UTF8.self))
    }

    static func isClaimBatchByte(_ c: UInt8) -> Bool {
        (c >= 0x30 && c <= 0x39) || (c >= 0x41 && c <= 0x5A) || (c >= 0x61 && c <= 0x7A) || c == 0x2D || c == 0x5F
    }

    /// A request on c/{CN}/{clientID}/onboardings: its CN and client ID
    /// (both non-empty single levels); nil for anything else.
    public static func parseClaimRequest(_ topic: String) -> (name: String, clientID: String)? {
        let parts = levels(topic)
        guard parts.count == 4, parts[0].equals("c"), parts[3].equals("onboardings"), isSafeLevel(parts[1]),
            isSafeLevel(parts[2])
        else { return nil }
        return (parts[1], parts[2])
    }

    /// The hub's subscription to claim onboardings.
    public static let claimSubscription = "c/+/+/onboardings"

    /// Subscriptions of the framework side (shared, so several hubs split the stream).
    public static let hubShareGroup = "thingif-hub"
    /// Requests go through the shared group (each reaches one hub); status
    /// messages, things' and end nodes', do not (every hub learns when a
    /// thing or an end node comes online).
    public static func hubSubscriptions(shared: Bool) -> [String] {
        let requests = ["p/+/thing-if/apps/#", "p/+/api/apps/#", claimSubscription]
        return (shared ? requests.map { str("$share/\(hubShareGroup)/\($0)") } : requests) + [
            "p/+/status", endNodeStatusSubscription
        ]
    }

    public struct ParsedRequest: Equatable, Sendable {
        public var clientID: String
        public var api: API
        public var appID: String
        public var path: String
    }

    /// The clientID of a status topic p/{clientID}/status; nil for anything else.
    public static func parseStatus(_ topic: String) -> String? {
        guard let parts = levels(topic, exactly: 3), parts[0].equals("p"), !parts[1].isEmpty, parts[2].equals("status")
        else { return nil }
        return parts[1]
    }

    /// The levels of `topic` when it has exactly `count` of them, else nil.
    /// The '/' bytes are counted first: most topics the hub gets are
    /// requests, of more levels, and none are made for them.
    static func levels(_ topic: String, exactly count: Int) -> [String]? {
        var slashes = 0
        for b in topic.utf8 where b == 0x2F {
            slashes += 1
            if slashes >= count { return nil }
        }
        return slashes == count - 1 ? levels(topic) : nil
    }

    /// The levels of a topic, split at every '/' byte. Not String.split:
    /// that splits between Characters, and a '/' followed by a combining
    /// mark is one Character, so "p/a/\u{351}b/status" read as three levels
    /// (found by the kii_request fuzz target).
    static func levels(_ topic: String) -> [String] {
        topic.utf8.split(separator: 0x2F, omittingEmptySubsequences: false).map {
            String(decoding: $0, as: UTF8.self)
        }
    }

    /// Parses a request topic; nil for anything else.
    public static func parseRequest(_ topic: String) -> ParsedRequest? {
        let parts = levels(topic)
        guard parts.count >= 6, parts[0].equals("p"), !parts[1].isEmpty,
            let api = API(named: parts[2]), parts[3].equals("apps"), !parts[4].isEmpty
        else { return nil }
        let path = parts[5...].joined(separator: "/")
        guard !path.isEmpty else { return nil }
        return ParsedRequest(clientID: parts[1], api: api, appID: parts[4], path: path)
    }

    /// True when `s` can stand as one topic level: non-empty, no '/', '+',
    /// '#' or NUL, at most 256 bytes.
    public static func isSafeLevel(_ s: String) -> Bool {
        !s.isEmpty && s.utf8.count <= 256 && !s.utf8.contains { $0 == 0x2F || $0 == 0x2B || $0 == 0x23 || $0 == 0 }
    }
}
