// The router: #/episodes, #/episode/ID, #/compare, #/training, #/sweep.
"use strict";

SG.render = async function render() {
  const app = document.getElementById("app");
  const { name, arg, params } = SG.route();
  try {
    SG.ov = SG.ov || (await SG.api.overview());
    const ov = SG.ov;
    const tabs = [["episodes", "Episodes"], ["compare", "Compare"]];
    if (ov.runs.some((r) => r.kind === "train")) tabs.push(["training", "Training"]);
    if (ov.runs.some((r) => r.kind === "sweep")) tabs.push(["sweep", "Sweep"]);
    const nav = document.getElementById("nav");
    nav.replaceChildren(...tabs.map(([k, label]) => SG.h("a", { href: "#/" + k,
      class: k === name || (k === "episodes" && name === "episode") ? "on" : "" }, label)));
    document.getElementById("where").textContent =
      `${ov.runs.length} run${ov.runs.length === 1 ? "" : "s"} · ${SG.fmt(ov.episodes)} episodes` + (SG.exported ? " · exported" : "");
    const view = SG.views[name] || SG.views.episodes;
    const el = await view(params, ov, arg);
    app.replaceChildren(el);
    document.body.dataset.view = name;
    document.body.dataset.ready = String(Date.now());
  } catch (e) {
    app.replaceChildren(SG.error(String(e.message || e)));
    document.body.dataset.ready = "error";
  }
};

window.addEventListener("hashchange", () => { SG.render(); window.scrollTo(0, 0); });
SG.render();
