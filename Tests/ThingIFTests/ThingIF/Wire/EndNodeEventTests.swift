// SPDX-License-Identifier: Apache-2.0

import Testing
import ThingIF

/// The membership events on a gateway's end-node command topic (EndNodeEvent).
@Suite("End-node events (codec)")
struct EndNodeEventTests {
    @Test("Each event decodes what it encodes, for the topic's end node only")
    func roundTrip() {
        let events: [EndNodeEvent] = [
            .added(thingID: "th.e1", vendorThingID: "LAMP-1", thingType: "Lamp"),
            .added(thingID: "th.e1", vendorThingID: "LAMP-1", thingType: nil),
            .removed(thingID: "th.e1"),
            .changed(thingID: "th.e1", vendorThingID: "LAMP-1b")
        ]
        for e in events {
            #expect(EndNodeEvent.decode(e.encode(), endNode: "th.e1") == e, "\(e)")
            #expect(EndNodeEvent.decode(e.encode(), endNode: "th.e2") == nil, "another end node's topic: \(e)")
        }
        #expect(
            String(decoding: EndNodeEvent.removed(thingID: "th.e1").encode(), as: UTF8.self)
                == #"{"event":"endNodeRemoved","thingID":"th.e1"}"#)
    }

    @Test("Commands, cancels, unknown events, missing or wrong fields, oversized and malformed payloads are no events")
    func notEvents() {
        let bad = [
            #"{"commandID":"c1","actions":[{"turnPower":{"power":true}}],"event":"endNodeRemoved","thingID":"th.e1"}"#,
            #"{"commandID":"c1","cancel":true}"#,
            #"{"event":"endNodeExploded","thingID":"th.e1"}"#,
            #"{"event":"endNodeAdded","thingID":"th.e1"}"#,
            #"{"event":"endNodeAdded","thingID":"th.e1","vendorThingID":""}"#,
            #"{"event":"endNodeAdded","thingID":"th.e1","vendorThingID":"v","thingType":7}"#,
            #"{"event":"endNodeChanged","thingID":"th.e1","vendorThingID":3}"#,
            #"{"event":"endNodeRemoved"}"#,
            #"{"event":7,"thingID":"th.e1"}"#,
            #"["endNodeRemoved","th.e1"]"#,
            #"{"event":"endNodeRemoved","thingID":"th.e1""#,
            "",
            #"{"event":"endNodeRemoved","thingID":"th.e1","pad":""# + String(repeating: "x", count: 1100) + #""}"#
        ]
        for text in bad {
            #expect(EndNodeEvent.decode(Array(text.utf8), endNode: "th.e1") == nil, "\(text.prefix(80))")
        }
        #expect(EndNodeEvent.decode([0xFF, 0xFE, 0x7B], endNode: "th.e1") == nil, "not UTF-8")
    }
}
