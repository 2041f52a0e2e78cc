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

    public init(_ status: Int, _ code: String, _ message: String) {
        self.status = status
        self.code = code
        self.message = message
    }

    public static func invalid(_ message: String) -> HubError { HubError(400, "INVALID_INPUT_DATA", message) }
    /// Kii's code for a command the API refuses.
    public static func wrongCommand(_ message: String) -> HubError { HubError(400, "WRONG_COMMAND", message) }
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
    public static func notFound(_ code: String, _ message: String) -> HubError { HubError(404, code, message) }
    public static let storage = HubError(500, "STORAGE_ERROR", "the hub's store could not be written")

    /// The response body.
    public var body: JSON {
        let o = JSON.object()
        o.set("errorCode", string: code)
        o.set("message", string: message)
        if let commandState { o.set("commandState", string: commandState) }
        return o
    }
}

/// Limits of the app API (documented in docs/openapi.yaml).
public enum AppLimits {
    public static let maxTitle = 50
    public static let maxDescription = 200
    public static let maxMetadataBytes = 1024
    public static let maxActions = 100
    public static let maxActionBytes = 16 * 1024
    public static let defaultPageSize = 10
    public static let maxPageSize = 100
    public static let groupingIntervals: [String: Int64] = [
        "1_MINUTE": 60_000, "15_MINUTES": 900_000, "30_MINUTES": 1_800_000,
        "1_HOUR": 3_600_000, "12_HOURS": 43_200_000
    ]
}
