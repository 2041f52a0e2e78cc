// SPDX-License-Identifier: Apache-2.0

import Foundation
#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif
import ThingIF

/// POSTs notifications to webhook URLs, off the caller's thread: the host
/// is resolved and checked against the WebhookGuard at each delivery (a name
/// may resolve elsewhere now), redirects are not followed, and each POST
/// has `timeoutSeconds`.
final class Webhooks: @unchecked Sendable {
    /// Seconds a webhook POST may take.
    static let timeoutSeconds = 5
    let guard_: WebhookGuard
    /// The session, made at the first POST and again after `close`.
    private let session = Locked<URLSession?>(nil)

    init(guard: WebhookGuard) { guard_ = `guard` }

    private func current() -> URLSession {
        session.withLock { s in
            if let s { return s }
            let config = URLSessionConfiguration.ephemeral
            config.timeoutIntervalForRequest = TimeInterval(Self.timeoutSeconds)
            config.timeoutIntervalForResource = TimeInterval(Self.timeoutSeconds)
            // No redirects: a public URL must not bounce the POST to an internal one.
            let made = URLSession(configuration: config, delegate: NoRedirects(), delegateQueue: nil)
            s = made
            return made
        }
    }

    /// Posts `payload`; `done` gets whether a 2xx came back, and why not.
    func post(_ payload: [UInt8], to urlText: String, done: @escaping @Sendable (_ ok: Bool, _ why: String?) -> Void) {
        guard let url = URL(string: urlText) else {
            done(false, "bad URL \(urlText)")
            return
        }
        let session = current()
        let webhooks = guard_
        // Resolving the name may wait on DNS: off the caller's thread.
        DispatchQueue.global().async {
            if case .refused(let why) = webhooks.checkAtDelivery(url) {
                done(false, "refused: \(why)")
                return
            }
            var request = URLRequest(url: url, timeoutInterval: TimeInterval(Self.timeoutSeconds))
            request.httpMethod = "POST"
            request.setValue("application/json", forHTTPHeaderField: "Content-Type")
            request.httpBody = Data(payload)
            // URLSession runs the request on its own threads; the completion only reports.
            session.dataTask(with: request) { _, response, error in
                if let error {
                    done(false, "failed: \(error.localizedDescription)")
                } else if let http = response as? HTTPURLResponse, !(200..<300).contains(http.statusCode) {
                    done(false, "HTTP \(http.statusCode)")
                } else {
                    done(response is HTTPURLResponse, response is HTTPURLResponse ? nil : "no HTTP response")
                }
            }.resume()
        }
    }

    /// Lets the POSTs under way finish and takes no more.
    func close() {
        session.withLock { s in
            s?.finishTasksAndInvalidate()
            s = nil
        }
    }
}

/// Answers every redirect with "do not follow": the 3xx itself is the answer.
final class NoRedirects: NSObject, URLSessionTaskDelegate, @unchecked Sendable {
    func urlSession(
        _ session: URLSession, task: URLSessionTask, willPerformHTTPRedirection response: HTTPURLResponse,
        newRequest request: URLRequest, completionHandler: @escaping (URLRequest?) -> Void
    ) {
        completionHandler(nil)
    }
}
