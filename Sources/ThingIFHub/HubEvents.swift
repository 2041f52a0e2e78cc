// SPDX-License-Identifier: Apache-2.0

import ThingIF

/// Where the hub's components report what happens: notable events (the
/// hub's `--verbose` lines, and what tests watch) and operator log lines
/// (always printed). One sink shared by every component, set by whoever
/// runs the hub; unset, nothing is reported.
public final class HubEvents: @unchecked Sendable {
    public typealias Sink = @Sendable (String) -> Void
    private let sinks = Locked<(event: Sink?, log: Sink?)>((nil, nil))

    public init() {}

    public var onEvent: Sink? {
        get { sinks.withLock { $0.event } }
        set { sinks.withLock { $0.event = newValue } }
    }

    public var onLog: Sink? {
        get { sinks.withLock { $0.log } }
        set { sinks.withLock { $0.log = newValue } }
    }

    /// A notable event; the text is made only when someone listens.
    func event(_ text: @autoclosure () -> String) {
        if let sink = onEvent { sink(text()) }
    }

    /// A line for the operator.
    func log(_ text: String) { onLog?(text) }
}
