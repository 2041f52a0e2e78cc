// SPDX-License-Identifier: Apache-2.0

import Foundation
#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// An error answer of the hub: the HTTP status and Thing-IF's
/// {"errorCode","message"} body.
struct HubHTTPError: Error, CustomStringConvertible {
    var status: Int
    var errorCode: String
    var message: String
    var description: String { "HTTP \(status) \(errorCode): \(message)" }
}

/// A failure before any answer: the hub is unreachable, or its answer is not
/// what the API promises.
struct HubClientError: Error, CustomStringConvertible {
    var description: String
}

/// The hub's REST API, one blocking call at a time.
final class HubClient: @unchecked Sendable {
    let base: URL
    let appID: String
    let token: String?
    let timeout: TimeInterval
    private let session: URLSession

    init(hub: String, appID: String, token: String?, timeout: TimeInterval = 30) throws {
        guard let url = URL(string: hub), let scheme = url.scheme, ["http", "https"].contains(scheme), url.host != nil
        else {
            throw HubClientError(description: "--hub must be an http:// or https:// URL, not '\(hub)'")
        }
        self.base = url
        self.appID = appID
        self.token = token
        self.timeout = timeout
        let config = URLSessionConfiguration.ephemeral
        config.timeoutIntervalForRequest = timeout
        config.urlCache = nil
        self.session = URLSession(configuration: config)
    }

    static func pathComponent(_ s: String) -> String {
        var allowed = CharacterSet.urlPathAllowed
        allowed.remove(charactersIn: "/?#")
        return s.addingPercentEncoding(withAllowedCharacters: allowed) ?? s
    }

    var app: String { "/api/apps/" + HubClient.pathComponent(appID) }
    var thingIF: String { "/thing-if/apps/" + HubClient.pathComponent(appID) }
    func target(_ thingID: String) -> String { thingIF + "/targets/thing:" + HubClient.pathComponent(thingID) }

    func url(_ path: String, query: [(String, String)] = []) -> URL {
        var c = URLComponents(url: base, resolvingAgainstBaseURL: false)!
        let prefix = c.path.hasSuffix("/") ? String(c.path.dropLast()) : c.path
        c.percentEncodedPath = prefix + path
        if !query.isEmpty { c.queryItems = query.map { URLQueryItem(name: $0.0, value: $0.1) } }
        return c.url!
    }

    func request(
        _ method: String, _ path: String, query: [(String, String)] = [], body: JSONValue? = nil,
        contentType: String = "application/json", headers: [String: String] = [:],
        authorized: Bool = true, data: Data? = nil
    ) -> URLRequest {
        var r = URLRequest(url: url(path, query: query))
        r.httpMethod = method
        r.timeoutInterval = timeout
        if let bytes = data ?? body.map({ Data($0.text.utf8) }) {
            r.httpBody = bytes
            r.setValue(contentType, forHTTPHeaderField: "Content-Type")
        }
        r.setValue("application/json", forHTTPHeaderField: "Accept")
        if authorized, let token { r.setValue("Bearer " + token, forHTTPHeaderField: "Authorization") }
        for (k, v) in headers { r.setValue(v, forHTTPHeaderField: k) }
        return r
    }

    /// Sends a request (a JSON `body`, or raw `data`) and returns the parsed
    /// JSON body (`.null` for an empty one). A 4xx/5xx answer throws HubHTTPError.
    @discardableResult
    func call(
        _ method: String, _ path: String, query: [(String, String)] = [], body: JSONValue? = nil,
        contentType: String = "application/json", headers: [String: String] = [:],
        authorized: Bool = true, data: Data? = nil
    ) throws -> JSONValue {
        let req = request(
            method, path, query: query, body: body, contentType: contentType, headers: headers,
            authorized: authorized, data: data)
        let done = DispatchSemaphore(value: 0)
        nonisolated(unsafe) var answer: (Data?, URLResponse?, Error?) = (nil, nil, nil)
        let task = session.dataTask(with: req) { data, response, error in
            answer = (data, response, error)
            done.signal()
        }
        task.resume()
        done.wait()
        let (data, response, error) = answer
        if let error {
            throw HubClientError(
                description: "cannot reach the hub at \(base.absoluteString): \(error.localizedDescription)")
        }
        guard let http = response as? HTTPURLResponse else {
            throw HubClientError(description: "no HTTP answer from \(base.absoluteString)")
        }
        let text = String(decoding: data ?? Data(), as: UTF8.self)
        let json: JSONValue? = text.allSatisfy(\.isWhitespace) ? .null : try? JSONValue.parse(text)
        guard (200..<300).contains(http.statusCode) else {
            let code =
                json?["errorCode"]?.stringValue ?? HTTPURLResponse.localizedString(forStatusCode: http.statusCode)
            let message = json?["message"]?.stringValue ?? (text.isEmpty ? "(no message)" : text)
            throw HubHTTPError(status: http.statusCode, errorCode: code, message: message)
        }
        guard let json else {
            throw HubClientError(
                description:
                    "\(method) \(path): the hub answered \(http.statusCode) with a body that is not JSON: \(text.prefix(200))"
            )
        }
        return json
    }
}

/// Reads a text/event-stream answer as it arrives and hands each event
/// (its `event:` name and joined `data:` lines) to a callback.
final class EventStream: NSObject, URLSessionDataDelegate, @unchecked Sendable {
    struct Event: Equatable {
        var name: String
        var data: String
    }

    private let onEvent: (Event) -> Void
    private let onOpen: (Int) -> Void
    private var parser = Parser()
    private let finished = DispatchSemaphore(value: 0)
    private(set) var failure: Error?
    private(set) var status = 0
    private(set) var errorBody = Data()

    init(onOpen: @escaping (Int) -> Void, onEvent: @escaping (Event) -> Void) {
        self.onOpen = onOpen
        self.onEvent = onEvent
    }

    /// Runs the request until the stream ends or `timeout` seconds pass
    /// (nil: no limit). True when the time ran out (the normal end of
    /// `watch --timeout`), false when the stream ended by itself.
    func run(_ request: URLRequest, timeout: TimeInterval?) -> Bool {
        let config = URLSessionConfiguration.ephemeral
        config.timeoutIntervalForRequest = 365 * 24 * 3600
        config.timeoutIntervalForResource = 365 * 24 * 3600
        let queue = OperationQueue()
        queue.maxConcurrentOperationCount = 1
        let session = URLSession(configuration: config, delegate: self, delegateQueue: queue)
        var req = request
        req.timeoutInterval = 365 * 24 * 3600
        req.setValue("text/event-stream", forHTTPHeaderField: "Accept")
        let task = session.dataTask(with: req)
        task.resume()
        let timedOut: Bool
        if let timeout {
            timedOut = finished.wait(timeout: .now() + timeout) == .timedOut
        } else {
            finished.wait()
            timedOut = false
        }
        task.cancel()
        session.invalidateAndCancel()
        return timedOut
    }

    func urlSession(
        _ session: URLSession, dataTask: URLSessionDataTask, didReceive response: URLResponse,
        completionHandler: @escaping (URLSession.ResponseDisposition) -> Void
    ) {
        status = (response as? HTTPURLResponse)?.statusCode ?? 0
        if (200..<300).contains(status) { onOpen(status) }
        completionHandler(.allow)
    }

    func urlSession(_ session: URLSession, dataTask: URLSessionDataTask, didReceive data: Data) {
        guard (200..<300).contains(status) else { errorBody.append(data); return }
        for event in parser.feed(data) { onEvent(event) }
    }

    func urlSession(_ session: URLSession, task: URLSessionTask, didCompleteWithError error: Error?) {
        failure = error
        finished.signal()
    }

    /// The text/event-stream format: lines; `event:` and `data:` fields; a
    /// blank line ends an event; lines starting with ':' are comments.
    struct Parser {
        private var buffer = [UInt8]()
        private var name = ""
        private var data: [String] = []

        mutating func feed(_ bytes: Data) -> [Event] {
            buffer.append(contentsOf: bytes)
            var events: [Event] = []
            while let nl = buffer.firstIndex(of: 0x0A) {
                var lineBytes = buffer[..<nl]
                if lineBytes.last == 0x0D { lineBytes = lineBytes.dropLast() }
                let line = String(decoding: lineBytes, as: UTF8.self)
                buffer.removeSubrange(...nl)
                if line.isEmpty {
                    if !data.isEmpty {
                        events.append(Event(name: name.isEmpty ? "message" : name, data: data.joined(separator: "\n")))
                    }
                    name = ""
                    data = []
                    continue
                }
                if line.hasPrefix(":") { continue }
                let field: Substring, value: Substring
                if let colon = line.firstIndex(of: ":") {
                    field = line[..<colon]
                    var v = line[line.index(after: colon)...]
                    if v.hasPrefix(" ") { v = v.dropFirst() }
                    value = v
                } else {
                    field = Substring(line)
                    value = ""
                }
                switch field {
                case "event": name = String(value)
                case "data": data.append(String(value))
                default: break
                }
            }
            return events
        }
    }
}
