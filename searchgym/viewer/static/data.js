// Where the views get their data: the viewer's JSON API, or, in an exported file, the data
// embedded in it (#sg-data), queried here the way searchgym/viewer/query.py does on the server.
"use strict";

// Every failure of the API is a readable error: the server's own message (its "detail"), or
// what went wrong getting one.
SG.remote = {
  async get(path) {
    let response, text;
    try {
      response = await fetch(path);
      text = await response.text();
    } catch (e) {
      throw SG.problem(`The viewer's server does not answer (is searchgym view still running?): ${e.message || e}`);
    }
    let body = null;
    try { body = JSON.parse(text); } catch (e) { /* said below */ }
    if (!response.ok) {
      const detail = body && typeof body.detail === "string" ? body.detail : `${response.status} ${response.statusText}`;
      throw SG.problem(detail);
    }
    if (body === null) throw SG.problem(`The viewer's server answered ${path} with something that is not JSON.`);
    return body;
  },
  overview() { return this.get("api/overview"); },
  version() { return this.get("api/version"); },
  episodes(params) { return this.get("api/episodes?" + new URLSearchParams(params)); },
  summary(params) { return this.get("api/summary?" + new URLSearchParams(params)); },
  episode(id) { return this.get("api/episode/" + encodeURIComponent(id)); },
  compare(a, b) { return this.get("api/compare?" + new URLSearchParams({ a, b })); },
  steps(run) { return this.get("api/steps/" + encodeURIComponent(run)); },
  skipped() { return this.get("api/skipped"); },
};

// A seeded generator (mulberry32), so an interval is the same on every load.
SG.random = function random(seed) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = Math.imul(a ^ (a >>> 15), 1 | a);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
};

// Percentile bootstrap interval of the mean (as searchgym.viewer.stats.bootstrap_interval).
SG.bootstrap = function bootstrap(values, level = 0.95, resamples = 1000) {
  const xs = values.filter((v) => v !== null && Number.isFinite(v));
  if (!xs.length) return [null, null];
  const next = SG.random(0);
  const means = new Float64Array(resamples);
  for (let r = 0; r < resamples; r++) {
    let sum = 0;
    for (let i = 0; i < xs.length; i++) sum += xs[Math.floor(next() * xs.length)];
    means[r] = sum / xs.length;
  }
  means.sort();
  const at = (q) => means[Math.min(resamples - 1, Math.max(0, Math.round(q * (resamples - 1))))];
  return [at((1 - level) / 2), at(1 - (1 - level) / 2)];
};

SG.mean = function mean(values) {
  const xs = values.filter((v) => v !== null && Number.isFinite(v));
  return xs.length ? xs.reduce((a, b) => a + b, 0) / xs.length : null;
};

SG.summarize = function summarize(rows) {
  if (!rows.length) return { n: 0 };
  const col = (k) => rows.map((r) => r[k]);
  const [low, high] = SG.bootstrap(col("em"));
  const turns = rows.reduce((a, r) => a + (r.turns || 0), 0);
  return {
    n: rows.length, em: SG.mean(col("em")), em_low: low, em_high: high, f1: SG.mean(col("f1")),
    searches: SG.mean(col("searches")), turns: SG.mean(col("turns")),
    invalid_rate: rows.reduce((a, r) => a + (r.invalid || 0), 0) / Math.max(turns, 1),
    errors: SG.mean(col("errors")), reward: SG.mean(col("reward")), tokens: SG.mean(col("tokens")),
  };
};

SG.groupSummaries = function groupSummaries(rows, key) {
  const groups = new Map();
  for (const r of rows) {
    if (r[key] === null || r[key] === undefined) continue;
    if (!groups.has(r[key])) groups.set(r[key], []);
    groups.get(r[key]).push(r);
  }
  return [...groups.keys()].sort((a, b) => a - b).map((k) => ({ [key]: k, ...SG.summarize(groups.get(k)) }));
};

const FILTER_KEYS = ["runs", "sources", "hops", "outcome", "failure", "invalid", "errors", "min_searches", "max_searches",
  "min_reward", "max_reward", "min_step", "max_step", "text"];

SG.select_rows = function selectRows(all, p) {
  const ints = (s) => (s ? String(s).split(",").filter((x) => x !== "").map(Number) : []);
  const sets = { run: ints(p.runs), source: ints(p.sources), hops: ints(p.hops) };
  const num = (s) => (s === undefined || s === "" ? null : Number(s));
  const ranges = [["searches", num(p.min_searches), num(p.max_searches)],
    ["reward", num(p.min_reward), num(p.max_reward)], ["step", num(p.min_step), num(p.max_step)]];
  const needle = (p.text || "").toLowerCase();
  let rows = all.filter((r) => {
    for (const [k, set] of Object.entries(sets)) if (set.length && !set.includes(r[k])) return false;
    if (p.outcome === "solved" && !(r.em >= 1)) return false;
    if (p.outcome === "failed" && r.em >= 1) return false;
    if (p.failure && p.failure !== "any" && r.failure !== p.failure) return false;
    for (const k of ["invalid", "errors"]) {
      if (p[k] === "some" && !(r[k] > 0)) return false;
      if (p[k] === "none" && r[k] > 0) return false;
    }
    for (const [k, lo, hi] of ranges) {
      if (lo !== null && !(r[k] >= lo)) return false;
      if (hi !== null && !(r[k] <= hi)) return false;
    }
    return !needle || ((r.question || "") + "\n" + (r.task_id || "")).toLowerCase().includes(needle);
  });
  const desc = p.desc === "1" || p.desc === "true";
  if (p.sort && p.sort !== "index") {
    const present = rows.filter((r) => r[p.sort] !== null && r[p.sort] !== undefined);
    const missing = rows.filter((r) => r[p.sort] === null || r[p.sort] === undefined);
    present.sort((a, b) => (desc ? b[p.sort] - a[p.sort] : a[p.sort] - b[p.sort]));
    rows = present.concat(missing);
  } else if (desc) rows = rows.slice().reverse();
  return rows;
};

SG.local = function local(data) {
  return {
    async overview() { return data.overview; },
    async episodes(p) {
      const rows = SG.select_rows(data.rows, p);
      const offset = Number(p.offset || 0), limit = Number(p.limit || 50);
      return { total: rows.length, offset, rows: rows.slice(offset, offset + limit) };
    },
    async summary(p) {
      const rows = SG.select_rows(data.rows, p);
      const unfiltered = FILTER_KEYS.every((k) => !p[k] || p[k] === "any");
      const groups = SG.groupSummaries(rows, "arm").map((g) => {
        const arm = data.overview.arms[g.arm];
        const out = { ...g, run: arm.run, agent: arm.agent, ci: "bootstrap" };
        const iv = data.intervals[g.arm];
        if (unfiltered && iv) Object.assign(out, { em_low: iv[0], em_high: iv[1], ci: "metrics.json" });
        return out;
      });
      const distinct = (k) => [...new Set(data.rows.map((r) => r[k]).filter((v) => v !== null && v !== undefined))];
      const numbers = (k) => distinct(k).sort((a, b) => a - b);
      const kinds = distinct("failure").sort((a, b) => data.overview.failure_kinds.indexOf(a) - data.overview.failure_kinds.indexOf(b));
      return { total: rows.length, groups, facets: { hops: numbers("hops"), step: numbers("step"), failure: kinds } };
    },
    async episode(id) {
      const ep = data.episodes[id];
      if (!ep) {
        throw SG.problem(`Episode ${id} is not in this export (it holds ${Object.keys(data.episodes).length} of ` +
          `${data.overview.episodes} episodes; searchgym view --export-max sets how many).`);
      }
      return ep;
    },
    async compare(a, b) {
      const first = (s) => {
        const m = new Map();
        for (const r of data.rows) if (r.source === Number(s) && !m.has(r.task_id)) m.set(r.task_id, r);
        return m;
      };
      const left = first(a), right = first(b), rows = [];
      for (const [task, ra] of left) {
        const rb = right.get(task);
        if (!rb) continue;
        const sa = ra.em >= 1, sb = rb.em >= 1;
        rows.push({ task_id: task, question: ra.question, a: ra.id, b: rb.id, em_a: ra.em, em_b: rb.em,
          solved: sa && sb ? "both" : sa ? "a" : sb ? "b" : "neither" });
      }
      return { a: Number(a), b: Number(b), rows };
    },
    async steps(run) {
      if (!data.overview.runs[run] || data.overview.runs[run].kind !== "train") throw SG.problem(`there is no training run ${run}`);
      return SG.groupSummaries(data.rows.filter((r) => r.run === Number(run)), "step");
    },
    async skipped() { return data.skipped || { episodes: data.overview.episodes, skipped: [] }; },
  };
};

SG.api = (() => {
  const embedded = document.getElementById("sg-data");
  return embedded ? SG.local(JSON.parse(embedded.textContent)) : SG.remote;
})();
SG.exported = !!document.getElementById("sg-data");
