// SPDX-License-Identifier: Apache-2.0

/// Whom a command is for: the thing itself, or (on a gateway) one of its
/// end nodes, named by the topic it came on (docs/GATEWAYS.md §5). A class:
/// the pipeline hands it along every step, and a reference costs one retain
/// where a struct of strings is copied field by field (the library's size).
final class CommandTarget {
    /// Why a gateway does not run a command for an end node.
    enum Refusal {
        /// The gateway does not carry it (NOT_REGISTERED).
        case notRegistered
        /// Its removal waits for the framework (REMOVED).
        case removed
    }

    /// Where its results go.
    let thingID: String
    /// The end node's thingID (the ledger's "e"); nil: the thing's own.
    let endNode: String?
    /// The end node's vendorThingID, for the handler; nil for the thing's
    /// own, and for an end node the gateway does not carry.
    let vendorThingID: String?
    let refusal: Refusal?

    init(thingID: String, endNode: String?, vendorThingID: String?, refusal: Refusal?) {
        self.thingID = thingID
        self.endNode = endNode
        self.vendorThingID = vendorThingID
        self.refusal = refusal
    }

    static func own(_ thingID: String) -> CommandTarget {
        CommandTarget(thingID: thingID, endNode: nil, vendorThingID: nil, refusal: nil)
    }

    /// The refusal's reason (data.reason) and message.
    var refusalText: (reason: String, message: String)? {
        switch refusal {
        case nil: return nil
        case .notRegistered?:
            return ("NOT_REGISTERED", str("end node \(thingID) is not registered on this gateway"))
        case .removed?:
            return ("REMOVED", str("end node \(thingID) (\(vendorThingID ?? "")) is being removed from this gateway"))
        }
    }
}
