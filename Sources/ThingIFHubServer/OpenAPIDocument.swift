// The OpenAPI document served at GET /openapi.yaml: a copy of
// docs/openapi.yaml, so that the binary serves it from any directory.
// HubAPITests checks that the two are the same; after editing the YAML, copy
// it here between the delimiters.
enum OpenAPIDocument {
    static let yaml = #"""
openapi: 3.0.3
info:
  title: thingif-hub app API
  version: "1.0.0"
  description: |
    The app side of thingif-hub: Kii Thing-IF's REST paths for users, onboarding by the
    owner, commands, state and result notifications. Things talk to the hub over MQTT
    (docs/PROTOCOL.md); apps and the `thingif` CLI call this API.

    Rules that hold for every operation:
    - Every call except POST /api/apps/{appID}/users, POST /api/apps/{appID}/oauth2/token,
      GET /openapi.yaml and GET /health needs `Authorization: Bearer {accessToken}` of a
      user. A missing, unknown, expired or revoked token, or a thing's token, gets 401
      INVALID_ACCESS_TOKEN. Users' tokens expire after the hub's tokenLifetime (30 days by
      default); each login issues a new one; POST …/oauth2/revoke ends one early. The hub
      keeps only tokens' SHA-256, so it can never show a token again after issuing it.
    - An unknown {appID} gets 404 APP_NOT_FOUND.
    - Request bodies are JSON: Content-Type application/json or any application/…+json
      (else 415 UNSUPPORTED_MEDIA_TYPE), at most the hub's maxBody, 65536 bytes by default
      (else 413 REQUEST_TOO_LARGE).
    - Each user (by token), each target thing and each loginName at login has a request
      budget (the hub's rateLimit per second and rateBurst at once; 20 and 100 by default):
      beyond it, 429 TOO_MANY_REQUESTS with a `Retry-After` header in seconds.
    - With --tls-cert/--tls-key the hub serves this API over HTTPS only.
      Malformed JSON, a body that is not an object, wrong types or missing fields get
      400 INVALID_INPUT_DATA.
    - Errors always have the body `{"errorCode","message"}` and a 4xx/5xx status.
      Nothing is stored when the answer is a 4xx.
    - A thing that the caller does not own (directly or through a group) looks exactly
      like an unknown thing: 404 TARGET_NOT_FOUND.

    Limits of a command (CommandForm): schema and issuer 1..200 characters, title at most
    50, description at most 200, metadata an object of at most 1024 bytes (as compact
    JSON), 1..100 actions of at most 16384 bytes each. Listing: bestEffortLimit defaults
    to 10 and is capped at 100.
servers:
  - url: http://127.0.0.1:8080
security:
  - bearer: []
tags:
  - name: users
  - name: things
  - name: commands
  - name: states
  - name: notifications
  - name: triggers
  - name: automation
  - name: service
paths:
  /health:
    get:
      tags: [service]
      summary: Liveness
      security: []
      responses:
        "200":
          description: The hub is up.
          content:
            application/json:
              schema:
                type: object
                required: [status]
                properties:
                  status: { type: string, enum: [ok] }
  /openapi.yaml:
    get:
      tags: [service]
      summary: This document
      security: []
      responses:
        "200":
          description: The OpenAPI document.
          content:
            application/yaml:
              schema: { type: string }
  /api/apps/{appID}/users:
    parameters:
      - $ref: "#/components/parameters/appID"
    post:
      tags: [users]
      summary: Register a user (pseudo user with an empty body)
      description: |
        `{}` registers a pseudo user (seed "Defining an Owner"); `{"loginName","password"}`
        a normal one. loginName: 3..64 letters, digits or . _ @ -; password: 4..128 characters.
      security: []
      requestBody:
        required: true
        content:
          application/json:
            schema:
              type: object
              properties:
                loginName: { type: string }
                password: { type: string }
            examples:
              pseudo: { value: {} }
              normal: { value: { loginName: alice, password: s3cret-pw } }
      responses:
        "201":
          description: Created.
          content:
            application/json:
              schema:
                type: object
                required: [userID, accessToken]
                properties:
                  userID: { type: string }
                  accessToken: { type: string }
                  loginName: { type: string }
        "400": { $ref: "#/components/responses/BadRequest" }
        "404": { $ref: "#/components/responses/NotFound" }
        "409":
          description: USER_ALREADY_EXISTS
          content:
            application/json:
              schema: { $ref: "#/components/schemas/Error" }
        "413": { $ref: "#/components/responses/TooLarge" }
        "415": { $ref: "#/components/responses/UnsupportedMediaType" }
  /api/apps/{appID}/oauth2/token:
    parameters:
      - $ref: "#/components/parameters/appID"
    post:
      tags: [users]
      summary: Log a normal user in
      security: []
      requestBody:
        required: true
        content:
          application/json:
            schema:
              type: object
              required: [username, password]
              properties:
                username: { type: string, description: the loginName }
                password: { type: string }
      responses:
        "200":
          description: The user's token.
          content:
            application/json:
              schema:
                type: object
                required: [access_token, token_type, id]
                properties:
                  access_token: { type: string, description: a new token on every login }
                  token_type: { type: string, enum: [Bearer] }
                  id: { type: string, description: the userID }
                  expires_in: { type: integer, description: "seconds the token is valid (absent: no expiry)" }
        "400":
          description: INVALID_INPUT_DATA, or invalid_grant for a wrong loginName or password.
          content:
            application/json:
              schema: { $ref: "#/components/schemas/Error" }
        "404": { $ref: "#/components/responses/NotFound" }
        "413": { $ref: "#/components/responses/TooLarge" }
        "415": { $ref: "#/components/responses/UnsupportedMediaType" }
        "429": { $ref: "#/components/responses/TooManyRequests" }
  /api/apps/{appID}/oauth2/revoke:
    parameters:
      - $ref: "#/components/parameters/appID"
    post:
      tags: [users]
      summary: Revoke one of the caller's own tokens
      description: |
        Ends a token of the caller's (as RFC 7009 and Kii's revoke): the one named in
        `token`, or, without it, the token the request carries. Other tokens of the user
        stay valid. A token of another user, a thing's, or an unknown or already revoked
        one gets 400.
      requestBody:
        required: true
        content:
          application/json:
            schema:
              type: object
              properties:
                token: { type: string, description: "the access token to revoke (default: the caller's)" }
      responses:
        "204":
          description: Revoked; the token now gets 401.
        "400": { $ref: "#/components/responses/BadRequest" }
        "401": { $ref: "#/components/responses/Unauthorized" }
        "404": { $ref: "#/components/responses/NotFound" }
        "413": { $ref: "#/components/responses/TooLarge" }
        "415": { $ref: "#/components/responses/UnsupportedMediaType" }
        "429": { $ref: "#/components/responses/TooManyRequests" }
  /api/apps/{appID}/groups:
    parameters:
      - $ref: "#/components/parameters/appID"
    post:
      tags: [users]
      summary: Create a group owned by the caller
      description: A group (name 1..64 characters, at most 100 members) can own things; its owner and members see them.
      requestBody:
        required: true
        content:
          application/json:
            schema:
              type: object
              required: [name]
              properties:
                name: { type: string }
                members: { type: array, items: { type: string, description: a userID } }
      responses:
        "201":
          description: Created.
          content:
            application/json:
              schema:
                type: object
                required: [groupID]
                properties:
                  groupID: { type: string }
        "400": { $ref: "#/components/responses/BadRequest" }
        "401": { $ref: "#/components/responses/Unauthorized" }
        "404": { $ref: "#/components/responses/NotFound" }
        "413": { $ref: "#/components/responses/TooLarge" }
        "415": { $ref: "#/components/responses/UnsupportedMediaType" }
        "429": { $ref: "#/components/responses/TooManyRequests" }
  /api/apps/{appID}/installations:
    parameters:
      - $ref: "#/components/parameters/appID"
    post:
      tags: [notifications]
      summary: Register an app installation for result notifications
      description: |
        MQTT: the hub publishes on `mqttTopic` (`n/{installationID}`). SSE: open
        GET …/installations/{id}/events. WEBHOOK: the hub POSTs to `webhookURL`
        (http:// or https://), only to a public address: a URL whose host is a literal
        loopback, private, shared, link-local, unique-local, unspecified or multicast
        address (IPv4-mapped forms too) gets 400 here, and a name that resolves to one is
        skipped at delivery, unless the operator's webhookAllow lists its host:port.
        Redirects are not followed. Every notification body is NotificationPayload.
        A pseudo user is notified only on the installation a command was posted
        from (header X-Thingif-Installation-ID); a normal user on all of its installations;
        for a group issuer, every installation of the group's owner and members.
      requestBody:
        required: true
        content:
          application/json:
            schema:
              type: object
              required: [deviceType]
              properties:
                deviceType: { type: string, enum: [MQTT, SSE, WEBHOOK] }
                webhookURL: { type: string, description: "required for WEBHOOK, refused otherwise" }
      responses:
        "201":
          description: Created.
          content:
            application/json:
              schema:
                type: object
                required: [installationID]
                properties:
                  installationID: { type: string }
                  mqttTopic: { type: string, description: MQTT installations only }
        "400": { $ref: "#/components/responses/BadRequest" }
        "401": { $ref: "#/components/responses/Unauthorized" }
        "404": { $ref: "#/components/responses/NotFound" }
        "413": { $ref: "#/components/responses/TooLarge" }
        "415": { $ref: "#/components/responses/UnsupportedMediaType" }
        "429": { $ref: "#/components/responses/TooManyRequests" }
  /api/apps/{appID}/installations/{installationID}:
    parameters:
      - $ref: "#/components/parameters/appID"
      - $ref: "#/components/parameters/installationID"
    delete:
      tags: [notifications]
      summary: Remove one of the caller's installations
      responses:
        "204": { description: Removed; its open event streams end. }
        "401": { $ref: "#/components/responses/Unauthorized" }
        "404": { $ref: "#/components/responses/NotFound" }
        "429": { $ref: "#/components/responses/TooManyRequests" }
  /api/apps/{appID}/installations/{installationID}/events:
    parameters:
      - $ref: "#/components/parameters/appID"
      - $ref: "#/components/parameters/installationID"
    get:
      tags: [notifications]
      summary: Server-Sent Events of an SSE installation of the caller
      description: |
        The stream starts with the comment `: connected`, then carries one event per
        finished command (`event: command`, `data: NotificationPayload`) and a
        comment (`: keepalive`) every 15 s.
      responses:
        "200":
          description: The event stream.
          content:
            text/event-stream:
              schema: { type: string }
              example: "event: command\ndata: {\"commandID\":\"cmd-1\",\"thingID\":\"th.1\",\"commandState\":\"DONE\"}\n\n"
        "400":
          description: The installation is not an SSE one (INVALID_INPUT_DATA).
          content:
            application/json:
              schema: { $ref: "#/components/schemas/Error" }
        "401": { $ref: "#/components/responses/Unauthorized" }
        "404": { $ref: "#/components/responses/NotFound" }
        "429": { $ref: "#/components/responses/TooManyRequests" }
  /thing-if/apps/{appID}/onboardings:
    parameters:
      - $ref: "#/components/parameters/appID"
    post:
      tags: [things]
      summary: Onboard a thing by its owner
      description: |
        Registers the thing on first use (vendorThingID + thingPassword, thingType), or
        checks the password (403 WRONG_PASSWORD) and thingType (409 THING_TYPE_MISMATCH)
        of a registered one, and binds `owner`: `user:{userID}` (the caller) or
        `group:{groupID}` (a group the caller owns or belongs to; else 403 FORBIDDEN).
        Several owners can share a thing. The reply's accessToken is the thing's: hand it
        to the device (thingif_use_onboarded), it does not act as a user. Every onboarding
        issues a NEW token (the hub keeps only its SHA-256); earlier tokens of the thing
        stay valid until they expire (thingTokenLifetime, none by default) or are revoked.
      requestBody:
        required: true
        content:
          application/vnd.kii.OnboardingWithVendorThingIDByOwner+json:
            schema: { $ref: "#/components/schemas/OnboardingByOwner" }
          application/json:
            schema: { $ref: "#/components/schemas/OnboardingByOwner" }
      responses:
        "200":
          description: Onboarded.
          content:
            application/json:
              schema:
                type: object
                required: [thingID, accessToken]
                properties:
                  thingID: { type: string }
                  accessToken: { type: string, description: "the thing's token, new on every onboarding" }
        "400": { $ref: "#/components/responses/BadRequest" }
        "401": { $ref: "#/components/responses/Unauthorized" }
        "403":
          description: FORBIDDEN (owner) or WRONG_PASSWORD.
          content:
            application/json:
              schema: { $ref: "#/components/schemas/Error" }
        "404": { $ref: "#/components/responses/NotFound" }
        "409":
          description: THING_TYPE_MISMATCH
          content:
            application/json:
              schema: { $ref: "#/components/schemas/Error" }
        "413": { $ref: "#/components/responses/TooLarge" }
        "415": { $ref: "#/components/responses/UnsupportedMediaType" }
        "429": { $ref: "#/components/responses/TooManyRequests" }
  /thing-if/apps/{appID}/targets/thing:{thingID}/commands:
    parameters:
      - $ref: "#/components/parameters/appID"
      - $ref: "#/components/parameters/thingID"
    post:
      tags: [commands]
      summary: postNewCommand
      description: |
        Stores the command (SENDING) and publishes it to the thing; DELIVERED once the
        broker took it while the thing was online; DONE or INCOMPLETE when its results
        arrive. `issuer` must be the caller (`user:{userID}`) or one of its groups.
      parameters:
        - name: X-Thingif-Installation-ID
          in: header
          required: false
          description: The caller's app installation the command is issued from (pseudo users are notified only there).
          schema: { type: string }
      requestBody:
        required: true
        content:
          application/json:
            schema: { $ref: "#/components/schemas/CommandForm" }
            example:
              schema: AirConditioner-Demo
              schemaVersion: 1
              issuer: user:u.0123456789abcdef0123
              actions:
                - turnPower: { power: true }
                - setPresetTemperature: { presetTemperature: 25 }
                - setFanSpeed: { fanSpeed: 5 }
              title: Cool down
              description: Before I get home
              metadata: { origin: app }
      responses:
        "201":
          description: Created.
          content:
            application/json:
              schema:
                type: object
                required: [commandID]
                properties:
                  commandID: { type: string }
        "400": { $ref: "#/components/responses/BadRequest" }
        "401": { $ref: "#/components/responses/Unauthorized" }
        "403":
          description: FORBIDDEN (issuer is not the caller nor one of its groups).
          content:
            application/json:
              schema: { $ref: "#/components/schemas/Error" }
        "404": { $ref: "#/components/responses/NotFound" }
        "413": { $ref: "#/components/responses/TooLarge" }
        "415": { $ref: "#/components/responses/UnsupportedMediaType" }
        "429": { $ref: "#/components/responses/TooManyRequests" }
    get:
      tags: [commands]
      summary: listCommands (ascending, paginated)
      parameters:
        - name: bestEffortLimit
          in: query
          schema: { type: integer, minimum: 1, default: 10, maximum: 100 }
        - name: paginationKey
          in: query
          description: nextPaginationKey of the previous page.
          schema: { type: string }
      responses:
        "200":
          description: One page, oldest first; no nextPaginationKey after the last page.
          content:
            application/json:
              schema:
                type: object
                required: [commands]
                properties:
                  commands: { type: array, items: { $ref: "#/components/schemas/Command" } }
                  nextPaginationKey: { type: string }
        "400":
          description: INVALID_INPUT_DATA or INVALID_PAGINATION_KEY.
          content:
            application/json:
              schema: { $ref: "#/components/schemas/Error" }
        "401": { $ref: "#/components/responses/Unauthorized" }
        "404": { $ref: "#/components/responses/NotFound" }
        "429": { $ref: "#/components/responses/TooManyRequests" }
  /thing-if/apps/{appID}/targets/thing:{thingID}/commands/{commandID}:
    parameters:
      - $ref: "#/components/parameters/appID"
      - $ref: "#/components/parameters/thingID"
      - name: commandID
        in: path
        required: true
        schema: { type: string }
    get:
      tags: [commands]
      summary: getCommand
      responses:
        "200":
          description: The command.
          content:
            application/json:
              schema: { $ref: "#/components/schemas/Command" }
        "401": { $ref: "#/components/responses/Unauthorized" }
        "404":
          description: TARGET_NOT_FOUND, COMMAND_NOT_FOUND or APP_NOT_FOUND.
          content:
            application/json:
              schema: { $ref: "#/components/schemas/Error" }
        "429": { $ref: "#/components/responses/TooManyRequests" }
  /thing-if/apps/{appID}/targets/thing:{thingID}/states:
    parameters:
      - $ref: "#/components/parameters/appID"
      - $ref: "#/components/parameters/thingID"
    get:
      tags: [states]
      summary: The latest state
      responses:
        "200":
          description: The thing's whole state after its last upload (PUT replaces, PATCH merges).
          content:
            application/json:
              schema: { type: object, additionalProperties: true }
              example: { power: true, presetTemperature: 25, fanSpeed: 5 }
        "401": { $ref: "#/components/responses/Unauthorized" }
        "404":
          description: TARGET_NOT_FOUND, or STATE_NOT_FOUND when the thing has not uploaded a state.
          content:
            application/json:
              schema: { $ref: "#/components/schemas/Error" }
        "429": { $ref: "#/components/responses/TooManyRequests" }
  /thing-if/apps/{appID}/targets/thing:{thingID}/states/history:
    parameters:
      - $ref: "#/components/parameters/appID"
      - $ref: "#/components/parameters/thingID"
    get:
      tags: [states]
      summary: State history grouped by the thing's dataGroupingInterval
      description: |
        The states uploaded at from <= time < to, in groups of the dataGroupingInterval
        set at onboarding (one group per interval that has samples, oldest first; a
        thing without an interval gets one group for the whole range). Each object is
        the whole state after an upload plus `_created` (milliseconds). One answer holds
        at most bestEffortLimit samples (default and cap: the hub's maxHistoryPage, 1000);
        `nextPaginationKey` is there when more follow. The hub keeps the newest
        stateRetention samples per thing (100000 by default) and, when stateRetentionDays
        is set, only that many days.
      parameters:
        - name: bestEffortLimit
          in: query
          schema: { type: integer, minimum: 1 }
          description: At most this many samples (capped at maxHistoryPage).
        - name: paginationKey
          in: query
          schema: { type: string }
          description: The nextPaginationKey of the previous page.
        - name: from
          in: query
          schema: { type: integer, format: int64, default: 0 }
          description: Milliseconds since the epoch.
        - name: to
          in: query
          schema: { type: integer, format: int64 }
          description: Milliseconds since the epoch (default now); greater than from.
      responses:
        "200":
          description: The groups.
          content:
            application/json:
              schema:
                type: object
                required: [groupedResults]
                properties:
                  groupedResults:
                    type: array
                    items:
                      type: object
                      required: [range, objects]
                      properties:
                        range:
                          type: object
                          required: [from, to]
                          properties:
                            from: { type: integer, format: int64 }
                            to: { type: integer, format: int64 }
                        objects:
                          type: array
                          items:
                            type: object
                            required: [_created]
                            properties:
                              _created: { type: integer, format: int64 }
                            additionalProperties: true
                  nextPaginationKey: { type: string, description: present when more samples follow }
        "400": { $ref: "#/components/responses/BadRequest" }
        "401": { $ref: "#/components/responses/Unauthorized" }
        "404": { $ref: "#/components/responses/NotFound" }
        "429": { $ref: "#/components/responses/TooManyRequests" }
  /thing-if/apps/{appID}/targets/thing:{thingID}/triggers:
    parameters:
      - $ref: "#/components/parameters/appID"
      - $ref: "#/components/parameters/thingID"
    post:
      tags: [triggers]
      summary: Create a server trigger (enabled)
      description: |
        A STATES trigger is evaluated on every state upload of the thing, on the state
        before and after the upload: CONDITION_TRUE fires whenever the new state matches,
        CONDITION_FALSE_TO_TRUE only when the state did not match before and does now,
        CONDITION_CHANGED when the match result changed. A SCHEDULE trigger fires at
        every minute its cron expression (UTC) matches; a SCHEDULE_ONCE trigger fires
        once at scheduleAt (which must be in the future) and is then disabled. The hub
        checks the schedules once a second; firings missed while the hub was down are
        not made up. A firing issues the trigger's command as postNewCommand does, with
        "firedByTriggerID" set, so that it shows in listCommands. The command's issuer
        must be the caller or one of its groups (else 403).
      requestBody:
        required: true
        content:
          application/json:
            schema: { $ref: "#/components/schemas/TriggerForm" }
      responses:
        "201":
          description: Created.
          content:
            application/json:
              schema:
                type: object
                required: [triggerID]
                properties:
                  triggerID: { type: string }
        "400": { $ref: "#/components/responses/BadRequest" }
        "401": { $ref: "#/components/responses/Unauthorized" }
        "404": { $ref: "#/components/responses/NotFound" }
        "413": { $ref: "#/components/responses/TooLarge" }
        "415": { $ref: "#/components/responses/UnsupportedMediaType" }
        "403":
          description: FORBIDDEN (the command's issuer is not the caller nor one of its groups).
          content:
            application/json:
              schema: { $ref: "#/components/schemas/Error" }
        "429": { $ref: "#/components/responses/TooManyRequests" }
    get:
      tags: [triggers]
      summary: List the thing's server triggers (in creation order)
      responses:
        "200":
          description: The triggers.
          content:
            application/json:
              schema:
                type: object
                required: [triggers]
                properties:
                  triggers: { type: array, items: { $ref: "#/components/schemas/Trigger" } }
        "401": { $ref: "#/components/responses/Unauthorized" }
        "404": { $ref: "#/components/responses/NotFound" }
        "429": { $ref: "#/components/responses/TooManyRequests" }
  /thing-if/apps/{appID}/targets/thing:{thingID}/triggers/{triggerID}:
    parameters:
      - $ref: "#/components/parameters/appID"
      - $ref: "#/components/parameters/thingID"
      - name: triggerID
        in: path
        required: true
        schema: { type: string }
    get:
      tags: [triggers]
      summary: One server trigger
      responses:
        "200":
          description: The trigger.
          content:
            application/json:
              schema: { $ref: "#/components/schemas/Trigger" }
        "401": { $ref: "#/components/responses/Unauthorized" }
        "404": { $ref: "#/components/responses/NotFound" }
        "429": { $ref: "#/components/responses/TooManyRequests" }
    delete:
      tags: [triggers]
      summary: Delete a server trigger
      responses:
        "204":
          description: Deleted.
        "401": { $ref: "#/components/responses/Unauthorized" }
        "404": { $ref: "#/components/responses/NotFound" }
        "429": { $ref: "#/components/responses/TooManyRequests" }
  /thing-if/apps/{appID}/targets/thing:{thingID}/triggers/{triggerID}/enable:
    parameters:
      - $ref: "#/components/parameters/appID"
      - $ref: "#/components/parameters/thingID"
      - name: triggerID
        in: path
        required: true
        schema: { type: string }
    put:
      tags: [triggers]
      summary: Enable a server trigger
      responses:
        "204":
          description: Enabled (a SCHEDULE trigger counts its next firing from now).
        "401": { $ref: "#/components/responses/Unauthorized" }
        "404": { $ref: "#/components/responses/NotFound" }
        "429": { $ref: "#/components/responses/TooManyRequests" }
  /thing-if/apps/{appID}/targets/thing:{thingID}/triggers/{triggerID}/disable:
    parameters:
      - $ref: "#/components/parameters/appID"
      - $ref: "#/components/parameters/thingID"
      - name: triggerID
        in: path
        required: true
        schema: { type: string }
    put:
      tags: [triggers]
      summary: Disable a server trigger
      responses:
        "204":
          description: Disabled.
        "401": { $ref: "#/components/responses/Unauthorized" }
        "404": { $ref: "#/components/responses/NotFound" }
        "429": { $ref: "#/components/responses/TooManyRequests" }
  /thing-if/apps/{appID}/targets/thing:{thingID}/action-sets:
    parameters:
      - $ref: "#/components/parameters/appID"
      - $ref: "#/components/parameters/thingID"
    get:
      tags: [automation]
      summary: List the action sets the thing runs by itself
      responses:
        "200":
          description: The action sets.
          content:
            application/json:
              schema:
                type: object
                required: [actionSets]
                properties:
                  actionSets: { type: array, items: { $ref: "#/components/schemas/ActionSet" } }
        "401": { $ref: "#/components/responses/Unauthorized" }
        "404": { $ref: "#/components/responses/NotFound" }
        "429": { $ref: "#/components/responses/TooManyRequests" }
  /thing-if/apps/{appID}/targets/thing:{thingID}/action-sets/{name}:
    parameters:
      - $ref: "#/components/parameters/appID"
      - $ref: "#/components/parameters/thingID"
      - name: name
        in: path
        required: true
        description: 1..64 characters (percent-encoded in the path).
        schema: { type: string, minLength: 1, maxLength: 64 }
    put:
      tags: [automation]
      summary: Create or replace an action set
      description: |
        At most 100 action sets per thing. After every change of the thing's action sets
        or timer triggers the hub publishes the whole config, retained with QoS 1, on
        p/{mqttTopic}/config of each MQTT installation of the thing:
        {"version":N,"actionSets":[…],"timerTriggers":[…]}, N increasing with every change.
        A change that would make that config larger than 65536 bytes
        (AutomationLimits.maxConfigBytes, which the thing enforces too) is refused with 400.
      requestBody:
        required: true
        content:
          application/json:
            schema:
              type: object
              required: [actions]
              properties:
                actions:
                  type: array
                  minItems: 1
                  maxItems: 100
                  items: { $ref: "#/components/schemas/AutomationAction" }
      responses:
        "204":
          description: Stored and published to the thing.
        "400": { $ref: "#/components/responses/BadRequest" }
        "401": { $ref: "#/components/responses/Unauthorized" }
        "404": { $ref: "#/components/responses/NotFound" }
        "413": { $ref: "#/components/responses/TooLarge" }
        "415": { $ref: "#/components/responses/UnsupportedMediaType" }
        "429": { $ref: "#/components/responses/TooManyRequests" }
    delete:
      tags: [automation]
      summary: Delete an action set
      responses:
        "204":
          description: Deleted and published to the thing.
        "401": { $ref: "#/components/responses/Unauthorized" }
        "404": { $ref: "#/components/responses/NotFound" }
        "409":
          description: ACTION_SET_IN_USE (a timer trigger uses it).
          content:
            application/json:
              schema: { $ref: "#/components/schemas/Error" }
        "429": { $ref: "#/components/responses/TooManyRequests" }
  /thing-if/apps/{appID}/targets/thing:{thingID}/timer-triggers:
    parameters:
      - $ref: "#/components/parameters/appID"
      - $ref: "#/components/parameters/thingID"
    get:
      tags: [automation]
      summary: List the timer triggers the thing runs by itself
      responses:
        "200":
          description: The timer triggers.
          content:
            application/json:
              schema:
                type: object
                required: [timerTriggers]
                properties:
                  timerTriggers: { type: array, items: { $ref: "#/components/schemas/TimerTrigger" } }
        "401": { $ref: "#/components/responses/Unauthorized" }
        "404": { $ref: "#/components/responses/NotFound" }
        "429": { $ref: "#/components/responses/TooManyRequests" }
  /thing-if/apps/{appID}/targets/thing:{thingID}/timer-triggers/{name}:
    parameters:
      - $ref: "#/components/parameters/appID"
      - $ref: "#/components/parameters/thingID"
      - name: name
        in: path
        required: true
        description: 1..64 characters (percent-encoded in the path).
        schema: { type: string, minLength: 1, maxLength: 64 }
    put:
      tags: [automation]
      summary: Create or replace a timer trigger (disabled)
      description: |
        fireDate must be in the future; a recurrence must be between 5 minutes and
        5 weeks inclusive; timeZone must name a file under /usr/share/zoneinfo; the action
        sets (1..16) must exist. A created or replaced trigger is disabled until enabled.
        At most 100 timer triggers per thing. The thing fires it while offline and reports
        each firing as a command with firedByTriggerID.
      requestBody:
        required: true
        content:
          application/json:
            schema: { $ref: "#/components/schemas/TimerTriggerForm" }
      responses:
        "204":
          description: Stored (disabled) and published to the thing.
        "400": { $ref: "#/components/responses/BadRequest" }
        "401": { $ref: "#/components/responses/Unauthorized" }
        "404": { $ref: "#/components/responses/NotFound" }
        "413": { $ref: "#/components/responses/TooLarge" }
        "415": { $ref: "#/components/responses/UnsupportedMediaType" }
        "429": { $ref: "#/components/responses/TooManyRequests" }
    delete:
      tags: [automation]
      summary: Delete a timer trigger
      responses:
        "204":
          description: Deleted and published to the thing.
        "401": { $ref: "#/components/responses/Unauthorized" }
        "404": { $ref: "#/components/responses/NotFound" }
        "429": { $ref: "#/components/responses/TooManyRequests" }
  /thing-if/apps/{appID}/targets/thing:{thingID}/timer-triggers/{name}/enable:
    parameters:
      - $ref: "#/components/parameters/appID"
      - $ref: "#/components/parameters/thingID"
      - name: name
        in: path
        required: true
        description: 1..64 characters (percent-encoded in the path).
        schema: { type: string, minLength: 1, maxLength: 64 }
    put:
      tags: [automation]
      summary: Enable a timer trigger
      responses:
        "204":
          description: Enabled and published to the thing.
        "401": { $ref: "#/components/responses/Unauthorized" }
        "404": { $ref: "#/components/responses/NotFound" }
        "429": { $ref: "#/components/responses/TooManyRequests" }
  /thing-if/apps/{appID}/targets/thing:{thingID}/timer-triggers/{name}/disable:
    parameters:
      - $ref: "#/components/parameters/appID"
      - $ref: "#/components/parameters/thingID"
      - name: name
        in: path
        required: true
        description: 1..64 characters (percent-encoded in the path).
        schema: { type: string, minLength: 1, maxLength: 64 }
    put:
      tags: [automation]
      summary: Disable a timer trigger
      responses:
        "204":
          description: Disabled and published to the thing.
        "401": { $ref: "#/components/responses/Unauthorized" }
        "404": { $ref: "#/components/responses/NotFound" }
        "429": { $ref: "#/components/responses/TooManyRequests" }
components:
  securitySchemes:
    bearer:
      type: http
      scheme: bearer
      description: A user's accessToken (from POST …/users or …/oauth2/token).
  parameters:
    appID:
      name: appID
      in: path
      required: true
      schema: { type: string }
    installationID:
      name: installationID
      in: path
      required: true
      schema: { type: string }
    thingID:
      name: thingID
      in: path
      required: true
      description: The path segment is `thing:{thingID}`.
      schema: { type: string }
  responses:
    BadRequest:
      description: INVALID_INPUT_DATA (malformed JSON, wrong types, missing fields, values out of range).
      content:
        application/json:
          schema: { $ref: "#/components/schemas/Error" }
    Unauthorized:
      description: UNAUTHORIZED (no bearer token) or INVALID_ACCESS_TOKEN (unknown, expired, revoked, or a thing's).
      content:
        application/json:
          schema: { $ref: "#/components/schemas/Error" }
    NotFound:
      description: APP_NOT_FOUND, TARGET_NOT_FOUND, INSTALLATION_NOT_FOUND, TRIGGER_NOT_FOUND, ACTION_SET_NOT_FOUND, TIMER_TRIGGER_NOT_FOUND or NOT_FOUND.
      content:
        application/json:
          schema: { $ref: "#/components/schemas/Error" }
    TooLarge:
      description: REQUEST_TOO_LARGE (body above the hub's maxBody, 65536 bytes by default).
      content:
        application/json:
          schema: { $ref: "#/components/schemas/Error" }
    TooManyRequests:
      description: TOO_MANY_REQUESTS (the caller's, the target thing's or the loginName's request budget is spent).
      headers:
        Retry-After:
          description: Seconds until a request fits the budget again.
          schema: { type: integer, minimum: 1 }
      content:
        application/json:
          schema: { $ref: "#/components/schemas/Error" }
    UnsupportedMediaType:
      description: UNSUPPORTED_MEDIA_TYPE (the body is not application/json or application/…+json).
      content:
        application/json:
          schema: { $ref: "#/components/schemas/Error" }
  schemas:
    Error:
      type: object
      required: [errorCode, message]
      properties:
        errorCode: { type: string }
        message: { type: string }
    OnboardingByOwner:
      type: object
      required: [vendorThingID, thingPassword, owner]
      properties:
        vendorThingID: { type: string, minLength: 1, maxLength: 200 }
        thingPassword: { type: string, minLength: 1, maxLength: 200 }
        owner: { type: string, description: "user:{userID} or group:{groupID}" }
        thingType: { type: string }
        firmwareVersion: { type: string }
        dataGroupingInterval: { type: string, enum: [1_MINUTE, 15_MINUTES, 30_MINUTES, 1_HOUR, 12_HOURS] }
    CommandForm:
      type: object
      required: [schema, schemaVersion, actions, issuer]
      properties:
        schema: { type: string, minLength: 1, maxLength: 200 }
        schemaVersion: { type: integer, minimum: 0 }
        actions:
          type: array
          minItems: 1
          maxItems: 100
          items:
            type: object
            description: One key, the action name, whose value is the action's parameters.
            minProperties: 1
            maxProperties: 1
        issuer: { type: string, description: "user:{userID} (the caller) or group:{groupID}" }
        title: { type: string, maxLength: 50 }
        description: { type: string, maxLength: 200 }
        metadata: { type: object, description: at most 1024 bytes as compact JSON }
    Command:
      type: object
      required: [commandID, target, actions, commandState, createdAt, modifiedAt]
      properties:
        commandID: { type: string }
        schema: { type: string }
        schemaVersion: { type: integer }
        target: { type: string, example: "thing:th.0123456789abcdef0123" }
        issuer: { type: string }
        actions: { type: array, items: { type: object } }
        actionResults:
          type: array
          description: One per action, in order, e.g. {"turnPower":{"succeeded":true}} or {"setFanSpeed":{"succeeded":false,"errorMessage":"…","data":{}}}.
          items: { type: object }
        commandState: { type: string, enum: [SENDING, DELIVERED, DONE, INCOMPLETE] }
        title: { type: string }
        description: { type: string }
        metadata: { type: object }
        firedByTriggerID: { type: string, description: The server trigger or the thing's timer trigger that issued it. }
        createdAt: { type: integer, format: int64 }
        modifiedAt: { type: integer, format: int64 }
    NotificationPayload:
      type: object
      required: [commandID, thingID, commandState]
      properties:
        commandID: { type: string }
        thingID: { type: string }
        commandState: { type: string, enum: [DONE, INCOMPLETE] }
    TriggerForm:
      type: object
      required: [predicate, command]
      properties:
        predicate: { $ref: "#/components/schemas/Predicate" }
        command: { $ref: "#/components/schemas/CommandForm" }
        title: { type: string, maxLength: 50 }
        description: { type: string, maxLength: 200 }
    Trigger:
      type: object
      required: [triggerID, target, predicate, command, enabled, disabled, createdAt]
      properties:
        triggerID: { type: string }
        target: { type: string }
        predicate: { $ref: "#/components/schemas/Predicate" }
        command: { $ref: "#/components/schemas/CommandForm" }
        title: { type: string }
        description: { type: string }
        enabled: { type: boolean }
        disabled: { type: boolean, description: The opposite of enabled (Thing-IF's field). }
        createdAt: { type: integer, format: int64 }
    Predicate:
      type: object
      required: [eventSource]
      description: |
        STATES: {"eventSource":"STATES","condition":Condition,"triggersWhen":"CONDITION_TRUE"|"CONDITION_FALSE_TO_TRUE"|"CONDITION_CHANGED"}.
        SCHEDULE: {"eventSource":"SCHEDULE","schedule":"min hour day-of-month month day-of-week"}, UTC;
        each field *, a number, a range a-b, a list a,b and steps */n or a-b/n; day of week 0-7
        (0 and 7 Sunday); when both day fields are restricted a day matching either fires.
        SCHEDULE_ONCE: {"eventSource":"SCHEDULE_ONCE","scheduleAt":milliseconds, in the future}.
      properties:
        eventSource: { type: string, enum: [STATES, SCHEDULE, SCHEDULE_ONCE] }
        condition: { $ref: "#/components/schemas/Condition" }
        triggersWhen: { type: string, enum: [CONDITION_TRUE, CONDITION_FALSE_TO_TRUE, CONDITION_CHANGED] }
        schedule: { type: string, example: "*/15 8-18 * * 1-5" }
        scheduleAt: { type: integer, format: int64 }
    Condition:
      type: object
      required: [type]
      description: |
        {"type":"eq","field","value"} (value a string, number, boolean or null; numbers compare by value),
        {"type":"not","clause":Condition},
        {"type":"range","field","upperLimit"?,"upperIncluded"?,"lowerLimit"?,"lowerIncluded"?}
        (at least one limit; the Included flags default to true; a non-number field matches no range),
        {"type":"and","clauses":[Condition…]}, {"type":"or","clauses":[Condition…]} (1..64 clauses,
        nesting at most 16 deep). Fields are top-level keys of the thing's state; a missing field
        matches no eq and no range.
      properties:
        type: { type: string, enum: [eq, not, range, and, or] }
        field: { type: string }
        value: {}
        clause: { type: object }
        clauses: { type: array, items: { type: object } }
        upperLimit: { type: number }
        upperIncluded: { type: boolean, default: true }
        lowerLimit: { type: number }
        lowerIncluded: { type: boolean, default: true }
    AutomationAction:
      type: object
      required: [schema, schemaVersion, action]
      properties:
        schema: { type: string, minLength: 1, maxLength: 200 }
        schemaVersion: { type: integer, minimum: 0 }
        action: { type: string, minLength: 1, maxLength: 200 }
        params: { description: The action's parameters (any JSON; null when absent). }
    ActionSet:
      type: object
      required: [name, actions]
      properties:
        name: { type: string }
        actions: { type: array, items: { $ref: "#/components/schemas/AutomationAction" } }
    Recurrence:
      type: object
      required: [unit, count]
      description: unit × count must be between 5 minutes and 5 weeks inclusive.
      properties:
        unit: { type: string, enum: [minute, hour, day, week] }
        count: { type: integer, minimum: 1 }
    TimerTriggerForm:
      type: object
      required: [fireDate, timeZone, actionSets]
      properties:
        fireDate: { type: integer, format: int64, description: milliseconds since the epoch, in the future }
        recurrence: { $ref: "#/components/schemas/Recurrence" }
        timeZone: { type: string, example: Europe/Paris }
        actionSets: { type: array, minItems: 1, maxItems: 16, items: { type: string } }
    TimerTrigger:
      type: object
      required: [name, fireDate, timeZone, actionSets, enabled]
      properties:
        name: { type: string }
        fireDate: { type: integer, format: int64 }
        recurrence: { $ref: "#/components/schemas/Recurrence" }
        timeZone: { type: string }
        actionSets: { type: array, items: { type: string } }
        enabled: { type: boolean }
"""#
}
