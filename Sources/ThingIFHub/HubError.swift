// SPDX-License-Identifier: Apache-2.0

import ThingIF

/// An error of the app API: an HTTP status and Thing-IF's
/// {"errorCode","message"} body.
public struct HubError: Error, Sendable, Equatable {
    public var status: Int
    public var code: String
    public var message: String
    /// A command's state beside the error (409 COMMAND_NOT_CANCELLABLE), nil for none.
    public var commandState: String?
    /// Kii's `invalidFields` of a 400 INVALID_INPUT_DATA: the field at fault
    /// and why (nil: no one field is).
    public var invalidFields: [String: String]?

    public init(_ status: Int, _ code: String, _ message: String) {
        self.status = status
        self.code = code
        self.message = message
    }

    /// A body the API refuses; with the field at fault, the body names it
    /// in Kii's `invalidFields` ({"field":"why"}, as Kii's validation
    /// errors carry it: thing-if-JSSDK test/small/PushOpsTest.ts).
    public static func invalid(_ message: String, field: String? = nil) -> HubError {
        var e = HubError(400, "INVALID_INPUT_DATA", message)
        e.invalidFields = field.map { [$0: message] }
        return e
    }
    /// The refusal of the thing's automation codec, naming the field it
    /// says (a body the thing would refuse is refused as it would be).
    public static func invalid(_ refusal: StatusMessage) -> HubError {
        invalid(refusal.description, field: refusal.field)
    }
    /// Kii's code for a command the API refuses.
    public static func wrongCommand(_ message: String) -> HubError { HubError(400, "WRONG_COMMAND", message) }
    /// A refused command whose fault is one field (an alias or an action a
    /// trait does not define, or its parameters): Kii's code, and the field
    /// in Kii's `invalidFields`.
    public static func wrongCommand(_ message: String, field: String?) -> HubError {
        var e = wrongCommand(message)
        e.invalidFields = field.map { [$0: message] }
        return e
    }
    /// Kii Cloud's code for a query it cannot run.
    public static func queryNotSupported(_ message: String) -> HubError {
        HubError(400, "QUERY_NOT_SUPPORTED", message)
    }
    /// Kii's code for a trigger the API refuses.
    public static func wrongTrigger(_ message: String) -> HubError { HubError(400, "WRONG_TRIGGER", message) }
    /// Kii Thing-IF's answer for a target thing the caller does not own or
    /// that does not exist (its SDKs' tests: "Target thing:{id} not found").
    public static func thingNotFound(_ thingID: String) -> HubError {
        HubError(404, "TARGET_NOT_FOUND", "Target thing:\(thingID) not found")
    }
    public static func unauthorized(_ message: String = "an Authorization: Bearer token of a user is required")
        -> HubError
    {
        HubError(401, "UNAUTHORIZED", message)
    }
    public static func forbidden(_ message: String) -> HubError { HubError(403, "FORBIDDEN", message) }
    /// A thing's layout is kept from its first onboarding; an end node's
    /// credentials onboard nothing but the end node (docs/GATEWAYS.md §3.1).
    public static func layoutMismatch(_ vendorThingID: String) -> HubError {
        HubError(
            409, "LAYOUT_POSITION_MISMATCH",
            "\(vendorThingID) is registered with another layoutPosition (or is an end node)")
    }
    public static func notFound(_ code: String, _ message: String) -> HubError { HubError(404, code, message) }
    public static let storage = HubError(500, "STORAGE_ERROR", "the hub's store could not be written")

    // Kii's answers, code and message, where its SDKs and documentation
    // record them: every route says each one through these, and
    // docs/PROTOCOL.md §12.3 lists them (KiiErrorTableTests walks that table).

    /// A command the target does not have.
    public static func commandNotFound(_ commandID: String) -> HubError {
        HubError(404, "COMMAND_NOT_FOUND", "Command \(commandID) not found")
    }
    /// A server trigger the target does not have.
    public static func triggerNotFound(_ triggerID: String) -> HubError {
        HubError(404, "TRIGGER_NOT_FOUND", "Trigger \(triggerID) not found")
    }
    /// A thing that has never uploaded a state, read by one trait alias.
    public static let stateNotFound = HubError(404, "STATE_NOT_FOUND", "Thing state not found")
    /// A trait alias the thing's state does not have.
    public static let traitAliasNotFound = HubError(404, "TRAIT_ALIAS_NOT_FOUND", "The trait alias was not found")
    /// A SCHEDULE predicate whose cron string does not parse.
    public static let wrongSchedule = HubError(400, "WRONG_PREDICATE", "Value for 'schedule' field is incorrect")
    /// A thing named by its thingID in a `/things/{thingID}` path (and in
    /// onboarding by thingID) that is not there, or not the caller's.
    public static func thingIDNotFound(_ thingID: String) -> HubError {
        HubError(404, "THING_NOT_FOUND", "Thing with thingID \(thingID) was not found")
    }
    /// A thing without a firmware version, read.
    public static let thingWithoutFirmwareVersion = HubError(
        404, "THING_WITHOUT_FIRMWARE_VERSION", "The thing does not have firmware version associated")
    /// A thing without a thing type, read.
    public static let thingWithoutThingType = HubError(
        404, "THING_WITHOUT_THING_TYPE", "The thing does not have thing type associated")
    /// An update job that does not exist, or another thing's: the same
    /// answer for both, to the operator and to the thing.
    public static func updateJobNotFound(_ jobID: String) -> HubError {
        HubError(404, "UPDATE_JOB_NOT_FOUND", "no update job \(jobID) of this thing")
    }
    /// An app installation that is not the caller's.
    public static func installationNotFound(_ installationID: String) -> HubError {
        HubError(404, "INSTALLATION_NOT_FOUND", "Installation \(installationID) not found")
    }
    /// A user ID that is no user of the app.
    public static func userNotFound(_ userID: String) -> HubError {
        HubError(404, "USER_NOT_FOUND", "User \(userID) not found")
    }

    // The trait registry (docs/decisions/kii-trait-registry.md): no Kii
    // source records these answers, so they are the hub's, in Kii's manner.

    /// A trait with no version stored.
    public static func traitNotFound(_ trait: String) -> HubError {
        HubError(404, "TRAIT_NOT_FOUND", "Trait \(trait) not found")
    }
    /// A trait version that is not stored.
    public static func traitVersionNotFound(_ trait: String, _ version: Int) -> HubError {
        HubError(404, "TRAIT_VERSION_NOT_FOUND", "Trait \(trait) version \(version) not found")
    }
    /// A trait version stored with another definition: published, immutable.
    public static func traitVersionExists(_ trait: String, _ version: Int) -> HubError {
        HubError(
            409, "TRAIT_VERSION_ALREADY_EXISTS",
            "Trait \(trait) version \(version) is published with another definition: a published version does not change"
        )
    }
    /// A thing type that is not registered.
    public static func thingTypeNotFound(_ thingType: String) -> HubError {
        HubError(404, "THING_TYPE_NOT_FOUND", "Thing type \(thingType) not found")
    }
    /// A firmware version of a thing type that is not registered.
    public static func firmwareVersionNotFound(_ thingType: String, _ firmwareVersion: String) -> HubError {
        HubError(
            404, "FIRMWARE_VERSION_NOT_FOUND",
            "Firmware version \(firmwareVersion) of thing type \(thingType) not found")
    }
    /// An alias bound to another trait version already.
    public static func traitAliasExists(_ alias: String, _ trait: String, _ version: Int) -> HubError {
        HubError(
            409, "TRAIT_ALIAS_ALREADY_EXISTS",
            "Trait alias \(alias) is bound to trait \(trait) version \(version): an alias does not change")
    }

    // A gateway's end nodes (docs/GATEWAYS.md §3.2, §3.3): no Kii source
    // records these answers' messages, so they are the hub's, in Kii's manner.

    /// A gateway named by its vendorThingID that is not there, or not the caller's.
    public static func thingVendorIDNotFound(_ vendorThingID: String) -> HubError {
        HubError(404, "THING_NOT_FOUND", "Thing with vendorThingID \(vendorThingID) was not found")
    }
    /// An end node onboarded onto a thing whose layout is not GATEWAY.
    public static func notAGateway(_ thingID: String) -> HubError {
        HubError(409, "NOT_A_GATEWAY", "Thing \(thingID) is not a gateway")
    }
    /// An end node's vendorThingID that is a standalone thing's or a gateway's.
    public static func notAnEndNode(_ vendorThingID: String) -> HubError {
        HubError(409, "LAYOUT_POSITION_MISMATCH", "\(vendorThingID) is registered as a thing that is no end node")
    }
    /// An end node's vendorThingID that another gateway carries.
    public static func endNodeOfAnotherGateway(_ vendorThingID: String) -> HubError {
        HubError(409, "END_NODE_OF_ANOTHER_GATEWAY", "\(vendorThingID) is an end node of another gateway")
    }
    /// A gateway that carries as many end nodes as the hub allows.
    public static func tooManyEndNodes(_ gatewayThingID: String, max: Int) -> HubError {
        HubError(409, "TOO_MANY_END_NODES", "Gateway \(gatewayThingID) has the most end nodes this hub allows: \(max)")
    }
    /// What an end node cannot have (`what`): an automation configuration,
    /// an MQTT installation of its own; its gateway carries its traffic.
    public static func endNodeUnsupported(_ endNodeThingID: String, _ what: String) -> HubError {
        HubError(
            409, "END_NODE_UNSUPPORTED",
            "Thing \(endNodeThingID) is an end node: it has no \(what) of its own; its gateway carries its commands")
    }
    /// An end node the path names that is not one of the gateway's.
    public static func endNodeNotFound(_ endNodeThingID: String) -> HubError {
        HubError(404, "END_NODE_NOT_FOUND", "End node \(endNodeThingID) not found")
    }

    /// The response body.
    public var body: JSON {
        let o = JSON.object()
        o.set("errorCode", string: code)
        o.set("message", string: message)
        if let commandState { o.set("commandState", string: commandState) }
        if let invalidFields {
            let fields = JSON.object()
            for (k, v) in invalidFields.sorted(by: { $0.key < $1.key }) { fields.set(k, string: v) }
            o.set("invalidFields", fields)
        }
        return o
    }
}
