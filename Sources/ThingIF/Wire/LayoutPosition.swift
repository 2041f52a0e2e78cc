// SPDX-License-Identifier: Apache-2.0

/// What a thing is in Kii Thing-IF's layout (docs/GATEWAYS.md §1): a thing
/// on its own, a gateway that carries end nodes, or an end node reached
/// through its gateway. Sent in the onboarding bodies (`layoutPosition`),
/// kept by the framework from a thing's first onboarding on.
public enum LayoutPosition: String, Sendable, Equatable, CaseIterable {
    case standalone = "STANDALONE"
    case gateway = "GATEWAY"
    case endNode = "ENDNODE"

    /// The body field that carries it.
    public static let field = "layoutPosition"

    /// A layout as Kii's clients write it: the SDKs' spellings and kii_go's
    /// `END_NODE`, in any ASCII case; nil for anything else.
    public init?(parsing text: String) {
        if let named = Self.allCases.first(where: { text.equalsIgnoringASCIICase($0.rawValue) }) {
            self = named
        } else if text.equalsIgnoringASCIICase("END_NODE") {
            self = .endNode
        } else {
            return nil
        }
    }

    /// The layout an onboarding body names (nil: it names none), or why the
    /// field is refused: not one of the three, or an end node, which is
    /// onboarded with the forms that name its gateway.
    public static func named(in body: JSON) -> Result<LayoutPosition?, LayoutRefusal> {
        guard let v = body[field] else { return .success(nil) }
        guard let text = v.stringValue, let layout = LayoutPosition(parsing: text) else {
            return .failure(LayoutRefusal("layoutPosition must be STANDALONE or GATEWAY"))
        }
        guard layout != .endNode else {
            return .failure(
                LayoutRefusal(
                    "an end node is onboarded with OnboardingEndNodeWithGatewayThingID or"
                        + " OnboardingEndNodeWithGatewayVendorThingID, which name its gateway"))
        }
        return .success(layout)
    }
}

/// Why an onboarding body's layoutPosition is refused (the framework's 400).
public struct LayoutRefusal: Error, Equatable, Sendable {
    public var message: String
    public init(_ message: String) { self.message = message }
}
