// One episode: the question, gold answers and evidence chain, then every turn: the action with
// its queries and answer marked out, the observation split into documents (gold evidence
// highlighted), web results or page parts, invalid actions with their reason, rewards, tokens.
"use strict";
SG.views = SG.views || {};

const ACTION_TAGS = /<(think|search|answer|open|follow|find|tool_call)>([\s\S]*?)<\/\1>/g;

// The action as text with its tagged parts in marked spans.
SG.renderAction = function renderAction(text) {
  const h = SG.h, out = [];
  let at = 0;
  for (const m of text.matchAll(ACTION_TAGS)) {
    if (m.index > at) out.push(text.slice(at, m.index));
    let [tag, inner] = [m[1], m[2].trim()];
    if (tag === "tool_call") {
      try {
        const call = JSON.parse(inner);
        tag = call.name || tag;
        inner = Object.values(call.arguments || {}).join(", ");
      } catch (e) { /* shown as written */ }
    }
    out.push(h("span", { class: "act act-" + tag }, h("b", {}, tag), inner));
    at = m.index + m[0].length;
  }
  if (at < text.length) out.push(text.slice(at));
  return h("div", { class: "action" }, out);
};

// Search-R1's "Doc N(Title: t) text" blocks, one per line; a title may hold parentheses.
function splitDocs(body) {
  const starts = [...body.matchAll(/^Doc (\d+)\s*\(Title: /gm)];
  if (!starts.length || starts[0].index !== 0) return null;
  return starts.map((m, i) => {
    const end = i + 1 < starts.length ? starts[i + 1].index : body.length;
    let at = m.index + m[0].length, depth = 0;
    for (; at < end; at++) {
      if (body[at] === "(") depth++;
      else if (body[at] === ")" && depth-- === 0) break;
      else if (body[at] === "\n") break;
    }
    return { n: Number(m[1]), title: body.slice(m.index + m[0].length, at), text: body.slice(at + 1, end).trim() };
  });
}

// What an observation shows: Search-R1 documents, numbered web results, a page part, or text.
SG.parseObservation = function parseObservation(text) {
  let body = text.trim();
  const wrapped = body.match(/^<(information|tool_response)>([\s\S]*)<\/\1>$/);
  if (wrapped) body = wrapped[2].trim();
  const docs = splitDocs(body);
  if (docs) return { kind: "docs", docs };
  const results = [...body.matchAll(/(?:^|\n\n)(\d+)\. ([^\n]*)\nURL: (\S+)\n?([\s\S]*?)(?=\n\n\d+\. |$)/g)];
  if (results.length && /^1\. /.test(body)) {
    return { kind: "results", results: results.map((m) => ({ n: Number(m[1]), title: m[2], url: m[3], snippet: m[4].trim() })) };
  }
  const page = body.match(/^Title: ([^\n]*)\nURL: (\S+)(?:\nPart (\d+) of (\d+))?\n\n([\s\S]*)$/);
  if (page) {
    const footer = page[5].match(/\n\n(\[Part [^\]]*\])$/);
    return { kind: "page", title: page[1], url: page[2], part: page[3] ? Number(page[3]) : null,
      parts: page[4] ? Number(page[4]) : null, text: footer ? page[5].slice(0, footer.index) : page[5],
      footer: footer ? footer[1] : null };
  }
  return { kind: "text", text: body };
};

function observationView(turn, evidence) {
  const h = SG.h;
  if (!turn.observation || !turn.observation.trim()) return null;
  const obs = SG.parseObservation(turn.observation);
  if (obs.kind === "docs") {
    return h("div", { class: "docs" }, obs.docs.map((d, i) => {
      const id = turn.doc_ids ? turn.doc_ids[i] : null;
      const gold = id !== null && id !== undefined && evidence.has(id);
      return h("article", { class: "doc" + (gold ? " gold" : ""), "data-doc-id": id ?? "" },
        h("header", {}, h("span", { class: "doc-n" }, "Doc " + d.n), h("span", { class: "doc-title" }, d.title),
          id ? h("code", { class: "doc-id" }, id) : null, gold ? SG.badge("gold evidence", "gold") : null),
        h("p", {}, d.text));
    }));
  }
  if (obs.kind === "results") {
    return h("div", { class: "docs" }, obs.results.map((r) => h("article", { class: "doc result" },
      h("header", {}, h("span", { class: "doc-n" }, r.n + "."), h("span", { class: "doc-title" }, r.title)),
      h("div", { class: "url" }, r.url), h("p", {}, r.snippet))));
  }
  if (obs.kind === "page") {
    return h("article", { class: "doc page" },
      h("header", {}, h("span", { class: "doc-n" }, "page"), h("span", { class: "doc-title" }, obs.title),
        obs.part ? SG.badge(`part ${obs.part} of ${obs.parts}`, "muted") : null),
      h("div", { class: "url" }, obs.url), h("pre", {}, obs.text), obs.footer ? h("p", { class: "muted" }, obs.footer) : null);
  }
  return h("pre", { class: "obs-text" }, obs.text);
}

function components(values, total) {
  const h = SG.h;
  const entries = Object.entries(values || {});
  return h("span", { class: "components" },
    total !== undefined ? h("span", { class: "comp total" }, "reward ", h("b", {}, SG.num(total))) : null,
    entries.map(([k, v]) => h("span", { class: "comp" + (v > 0 ? " pos" : v < 0 ? " neg" : "") }, k + " ", h("b", {}, SG.num(v)))));
}

SG.turnView = function turnView(turn, i, evidence, extra) {
  const h = SG.h;
  const head = h("header", { class: "turn-head" },
    h("span", { class: "turn-n" }, "Turn " + (i + 1)),
    turn.tool ? SG.badge(turn.tool, "tool tool-" + turn.tool) : SG.badge("invalid", "bad"),
    components(turn.reward_components, turn.reward),
    turn.info_gain !== null && turn.info_gain !== undefined ? h("span", { class: "comp ig" }, "info gain ", h("b", {}, SG.num(turn.info_gain))) : null,  // files written before it joined reward_components
    h("span", { class: "tokens" }, SG.fmt(turn.obs_tokens || 0) + " obs tokens"));
  return h("section", { class: "turn" + (turn.error ? " invalid" : "") + (extra && extra.cls ? " " + extra.cls : ""), "data-turn": i },
    extra && extra.banner ? h("div", { class: "diverge-banner" }, extra.banner) : null,
    head, SG.renderAction(turn.action),
    turn.error ? h("div", { class: "error-box reason" }, h("b", {}, "Invalid: "), turn.error) : null,
    observationView(turn, evidence));
};

function evidenceChain(ep) {
  const h = SG.h;
  const chain = (ep.metadata && ep.metadata.chain) || [];
  const retrieved = new Map();
  ep.turns.forEach((t, i) => (t.doc_ids || []).forEach((id) => { if (!retrieved.has(id)) retrieved.set(id, i + 1); }));
  const found = (id) => (retrieved.has(id) ? SG.badge("found in turn " + retrieved.get(id), "ok") : SG.badge("never retrieved", "muted"));
  if (chain.length) {
    return h("ol", { class: "chain" }, chain.map((c) => h("li", {},
      h("b", {}, c.entity), h("span", { class: "rel" }, " —" + c.relation + "→ "),
      h("code", {}, c.doc_id), " ", found(c.doc_id), c.query ? h("span", { class: "muted" }, "  query: " + c.query) : null)));
  }
  const ids = ep.evidence || [];
  return ids.length ? h("ul", { class: "chain" }, ids.map((id) => h("li", {}, h("code", {}, id), " ", found(id))))
    : h("p", { class: "muted" }, "This task names no gold evidence.");
}

SG.episodeHeader = function episodeHeader(ep, ov) {
  const h = SG.h, src = ov.sources[ep.source];
  const facts = [["agent / step", SG.sourceLabel(ov, ep.source)], ["env", SG.envLabel(ov, src.run)], ["task", ep.task_id],
    ["hops", ep.metadata && ep.metadata.hops], ["step", ep.step ?? src.step], ["group", ep.group],
    ["searches", ep.n_searches], ["invalid", ep.n_invalid], ["errors", ep.n_errors], ["turns", ep.turns.length],
    ["obs tokens", ep.obs_tokens], ["F1", SG.fmt(ep.f1, 2)],
    ["end", ep.terminated ? "answered" : ep.truncated ? "truncated" : "—"],
    ["program error", ep.error]].filter(([, v]) => v !== undefined && v !== null);
  return h("section", { class: "card ep-head" },
    h("h1", { class: "question" }, ep.question),
    h("div", { class: "answers" },
      h("span", { class: "label" }, "gold"), (ep.answers || []).map((a) => SG.badge(a, "gold-answer")),
      h("span", { class: "label" }, "prediction"), h("span", { class: "prediction " + (ep.em >= 1 ? "ok" : "bad") }, ep.prediction ?? "(no answer)"),
      SG.emBadge(ep.em)),
    h("div", { class: "facts" }, facts.map(([k, v]) => h("span", { class: "fact" }, h("span", { class: "k" }, k), h("span", { class: "v" }, String(v))))),
    h("div", { class: "totals" }, components(ep.reward_components, ep.total_reward)));
};

SG.views.episode = async function episode(params, ov, arg) {
  const h = SG.h;
  const number = /^\d+$/.test(arg) ? Number(arg) : NaN;
  if (!(number < ov.episodes)) {
    throw SG.problem(`There is no episode "${arg}": episodes are numbered 0–${ov.episodes - 1} (#/episode/0 is the first).`);
  }
  const ep = await SG.api.episode(number);
  const evidence = new Set(ep.evidence || []);
  const ids = JSON.parse(sessionStorage.getItem("sg-page") || "[]");
  const at = ids.indexOf(ep.id);
  const nav = h("div", { class: "crumbs" },
    h("a", { href: sessionStorage.getItem("sg-list") || "#/episodes" }, "← episodes"),
    at > 0 ? h("a", { href: "#/episode/" + ids[at - 1] }, "‹ previous") : null,
    at >= 0 && at + 1 < ids.length ? h("a", { href: "#/episode/" + ids[at + 1] }, "next ›") : null,
    h("a", { href: SG.link("compare", { a: ep.source, task: ep.task_id }) }, "compare with…"));
  return h("div", { class: "view" }, nav, SG.episodeHeader(ep, ov),
    SG.card("Gold evidence chain", evidenceChain(ep)),
    h("div", { class: "turns" }, ep.turns.map((t, i) => SG.turnView(t, i, evidence))));
};
