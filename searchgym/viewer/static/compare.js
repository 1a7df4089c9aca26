// Two agents or two checkpoints on the same tasks: who solves what, and for one task both
// trajectories side by side with the first turn where they diverge marked.
"use strict";
SG.views = SG.views || {};

// What a turn does, without its thinking: the tool call as written, spaces collapsed.
SG.turnKey = (turn) => (turn ? turn.action.replace(/<think>[\s\S]*?<\/think>/g, "").replace(/\s+/g, " ").trim().toLowerCase() : null);

// Index of the first turn where two episodes act differently (or one has ended); -1 if never.
SG.firstDivergence = function firstDivergence(a, b) {
  const n = Math.max(a.turns.length, b.turns.length);
  for (let i = 0; i < n; i++) if (SG.turnKey(a.turns[i]) !== SG.turnKey(b.turns[i])) return i;
  return -1;
};

const SHOWS = ["differ", "a", "b", "both", "neither", "all"];

// What A and B played: each one's env under its menu, and a warning when the two differ
// (tasks are matched by id, which then need not be the same question).
function envNote(ov, a, b) {
  const h = SG.h;
  const env = (s) => (s === null ? null : SG.envLabel(ov, ov.sources[s].run));
  const [ea, eb] = [env(a), env(b)];
  return h("div", { class: "filter-row envs" },
    ea !== null ? h("span", { class: "env", "data-side": "a" }, h("span", { class: "side a" }, "A"), " env: ", ea) : null,
    eb !== null ? h("span", { class: "env", "data-side": "b" }, h("span", { class: "side b" }, "B"), " env: ", eb) : null,
    ea !== null && eb !== null && ea !== eb
      ? h("div", { class: "env-differ" }, "⚠ A and B played different envs: tasks are matched by their task id, " +
        "which need not name the same question in both.") : null);
}

SG.views.compare = async function compare(params, ov) {
  const h = SG.h;
  const p = { ...params };
  const go = (changes) => { location.hash = SG.link("compare", { ...p, ...changes }); };
  const many = SG.manyEnvs(ov);
  const options = [["", "choose…"], ...SG.sourcesByRun(ov).map(([i, s]) => [String(i),
    `${SG.sourceLabel(ov, i)} (${s.n})` + (many ? ` · ${SG.envLabel(ov, s.run)}` : "")])];
  if (p.a === undefined && ov.sources.length > 1) { p.a = "0"; }
  if (p.b === undefined && ov.sources.length > 1) { p.b = String(ov.sources.findIndex((s, i) => String(i) !== p.a)); }
  let problem = null, a = null, b = null;
  try {
    a = p.a === undefined || p.a === "" ? null : SG.findSource(ov, p.a, "a");
    b = p.b === undefined || p.b === "" ? null : SG.findSource(ov, p.b, "b");
    if (p.show && !SHOWS.includes(p.show)) throw SG.problem(`show=${p.show}: it must be one of ${SHOWS.join(", ")}.`);
  } catch (e) {
    if (!e.readable) throw e;
    problem = e.message;
  }
  const pickers = h("section", { class: "card filters" }, h("div", { class: "filter-row" },
    h("label", {}, h("span", { class: "side a" }, "A"), SG.select(options, p.a ?? "", (v) => go({ a: v }), { name: "a" })),
    h("button", { onclick: () => go({ a: p.b, b: p.a }) }, "⇄ swap"),
    h("label", {}, h("span", { class: "side b" }, "B"), SG.select(options, p.b ?? "", (v) => go({ b: v }), { name: "b" }))),
  problem ? null : envNote(ov, a, b));
  if (problem) return h("div", { class: "view" }, pickers, SG.error(problem));
  if (a === null || b === null) {
    return h("div", { class: "view" }, pickers, SG.card(null, h("p", { class: "muted" }, "Choose two agents or training steps.")));
  }
  const cmp = await SG.api.compare(a, b);
  const note = SG.skippedNote([ov.sources[a].run, ov.sources[b].run]);
  const count = (k) => cmp.rows.filter((r) => r.solved === k).length;
  const show = p.show || "differ";
  const shown = cmp.rows.filter((r) => show === "all" || (show === "differ" ? r.solved === "a" || r.solved === "b" : r.solved === show));
  const la = SG.sourceLabel(ov, cmp.a), lb = SG.sourceLabel(ov, cmp.b);
  const tab = (key, label) => h("button", { class: "chip" + (show === key ? " on" : ""), "data-show": key,
    onclick: () => go({ show: key, task: "" }) }, label);
  const table = SG.card(`${cmp.rows.length} tasks played by both`,
    h("div", { class: "scoreboard" },
      h("div", { class: "score a-only" }, h("b", {}, String(count("a"))), "solved by A only"),
      h("div", { class: "score b-only" }, h("b", {}, String(count("b"))), "solved by B only"),
      h("div", { class: "score" }, h("b", {}, String(count("both"))), "by both"),
      h("div", { class: "score" }, h("b", {}, String(count("neither"))), "by neither")),
    h("div", { class: "chips" }, tab("differ", "A xor B"), tab("a", "A solves, B does not"),
      tab("b", "B solves, A does not"), tab("both", "both"), tab("neither", "neither"), tab("all", "all")),
    h("table", { class: "episodes compare-table" },
      h("thead", {}, h("tr", {}, h("th", {}, "task"), h("th", {}, "question"), h("th", {}, "A: " + la), h("th", {}, "B: " + lb))),
      h("tbody", {}, shown.map((r) => h("tr", { class: "ep-row" + (r.task_id === p.task ? " current" : ""), "data-task": r.task_id,
        onclick: () => go({ task: r.task_id }) },
      h("td", { class: "muted" }, r.task_id), h("td", { class: "question" }, r.question),
      h("td", {}, SG.emBadge(r.em_a)), h("td", {}, SG.emBadge(r.em_b)))))));
  const row = cmp.rows.find((r) => r.task_id === p.task);
  const pair = row ? await sideBySide(row, ov)
    : p.task ? SG.error(`task=${p.task}: A and B have not both played this task; choose another B, or a task in the table below.`) : null;
  return h("div", { class: "view" }, pickers, note, pair, table);
};

async function sideBySide(row, ov) {
  const h = SG.h;
  const [a, b] = await Promise.all([SG.api.episode(row.a), SG.api.episode(row.b)]);
  const at = SG.firstDivergence(a, b);
  const column = (ep, side) => {
    const evidence = new Set(ep.evidence || []);
    return h("div", { class: "side-col" },
      h("h3", {}, h("span", { class: "side " + side }, side.toUpperCase()), SG.sourceLabel(ov, ep.source), " ", SG.emBadge(ep.em),
        h("a", { href: "#/episode/" + ep.id, class: "small-link" }, "open")),
      h("div", { class: "env muted" }, SG.envLabel(ov, ep.run)),
      h("div", { class: "muted" }, "answer: ", ep.prediction ?? "(none)", " · reward ", SG.num(ep.total_reward)),
      ep.turns.map((t, i) => SG.turnView(t, i, evidence, i === at
        ? { cls: "diverge", banner: "↯ first divergence: turn " + (i + 1) } : null)),
      at >= ep.turns.length ? h("div", { class: "diverge-banner ended" }, "↯ ended here; the other goes on (turn " + (at + 1) + ")") : null);
  };
  return h("section", { class: "card" },
    h("h2", {}, row.question),
    h("p", { class: "muted" }, "gold: ", (a.answers || []).join(" | "), " · ",
      at < 0 ? "the two trajectories act the same in every turn" : "they diverge at turn " + (at + 1)),
    h("div", { class: "side-by-side" }, column(a, "a"), column(b, "b")));
}
