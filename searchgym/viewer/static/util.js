// searchgym viewer: DOM helpers shared by every view.
// Trajectory text only ever enters the page as text nodes (h() below): never as markup.
"use strict";
const SG = {};

// h("div", {class: "x", onclick: f}, "text", child, [more]) -> element. Strings become text
// nodes; attribute values are set with setAttribute, never parsed as HTML.
SG.h = function h(tag, attrs, ...children) {
  const el = tag.includes(":")
    ? document.createElementNS("http://www.w3.org/2000/svg", tag.split(":")[1])
    : document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === null || value === undefined || value === false) continue;
    if (key.startsWith("on") && typeof value === "function") el.addEventListener(key.slice(2), value);
    else if (key === "href" && !String(value).startsWith("#")) throw new Error("only #routes are linked");
    else el.setAttribute(key, value === true ? "" : String(value));
  }
  SG.append(el, children);
  return el;
};

SG.append = function append(el, children) {
  for (const child of children.flat(Infinity)) {
    if (child === null || child === undefined || child === false) continue;
    el.appendChild(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return el;
};

// A count (no digits given: 1,234) or a value with fixed digits (0.500).
SG.fmt = function fmt(x, digits) {
  if (x === null || x === undefined || Number.isNaN(x)) return "–";
  if (digits === undefined && Number.isInteger(x)) return x.toLocaleString("en-US");
  return Number(x).toFixed(digits === undefined ? 3 : digits);
};

// A reward-like value with at most three decimals: 1, 0.1, -0.05.
SG.num = (x) => (x === null || x === undefined ? "–" : String(+Number(x).toFixed(3)));

SG.pct = (x) => (x === null || x === undefined ? "–" : (100 * x).toFixed(1) + "%");

// "#/name?a=1&b=2" -> {name: "name", params: {a: "1", b: "2"}}
SG.route = function route() {
  const hash = location.hash.replace(/^#\/?/, "");
  const [path, search] = hash.split("?");
  const params = Object.fromEntries(new URLSearchParams(search || ""));
  const [name, ...rest] = (path || "episodes").split("/");
  return { name, arg: rest.join("/"), params };
};

SG.link = function link(name, params) {
  const query = new URLSearchParams(
    Object.entries(params || {}).filter(([, v]) => v !== "" && v !== null && v !== undefined)
  ).toString();
  return "#/" + name + (query ? "?" + query : "");
};

SG.badge = (text, kind) => SG.h("span", { class: "badge " + (kind || "") }, text);

SG.emBadge = (em) =>
  em === null || em === undefined ? SG.badge("no answer", "muted")
    : em >= 1 ? SG.badge("EM 1", "ok") : SG.badge("EM 0", "bad");

SG.card = (title, ...children) =>
  SG.h("section", { class: "card" }, title ? SG.h("h2", {}, title) : null, ...children);

SG.select = function select(options, value, onchange, attrs) {
  const el = SG.h("select", { ...(attrs || {}), onchange: (e) => onchange(e.target.value) },
    options.map(([v, label]) => SG.h("option", { value: v, selected: String(v) === String(value) }, label)));
  return el;
};

SG.sourceLabel = function sourceLabel(ov, s) {
  const src = ov.sources[s];
  if (!src) throw SG.problem(`there is no agent or training step ${s}`);
  return ov.runs[src.run].name + " · " + src.label;
};

// [number, source] of every agent and training step, by run (steps a running trainer wrote
// after the viewer opened have the last numbers, but are listed with their run).
SG.sourcesByRun = (ov) => ov.sources.map((s, i) => [i, s]).sort(([, a], [, b]) => a.run - b.run);

SG.armLabel = (ov, arm) => ov.arms[arm] ? ov.arms[arm].label : "?";

// The env a run played (id and options), as its files record it.
SG.envLabel = (ov, run) => (ov.runs[run] ? ov.runs[run].env_label : "?");
SG.manyEnvs = (ov) => new Set(ov.runs.map((r) => r.env_label)).size > 1;

SG.error = function error(message) {
  return SG.h("div", { class: "error-box", role: "alert" }, message);
};

// What the server skipped (files it cannot read, malformed lines): {episodes, skipped: [...]},
// asked once per overview (it reads every file first) and shared by the views.
SG.skippedNow = function skippedNow() {
  if (!SG.skippedAsk) SG.skippedAsk = SG.api.skipped();
  return SG.skippedAsk;
};

// A note, filled in when known, naming what was skipped of the given runs (all: null).
SG.skippedNote = function skippedNote(runs) {
  const h = SG.h;
  const note = h("section", { class: "skipped-note", hidden: true });
  SG.skippedNow().then((found) => {
    const mine = found.skipped.filter((s) => !runs || s.run === null || runs.includes(s.run));
    note.dataset.skipped = String(mine.length);
    if (!mine.length) return;
    note.replaceChildren(h("b", {}, "⚠ Skipped, so not shown or counted:"), h("ul", {}, mine.map((s) => h("li", {}, s.message))));
    note.hidden = false;
  }, (e) => {
    note.replaceChildren(SG.error(`What was skipped is not known: ${e.message || e}`));
    note.hidden = false;
    note.dataset.skipped = "error";
  });
  return note;
};

// An error whose message is for the reader (a bad link, an unknown run): shown as it is.
SG.problem = function problem(message) {
  const e = new Error(message);
  e.readable = true;
  return e;
};

// "3 (eval-bm25), 4 (grpo-run)": what a link may name, for a message.
SG.listRuns = (ov, kind) => ov.runs.map((r, i) => [i, r]).filter(([, r]) => !kind || r.kind === kind)
  .map(([i, r]) => `${i} (${r.name})`).join(", ") || "none";

// A run named in a link, by its name or its number (of the given kind, if any); a readable
// error if there is none such.
SG.findRun = function findRun(ov, value, kind) {
  const [what, these] = kind === "train" ? ["training run", "Training runs"] : ["run", "Runs"];
  const text = String(value).trim();
  let at = ov.runs.findIndex((r) => r.name === text);
  if (at < 0 && /^\d+$/.test(text) && Number(text) < ov.runs.length) at = Number(text);
  if (at < 0) throw SG.problem(`There is no ${what} named "${text}". ${these}: ${SG.listRuns(ov, kind)}.`);
  if (kind && ov.runs[at].kind !== kind) {
    const other = ov.runs[at].kind;
    throw SG.problem(`"${ov.runs[at].name}" is ${/^[aeiou]/.test(other) ? "an" : "a"} ${other} run, not a ${what}. ` +
      `${these}: ${SG.listRuns(ov, kind)}.`);
  }
  return at;
};

// An agent or training step (a source) named in a link by its number.
SG.findSource = function findSource(ov, value, param) {
  const text = String(value).trim();
  if (/^\d+$/.test(text) && Number(text) < ov.sources.length) return Number(text);
  throw SG.problem(`${param}=${text}: there is no agent or training step "${text}"; they are numbered ` +
    `0–${ov.sources.length - 1} (choose one in the menu of the episodes list or the compare page).`);
};
