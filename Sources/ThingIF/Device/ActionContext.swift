// SPDX-License-Identifier: Apache-2.0

import CThingIF

/// C copies of a command's strings, shared by its actions and freed when
/// the command is done, so the `const char *` getters stay valid for the
/// whole handler call.
final class CommandStrings {
    let id: UnsafeMutablePointer<CChar>
    let issuer: UnsafeMutablePointer<CChar>?
    let schema: UnsafeMutablePointer<CChar>?
    let title: UnsafeMutablePointer<CChar>?
    let description: UnsafeMutablePointer<CChar>?
    let schemaVersion: Int32
    let metadata: JSON?
    /// Epoch ms, 0 for none.
    let expiresAt: Int64
    /// The end node's vendorThingID; nil for the thing's own command.
    let endNode: UnsafeMutablePointer<CChar>?
    /// Whom the command targets, for `thingID`.
    private let target: CommandTarget
    private var thingIDCopy: UnsafeMutablePointer<CChar>?

    /// The thingID the command targets (an end node's, or the thing's own),
    /// copied at the first call: few handlers ask (thingif_action_thing_id,
    /// called from the handler only, so on one thread at a time).
    var thingID: UnsafeMutablePointer<CChar> {
        if let p = thingIDCopy { return p }
        let p = Platform.cString(target.thingID)
        thingIDCopy = p
        return p
    }

    init(_ c: Command, target: CommandTarget) {
        self.target = target
        endNode = target.vendorThingID.map { Platform.cString($0) }
        id = Platform.cString(c.id)
        issuer = c.issuer.map { Platform.cString($0) }
        schema = c.shape == .schema ? c.schema.map { Platform.cString($0) } : nil
        title = c.title.map { Platform.cString($0) }
        description = c.description.map { Platform.cString($0) }
        schemaVersion = c.shape == .schema ? Int32(clamping: c.schemaVersion) : 0
        metadata = c.metadata
        expiresAt = c.expiresAt ?? 0
    }

    deinit {
        for p in [id, issuer, schema, title, description, thingIDCopy, endNode] { free(p) }
    }
}

/// What a handler sees as `thingif_action_t *`. Lives for one handler call.
final class ActionContext {
    // unowned(unsafe): the thing creates the context for one handler call and
    // drops it when the call returns (Embedded Swift has no plain unowned).
    unowned(unsafe) let thing: Thing
    let command: CommandStrings
    let name: UnsafeMutablePointer<CChar>
    let alias: UnsafeMutablePointer<CChar>?
    let params: JSON
    let index: Int32

    private(set) var errorMessage: String?
    private(set) var data: JSON?
    /// Set when the handler deferred its result (thingif_action_defer).
    var deferred: DeferredAction?

    init(thing: Thing, command: CommandStrings, name: String, alias: String?, params: JSON, index: Int) {
        self.thing = thing
        self.command = command
        self.name = Platform.cString(name)
        self.alias = alias.map { Platform.cString($0) }
        self.params = params
        self.index = Int32(clamping: index)
    }

    deinit {
        free(name)
        free(alias)
    }

    static let maxErrorMessageBytes = 1024

    func fail(_ message: String) { errorMessage = ActionContext.truncate(message) }

    /// Cuts an error message to maxErrorMessageBytes on a Unicode scalar
    /// boundary (bytes, not grapheme clusters: Text/Bytes.swift).
    static func truncate(_ message: String) -> String {
        guard message.utf8.count > maxErrorMessageBytes else { return message }
        let b = Array(message.utf8.prefix(maxErrorMessageBytes + 1))
        // b[end] is the first byte left out: back up while it continues a
        // scalar (10xxxxxx), so that the cut never splits one.
        var end = maxErrorMessageBytes
        while end > 0 && b[end] & 0xC0 == 0x80 { end -= 1 }
        return String(decoding: b[..<end], as: UTF8.self)
    }

    func setData(_ j: JSON) { data = j }

    var result: ActionResult {
        ActionResult(
            name: String(cString: name), succeeded: errorMessage == nil, errorMessage: errorMessage, data: data)
    }
}
