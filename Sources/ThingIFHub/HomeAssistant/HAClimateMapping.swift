// SPDX-License-Identifier: Apache-2.0

import ThingIF

/// How one thing type shows up in Home Assistant: a `climate` entity
/// (https://www.home-assistant.io/integrations/climate.mqtt/) whose controls
/// become Thing-IF schema actions. Read from JSON (docs: README "Home
/// Assistant"; examples/ha-mappings.json):
///
///     {"thingType":"AirConditioner","component":"climate","name":"Air conditioner",
///      "schema":"AirConditioner-Demo","schemaVersion":1,
///      "power":{"action":"turnPower","param":"power","state":"power"},
///      "targetTemperature":{"action":"setPresetTemperature","param":"presetTemperature",
///                           "state":"presetTemperature","min":16,"max":30,"step":1},
///      "fanMode":{"action":"setFanSpeed","param":"fanSpeed","state":"fanSpeed","modes":[0,1,2,3]},
///      "currentTemperature":{"state":"currentTemperature"},
///      "currentHumidity":{"state":"currentHumidity"}}
public struct HAClimateMapping: Sendable, Equatable {
    public struct Control: Sendable, Equatable {
        public var action: String
        public var param: String
        public var state: String
    }

    public var thingType: String
    public var name: String
    public var schema: String
    public var schemaVersion: Int
    public var power: Control
    public var temperature: Control
    public var minTemp: Int
    public var maxTemp: Int
    public var tempStep: Int
    public var fan: Control?
    public var fanModes: [Int]
    public var currentTemperatureState: String?
    public var currentHumidityState: String?

    /// The seeds' AirConditioner-Demo (examples-c/aircon.c): thingType
    /// AirConditioner, schema AirConditioner-Demo version 1.
    public static let airConditionerDemo = HAClimateMapping(
        thingType: "AirConditioner", name: "Air conditioner", schema: "AirConditioner-Demo", schemaVersion: 1,
        power: Control(action: "turnPower", param: "power", state: "power"),
        temperature: Control(action: "setPresetTemperature", param: "presetTemperature", state: "presetTemperature"),
        minTemp: 16, maxTemp: 30, tempStep: 1,
        fan: Control(action: "setFanSpeed", param: "fanSpeed", state: "fanSpeed"), fanModes: Array(0...10),
        currentTemperatureState: "currentTemperature", currentHumidityState: "currentHumidity")

    /// Parses {"mappings":[…]} or a single mapping object; a problem names the field.
    public static func parse(_ bytes: [UInt8]) -> Result<[HAClimateMapping], HubError> {
        guard case .success(let j) = JSON.parse(bytes) else { return .failure(bad("the file is not JSON")) }
        let items = j["mappings"]?.elements ?? (j.isObject ? [j] : [])
        guard !items.isEmpty else { return .failure(bad("no mappings")) }
        var out: [HAClimateMapping] = []
        for (i, m) in items.enumerated() {
            switch decode(m) {
            case .success(let x): out.append(x)
            case .failure(let why): return .failure(bad("mapping \(i): \(why.message)"))
            }
        }
        return .success(out)
    }

    static func bad(_ s: String) -> HubError { HubError(400, "INVALID_MAPPING", s) }

    static func decode(_ m: JSON) -> Result<HAClimateMapping, HubError> {
        func str(_ o: JSON?, _ k: String) -> String? {
            guard let s = o?[k]?.stringValue, !s.isEmpty, s.utf8.count <= 128 else { return nil }
            return s
        }
        func control(_ k: String) -> Control? {
            guard let o = m[k], let a = str(o, "action"), let p = str(o, "param"), let s = str(o, "state") else {
                return nil
            }
            return Control(action: a, param: p, state: s)
        }
        guard m.isObject else { return .failure(bad("not an object")) }
        guard let type = str(m, "thingType"), Topics.isSafeLevel(type) else { return .failure(bad("thingType")) }
        if let c = m["component"], c.stringValue != "climate" { return .failure(bad("component must be climate")) }
        guard let schema = str(m, "schema") else { return .failure(bad("schema")) }
        guard let power = control("power") else { return .failure(bad("power {action,param,state}")) }
        guard let temp = control("targetTemperature") else {
            return .failure(bad("targetTemperature {action,param,state}"))
        }
        let t = m["targetTemperature"]
        let minT = t?["min"]?.intValue ?? 7
        let maxT = t?["max"]?.intValue ?? 35
        let step = t?["step"]?.intValue ?? 1
        guard minT < maxT, step >= 1 else { return .failure(bad("targetTemperature min < max, step >= 1")) }
        let fan = m["fanMode"] == nil ? nil : control("fanMode")
        if m["fanMode"] != nil && fan == nil { return .failure(bad("fanMode {action,param,state,modes}")) }
        let modes = m["fanMode"]?["modes"]?.elements.compactMap(\.intValue) ?? []
        if fan != nil && modes.isEmpty { return .failure(bad("fanMode.modes: whole numbers")) }
        return .success(
            HAClimateMapping(
                thingType: type, name: str(m, "name") ?? type, schema: schema,
                schemaVersion: m["schemaVersion"]?.intValue ?? 1, power: power, temperature: temp,
                minTemp: minT, maxTemp: maxT, tempStep: step, fan: fan, fanModes: modes,
                currentTemperatureState: str(m["currentTemperature"], "state"),
                currentHumidityState: str(m["currentHumidity"], "state")))
    }
}
