"use strict";
// One of the dashboard's scripts. dashboard-page.ts joins them, in the order dashboard.html names them,
// into the page's one <script>, so they share one scope: what one declares at its top level the others
// use. Top-level code only declares and listens; dashboard.js, the last, starts the polling.
// This one: a panel per throttler, its tiles, and its first chart (granted rate, or units in use).

const panels = new Map(); // throttler id → { root, els }

function panelFor(id) {
  let panel = panels.get(id);
  if (panel) return panel;
  const root = el("section", { class: "panel", "data-throttler": id });
  root.innerHTML =
    '<h2></h2><div class="config"></div>' +
    '<div class="tiles">' +
    '<div class="tile"><div class="label">Limit</div><div class="value" data-stat="limit"></div><div class="sub" data-sub="limit"></div></div>' +
    '<div class="tile"><div class="label" data-label="granted-rate">Granted rate · 5 s</div><div class="value" data-stat="granted-rate"></div><div class="sub" data-sub="granted-rate"></div></div>' +
    '<div class="tile"><div class="label">Queue</div><div class="value" data-stat="queue"></div><div class="sub" data-sub="queue"></div></div>' +
    '<div class="tile"><div class="label">Wait · last 10 s</div><div class="value" data-stat="wait"></div><div class="sub" data-sub="wait"></div></div>' +
    '<div class="tile"><div class="label">Granted total</div><div class="value" data-stat="granted-total"></div><div class="sub" data-sub="granted-total"></div></div>' +
    "</div>" +
    '<div class="charts">' +
    '<div class="chart"><h3 data-title="rate">Granted rate vs limit <span>units/s, stacked by quota class</span></h3><svg data-chart="rate"></svg><div class="legend" data-legend="rate"></div></div>' +
    '<div class="chart"><h3>Queue size <span>requests waiting</span></h3><svg data-chart="queue"></svg><div class="legend"><span><i class="line" style="border-color:#0969da"></i>waiting requests</span></div></div>' +
    '<div class="chart"><h3>Wait time <span>ms, per second</span></h3><svg data-chart="wait"></svg><div class="legend"><span><i class="line" style="border-color:#bc4c00"></i>p95</span><span><i class="line" style="border-color:#6e40c9"></i>mean</span></div></div>' +
    "</div>" +
    // Adaptive limits (docs/design.md §11.3): shown only for a throttler whose limit its loop sets.
    '<div class="charts" data-adaptive hidden>' +
    '<div class="chart"><h3>Load vs band <span>the reading the adaptive loop acts on</span></h3><svg data-chart="load"></svg><div class="legend"><span><i class="line" style="border-color:#0969da"></i>load</span><span><i class="dash"></i>target low / high</span></div></div>' +
    '<div class="chart"><h3>Adaptive limit <span>in force, and suggested (differs under dry_run)</span></h3><svg data-chart="adaptive-limit"></svg><div class="legend"><span><i class="line" style="border-color:#1f2328"></i>in force</span><span><i class="line" style="border-color:#bc4c00"></i>suggested</span></div></div>' +
    "</div>" +
    '<div class="classes"><h3>Quota classes <span>observed share of granted units over the last minute, against the share of weight among classes with demand</span></h3>' +
    '<table><thead><tr><th>class</th><th class="num">weight</th><th class="share">share <span style="text-transform:none;font-weight:400">(hatched: by weight · solid: observed)</span></th>' +
    '<th class="num">granted/s</th><th class="num">waiting</th><th class="num">first grant wait</th></tr></thead><tbody></tbody></table></div>' +
    // Keyed throttlers (docs/design.md §11.4): the keys' aggregates and the same top keys as /metrics.
    '<div class="classes" data-keyed hidden><h3>Keys <span>top keys by wait over the last minute (the same keys as /metrics)</span></h3>' +
    '<div class="config" data-keys-summary></div>' +
    '<table><thead><tr><th>key</th><th class="num">waited · last minute</th><th class="num">balance</th><th class="num">waiting</th></tr></thead>' +
    "<tbody data-top-keys></tbody></table></div>";
  $("h2", root).textContent = id;
  $("#panels").appendChild(root);
  panel = { root };
  panels.set(id, panel);
  return panel;
}

function setStat(root, key, value, unit, sub, subClass) {
  const v = $('[data-stat="' + key + '"]', root);
  v.innerHTML = esc(value) + (unit ? "<small>" + esc(unit) + "</small>" : "");
  const s = $('[data-sub="' + key + '"]', root);
  s.textContent = sub || "\u00a0";
  s.className = "sub" + (subClass ? " " + subClass : "");
}

/** A rate throttler: granted rate, stacked by class, against the limit (units/s). */
function renderGrantedRate(root, id, visible, t0, t1, limit) {
  $('[data-title="rate"]', root).innerHTML = "Granted rate vs limit <span>units/s, stacked by quota class</span>";
  const classIds = [];
  for (const s of visible) {
    const x = s.throttlers.get(id);
    if (x) for (const k of x.classes) if (!classIds.includes(k.id)) classIds.push(k.id);
  }
  const stacked = [];
  const running = new Map();
  for (const cid of classIds) {
    // A class that got nothing on screen would only add an empty band and a legend entry.
    const seen = visible.some((s) => {
      const x = s.throttlers.get(id);
      const k = x && x.classes.find((q) => q.id === cid);
      return k && k.grantedRate > 0;
    });
    if (!seen) continue;
    const points = visible.map((s) => {
      const x = s.throttlers.get(id);
      const k = x && x.classes.find((q) => q.id === cid);
      const v = (running.get(s.t) || 0) + (k ? k.grantedRate : 0);
      running.set(s.t, v);
      return [s.t, x ? v : null];
    });
    const own = new Map(
      visible.map((s) => {
        const x = s.throttlers.get(id);
        const k = x && x.classes.find((q) => q.id === cid);
        return [s.t, k ? k.grantedRate : null];
      }),
    );
    stacked.push({ color: colorOf(cid), points, fill: true, classId: cid, name: cid, own });
  }
  const limitSeries = {
    name: "limit",
    color: "#1f2328",
    dash: true,
    width: 1.6,
    points: visible.map((s) => {
      const x = s.throttlers.get(id);
      return [s.t, x && x.limit !== null ? x.limit : null];
    }),
  };
  drawChart($('[data-chart="rate"]', root), { t0, t1, series: stacked.concat([limitSeries]), format: num, minMax: limit || 0 });
  $('[data-legend="rate"]', root).innerHTML =
    stacked.map((s) => '<span><i style="background:' + s.color + '"></i>' + esc(s.classId) + "</span>").join("") +
    (limit !== null ? '<span><i class="dash"></i>limit</span>' : "");
}

/**
 * A concurrency throttler: its limit counts units held at once, not units per second, so the chart
 * draws the units in use (and the clients holding them) against the limit in force.
 */
function renderInUse(root, id, visible, t0, t1, limit) {
  $('[data-title="rate"]', root).innerHTML = "Units in use vs limit <span>units held at once · holders</span>";
  const at = (pick) =>
    visible.map((s) => {
      const x = s.throttlers.get(id);
      return [s.t, x ? pick(x) : null];
    });
  const series = [
    { name: "in use", color: colorOf("default"), fill: true, points: at((x) => x.inUse || 0) },
    { name: "holders", color: "#8250df", width: 1.4, points: at((x) => (x.concurrency ? x.concurrency.holders : null)) },
    { name: "limit", color: "#1f2328", dash: true, width: 1.6, points: at((x) => x.limit) },
  ];
  drawChart($('[data-chart="rate"]', root), { t0, t1, series, format: num, minMax: limit || 0, integer: true });
  $('[data-legend="rate"]', root).innerHTML =
    '<span><i style="background:' +
    colorOf("default") +
    '"></i>in use</span><span><i style="background:#8250df"></i>holders</span>' +
    (limit !== null ? '<span><i class="dash"></i>limit</span>' : "");
}

/** A keyed throttler's keys live, refused and forgotten, and its top keys by wait (hidden for any other throttler). */
function renderKeys(root, th) {
  const box = $("[data-keyed]", root);
  const k = th.keyed;
  box.hidden = !k;
  if (!k) return;
  $("[data-keys-summary]", root).textContent =
    num(k.keys) +
    " keys live of max " +
    num(k.maxKeys) +
    " (" +
    num(k.activeKeys) +
    " with a bucket, the rest parked) · " +
    num(k.refusedKeys) +
    " refused · " +
    num(k.forgottenKeys) +
    " forgotten · idle_timeout " +
    duration(k.idleTimeoutMs);
  $("[data-top-keys]", root).innerHTML =
    k.topKeys.length === 0
      ? '<tr><td colspan="4" style="color:var(--muted)">no key waited over the last minute</td></tr>'
      : k.topKeys
          .map(
            (top) =>
              '<tr data-key="' +
              esc(top.key) +
              '"><td class="name">' +
              esc(top.key) +
              '</td><td class="num" data-waited>' +
              ms(top.waitedMs) +
              '</td><td class="num">' +
              (top.balance === null ? "–" : num(top.balance)) +
              '</td><td class="num">' +
              num(top.pendingRequests) +
              "</td></tr>",
          )
          .join("");
}
