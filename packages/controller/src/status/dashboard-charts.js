"use strict";
// One of the dashboard's scripts. dashboard-page.ts joins them, in the order dashboard.html names them,
// into the page's one <script>, so they share one scope: what one declares at its top level the others
// use. Top-level code only declares and listens; dashboard.js, the last, starts the polling.
// This one: the hand-drawn SVG charts and their hover read-out.

// ---- charts (hand-written SVG) -----------------------------------------------------------------
/** A top of the y axis whose four gridlines fall on round numbers (integers when `integer`). */
function niceMax(x, integer) {
  const step0 = x > 0 ? x / 4 : 0.25;
  const p = Math.pow(10, Math.floor(Math.log10(step0)));
  let step = 10 * p;
  for (const m of [1, 1.5, 2, 2.5, 3, 4, 5, 6, 8, 10])
    if (m * p >= step0) {
      step = m * p;
      break;
    }
  if (integer) step = Math.max(1, Math.ceil(step));
  return 4 * step;
}

/**
 * series: [{ color, points: [[t, y|null]], fill?: true (stacked area), dash?: true, width? }].
 * Stacked series are drawn bottom-up in order, their points already cumulative.
 */
function drawChart(svg, opts) {
  const width = Math.max(240, svg.clientWidth || 480);
  const height = Math.max(120, svg.clientHeight || 190);
  const left = 48,
    right = 10,
    top = 10,
    bottom = 22;
  const w = width - left - right,
    h = height - top - bottom;
  const t1 = opts.t1,
    t0 = opts.t0;
  let maxY = opts.minMax || 0;
  for (const s of opts.series) for (const [, y] of s.points) if (y !== null && y > maxY) maxY = y;
  maxY = niceMax(maxY * 1.08, opts.integer);
  const x = (t) => left + ((t - t0) / (t1 - t0)) * w;
  const y = (v) => top + h - (v / maxY) * h;
  const parts = [];
  // grid and y labels
  for (let i = 0; i <= 4; i++) {
    const v = (maxY * i) / 4,
      yy = y(v).toFixed(1);
    parts.push('<line x1="' + left + '" x2="' + (left + w) + '" y1="' + yy + '" y2="' + yy + '" stroke="' + (i === 0 ? "#d0d7de" : "#eef0f2") + '"/>');
    parts.push('<text class="axis" x="' + (left - 6) + '" y="' + (Number(yy) + 4) + '" text-anchor="end">' + esc(opts.format(v)) + "</text>");
  }
  // x labels: relative time
  const spanS = (t1 - t0) / 1000;
  const stepS = spanS > 180 ? 60 : spanS > 90 ? 30 : 15;
  for (let s = 0; s <= spanS + 0.001; s += stepS) {
    const xx = x(t1 - s * 1000).toFixed(1);
    const label = s === 0 ? "now" : s >= 60 && s % 60 === 0 ? "−" + s / 60 + " min" : "−" + s + " s";
    parts.push('<line x1="' + xx + '" x2="' + xx + '" y1="' + (top + h) + '" y2="' + (top + h + 4) + '" stroke="#d0d7de"/>');
    parts.push('<text class="axis" x="' + xx + '" y="' + (top + h + 16) + '" text-anchor="' + (s === 0 ? "end" : "middle") + '">' + label + "</text>");
  }
  // series
  let below = null;
  for (const s of opts.series) {
    const segments = [];
    let current = [];
    for (const p of s.points) {
      if (p[1] === null || p[0] < t0) {
        if (current.length) segments.push(current);
        current = [];
        continue;
      }
      current.push(p);
    }
    if (current.length) segments.push(current);
    for (const seg of segments) {
      const line = seg.map((p) => x(p[0]).toFixed(1) + "," + y(p[1]).toFixed(1)).join(" ");
      if (s.fill) {
        const base = seg
          .slice()
          .reverse()
          .map((p) => {
            const b = below ? below.get(p[0]) || 0 : 0;
            return x(p[0]).toFixed(1) + "," + y(b).toFixed(1);
          })
          .join(" ");
        parts.push('<polygon points="' + line + " " + base + '" fill="' + s.color + '" fill-opacity="0.55" stroke="none"/>');
        parts.push('<polyline points="' + line + '" fill="none" stroke="' + s.color + '" stroke-width="1.5"/>');
      } else {
        parts.push(
          '<polyline points="' +
            line +
            '" fill="none" stroke="' +
            s.color +
            '" stroke-width="' +
            (s.width || 2) +
            '"' +
            (s.dash ? ' stroke-dasharray="6 4"' : "") +
            ' stroke-linejoin="round"/>',
        );
      }
    }
    if (s.fill) below = new Map(s.points.map((p) => [p[0], p[1] || 0]));
  }
  if (opts.series.every((s) => s.points.length < 2)) {
    parts.push('<text class="axis" x="' + (left + w / 2) + '" y="' + (top + h / 2) + '" text-anchor="middle">collecting data…</text>');
  }
  // Kept for the hover read-out, which runs between redraws.
  svg.__chart = { left, top, w, h, t0, t1, series: opts.series, format: opts.format, unitTotal: opts.unitTotal };
  const hover = svg.__hover;
  if (hover !== undefined && hover >= t0 && hover <= t1) {
    const hx = x(hover).toFixed(1);
    parts.push('<line x1="' + hx + '" x2="' + hx + '" y1="' + top + '" y2="' + (top + h) + '" stroke="#8c959f" stroke-dasharray="3 3"/>');
  }
  svg.setAttribute("viewBox", "0 0 " + width + " " + height);
  svg.innerHTML = parts.join("");
}

// Hovering a chart shows the values at that moment: a dashed line and a read-out beside the cursor.
function showTip(svg, event) {
  const c = svg.__chart;
  const tip = svg.parentElement.querySelector(".tip") || svg.parentElement.appendChild(el("div", { class: "tip" }));
  if (!c) return;
  const box = svg.getBoundingClientRect();
  const scale = box.width > 0 ? Number(svg.getAttribute("viewBox").split(" ")[2]) / box.width : 1;
  const px = (event.clientX - box.left) * scale;
  const t = c.t0 + ((px - c.left) / c.w) * (c.t1 - c.t0);
  if (px < c.left || px > c.left + c.w) {
    hideTip(svg);
    return;
  }
  let nearest = null;
  for (const s of c.series) for (const p of s.points) if (nearest === null || Math.abs(p[0] - t) < Math.abs(nearest - t)) nearest = p[0];
  if (nearest === null) {
    hideTip(svg);
    return;
  }
  const moved = svg.__hover !== nearest;
  svg.__hover = nearest;
  const ago = Math.round((c.t1 - nearest) / 1000);
  const rows = c.series
    .slice()
    .reverse()
    .map((s) => {
      const p = s.points.find((q) => q[0] === nearest);
      const v = s.own ? s.own.get(nearest) : p ? p[1] : null;
      // The limit's dark swatch would vanish on the dark read-out: draw it as a light dash there.
      const swatch = s.dash ? "background:none;border-top:2px dashed #f6f8fa;height:0;vertical-align:3px" : "background:" + s.color;
      return v === null || v === undefined ? "" : '<div><i style="' + swatch + '"></i>' + esc(s.name) + " " + esc(c.format(v)) + (s.unit || "") + "</div>";
    })
    .join("");
  const stackedTotal = c.series.filter((s) => s.own).reduce((sum, s) => sum + (s.own.get(nearest) || 0), 0);
  const total = !c.series.some((s) => s.own)
    ? ""
    : c.unitTotal
      ? '<div class="when">' + esc(c.format(stackedTotal)) + esc(c.unitTotal) + "</div>"
      : '<div class="when">granted ' + esc(c.format(stackedTotal)) + "/s in all</div>";
  tip.innerHTML = '<div class="when">' + new Date(nearest).toLocaleTimeString() + (ago > 0 ? " · " + ago + " s ago" : " · now") + "</div>" + rows + total;
  tip.hidden = false;
  const parent = svg.parentElement.getBoundingClientRect();
  const left = event.clientX - parent.left + 14;
  tip.style.left = Math.min(left, parent.width - tip.offsetWidth - 4) + "px";
  tip.style.top = event.clientY - parent.top + 12 + "px";
  if (moved) render();
}
function hideTip(svg) {
  const tip = svg.parentElement.querySelector(".tip");
  if (tip) tip.hidden = true;
  if (svg.__hover !== undefined) {
    svg.__hover = undefined;
    render();
  }
}
document.addEventListener("mousemove", (event) => {
  const svg = event.target instanceof Element ? event.target.closest("svg[data-chart]") : null;
  for (const other of document.querySelectorAll("svg[data-chart]")) if (other !== svg && other.__hover !== undefined) hideTip(other);
  if (svg) showTip(svg, event);
});
