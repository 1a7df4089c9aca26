// The router: #/episodes, #/episode/ID, #/compare, #/training, #/sweep. A link to anything
// else, or with a parameter that names nothing, shows what is wrong and what there is.
// Served (not exported), the page asks the server every few seconds whether its runs have
// grown (a trainer's new steps and metrics lines) and then draws the view again.
"use strict";

const PAGES = "#/episodes, #/episode/ID, #/compare, #/training, #/sweep";
SG.POLL_MS = 5000;
SG.drawn = 0; // the number of the latest render: an older one that ends later is dropped

function showWhere(ov) {
  const envs = new Set(ov.runs.map((r) => r.env_label)).size;
  const where = document.getElementById("where");
  where.replaceChildren(`${ov.runs.length} run${ov.runs.length === 1 ? "" : "s"} · ${envs} env${envs === 1 ? "" : "s"} · ` +
    `${SG.fmt(ov.episodes)} episodes` + (SG.exported ? " · exported" : ""));
  if (SG.trouble) where.appendChild(SG.h("span", { class: "trouble", title: SG.trouble }, " · ⚠ " + SG.trouble));
}

SG.render = async function render(opts = {}) {
  const app = document.getElementById("app");
  const { name, arg, params } = SG.route();
  const drawn = ++SG.drawn;
  const y = window.scrollY;
  try {
    const ov = SG.ov || (await SG.api.overview());
    if (drawn !== SG.drawn) return;
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
      SG.ov = await SG.api.overview();
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
    await SG.render({ keepScroll: true });
  } else {
    showWhere(SG.ov);
  }
};

window.addEventListener("hashchange", () => { SG.render(); window.scrollTo(0, 0); });
SG.render();
if (!SG.exported) setInterval(SG.checkForUpdates, SG.POLL_MS);
