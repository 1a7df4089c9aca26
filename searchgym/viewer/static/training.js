// A training run's curves (from metrics.jsonl) and its sampled episodes per step; a sweep's
// accuracy against cost with the Pareto front (from sweep.json).
"use strict";
SG.views = SG.views || {};

const PANELS = [
  ["Reward components", (k) => k.startsWith("reward/")],
  ["EM: rollout and dev (with intervals)", (k) => k === "rollout/em" || k === "eval/em"],
  ["Searches per episode", (k) => k === "rollout/searches"],
  ["Invalid-action rate", (k) => k === "rollout/invalid_rate"],
  ["Entropy", (k) => k === "loss/entropy"],
  ["KL to the reference", (k) => k === "loss/kl"],
  ["Degenerate groups", (k) => k === "rollout/degenerate_groups"],
];
const BAND = /_(low|high)$/;

function seriesOf(curves, key) {
  const pts = (k) => curves.filter((r) => r[k] !== null && r[k] !== undefined).map((r) => [r.step, r[k]]);
  const low = curves.filter((r) => r[key + "_low"] !== null && r[key + "_low"] !== undefined && r[key + "_high"] !== null && r[key + "_high"] !== undefined)
    .map((r) => [r.step, r[key + "_low"], r[key + "_high"]]);
  return { name: key, points: pts(key), band: low, dashed: key.startsWith("eval/") };
}

SG.views.training = async function training(params, ov) {
  const h = SG.h;
  const runs = ov.runs.map((r, i) => [i, r]).filter(([, r]) => r.kind === "train");
  if (!runs.length && params.run === undefined) return SG.card("Training", h("p", { class: "muted" }, "No training run is open."));
  const run = params.run !== undefined ? SG.findRun(ov, params.run, "train") : runs[0][0];
  const curves = ov.runs[run].curves || [];
  const keys = [...new Set(curves.flatMap((r) => Object.keys(r)))].filter((k) => k !== "step" && !BAND.test(k));
  const used = new Set();
  const charts = PANELS.map(([title, match]) => {
    const mine = keys.filter(match);
    mine.forEach((k) => used.add(k));
    return mine.length ? SG.lineChart(title, mine.map((k) => seriesOf(curves, k)), { legend: mine.length > 1 || title.startsWith("Reward") }) : null;
  }).filter(Boolean);
  const others = keys.filter((k) => !used.has(k)).map((k) => SG.lineChart(k, [seriesOf(curves, k)], { width: 320, height: 170 }));
  const steps = await SG.api.steps(run);
  const picker = SG.select(runs.map(([, r]) => [r.name, r.name]), ov.runs[run].name, (v) => { location.hash = SG.link("training", { run: v }); }, { name: "run" });
  return h("div", { class: "view" }, SG.skippedNote([run]),
    h("section", { class: "card filters" }, h("label", {}, "Training run ", picker),
      h("span", { class: "env" }, " env: ", SG.envLabel(ov, run)), h("span", { class: "muted" }, " · " + ov.runs[run].path)),
    SG.card("Training curves", curves.length ? h("div", { class: "chart-grid" }, charts) : h("p", { class: "muted" }, "This run has no metrics.jsonl yet.")),
    others.length ? SG.card("Other metrics", h("div", { class: "chart-grid small" }, others)) : null,
    stepsCard(steps, run));
};

function stepsCard(steps, run) {
  const h = SG.h;
  if (!steps.length) return SG.card("Sampled episodes", h("p", { class: "muted" }, "No episodes/step-NNNNNN.jsonl in this run yet."));
  const line = (key, name) => ({ name, points: steps.map((s) => [s.step, s[key]]).filter((p) => p[1] !== null) });
  const em = { ...line("em", "EM"), band: steps.map((s) => [s.step, s.em_low, s.em_high]) };
  return SG.card("Sampled episodes, per step",
    h("div", { class: "chart-grid" },
      SG.lineChart("EM of the sampled episodes (95% bootstrap)", [em], { yMin: 0, yMax: 1 }),
      SG.lineChart("Searches and invalid actions per episode", [line("searches", "searches"),
        { ...line("invalid_rate", "invalid rate (per turn)"), dashed: true }], { legend: true }),
      SG.lineChart("Reward", [line("reward", "total reward")])),
    h("table", { class: "episodes steps" },
      h("thead", {}, h("tr", {}, ["step", "episodes", "EM", "95% interval", "searches", "invalid", "reward", ""].map((t) => h("th", {}, t)))),
      h("tbody", {}, steps.map((s) => h("tr", { "data-step": s.step },
        h("td", { class: "num" }, String(s.step)), h("td", { class: "num" }, SG.fmt(s.n)), h("td", { class: "num" }, SG.fmt(s.em, 3)),
        h("td", { class: "num ci" }, `[${SG.fmt(s.em_low, 3)}, ${SG.fmt(s.em_high, 3)}]`), h("td", { class: "num" }, SG.fmt(s.searches, 2)),
        h("td", { class: "num" }, SG.pct(s.invalid_rate)), h("td", { class: "num" }, SG.fmt(s.reward, 3)),
        h("td", {}, h("a", { href: SG.link("episodes", { runs: run, min_step: s.step, max_step: s.step }) }, "episodes ›")))))));
}

SG.views.sweep = async function sweep(params, ov) {
  const h = SG.h;
  const runs = ov.runs.map((r, i) => [i, r]).filter(([, r]) => r.kind === "sweep" && r.metrics && r.metrics.agents);
  if (!runs.length) return SG.card("Sweep", h("p", { class: "muted" }, "No sweep (sweep.json) is open."));
  return h("div", { class: "view" }, runs.map(([i, r]) => {
    const m = r.metrics, picks = {};
    for (const w of m.weights || []) (picks[w.best] = picks[w.best] || []).push(w.lambda);
    const points = Object.entries(m.agents).map(([name, a]) => ({ name, x: a.searches, y: a.accuracy, front: a.pareto, picked: picks[name] }));
    return SG.card(`${r.name}: accuracy against cost`,
      h("p", { class: "muted" }, `${r.env_label} · ${m.n ?? "?"} tasks · cost: ${m.cost || "per search"} · ringed: the best reward at λ`),
      SG.paretoChart(points),
      h("table", { class: "episodes" },
        h("thead", {}, h("tr", {}, ["agent", "EM", "F1", "searches", "turns", "on the front", ""].map((t) => h("th", {}, t)))),
        h("tbody", {}, Object.entries(m.agents).map(([name, a]) => {
          const s = ov.sources.findIndex((src) => src.run === i && src.label === name);
          return h("tr", {}, h("th", {}, name), h("td", { class: "num" }, SG.fmt(a.accuracy, 3)), h("td", { class: "num" }, SG.fmt(a.f1, 3)),
            h("td", { class: "num" }, SG.fmt(a.searches, 2)), h("td", { class: "num" }, SG.fmt(a.turns, 2)),
            h("td", {}, a.pareto ? "★" : ""), h("td", {}, s >= 0 ? h("a", { href: SG.link("episodes", { sources: s }) }, "episodes ›") : null));
        }))));
  }));
};
