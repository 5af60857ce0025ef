"use strict";
// One of the dashboard's scripts. dashboard-page.ts joins them, in the order dashboard.html names them,
// into the page's one <script>, so they share one scope: what one declares at its top level the others
// use. Top-level code only declares and listens; dashboard.js, the last, starts the polling.
// This one: "Epoch parts time" (docs/design.md §15), per computation the seconds per second its iterations
// spend in each part, stacked, from the worker's sluice_worker_iteration_part_seconds on this
// server's /metrics (served when the worker runs in this process: `sluice run`).

const PARTS = ["Input.Throttle", "Process", "Output", "Commit"];
const PART_NAMES = { "Input.Throttle": "throttle", Process: "process", Output: "output", Commit: "commit" };
const PART_COLORS = { "Input.Throttle": "#e15759", Process: "#4e79a7", Output: "#59a14f", Commit: "#edc948" };
/** Rates over this much history: one iteration's part lands in one poll, so a 1 s difference jumps. */
const PART_RATE_WINDOW_MS = 5 * 1000;
const PART_SUM = /^sluice_worker_iteration_part_seconds_sum\{([^}]*)\} (\S+)$/;
const LABEL_VALUE = /([a-z_]+)="((?:[^"\\]|\\.)*)"/g;

const partCharts = new Map(); // computation → chart element

/** computation → { part → seconds (cumulative) } from a Prometheus exposition. */
function parseParts(text) {
  const byComputation = new Map();
  for (const line of text.split("\n")) {
    const m = PART_SUM.exec(line);
    if (!m) continue;
    const labels = {};
    for (const [, key, value] of m[1].matchAll(LABEL_VALUE)) labels[key] = value.replace(/\\(.)/g, "$1");
    if (!labels.computation_id || !PARTS.includes(labels.part)) continue;
    const sums = byComputation.get(labels.computation_id) || {};
    sums[labels.part] = Number(m[2]);
    byComputation.set(labels.computation_id, sums);
  }
  return byComputation;
}

/** The /metrics of this server, parsed; null when it has none of the family (a controller without a worker). */
async function fetchParts() {
  try {
    const response = await fetch("metrics", { cache: "no-store", signal: AbortSignal.timeout(5000) });
    if (!response.ok) return null;
    const parts = parseParts(await response.text());
    return parts.size > 0 ? parts : null;
  } catch {
    return null;
  }
}

/** Seconds per second in each part between two samples' sums; null where either lacks it. */
function partRates(before, after, dtMs) {
  if (!before || !after || dtMs <= 0) return null;
  const rates = {};
  for (const part of PARTS) rates[part] = Math.max(0, ((after[part] || 0) - (before[part] || 0)) / (dtMs / 1000));
  return rates;
}

/** "throttle 62% · process 30% · output 6% · commit 2%", as `sluice top` writes it. */
function partShares(rates) {
  const total = PARTS.reduce((sum, p) => sum + rates[p], 0);
  if (!(total > 0)) return "idle";
  return PARTS.map((p) => PART_NAMES[p] + " " + Math.round((rates[p] / total) * 100) + "%").join(" · ");
}

function partChartFor(computation) {
  let chart = partCharts.get(computation);
  if (chart) return chart;
  chart = el("div", { class: "chart", "data-computation": computation });
  chart.innerHTML =
    '<h3></h3><svg data-chart="epoch-parts"></svg>' +
    '<div class="legend">' +
    PARTS.map((p) => '<span><i style="background:' + PART_COLORS[p] + '"></i>' + esc(p) + "</span>").join("") +
    "</div>" +
    '<div class="note" data-shares></div>';
  $("h3", chart).innerHTML = "Epoch parts time · " + esc(computation) + " <span>seconds per second in each part, stacked (over 5 s)</span>";
  $("#epoch-parts .parts-charts").appendChild(chart);
  partCharts.set(computation, chart);
  return chart;
}

function renderEpochParts(visible, t0, t1) {
  const latest = history[history.length - 1];
  const section = $("#epoch-parts");
  section.hidden = !latest || !latest.parts;
  if (section.hidden) return;
  for (const [computation, chart] of partCharts)
    if (!latest.parts.has(computation)) {
      chart.remove();
      partCharts.delete(computation);
    }
  for (const computation of [...latest.parts.keys()].sort()) {
    const chart = partChartFor(computation);
    const ratesAt = visible.map((s) => {
      const past = sampleAt(s.t - PART_RATE_WINDOW_MS);
      return [s.t, past === s ? null : partRates(past.parts && past.parts.get(computation), s.parts && s.parts.get(computation), s.t - past.t)];
    });
    const series = [];
    const running = new Map();
    for (const part of PARTS) {
      const points = ratesAt.map(([t, r]) => {
        if (!r) return [t, null];
        const v = (running.get(t) || 0) + r[part];
        running.set(t, v);
        return [t, v];
      });
      series.push({ name: part, color: PART_COLORS[part], fill: true, points, own: new Map(ratesAt.map(([t, r]) => [t, r ? r[part] : null])) });
    }
    drawChart($('[data-chart="epoch-parts"]', chart), { t0, t1, series, format: (v) => v.toFixed(2), unitTotal: " s/s in all", minMax: 0.1 });
    const past = sampleAt(t1 - SHARE_WINDOW_MS);
    const recent = partRates(past.parts && past.parts.get(computation), latest.parts.get(computation), t1 - past.t);
    $("[data-shares]", chart).textContent = recent ? "last " + Math.max(1, Math.round((t1 - past.t) / 1000)) + " s: " + partShares(recent) : "collecting data…";
  }
}
