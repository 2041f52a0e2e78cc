import CThingIF
import ThingIF

/// The MQTT request loop: each request on p/{clientID}/thing-if/… or …/api/… is framed,
/// size- and rate-limited, routed and answered on p/{clientID}/resp only.
extension FrameworkSide {
    // MARK: request handling (MQTT thread)

    func handle(_ m: MqttClient.Message) {
        if let clientID = Topics.parseStatus(m.topic) {
            let up = m.payload == Array("online".utf8)
            guard let tid = store.thing(mqttTopic: clientID)?.thingID else { return }
            data.withLock { $0.online[tid] = up }
            onEvent?("\(tid) is \(up ? "online" : "offline")")
            if up {
                let n = resendUnanswered(to: tid)
                if n > 0 { onEvent?("sent \(n) unanswered command(s) to \(tid) again") }
            }
            return
        }
        guard let t = Topics.parseRequest(m.topic), Topics.isSafeLevel(t.clientID) else { return }
        let reply: KiiResponse
        var method = "?"
        let request = KiiRequest.decode(m.payload)
        if let req = request {
            method = req.method
            if req.body.count > maxBody(path: t.path) {
                reply = error(413, "REQUEST_TOO_LARGE", "the body is larger than \(maxBody(path: t.path)) bytes")
            } else if !rateLimiter.allow("mqtt:" + t.clientID, now: Platform.nowMs()) {
                reply = error(429, "TOO_MANY_REQUESTS", "too many requests from \(t.clientID); slow down")
            } else {
                reply =
                    t.appID == options.appID
                    ? route(req, t) : error(404, "APP_NOT_FOUND", "app \(t.appID) is not served here")
            }
        } else {
            reply = error(400, "INVALID_INPUT_DATA", "the request is not in Kii's MQTT request format")
        }
        var answer = reply
        if let rid = request?.requestID {
            answer.headers.append((KiiFraming.requestIDHeader, rid))
        }
        let logged = RequestRecord(
            clientID: t.clientID, method: method, path: t.path,
            body: FrameworkSide.redacted(request?.body ?? [], path: t.path), status: reply.status)
        data.withLock {
            $0.requests.append(logged)
            if $0.requests.count > FrameworkSide.requestLogSize {
                $0.requests.removeFirst($0.requests.count - FrameworkSide.requestLogSize)
            }
        }
        // Always on the reply topic of the client ID the request came from
        // (the broker lets a client publish only under its own ID), never on
        // a Response Topic the request names: that would let any client make
        // the hub publish anywhere.
        _ = client.publish(
            topic: Topics.response(clientID: t.clientID), payload: answer.encode(), qos: 1,
            correlationData: m.correlationData)
    }

    /// The body limit of a request path: state uploads have their own.
    func maxBody(path: String) -> Int {
        path.hasSuffix("/states") ? options.limits.maxStateBody : options.limits.maxBody
    }

    func error(_ status: Int, _ code: String, _ message: String) -> KiiResponse {
        KiiResponse(
            status: status, headers: [("Content-Type", MediaType.json)],
            body: HubError(status, code, message).body.dumpBytes())
    }

    func ok(_ status: Int, _ body: JSON? = nil) -> KiiResponse {
        guard let body else { return KiiResponse(status: status) }
        return KiiResponse(status: status, headers: [("Content-Type", MediaType.json)], body: body.dumpBytes())
    }

    func route(_ req: KiiRequest, _ t: Topics.ParsedRequest) -> KiiResponse {
        let parts = t.path.split(separator: "/", omittingEmptySubsequences: false).map(String.init)
        switch (t.api, req.method, parts.count) {
        case (.thingIF, "POST", 1) where parts[0] == "onboardings":
            return onboardByThing(req)
        case (.kii, "POST", 1) where parts[0] == "installations":
            return createInstallation(req)
        case (.kii, "GET", 3) where parts[0] == "installations" && parts[2] == "mqtt-endpoint":
            return endpoint(req, installationID: parts[1])
        case (.thingIF, "PUT", 4) where parts[0] == "targets" && parts[2] == "commands":
            return commandReport(req, from: t.clientID, target: parts[1], commandID: parts[3])
        case (.thingIF, "PUT", 5) where parts[0] == "targets" && parts[2] == "commands" && parts[4] == "action-results":
            return actionResults(req, from: t.clientID, target: parts[1], commandID: parts[3])
        case (.thingIF, "PUT", 3) where parts[0] == "targets" && parts[2] == "states",
            (.thingIF, "PATCH", 3) where parts[0] == "targets" && parts[2] == "states":
            return state(req, from: t.clientID, target: parts[1])
        case (.thingIF, "PUT", 3) where parts[0] == "things" && parts[2] == "firmware-version":
            return firmwareVersion(req, from: t.clientID, thingID: parts[1])
        case (.thingIF, "PUT", 3) where parts[0] == "targets" && parts[2] == "automation-report":
            return automationReport(req, from: t.clientID, target: parts[1])
        default:
            return error(404, "NOT_FOUND", "no \(req.method) \(t.path)")
        }
    }
}
