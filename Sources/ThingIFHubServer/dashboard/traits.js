// SPDX-License-Identifier: Apache-2.0

// A thing's controls and states from its trait registry entry
// (GET …/targets/thing:{id}/traits; docs/decisions/trait-driven-controls.md).
// Per action, by its payloadSchema: none (null, or an object without
// properties) → a button; boolean → a toggle; integer or number with
// minimum and maximum → a slider with a number input; other numbers → a
// number input; string with an enum (or any enum) → a select; other
// strings → a text input; an object of such properties → a small form;
// anything else, or a schema past the bounds below → the raw JSON editor.
// Everything goes on the page with textContent and attributes only.
"use strict";

const Traits = (() => {
  const MAX_ALIASES = 16;
  const MAX_ACTIONS = 64; // per alias: the registry's own bound
  const MAX_ENUM = 64;
  const MAX_PROPERTIES = 16;
  const MAX_STATES = 64;

  function node(tag, attrs, ...children) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v == null || v === false) continue;
      if (k === "class") e.className = v;
      else e.setAttribute(k, v === true ? "" : String(v));
    }
    for (const c of children) e.append(c instanceof Node ? c : document.createTextNode(c == null ? "" : String(c)));
    return e;
  }

  const isObject = (v) => v !== null && typeof v === "object" && !Array.isArray(v);
  const finite = (v) => typeof v === "number" && Number.isFinite(v);
  const scalar = (v) => v === null || ["string", "number", "boolean"].includes(typeof v);

  // One input for a scalar schema: {elements, read()} (read throws a
  // message), or null when the schema is none this file draws.
  function scalarInput(schema, label) {
    if (!isObject(schema)) return null;
    const t = schema.type;
    if (Array.isArray(schema.enum)) {
      if (schema.enum.length < 1 || schema.enum.length > MAX_ENUM || !schema.enum.every(scalar)) return null;
      const select = node("select", { class: "trait-select", "aria-label": label });
      schema.enum.forEach((v, i) => select.append(node("option", { value: String(i) }, typeof v === "string" ? v : JSON.stringify(v))));
      return { elements: [select], read: () => schema.enum[Number(select.value)] };
    }
    if (t === "boolean") {
      const box = node("input", { type: "checkbox", class: "trait-toggle", "aria-label": label });
      return { elements: [box], read: () => box.checked, toggle: box };
    }
    if (t === "integer" || t === "number") {
      const step = t === "integer" ? "1" : "any";
      const number = node("input", { type: "number", class: "trait-number", step, "aria-label": label });
      const elements = [number];
      const lo = schema.minimum, hi = schema.maximum;
      if (finite(lo)) number.setAttribute("min", String(lo));
      if (finite(hi)) number.setAttribute("max", String(hi));
      if (finite(lo) && finite(hi) && lo <= hi) {
        const slider = node("input", { type: "range", class: "trait-slider", min: lo, max: hi, step, "aria-label": label });
        slider.value = String(lo);
        number.value = slider.value;
        slider.addEventListener("input", () => { number.value = slider.value; });
        number.addEventListener("input", () => { if (number.value !== "") slider.value = number.value; });
        elements.unshift(slider);
      }
      return {
        elements,
        read: () => {
          const v = Number(number.value);
          if (number.value === "" || !Number.isFinite(v)) throw label + " needs a number";
          if (t === "integer" && !Number.isInteger(v)) throw label + " needs a whole number";
          if ((finite(lo) && v < lo) || (finite(hi) && v > hi)) throw label + " must be from " + lo + " to " + hi;
          return v;
        },
      };
    }
    if (t === "string") {
      const text = node("input", { type: "text", class: "trait-text", "aria-label": label });
      return { elements: [text], read: () => text.value };
    }
    return null;
  }

  // The raw JSON editor, as today's form has it.
  function rawInput(label, value) {
    const area = node("textarea", { class: "trait-raw mono", rows: "2", "aria-label": label });
    area.value = value;
    return {
      elements: [area],
      read: () => {
        try { return JSON.parse(area.value); } catch (e) { throw label + " is not JSON: " + e.message; }
      },
    };
  }

  // The input for an action's whole value.
  function valueInput(schema, label) {
    if (!isObject(schema)) return rawInput(label, "{}");
    if (schema.type === "object" && isObject(schema.properties)) {
      const names = Object.keys(schema.properties);
      if (names.length > MAX_PROPERTIES) return rawInput(label, "{}");
      const required = new Set(Array.isArray(schema.required) ? schema.required : []);
      const fields = [];
      for (const name of names) {
        const input = scalarInput(schema.properties[name], label + "." + name);
        if (!input) return rawInput(label, "{}");
        // An optional field left empty is left out (a toggle always counts).
        fields.push({ name, input, optional: !required.has(name) });
      }
      const elements = fields.map((f) =>
        node("label", { class: "trait-field", "data-param": f.name }, f.name + (f.optional ? "" : " *"), ...f.input.elements));
      return {
        elements,
        read: () => {
          const out = {};
          for (const f of fields) {
            const text = f.input.elements.find((e) => e.classList.contains("trait-number") || e.classList.contains("trait-text"));
            if (f.optional && text && text.value === "") continue;
            out[f.name] = f.input.read();
          }
          return out;
        },
      };
    }
    return scalarInput(schema, label) || rawInput(label, schema.type === "object" ? "{}" : "null");
  }

  const parameterless = (schema) =>
    isObject(schema) && (schema.type === "null" || (schema.type === "object" && !isObject(schema.properties)));

  // One action's control; send(alias, action, value) sends it.
  function actionControl(alias, name, member, send) {
    const schema = isObject(member) ? member.payloadSchema : undefined;
    const box = node("div", { class: "trait-action", "data-alias": alias, "data-action": name });
    const title = node("span", { class: "trait-name" }, name);
    if (isObject(member) && typeof member.description === "string") title.title = member.description.slice(0, 200);
    box.append(title);
    if (parameterless(schema)) {
      const value = schema.type === "null" ? null : {};
      const b = node("button", { type: "button", class: "small trait-send" }, name);
      b.addEventListener("click", () => send(alias, name, value));
      box.append(b);
      return box;
    }
    let input;
    try {
      input = valueInput(schema, alias + "." + name);
    } catch (_) {
      input = rawInput(alias + "." + name, "{}");
    }
    box.append(...input.elements);
    const go = () => {
      let value;
      try { value = input.read(); } catch (why) { send.refuse(String(why)); return; }
      send(alias, name, value);
    };
    if (input.toggle) {
      // A toggle sends as it flips.
      input.toggle.addEventListener("change", go);
    } else {
      const b = node("button", { type: "button", class: "small trait-send" }, "Send");
      b.addEventListener("click", go);
      box.append(b);
    }
    return box;
  }

  function members(list) {
    const out = [];
    for (const m of Array.isArray(list) ? list.slice(0, MAX_ACTIONS) : []) {
      if (!isObject(m)) continue;
      const [name] = Object.keys(m);
      if (typeof name === "string" && name) out.push([name, m[name]]);
    }
    return out;
  }

  const aliases = (entry) =>
    (isObject(entry) && Array.isArray(entry.aliases) ? entry.aliases : [])
      .filter((a) => isObject(a) && typeof a.alias === "string" && isObject(a.definition))
      .slice(0, MAX_ALIASES);

  // The controls of every alias's actions.
  function controls(entry, send) {
    const out = [];
    for (const a of aliases(entry)) {
      const actions = members(a.definition.actions);
      if (!actions.length) continue;
      const group = node("fieldset", { class: "trait-alias", "data-alias": a.alias },
        node("legend", {}, a.alias + " · " + (a.trait || "") + " " + (a.traitVersion || "")));
      for (const [name, member] of actions) group.append(actionControl(a.alias, name, member, send));
      out.push(group);
    }
    return out;
  }

  function show(value, schema) {
    if (value === undefined) return "—";
    if (isObject(schema) && schema.type === "boolean" && typeof value === "boolean") return value ? "on" : "off";
    if (typeof value === "string") return value;
    const text = JSON.stringify(value);
    return text.length > 200 ? text.slice(0, 200) + "…" : text;
  }

  // Each state of each alias, by its definition, from the thing's state.
  function states(entry, state) {
    const rows = [];
    for (const a of aliases(entry)) {
      const values = isObject(state) && isObject(state[a.alias]) ? state[a.alias] : {};
      for (const [name, member] of members(a.definition.states).slice(0, MAX_STATES)) {
        const schema = isObject(member) ? member.payloadSchema : undefined;
        const range = isObject(schema) && finite(schema.minimum) && finite(schema.maximum)
          ? " (" + schema.minimum + "–" + schema.maximum + ")" : "";
        rows.push(node("tr", { class: "trait-state", "data-alias": a.alias, "data-state": name },
          node("td", {}, a.alias + "." + name), node("td", { class: "mono" }, show(values[name], schema) + range)));
      }
    }
    return rows;
  }

  return { controls, states };
})();
