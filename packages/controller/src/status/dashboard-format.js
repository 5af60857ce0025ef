"use strict";
// One of the dashboard's scripts. dashboard-page.ts joins them, in the order dashboard.html names them,
// into the page's one <script>, so they share one scope: what one declares at its top level the others
// use. Top-level code only declares and listens; dashboard.js, the last, starts the polling.
// This one: DOM helpers, the class colours, number formatting and the wait figures of two histograms.
const PALETTE = ["#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2", "#edc948", "#b07aa1", "#ff9da7", "#9c755f", "#bab0ac"];
const WAIT_BOUNDS_MS = [1, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000, 30000, 60000];

const classColors = new Map();

function $(selector, root) {
  return (root || document).querySelector(selector);
}
function el(tag, attrs, text) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) node.setAttribute(k, v);
  if (text !== undefined) node.textContent = text;
  return node;
}
function esc(text) {
  return String(text).replace(/[&<>"']/g, (c) => "&#" + c.charCodeAt(0) + ";");
}
function colorOf(classId) {
  if (classId === "default") return "#8c959f";
  if (!classColors.has(classId)) classColors.set(classId, PALETTE[classColors.size % PALETTE.length]);
  return classColors.get(classId);
}

// ---- number formatting -------------------------------------------------------------------------
function num(x) {
  if (x === null || x === undefined || !isFinite(x)) return "–";
  const a = Math.abs(x);
  const trim = (text) => text.replace(/\.0+(?=[kMG]?$)/, "");
  if (a >= 1e9) return trim((x / 1e9).toFixed(a >= 1e10 ? 0 : 1)) + "G";
  if (a >= 1e6) return trim((x / 1e6).toFixed(a >= 1e7 ? 0 : 1)) + "M";
  if (a >= 1e4) return trim((x / 1e3).toFixed(a >= 1e5 ? 0 : 1)) + "k";
  if (a >= 100) return x.toFixed(0);
  if (a >= 10) return trim(x.toFixed(1));
  if (a === 0) return "0";
  return trim(x.toFixed(a >= 1 ? 1 : 2));
}
function ms(x) {
  if (x === null || x === undefined || !isFinite(x)) return "–";
  if (x >= 60000) return (x / 60000).toFixed(1) + " min";
  if (x >= 1000) return (x / 1000).toFixed(x >= 10000 ? 0 : 1) + " s";
  return x.toFixed(x >= 10 ? 0 : 1) + " ms";
}
function pct(x) {
  return x === null || !isFinite(x) ? "–" : (x * 100).toFixed(0) + "%";
}
function duration(ms) {
  return ms >= 60000 ? ms / 60000 + " min" : ms >= 1000 ? ms / 1000 + " s" : ms + " ms";
}

// ---- derived series ----------------------------------------------------------------------------
/** Mean and p95 (histogram_quantile-style interpolation) of the waits between two cumulative views. */
function waitBetween(a, b) {
  if (!a || !b) return null;
  const count = b.count - a.count;
  if (count <= 0) return null;
  const mean = (b.sumMs - a.sumMs) / count;
  const rank = 0.95 * count;
  let p95 = null;
  for (let i = 0; i < WAIT_BOUNDS_MS.length; i++) {
    const cum = (b.buckets[i] || 0) - (a.buckets[i] || 0);
    if (cum >= rank) {
      const prevCum = i === 0 ? 0 : (b.buckets[i - 1] || 0) - (a.buckets[i - 1] || 0);
      const lower = i === 0 ? 0 : WAIT_BOUNDS_MS[i - 1];
      const inBucket = cum - prevCum;
      p95 = inBucket > 0 ? lower + (WAIT_BOUNDS_MS[i] - lower) * ((rank - prevCum) / inBucket) : WAIT_BOUNDS_MS[i];
      p95 = Math.min(p95, b.maxMs); // no wait exceeds the max seen, however wide its bucket
      break;
    }
  }
  if (p95 === null) p95 = b.maxMs;
  return { mean, p95, count };
}
