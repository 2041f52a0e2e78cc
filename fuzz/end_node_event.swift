// SPDX-License-Identifier: Apache-2.0

// What a gateway's library reads from the hub about its end nodes, as it
// runs on every message of p/{G}/end-nodes/{E}/events and every answer to
// its list read (docs/GATEWAYS.md §4.2, §2): EndNodeEvent.decode,
// EndNodeListPage.decode, and the end-node topics' parsers.
//
// Properties, beyond "no crash":
//  1. A decoded event is about the topic's end node: never taken for another.
//  2. Nothing over EndNodeEvent.maxSize and nothing with "actions" decodes.
//  3. A decoded event is a fixed point: encode, then decode, gives it back.
//  4. Every entry of a decoded list page has a thingID that is a safe topic
//     level (it becomes a topic) and a vendorThingID that is not empty.
//  5. A topic a parser takes has safe levels and is rebuilt byte for byte
//     from them; no topic is both an end node's command and events topic.
//  6. jansson's memory returns to its baseline after each input.
import CThingIF
@testable import ThingIF

func fuzzCheck(_ input: [UInt8]) {
    let endNode = "th.e1"
    if let event = EndNodeEvent.decode(input, endNode: endNode) {
        if !event.thingID.equals(endNode) { fuzzFail("an event about \(event.thingID) on \(endNode)'s topic", input) }
        if EndNodeEvent.decode(event.encode(), endNode: endNode) != event {
            fuzzFail("an event does not decode back from its encoding", input)
        }
        if input.count > EndNodeEvent.maxSize { fuzzFail("an oversized payload taken for an event", input) }
        if case .success(let j) = JSON.parse(input), j["actions"] != nil {
            fuzzFail("a payload with actions taken for an event", input)
        }
    }
    if let page = EndNodeListPage.decode(input) {
        for e in page.entries where !Topics.isSafeLevel(e.thingID) || e.vendorThingID.isEmpty {
            fuzzFail("a list entry with thingID \(e.thingID) and vendorThingID \(e.vendorThingID)", input)
        }
    }
    let topic = String(decoding: input, as: UTF8.self)
    if let (clientID, e) = Topics.parseEndNodeCommands(topic) {
        if !Topics.isSafeLevel(clientID) || !Topics.isSafeLevel(e) { fuzzFail("an unsafe level parsed", input) }
        if !Topics.endNodeCommands(clientID: clientID, endNode: e).equals(topic) {
            fuzzFail("the topic does not rebuild from its levels", input)
        }
        if Topics.parseEndNodeEvents(topic) != nil { fuzzFail("a command topic taken for an events topic", input) }
    }
    if let (clientID, e) = Topics.parseEndNodeEvents(topic) {
        if !Topics.isSafeLevel(clientID) || !Topics.isSafeLevel(e) { fuzzFail("an unsafe level parsed", input) }
        if !Topics.endNodeEvents(clientID: clientID, endNode: e).equals(topic) {
            fuzzFail("the events topic does not rebuild from its levels", input)
        }
    }
}
