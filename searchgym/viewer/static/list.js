// The episodes list: a summary row per agent (or training run) with its EM interval, filters,
// a sortable table and pages. Its state lives in the URL (#/episodes?…), so views can be linked.
"use strict";
SG.views = SG.views || {};

const SORTS = [["index", "#"], ["hops", "hops"], ["step", "step"], ["em", "EM"], ["f1", "F1"],
  ["searches", "searches"], ["invalid", "invalid"], ["errors", "errors"], ["reward", "reward"],
  ["turns", "turns"], ["tokens", "obs tokens"]];

const QUERY_KEYS = [...FILTER_KEYS, "sort", "desc", "offset", "limit"];

// The list's parameters as a link gives them, checked (with a readable error for a bad one,
// before anything is asked of the server) and with runs named by name turned into numbers.
function checkQuery(params, ov) {
  const p = { limit: "50", ...params };
  const unknown = Object.keys(p).filter((k) => !QUERY_KEYS.includes(k));
  if (unknown.length) {
    throw SG.problem(`The episodes list has no parameter ${unknown.join(", ")}; its parameters: ${QUERY_KEYS.join(", ")}.`);
  }
  const list = (text) => String(text).split(",").filter((x) => x.trim() !== "");
  if (p.runs) p.runs = list(p.runs).map((r) => SG.findRun(ov, r)).join(",");
  if (p.sources) p.sources = list(p.sources).map((s) => SG.findSource(ov, s, "sources")).join(",");
  const choices = [["outcome", ["any", "solved", "failed"]], ["invalid", ["any", "none", "some"]],
    ["errors", ["any", "none", "some"]], ["sort", SORTS.map(([k]) => k)]];
  for (const [key, allowed] of choices) {
    if (p[key] && !allowed.includes(p[key])) throw SG.problem(`${key}=${p[key]}: it must be one of ${allowed.join(", ")}.`);
  }
  const integer = (text) => /^-?\d+$/.test(String(text).trim());
  if (p.hops && !list(p.hops).every(integer)) throw SG.problem(`hops=${p.hops}: give hop counts as numbers, e.g. hops=2,3.`);
  for (const key of ["min_searches", "max_searches", "min_reward", "max_reward"]) {
    if (p[key] && !Number.isFinite(Number(p[key]))) throw SG.problem(`${key}=${p[key]} is not a number.`);
  }
  for (const key of ["min_step", "max_step", "offset"]) {
    if (p[key] && !integer(p[key])) throw SG.problem(`${key}=${p[key]} is not a whole number.`);
  }
  if (Number(p.offset || 0) < 0) throw SG.problem(`offset=${p.offset}: it must be 0 or more.`);
  if (!integer(p.limit) || Number(p.limit) < 1 || Number(p.limit) > 500) {
    throw SG.problem(`limit=${p.limit}: show 1 to 500 episodes a page.`);
  }
  return p;
}

SG.views.episodes = async function episodes(params, ov) {
  const h = SG.h;
  const p = checkQuery(params, ov);
  const page = await SG.api.episodes(p);
  const go = (changes) => {
    const next = { ...p, offset: "0", ...changes };
    if (next.limit === "50") delete next.limit;
    location.hash = SG.link("episodes", next);
  };
  sessionStorage.setItem("sg-list", location.hash || "#/episodes");
  sessionStorage.setItem("sg-page", JSON.stringify(page.rows.map((r) => r.id)));
  const runs = p.runs ? p.runs.split(",").map(Number) : null;
  const hasSteps = ov.sources.some((s) => s.step !== null && (!runs || runs.includes(s.run)));
  const summary = SG.card("Summary", h("p", { class: "muted pending" }, `Summing up ${SG.fmt(page.total)} episodes…`));
  const filters = filterBar(p, { hops: [] }, ov, go, hasSteps);
  const pagers = [pager(page, p, go), pager(page, p, go)];
  const view = h("div", { class: "view" }, SG.skippedNote(runs), summary, filters,
    h("section", { class: "card" },
      pagers[0],
      h("div", { class: "table-wrap" }, episodeTable(page, p, ov, go, hasSteps)),
      page.total > Number(p.limit) ? pagers[1] : null));
  // The summary reads every episode: it fills in when ready, the page does not wait for it. Its
  // total is the exact one (the first page, served before every line is checked, counts lines).
  SG.api.summary(p).then((s) => {
    summary.replaceWith(summaryCard(s, ov));
    filters.replaceWith(filterBar(p, s.facets, ov, go, hasSteps));
    if (s.total !== page.total) pagers.forEach((el) => el.replaceWith(pager({ ...page, total: s.total }, p, go)));
    view.dataset.summary = "ready";
  }, (e) => summary.replaceWith(SG.error(String(e.message || e))));
  return view;
};

function summaryCard(page, ov) {
  const h = SG.h;
  const rows = page.groups.map((g) => h("tr", { "data-arm": g.arm },
    h("th", { scope: "row" }, SG.armLabel(ov, g.arm)),
    h("td", { class: "env" }, SG.envLabel(ov, g.run)),
    h("td", { class: "num" }, SG.fmt(g.n)),
    h("td", { class: "num em" }, SG.fmt(g.em, 3)),
    h("td", { class: "num ci", title: "95% interval: " + g.ci }, `[${SG.fmt(g.em_low, 3)}, ${SG.fmt(g.em_high, 3)}]`),
    h("td", { class: "ci-cell" }, ciBar(g)),
    h("td", { class: "num" }, SG.fmt(g.f1, 3)),
    h("td", { class: "num" }, SG.fmt(g.searches, 2)),
    h("td", { class: "num" }, SG.fmt(g.turns, 2)),
    h("td", { class: "num" }, SG.pct(g.invalid_rate)),
    h("td", { class: "num" }, SG.fmt(g.errors, 2)),
    h("td", { class: "num" }, SG.fmt(g.reward, 3)),
    h("td", { class: "num" }, SG.fmt(g.tokens, 0))));
  const sources = [...new Set(page.groups.map((g) => g.ci))];
  return SG.card("Summary",
    h("table", { class: "summary" },
      h("thead", {}, h("tr", {}, ["agent / run", "env", "episodes", "EM", "95% interval", "", "F1", "searches",
        "turns", "invalid", "errors", "reward", "obs tokens"].map((t) => h("th", {}, t)))),
      h("tbody", {}, rows)),
    h("p", { class: "note" }, "EM interval: ", sources.map((s) => s === "metrics.json"
      ? "from the run's metrics.json" : "95% percentile bootstrap over the episodes shown").join("; "),
    ". Invalid: invalid actions per turn."));
}

function ciBar(g) {
  const h = SG.h;
  if (g.em === null || g.em === undefined) return null;
  const svg = h("svg:svg", { viewBox: "0 0 120 14", class: "cibar" });
  svg.appendChild(h("svg:line", { x1: 0, x2: 120, y1: 7, y2: 7, class: "track" }));
  svg.appendChild(h("svg:line", { x1: 120 * (g.em_low || 0), x2: 120 * (g.em_high || 0), y1: 7, y2: 7, class: "range" }));
  svg.appendChild(h("svg:circle", { cx: 120 * g.em, cy: 7, r: 3.5, class: "dot" }));
  return svg;
}

function filterBar(p, facets, ov, go, hasSteps) {
  const h = SG.h;
  const runOptions = [["", "all runs"], ...ov.runs.map((r, i) => [String(i), `${r.name} · ${r.env_label}`])];
  const runSel = p.runs ? p.runs.split(",").map(Number) : [];
  const sources = SG.sourcesByRun(ov).filter(([, s]) => !runSel.length || runSel.includes(s.run));
  const sourceOptions = [["", "all agents / steps"], ...sources.map(([i]) => [String(i), SG.sourceLabel(ov, i)])];
  const hops = p.hops ? p.hops.split(",") : [];
  const toggleHop = (v) => go({ hops: (hops.includes(v) ? hops.filter((x) => x !== v) : [...hops, v]).join(",") });
  const number = (key, placeholder) => h("input", { type: "number", step: "any", name: key, value: p[key] || "",
    placeholder, class: "small", onchange: (e) => go({ [key]: e.target.value }) });
  const tri = (key, labels) => SG.select([["any", labels[0]], ["none", labels[1]], ["some", labels[2]]],
    p[key] || "any", (v) => go({ [key]: v }), { name: key });
  return h("section", { class: "card filters" },
    h("div", { class: "filter-row" },
      h("label", {}, "Run ", SG.select(runOptions, p.runs || "", (v) => go({ runs: v, sources: "" }), { name: "runs" })),
      h("label", {}, "Agent / step ", SG.select(sourceOptions, p.sources || "", (v) => go({ sources: v }), { name: "sources" })),
      h("span", { class: "chips" }, "Hops ", facets.hops.map((v) => h("button", {
        class: "chip" + (hops.includes(String(v)) ? " on" : ""), "data-hops": v, onclick: () => toggleHop(String(v)),
      }, String(v)))),
      h("label", {}, "Outcome ", SG.select([["any", "any"], ["solved", "solved (EM 1)"], ["failed", "failed"]],
        p.outcome || "any", (v) => go({ outcome: v }), { name: "outcome" })),
      (facets.failure || []).length ? h("label", {}, "Why it failed ", SG.select(
        [["any", "any"], ...facets.failure.map((k) => [k, k.replace("_", " ")])],
        p.failure || "any", (v) => go({ failure: v }), { name: "failure" })) : null),
    h("div", { class: "filter-row" },
      h("label", {}, "Invalid actions ", tri("invalid", ["any", "none", "some"])),
      h("label", {}, "Errors ", tri("errors", ["any", "none", "some"])),
      h("label", {}, "Searches ", number("min_searches", "min"), "–", number("max_searches", "max")),
      h("label", {}, "Reward ", number("min_reward", "min"), "–", number("max_reward", "max")),
      hasSteps ? h("label", {}, "Step ", number("min_step", "from"), "–", number("max_step", "to")) : null,
      h("input", { type: "search", name: "text", value: p.text || "", placeholder: "question or task id…",
        onchange: (e) => go({ text: e.target.value }) }),
      h("a", { class: "button", href: "#/episodes" }, "Reset")));
}

function pager(page, p, go) {
  const h = SG.h, limit = Number(p.limit), offset = page.offset;
  const last = Math.min(offset + limit, page.total);
  return h("div", { class: "pager" },
    h("span", { class: "count" }, page.total ? `${SG.fmt(offset + 1)}–${SG.fmt(last)} of ${SG.fmt(page.total)} episodes`
      : "no episode matches these filters"),
    h("button", { disabled: offset === 0, onclick: () => go({ offset: String(Math.max(0, offset - limit)) }) }, "‹ previous"),
    h("button", { disabled: last >= page.total, onclick: () => go({ offset: String(offset + limit) }) }, "next ›"));
}

function episodeTable(page, p, ov, go, hasSteps) {
  const h = SG.h;
  const sorts = SORTS.filter(([k]) => k !== "step" || hasSteps);
  const header = (key, label) => {
    const active = (p.sort || "index") === key, desc = p.desc === "1";
    return h("th", { class: "sortable" + (active ? " active" : ""), "data-sort": key,
      onclick: () => go({ sort: key, desc: active && !desc ? "1" : "" }) }, label, active ? (desc ? " ▼" : " ▲") : "");
  };
  const cols = [header("index", "#"), h("th", {}, "agent / step"), ...sorts.filter(([k]) => k === "hops" || k === "step")
    .map(([k, l]) => header(k, l)), h("th", {}, "question"), h("th", {}, "prediction · gold"),
  ...sorts.filter(([k]) => !["index", "hops", "step"].includes(k)).map(([k, l]) => header(k, l))];
  const envs = SG.manyEnvs(ov);
  const body = page.rows.map((r) => h("tr", { class: "ep-row" + (r.em >= 1 ? " solved" : ""), "data-id": r.id,
    onclick: () => { location.hash = "#/episode/" + r.id; } },
  h("td", { class: "num muted" }, String(r.id)),
  h("td", { class: "who" }, SG.sourceLabel(ov, r.source), envs ? h("div", { class: "env muted" }, SG.envLabel(ov, r.run)) : null),
  h("td", { class: "num" }, SG.fmt(r.hops)),
  hasSteps ? h("td", { class: "num step-cell" }, SG.fmt(r.step)) : null,
  h("td", { class: "question" }, r.question),
  h("td", { class: "pred" }, h("span", { class: r.em >= 1 ? "ok-text" : "bad-text" }, r.prediction ?? "—"),
    h("span", { class: "muted" }, " · " + (r.answers || []).join(" | ")),
    r.failure ? SG.badge(r.failure.replace("_", " "), "failure fail-" + r.failure) : null),
  h("td", { class: "num em-cell" }, SG.emBadge(r.em)),
  h("td", { class: "num" }, SG.fmt(r.f1, 2)),
  h("td", { class: "num" }, SG.fmt(r.searches)),
  h("td", { class: "num" + (r.invalid ? " warn" : "") }, SG.fmt(r.invalid)),
  h("td", { class: "num" + (r.errors ? " warn" : "") }, SG.fmt(r.errors)),
  h("td", { class: "num" }, SG.num(r.reward)),
  h("td", { class: "num" }, SG.fmt(r.turns)),
  h("td", { class: "num" }, SG.fmt(r.tokens))));
  return h("table", { class: "episodes" }, h("thead", {}, h("tr", {}, cols)), h("tbody", {}, body));
}
