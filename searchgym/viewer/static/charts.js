// Charts drawn as inline SVG: line charts with optional interval bands, and the sweep's
// accuracy-against-cost scatter with its Pareto front. No library, nothing fetched.
"use strict";

SG.COLORS = ["#2563eb", "#dc2626", "#059669", "#d97706", "#7c3aed", "#0891b2", "#db2777", "#4b5563"];

function niceTicks(lo, hi, count) {
  if (lo === hi) { lo -= 0.5; hi += 0.5; }
  const raw = (hi - lo) / count, mag = Math.pow(10, Math.floor(Math.log10(raw)));
  const step = [1, 2, 2.5, 5, 10].map((m) => m * mag).find((s) => s >= raw) || raw;
  const ticks = [];
  for (let t = Math.ceil(lo / step) * step; t <= hi + step * 1e-9; t += step) ticks.push(+t.toFixed(10));
  return ticks;
}

function tickText(t) {
  const a = Math.abs(t);
  return a >= 1e4 || (a > 0 && a < 1e-3) ? t.toExponential(1) : String(+t.toPrecision(4));
}

// series: [{name, points: [[x, y], ...], band: [[x, low, high], ...], dashed}]
SG.lineChart = function lineChart(title, series, opts = {}) {
  const h = SG.h, W = opts.width || 420, H = opts.height || 220, L = 48, R = 12, T = 10, B = 30;
  const shown = series.filter((s) => s.points.length || (s.band && s.band.length));
  const xs = shown.flatMap((s) => s.points.map((p) => p[0]).concat((s.band || []).map((b) => b[0])));
  const ys = shown.flatMap((s) => s.points.map((p) => p[1]).concat((s.band || []).flatMap((b) => [b[1], b[2]])));
  const svg = h("svg:svg", { viewBox: `0 0 ${W} ${H}`, class: "chart", role: "img", "aria-label": title });
  if (!xs.length) {
    svg.appendChild(h("svg:text", { x: W / 2, y: H / 2, "text-anchor": "middle", class: "axis" }, "no data"));
    return h("figure", { class: "chart-box" }, h("figcaption", {}, title), svg);
  }
  let [x0, x1] = [Math.min(...xs), Math.max(...xs)];
  let [y0, y1] = [Math.min(...ys), Math.max(...ys)];
  if (opts.yMin !== undefined) y0 = Math.min(y0, opts.yMin);
  if (opts.yMax !== undefined) y1 = Math.max(y1, opts.yMax);
  const yt = niceTicks(y0, y1, 4), xt = niceTicks(x0, x1, 5);
  [y0, y1] = [Math.min(y0, yt[0]), Math.max(y1, yt[yt.length - 1])];
  if (x0 === x1) { x0 -= 1; x1 += 1; }
  const sx = (x) => L + ((x - x0) / (x1 - x0)) * (W - L - R);
  const sy = (y) => T + (1 - (y - y0) / (y1 - y0 || 1)) * (H - T - B);
  for (const t of yt) {
    svg.appendChild(h("svg:line", { x1: L, x2: W - R, y1: sy(t), y2: sy(t), class: "grid" }));
    svg.appendChild(h("svg:text", { x: L - 6, y: sy(t) + 4, "text-anchor": "end", class: "axis" }, tickText(t)));
  }
  for (const t of xt.filter((t) => t >= x0 && t <= x1)) {
    svg.appendChild(h("svg:text", { x: sx(t), y: H - B + 16, "text-anchor": "middle", class: "axis" }, tickText(t)));
  }
  svg.appendChild(h("svg:text", { x: W - R, y: H - 4, "text-anchor": "end", class: "axis" }, opts.xLabel || "step"));
  shown.forEach((s, i) => {
    const color = s.color || SG.COLORS[i % SG.COLORS.length];
    if (s.band && s.band.length) {
      const top = s.band.map((b) => `${sx(b[0])},${sy(b[2])}`);
      const bottom = s.band.slice().reverse().map((b) => `${sx(b[0])},${sy(b[1])}`);
      svg.appendChild(h("svg:polygon", { points: top.concat(bottom).join(" "), fill: color, "fill-opacity": 0.15 }));
    }
    const path = s.points.map((p, j) => `${j ? "L" : "M"}${sx(p[0]).toFixed(1)},${sy(p[1]).toFixed(1)}`).join("");
    svg.appendChild(h("svg:path", { d: path, fill: "none", stroke: color, "stroke-width": 1.8,
      "stroke-dasharray": s.dashed ? "5 3" : null }));
    if (s.points.length <= 60) {
      for (const [x, y] of s.points) {
        svg.appendChild(h("svg:circle", { cx: sx(x), cy: sy(y), r: 2.6, fill: color },
          h("svg:title", {}, `${s.name} · step ${x}: ${tickText(y)}`)));
      }
    }
  });
  const legend = shown.length > 1 || opts.legend
    ? h("div", { class: "legend" }, shown.map((s, i) => h("span", {},
      h("i", { class: "swatch c" + (i % SG.COLORS.length) }), s.name)))
    : null;
  return h("figure", { class: "chart-box" }, h("figcaption", {}, title), svg, legend);
};

// points: [{name, x, y, front, picked: [λ...]}]; front names joined by a line in cost order.
SG.paretoChart = function paretoChart(points, opts = {}) {
  const h = SG.h, W = opts.width || 760, H = opts.height || 380, L = 56, R = 24, T = 16, B = 40;
  const xs = points.map((p) => p.x), ys = points.map((p) => p.y);
  let [x0, x1] = [Math.min(...xs), Math.max(...xs)];
  const span = Math.max(x1 - x0, 1);
  [x0, x1] = [x0 - 0.12 * span, x1 + 0.12 * span];
  const y0 = 0, y1 = Math.min(1.05, Math.max(...ys) * 1.15 + 0.05);
  const sx = (x) => L + ((x - x0) / (x1 - x0)) * (W - L - R);
  const sy = (y) => T + (1 - (y - y0) / (y1 - y0)) * (H - T - B);
  const svg = h("svg:svg", { viewBox: `0 0 ${W} ${H}`, class: "chart pareto", role: "img", "aria-label": "Pareto front" });
  for (const t of niceTicks(y0, y1, 5)) {
    svg.appendChild(h("svg:line", { x1: L, x2: W - R, y1: sy(t), y2: sy(t), class: "grid" }));
    svg.appendChild(h("svg:text", { x: L - 6, y: sy(t) + 4, "text-anchor": "end", class: "axis" }, tickText(t)));
  }
  for (const t of niceTicks(x0, x1, 6).filter((t) => t >= x0 && t <= x1)) {
    svg.appendChild(h("svg:text", { x: sx(t), y: H - B + 16, "text-anchor": "middle", class: "axis" }, tickText(t)));
  }
  svg.appendChild(h("svg:text", { x: (L + W - R) / 2, y: H - 6, "text-anchor": "middle", class: "axis label" },
    opts.xLabel || "mean searches per question (cost)"));
  svg.appendChild(h("svg:text", { x: 14, y: (T + H - B) / 2, "text-anchor": "middle", class: "axis label",
    transform: `rotate(-90 14 ${(T + H - B) / 2})` }, opts.yLabel || "EM (accuracy)"));
  const front = points.filter((p) => p.front).sort((a, b) => a.x - b.x);
  svg.appendChild(h("svg:polyline", { points: front.map((p) => `${sx(p.x)},${sy(p.y)}`).join(" "), class: "front" }));
  points.forEach((p, i) => {
    const g = h("svg:g", {}, h("svg:title", {}, `${p.name}: cost ${tickText(p.x)}, EM ${tickText(p.y)}`));
    if (p.picked && p.picked.length) {
      g.appendChild(h("svg:circle", { cx: sx(p.x), cy: sy(p.y), r: 10, class: "pick" }));
      g.appendChild(h("svg:text", { x: sx(p.x) - 12, y: sy(p.y) - 12, "text-anchor": "end", class: "pick-label" },
        "λ=" + p.picked.join(", ")));
    }
    g.appendChild(h("svg:circle", { cx: sx(p.x), cy: sy(p.y), r: 5, fill: SG.COLORS[i % SG.COLORS.length] }));
    g.appendChild(h("svg:text", { x: sx(p.x) + 8, y: sy(p.y) + 4, class: "point-label" }, p.name));
    svg.appendChild(g);
  });
  return h("figure", { class: "chart-box wide" }, svg);
};
