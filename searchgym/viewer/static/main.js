// The router: #/episodes, #/episode/ID, #/compare, #/training, #/sweep. A link to anything
// else, or with a parameter that names nothing, shows what is wrong and what there is.
// Served (not exported), the page asks the server every few seconds whether its runs have
// grown (a trainer's new steps and metrics lines) and then draws the view again.
"use strict";

const PAGES = "#/episodes, #/episode/ID, #/compare, #/training, #/sweep";
SG.POLL_MS = 5000;
SG.drawn = 0; // the number of the latest render: an older one that ends later is dropped

// The header: runs, envs and episodes (once known, without those skipped as malformed, and how
// many lines and files were skipped), and why the last look for new steps failed, if it did.
function showWhere(ov) {
  const envs = new Set(ov.runs.map((r) => r.env_label)).size;
  const where = document.getElementById("where");
  const found = SG.skippedFound && SG.skippedFound.ov === ov ? SG.skippedFound : null;
  where.replaceChildren(`${ov.runs.length} run${ov.runs.length === 1 ? "" : "s"} · ${envs} env${envs === 1 ? "" : "s"} · ` +
    `${SG.fmt(found ? found.episodes : ov.episodes)} episodes` + (SG.exported ? " · exported" : ""));
  if (found && found.skipped.length) {
    const lines = found.skipped.reduce((n, s) => n + (s.lines || 0), 0);
    const files = found.skipped.filter((s) => s.lines === null).length;
    const said = [lines ? `${SG.fmt(lines)} malformed line${lines === 1 ? "" : "s"}` : null,
      files ? `${files} file${files === 1 ? "" : "s"}` : null].filter(Boolean).join(" and ");
    where.appendChild(SG.h("span", { class: "skipped", title: found.skipped.map((s) => s.message).join("\n") },
      ` · ⚠ ${said} skipped`));
  }
  if (SG.trouble) where.appendChild(SG.h("span", { class: "trouble", title: SG.trouble }, " · ⚠ " + SG.trouble));
}

// Ask what was skipped (once per overview) and put it in the header when known.
function askSkipped(ov) {
  SG.skippedNow().then((found) => {
    SG.skippedFound = { ...found, ov };
    if (SG.ov === ov) showWhere(ov);
  }, () => {});
}

SG.render = async function render(opts = {}) {
  const app = document.getElementById("app");
  const { name, arg, params } = SG.route();
  const drawn = ++SG.drawn;
  const y = window.scrollY;
  try {
    const ov = SG.ov || (await SG.api.overview());
    if (drawn !== SG.drawn) return;
    if (SG.ov !== ov) askSkipped(ov);
    SG.ov = ov;
    const tabs = [["episodes", "Episodes"], ["compare", "Compare"]];
    if (ov.runs.some((r) => r.kind === "train")) tabs.push(["training", "Training"]);
    if (ov.runs.some((r) => r.kind === "sweep")) tabs.push(["sweep", "Sweep"]);
    const nav = document.getElementById("nav");
    nav.replaceChildren(...tabs.map(([k, label]) => SG.h("a", { href: "#/" + k,
      class: k === name || (k === "episodes" && name === "episode") ? "on" : "" }, label)));
    showWhere(ov);
    if (!Object.hasOwn(SG.views, name)) {
      throw SG.problem(`There is no page "${location.hash}". Pages: ${PAGES}.`);
    }
    let el;
    try {
      el = await SG.views[name](params, ov, arg);
    } catch (e) {
      // A link to an episode or step newer than this page's overview: read it again, once.
      const newer = e.readable && !SG.exported && (await SG.api.version().then((v) => v.version !== ov.version, () => false));
      if (!newer) throw e;
      SG.skippedAsk = null;
      SG.ov = await SG.api.overview();
      askSkipped(SG.ov);
      showWhere(SG.ov);
      el = await SG.views[name](params, SG.ov, arg);
    }
    if (drawn !== SG.drawn) return;
    app.replaceChildren(el);
    if (opts.keepScroll) window.scrollTo(0, y);
    document.body.dataset.view = name;
    document.body.dataset.ready = String(Date.now());
  } catch (e) {
    if (drawn !== SG.drawn) return;
    const message = e && e.readable ? e.message
      : `This page could not be drawn; that is a bug in the viewer, please report it (${e && e.message ? e.message : e}).`;
    app.replaceChildren(SG.h("div", { class: "view" }, SG.error(message),
      SG.h("p", {}, SG.h("a", { href: "#/episodes" }, "← all episodes"))));
    document.body.dataset.ready = "error";
  }
};

// Has the server's table grown since the overview was read? Then read it again and redraw,
// keeping the scroll position; not while the reader is typing into or choosing in the view.
SG.checkForUpdates = async function checkForUpdates() {
  if (SG.exported || document.hidden || !SG.ov) return;
  let answer;
  try {
    answer = await SG.api.version();
  } catch (e) {
    SG.trouble = "the viewer's server does not answer";
    showWhere(SG.ov);
    return;
  }
  SG.trouble = answer.problem;
  const busy = document.activeElement && document.activeElement.closest("#app input, #app select");
  if (answer.version !== SG.ov.version && !busy) {
    SG.ov = null;
    SG.skippedAsk = null;
    await SG.render({ keepScroll: true });
  } else {
    showWhere(SG.ov);
  }
};

window.addEventListener("hashchange", () => { SG.render(); window.scrollTo(0, 0); });
SG.render();
if (!SG.exported) setInterval(SG.checkForUpdates, SG.POLL_MS);
