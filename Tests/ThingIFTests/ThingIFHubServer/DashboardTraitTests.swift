// SPDX-License-Identifier: Apache-2.0

import Foundation
import Testing
import ThingIF
import ThingIFHubServer

/// The dashboard's controls from a thing's traits (dashboard/traits.js), in
/// a real browser: a thing whose type and firmware version have an entry
/// gets a slider with its schema's bounds, a select with its enum, a
/// toggle, a button, the raw editor for an odd schema, and its states by
/// their definitions; a slider moved and sent reaches the hub's store as a
/// trait command with that value; a thing without an entry keeps the raw form.
@Suite("Dashboard controls from traits", .serialized, .offPool)
struct DashboardTraitTests {
    static let admin = "operator-dash"
    static let alias = "AirConditionerAlias"
    static let definition = #"""
        {"actions":[
          {"turnPower":{"payloadSchema":{"type":"boolean"}}},
          {"setPresetTemperature":{"payloadSchema":{"type":"integer","minimum":16,"maximum":30}}},
          {"setMode":{"payloadSchema":{"type":"object","properties":{"mode":{"type":"string","enum":["cool","dry","fan"]},"fan":{"type":"integer","minimum":0,"maximum":5}},"required":["mode"]}}},
          {"reset":{"payloadSchema":{"type":"null"}}},
          {"setSchedule":{"payloadSchema":{"type":"array","items":{"type":"object","properties":{"at":{"type":"object","properties":{"h":{"type":"integer"}}}}}}}}],
         "states":[{"power":{"payloadSchema":{"type":"boolean"}}},
          {"presetTemperature":{"payloadSchema":{"type":"integer","minimum":16,"maximum":30}}}]}
        """#

    @Test(
        "Controls by schema in a real browser; a slider's command reaches the store; no entry: the raw form",
        .enabled(if: WebDriver.available, "needs chromium and chromedriver (apt: chromium chromium-driver)"),
        .timeLimit(.minutes(3)))
    func controls() async throws {
        var security = HubServer.Security()
        security.adminToken = Self.admin
        try await withHubAPI(security: security) { e in
            try await defineTraitEntry(
                e, admin: Self.admin, thingType: "MyAirConditioner", firmwareVersion: "v1", alias: Self.alias,
                trait: "AirConditioner", definition: Self.definition)
            let (uid, token) = try await e.user(loginName: "dash-traits")
            let (tid, _) = try await onboardTyped(
                e, "AC-DASH-TRAIT", uid: uid, token: token, thingType: "MyAirConditioner", firmwareVersion: "v1")
            let (plain, _) = try await onboardTyped(
                e, "AC-DASH-PLAIN", uid: uid, token: token, thingType: "MyAirConditioner", firmwareVersion: "v9")
            let up = try await e.call(
                "PUT", "\(e.target(tid))/states", token: token,
                json: [Self.alias: ["power": true, "presetTemperature": 21]])
            try #require((200..<300).contains(up.status), "\(up.status) \(up.text)")

            let browser = try await offPool { Result { try WebDriver.start() } }.get()
            defer { browser.quit() }
            func run(_ script: String, _ args: [Any] = []) async throws -> Any? {
                try await offPool { Result { try browser.script(script, args) } }.get()
            }
            try await offPool {
                Result {
                    try browser.signIn(e.base, token: token)
                }
            }.get()
            let open =
                "const r = document.querySelector(`tr[data-thing=\"${arguments[0]}\"]`); if (r) r.click(); return !!r;"
            #expect(
                await offPool { poll { ((try? browser.script(open, [tid])) as? Bool) == true } }, "no row for the thing"
            )

            // What the page drew, once the controls are there.
            let drawn = """
                const card = document.getElementById('trait-card');
                const a = (name) => document.querySelector(`.trait-action[data-alias="\(Self.alias)"][data-action="${name}"]`);
                if (card.classList.contains('hidden') || !a('setPresetTemperature')) return null;
                const slider = a('setPresetTemperature').querySelector('input[type=range]');
                const select = a('setMode').querySelector('select');
                const states = [...document.querySelectorAll('#trait-states tr.trait-state')].map(r => r.cells[1].textContent);
                return {
                  slider: slider ? [slider.min, slider.max, slider.step] : null,
                  options: select ? [...select.options].map(o => o.textContent) : null,
                  fanSlider: !!a('setMode').querySelector('[data-param=fan] input[type=range]'),
                  toggle: !!a('turnPower').querySelector('input[type=checkbox]'),
                  button: a('reset').querySelector('button') ? a('reset').querySelector('button').textContent : null,
                  raw: !!a('setSchedule').querySelector('textarea.trait-raw'),
                  rawForm: !document.getElementById('send-card').classList.contains('hidden'),
                  states
                };
                """
            var page: [String: Any]?
            _ = await offPool {
                poll {
                    page = (try? browser.script(drawn, [])) as? [String: Any]
                    return (page?["states"] as? [String])?.isEmpty == false
                }
            }
            let shown = try #require(page, "no trait controls drawn")
            #expect(shown["slider"] as? [String] == ["16", "30", "1"], "\(shown)")
            #expect(shown["options"] as? [String] == ["cool", "dry", "fan"], "\(shown)")
            #expect(shown["fanSlider"] as? Bool == true && shown["toggle"] as? Bool == true, "\(shown)")
            #expect(shown["button"] as? String == "reset", "\(shown)")
            #expect(shown["raw"] as? Bool == true, "an array schema falls back to the raw editor: \(shown)")
            #expect(shown["rawForm"] as? Bool == false, "the raw form gives way to the controls")
            #expect(shown["states"] as? [String] == ["on", "21 (16–30)"], "\(shown)")

            // The slider moved to 23 and sent; the select set to dry and sent.
            let used = """
                const a = (name) => document.querySelector(`.trait-action[data-alias="\(Self.alias)"][data-action="${name}"]`);
                const slider = a('setPresetTemperature').querySelector('input[type=range]');
                slider.value = '23';
                slider.dispatchEvent(new Event('input'));
                a('setPresetTemperature').querySelector('button.trait-send').click();
                return true;
                """
            _ = try await run(used)
            func stored() async throws -> [String] {
                let r = try await e.get("\(e.target(tid))/commands", token: token)
                return ((r.json["commands"] as? [[String: Any]]) ?? []).map { c in
                    (try? JSONSerialization.data(withJSONObject: c["actions"] ?? [], options: [.sortedKeys]))
                        .map { String(decoding: $0, as: UTF8.self) } ?? "-"
                }
            }
            // The page lists a command once the hub answered its POST with it.
            func listed(_ n: Int) async -> Bool {
                await offPool {
                    poll {
                        ((try? browser.script("return document.querySelectorAll('#commands tr.command').length;", []))
                            as? Int ?? 0) >= n
                    }
                }
            }
            #expect(await listed(1), "the page lists no command")
            var commands = try await stored()
            #expect(commands == [#"[{"\#(Self.alias)":[{"setPresetTemperature":23}]}]"#], "\(commands)")
            let mode = """
                const a = document.querySelector(`.trait-action[data-alias="\(Self.alias)"][data-action="setMode"]`);
                const select = a.querySelector('select');
                select.value = [...select.options].find(o => o.textContent === 'dry').value;
                a.querySelector('[data-param=fan] input[type=number]').value = '2';
                a.querySelector('button.trait-send').click();
                return true;
                """
            _ = try await run(mode)
            #expect(await listed(2), "the page lists one command")
            commands = try await stored()
            #expect(
                commands.last == #"[{"\#(Self.alias)":[{"setMode":{"fan":2,"mode":"dry"}}]}]"#, "\(commands)")

            // A thing without an entry: today's raw form, no controls.
            #expect(await offPool { poll { ((try? browser.script(open, [plain])) as? Bool) == true } })
            let raw = """
                return document.getElementById('thing-title').textContent.startsWith('AC-DASH-PLAIN') &&
                  document.getElementById('trait-card').classList.contains('hidden') &&
                  !document.getElementById('send-card').classList.contains('hidden') &&
                  document.querySelectorAll('#trait-controls .trait-action').length === 0;
                """
            #expect(await offPool { poll { ((try? browser.script(raw, [])) as? Bool) == true } }, "no raw form")
        }
    }
}
