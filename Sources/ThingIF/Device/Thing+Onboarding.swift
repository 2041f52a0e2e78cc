// SPDX-License-Identifier: Apache-2.0

import CThingIF

/// Onboarding: the identity the thing keeps (storage_dir/identity.json), onboarding by the
/// thing through a bootstrap session, and an identity handed over by the app.
extension Thing {
    // MARK: identity

    var thingIDPointer: UnsafePointer<CChar>? {
        thingIDCString.withLock { UnsafePointer($0) }
    }

    func adopt(_ identity: Identity) {
        let previous = shared.withLock { s -> MqttClient? in
            let old = s.identity
            s.identity = identity
            guard old != identity else { return nil }
            // A new identity needs a new connection.
            s.reconnectAttempt = 0
            return Thing.detachClient(&s)
        }
        pipeline.adopt(identity)
        if previous != nil { pipeline.detach() }
        previous?.disconnect()
        thingIDCString.withLock { p in
            free(p)
            p = strdup(identity.thingID)
        }
    }

    func storedIdentity() -> Identity? {
        guard let bytes = storage.read(Thing.identityFile), case .success(let j) = JSON.parse(bytes),
            let id = Identity.decode(j), id.appID.equals(appID)
        else { return nil }
        return id
    }

    func store(_ identity: Identity) -> Bool {
        storage.write(Thing.identityFile, identity.encode().dumpBytes())
    }

    /// A new identity (onboard, useOnboarded): thing-cert.pem is written
    /// (and checked against the key) before identity.json, which names it,
    /// is stored; then it is adopted. `askedForCertificate`: a CSR was sent
    /// (an info line when the framework signed none).
    func keep(_ identity: Identity, askedForCertificate: Bool) -> Int32 {
        if askedForCertificate && identity.endpoint.clientCertificate == nil {
            logger.info(
                "the framework signed no client certificate: thing \(identity.thingID) connects with a password")
        }
        let status = prepareClientCertificate(identity.endpoint)
        guard status == OK else { return status }
        guard store(identity) else {
            logger.error("cannot write \(storage.path(Thing.identityFile))")
            return THINGIF_ERR_STORAGE.code
        }
        adopt(identity)
        return OK
    }

    /// True while thingif_loop_start's thread runs or a thread is inside thingif_loop().
    var isLoopRunning: Bool { shared.withLock { $0.ownThread != nil || $0.loopThread != nil } }

    func checkCanBlock() -> Int32 {
        if isOnLoopThread { return THINGIF_ERR_IN_CALLBACK.code }
        if isLoopRunning { return THINGIF_ERR_STATE.code }
        return OK
    }

    /// Onboarding by the thing (POST onboardings on a bootstrap connection).
    func onboard(
        vendorThingID: String, password: String, thingType: String?, firmwareVersion: String?,
        properties: JSON?
    ) -> Int32 {
        let rc = checkCanBlock()
        guard rc == OK else { return rc }
        if let stored = storedIdentity(), stored.vendorThingID.equals(vendorThingID) {
            // Its client certificate, if any, is written out again when
            // thing-cert.pem is missing or differs; without its key the
            // thing cannot connect, and says so.
            let certificateStatus = prepareClientCertificate(stored.endpoint)
            guard certificateStatus == OK else { return certificateStatus }
            logger.info("using the stored onboarding of \(vendorThingID): thing \(stored.thingID)")
            adopt(stored)
            return OK
        }
        // With TLS and no client certificate of the user's own: a CSR for
        // the thing's own key (ClientCertificate.swift).
        let (csr, csrStatus) = certificateSigningRequest(commonName: vendorThingID)
        guard csrStatus == OK else { return csrStatus }
        let request = OnboardingRequest(
            vendorThingID: vendorThingID, thingPassword: password, thingType: thingType,
            firmwareVersion: firmwareVersion, thingProperties: properties, layoutPosition: config.layout,
            certificateSigningRequest: csr)
        let session = BootstrapSession(thing: self, budgetMs: config.requestTimeoutMs, claim: true)
        defer { session.close() }
        var status = session.open()
        guard status == OK else { return status }
        let reply: KiiResponse
        switch session.request(
            api: .thingIF, path: "onboardings", method: "POST", token: nil,
            contentType: MediaType.onboardingByThing, body: request.encode().dumpBytes())
        {
        case .failure(let e): return e.code
        case .success(let r): reply = r
        }
        guard reply.isSuccess else {
            logger.error("onboarding of \(vendorThingID) rejected: \(reply.status) \(reply.bodyText)")
            return THINGIF_ERR_REJECTED.code
        }
        guard case .success(let body) = JSON.parse(reply.body), let answer = OnboardingResponse.decode(body) else {
            logger.error("onboarding of \(vendorThingID): malformed answer: \(reply.bodyText)")
            return THINGIF_ERR_PROTOCOL.code
        }
        let identity = Identity(
            appID: appID, vendorThingID: vendorThingID, thingID: answer.thingID,
            accessToken: answer.accessToken, endpoint: answer.mqttEndpoint)
        status = keep(identity, askedForCertificate: csr != nil)
        if status == OK { logger.info("onboarded \(vendorThingID) as thing \(answer.thingID)") }
        return status
    }

    /// A thingID + token handed over by the app: create one installation and
    /// read its MQTT endpoint (Kii's thing SDK flow), unless stored. With TLS
    /// and no certificate of the user's own the installation request carries
    /// a CSR (CN = thingID); a framework that signs it answers with the
    /// endpoint and its certificate at once, and no endpoint is read.
    func useOnboarded(thingID: String, accessToken: String) -> Int32 {
        let rc = checkCanBlock()
        guard rc == OK else { return rc }
        if let stored = storedIdentity(), stored.thingID.equals(thingID), stored.accessToken.equals(accessToken) {
            // As it is (the loop's connect() checks and writes its
            // certificate files, tests-c/client_cert.c relies on that).
            logger.info("using the stored MQTT installation of thing \(thingID)")
            adopt(stored)
            return OK
        }
        let (csr, csrStatus) = certificateSigningRequest(commonName: thingID)
        guard csrStatus == OK else { return csrStatus }
        let session = BootstrapSession(thing: self, budgetMs: 2 * config.requestTimeoutMs)
        defer { session.close() }
        var status = session.open()
        guard status == OK else { return status }
        let body = JSON.object()
        body.set("deviceType", string: "MQTT")
        if let csr { body.set(OnboardingRequest.csrField, string: csr) }
        let created: KiiResponse
        switch session.request(
            api: .kii, path: "installations", method: "POST", token: accessToken,
            contentType: MediaType.installationCreation, body: body.dumpBytes())
        {
        case .failure(let e): return e.code
        case .success(let r): created = r
        }
        guard created.isSuccess else {
            logger.error("installation for thing \(thingID) rejected: \(created.status) \(created.bodyText)")
            return THINGIF_ERR_REJECTED.code
        }
        guard case .success(let cj) = JSON.parse(created.body), let installationID = cj["installationID"]?.stringValue,
            Topics.isSafeLevel(installationID)
        else {
            logger.error("installation for thing \(thingID): malformed answer: \(created.bodyText)")
            return THINGIF_ERR_PROTOCOL.code
        }
        // thingif's framework answers a CSR with the endpoint and its
        // certificate (Kii's answer has only installationID): no GET then.
        let endpoint: MQTTEndpoint
        if let signed = cj["mqttEndpoint"].flatMap(MQTTEndpoint.decode), signed.clientCertificate != nil {
            endpoint = signed
        } else {
            var endpointReply: KiiResponse?
            for attempt in 0..<5 {
                switch session.request(
                    api: .kii, path: str("installations/\(installationID)/mqtt-endpoint"), method: "GET",
                    token: accessToken, contentType: nil, body: [])
                {
                case .failure(let e): return e.code
                case .success(let r):
                    // Kii answers 503 while the endpoint is being prepared.
                    let pause = 200 << attempt
                    if r.status == 503 && attempt < 4 && Platform.nowMs() + Int64(pause) < session.deadline {
                        Platform.sleepMs(pause)
                        continue
                    }
                    endpointReply = r
                }
                break
            }
            guard let er = endpointReply, er.isSuccess else {
                logger.error(
                    "MQTT endpoint of thing \(thingID) refused: \(endpointReply?.status ?? 0) \(endpointReply?.bodyText ?? "")"
                )
                return THINGIF_ERR_REJECTED.code
            }
            guard case .success(let ej) = JSON.parse(er.body), let ep = MQTTEndpoint.decode(ej) else {
                logger.error("MQTT endpoint of thing \(thingID): malformed answer: \(er.bodyText)")
                return THINGIF_ERR_PROTOCOL.code
            }
            endpoint = ep
        }
        let identity = Identity(
            appID: appID, vendorThingID: nil, thingID: thingID, accessToken: accessToken, endpoint: endpoint)
        status = keep(identity, askedForCertificate: csr != nil)
        if status == OK { logger.info("thing \(thingID) uses MQTT installation \(endpoint.installationID)") }
        return status
    }
}
