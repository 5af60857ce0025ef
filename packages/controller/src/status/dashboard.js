"use strict";
// One of the dashboard's scripts. dashboard-page.ts joins them, in the order dashboard.html names them,
// into the page's one <script>, so they share one scope: what one declares at its top level the others
// use. Top-level code only declares and listens; dashboard.js, the last, starts the polling.
// This one: the history of snapshots, the redraw, leadership and alignment, and the polling.

// The page polls the controller's snapshot every second, keeps up to HISTORY_MS of it in memory, and
// redraws. Rates on the charts are the controller's own (granted units/s over its last 5 s); wait
// times per second come from the difference of two cumulative histograms, as Prometheus would.
const POLL_MS = 1000;
const HISTORY_MS = 5 * 60 * 1000;
const MIN_SPAN_MS = 30 * 1000;
const SHARE_WINDOW_MS = 60 * 1000;
const WAIT_WINDOW_MS = 10 * 1000;

const history = []; // [{ t, version, throttlers: Map(id → throttler snapshot), parts: Map(computation → part sums) | null }]
let lastOkAt = 0;
let failures = 0;

/** The newest sample at or before `t`, or the oldest one. */
function sampleAt(t) {
  for (let i = history.length - 1; i >= 0; i--) if (history[i].t <= t) return history[i];
  return history[0];
}

function render() {
  const latest = history[history.length - 1];
  if (!latest) return;
  const t1 = latest.t;
  const span = Math.min(HISTORY_MS, Math.max(MIN_SPAN_MS, t1 - history[0].t));
  const t0 = t1 - span;
  const visible = history.filter((s) => s.t >= t0);
  $("#empty").hidden = latest.throttlers.size > 0;
  renderEpochParts(visible, t0, t1);
  for (const [id, panel] of panels)
    if (!latest.throttlers.has(id)) {
      panel.root.remove();
      panels.delete(id);
    }

  for (const [id, th] of latest.throttlers) {
    const { root } = panelFor(id);
    const limit = th.limit;
    const cfg = [];
    // A concurrency throttler's limit is units in use at once: no rate, no period.
    const units = th.kind === "concurrency";
    cfg.push(th.useClassWeightsAsLimit ? "limit = Σ class weights" : limit === null ? "unlimited" : "limit " + num(limit) + (units ? " at once" : "/s"));
    if (!units) cfg.push("period " + duration(th.periodMs));
    if (th.capacity !== null) cfg.push("capacity " + num(th.capacity));
    if (th.maxGrantAmount !== null) cfg.push("max grant " + num(th.maxGrantAmount));
    cfg.push("max queue " + num(th.maxQueueSize));
    $(".config", root).textContent = cfg.join(" · ");

    setStat(
      root,
      "limit",
      limit === null ? "∞" : num(limit),
      limit === null ? "" : units ? "at once" : "/s",
      units ? num(th.inUse || 0) + " in use" : th.balance === null ? "unlimited: granted at once" : "balance " + num(th.balance) + " of " + num(th.capacity),
    );
    const util = limit ? (units ? th.inUse || 0 : th.grantedRate) / limit : null;
    const utilSub = util === null ? "no limit to compare" : pct(util) + (units ? " of the limit in use" : " of the limit");
    // A concurrency throttler's headline is what is held now; its grants per second are a detail.
    $('[data-label="granted-rate"]', root).textContent = units ? "In use" : "Granted rate \u00b7 5 s";
    if (units) {
      const holders = th.concurrency ? th.concurrency.holders : 0;
      setStat(
        root,
        "granted-rate",
        num(th.inUse || 0),
        "units",
        utilSub + " · " + holders + (holders === 1 ? " holder" : " holders") + " · " + num(th.grantedRate) + "/s taken",
        util !== null && util >= 0.9 ? "ok" : "",
      );
    } else {
      setStat(root, "granted-rate", num(th.grantedRate), "/s", utilSub, util !== null && util >= 0.9 ? "ok" : "");
    }
    setStat(
      root,
      "queue",
      num(th.pendingRequests),
      th.pendingRequests === 1 ? "request" : "requests",
      num(th.pendingAmount) + " units owed" + (th.detachedRequests ? " · " + th.detachedRequests + " detached" : ""),
      th.pendingRequests > 0.8 * th.maxQueueSize ? "warn" : "",
    );
    const older = sampleAt(t1 - WAIT_WINDOW_MS).throttlers.get(id);
    const recent = waitBetween(older && older.waitTime, th.waitTime);
    setStat(root, "wait", recent ? ms(recent.mean) : "–", "", (recent ? "p95 " + ms(recent.p95) + " · " : "no grants · ") + "max " + ms(th.waitTime.maxMs));
    const c = th.counters;
    setStat(
      root,
      "granted-total",
      num(c.granted),
      "units",
      "released " +
        num(c.released) +
        (c.refunded ? " · refunded " + num(c.refunded) : "") +
        (c.refusedQueueFull ? " · " + c.refusedQueueFull + " refused" : ""),
    );

    if (units) renderInUse(root, id, visible, t0, t1, limit);
    else renderGrantedRate(root, id, visible, t0, t1, limit);

    drawChart($('[data-chart="queue"]', root), {
      t0,
      t1,
      format: num,
      minMax: 4,
      integer: true,
      series: [
        {
          name: "waiting",
          color: "#0969da",
          points: visible.map((s) => {
            const x = s.throttlers.get(id);
            return [s.t, x ? x.pendingRequests : null];
          }),
        },
      ],
    });
    const mean = [],
      p95 = [];
    for (let i = 1; i < visible.length; i++) {
      const a = visible[i - 1].throttlers.get(id),
        b = visible[i].throttlers.get(id);
      const w = waitBetween(a && a.waitTime, b && b.waitTime);
      mean.push([visible[i].t, w ? w.mean : null]);
      p95.push([visible[i].t, w ? w.p95 : null]);
    }
    drawChart($('[data-chart="wait"]', root), {
      t0,
      t1,
      format: (v) => num(v),
      minMax: 10,
      series: [
        { name: "p95", color: "#bc4c00", points: p95, unit: " ms" },
        { name: "mean", color: "#6e40c9", points: mean, unit: " ms" },
      ],
    });

    const adaptiveBox = $("[data-adaptive]", root);
    adaptiveBox.hidden = !th.adaptive;
    if (th.adaptive) {
      const a = th.adaptive;
      const of = (pick) =>
        visible.map((s) => {
          const x = s.throttlers.get(id);
          return [s.t, x && x.adaptive ? pick(x.adaptive) : null];
        });
      drawChart($('[data-chart="load"]', root), {
        t0,
        t1,
        format: (v) => v.toFixed(2),
        minMax: Math.max(1, a.targetHigh),
        series: [
          { name: "low", color: "#1a7f37", dash: true, width: 1.4, points: of((x) => x.targetLow) },
          { name: "high", color: "#cf222e", dash: true, width: 1.4, points: of((x) => x.targetHigh) },
          { name: "load", color: "#0969da", points: of((x) => x.load) },
        ],
      });
      drawChart($('[data-chart="adaptive-limit"]', root), {
        t0,
        t1,
        format: num,
        minMax: a.minLimit,
        series: [
          { name: "in force", color: "#1f2328", points: of((x) => x.limitInForce) },
          { name: "suggested", color: "#bc4c00", dash: true, points: of((x) => x.suggestedLimit) },
        ],
      });
      const where = a.load === null ? "no reading" : "load " + a.load.toFixed(3) + " in band [" + a.targetLow + ", " + a.targetHigh + "]";
      $(".config", root).textContent +=
        " · adaptive " +
        num(a.minLimit) +
        "…" +
        num(a.maxLimit) +
        " every " +
        duration(a.intervalMs) +
        (a.dryRun ? " · DRY RUN" : "") +
        " · " +
        where +
        (a.consecutiveFailures ? " · " + a.consecutiveFailures + " failed readings" : "");
    }
    if (th.concurrency) {
      $(".config", root).textContent +=
        " · concurrency: " + num(th.inUse || 0) + " in use, " + th.concurrency.holders + " holders, " + th.concurrency.expiredLeases + " leases expired";
    }

    renderClasses(root, id, th, t1);
    renderKeys(root, th);
  }
}

function renderClasses(root, id, th, t1) {
  const past = sampleAt(t1 - SHARE_WINDOW_MS).throttlers.get(id);
  const windowS = past ? Math.round((t1 - sampleAt(t1 - SHARE_WINDOW_MS).t) / 1000) : 0;
  const deltas = th.classes.map((k) => {
    const before = past && past.classes.find((q) => q.id === k.id);
    return { k, delta: Math.max(0, k.granted - (before ? before.granted : 0)) };
  });
  const total = deltas.reduce((sum, d) => sum + d.delta, 0);
  // A weight is a share among classes that want quota: an idle class's share goes to the others (docs/design.md §9.2).
  const busy = deltas.filter((d) => d.delta > 0 || d.k.pendingRequests > 0);
  const busyWeight = busy.reduce((sum, d) => sum + d.k.weight, 0);
  const rows = deltas.map(({ k, delta }) => {
    const observed = total > 0 ? delta / total : null;
    const isBusy = delta > 0 || k.pendingRequests > 0;
    const target = isBusy && busyWeight > 0 ? k.weight / busyWeight : null;
    const waitMean = k.waitTime.count > 0 ? k.waitTime.sumMs / k.waitTime.count : null;
    const tags = (k.accepting ? "" : '<span class="tag">draining</span>') + (isBusy ? "" : '<span class="tag">idle</span>');
    return (
      '<tr data-class="' +
      esc(k.id) +
      '">' +
      '<td class="name"><i style="background:' +
      colorOf(k.id) +
      '"></i>' +
      esc(k.id) +
      tags +
      "</td>" +
      '<td class="num">' +
      num(k.weight) +
      (th.useClassWeightsAsLimit ? "/s" : "") +
      "</td>" +
      '<td class="share"><div class="bars"><div class="track">' +
      '<div class="bar target" style="width:' +
      ((target || 0) * 100).toFixed(1) +
      '%"></div>' +
      '<div class="bar observed" style="width:' +
      ((observed || 0) * 100).toFixed(1) +
      "%;background:" +
      colorOf(k.id) +
      '"></div></div>' +
      '<div class="figures"><div class="t">' +
      (target === null ? "idle" : "by weight " + pct(target)) +
      '</div><div>observed <b data-share="observed">' +
      (observed === null ? "–" : pct(observed)) +
      "</b></div></div></div></td>" +
      '<td class="num">' +
      num(k.grantedRate) +
      "</td>" +
      '<td class="num">' +
      num(k.pendingRequests) +
      (k.pendingAmount ? ' <span style="color:var(--muted)">(' + num(k.pendingAmount) + " u)</span>" : "") +
      "</td>" +
      '<td class="num">' +
      ms(waitMean) +
      "</td></tr>"
    );
  });
  $("tbody", root).innerHTML = rows.join("");
  const h3 = $(".classes h3 span", root);
  h3.textContent =
    "observed share of granted units over the last " + (windowS >= 60 ? "minute" : windowS + " s") + ", against the share of weight among classes with demand";
}

// ---- failover (docs/design.md §5.2): who leads, since when, elections, state age --------------------------
function showLeadership(f) {
  const el = $("#leader");
  el.hidden = !f;
  if (!f) return;
  const secs = (ms) => (ms === null || ms === undefined ? "–" : (ms / 1000).toFixed(ms < 10000 ? 1 : 0) + " s");
  const since = f.leaderSince ? " since " + new Date(f.leaderSince).toLocaleTimeString() : "";
  el.textContent =
    (f.role === "leader" ? "leader (this controller)" : f.role + " · leader " + (f.leader || "unknown")) +
    since +
    " · generation " +
    (f.generation ?? "–") +
    " · " +
    f.elections +
    " elections · state age " +
    secs(f.stateAgeMs);
  if (f.role !== "leader")
    $("#empty").textContent = "This controller does not serve quota now (" + f.role + "); the leader is " + (f.leader || "not known yet") + ".";
}

// ---- watermark alignment (docs/design.md §12): each group's watermark and its held partitions ------------
function showAlignment(groups, generatedAt) {
  const section = $("#alignment");
  section.hidden = !groups || groups.length === 0;
  if (section.hidden) return;
  const now = Date.parse(generatedAt);
  $("tbody", section).innerHTML = groups
    .map(
      (g) =>
        '<tr data-group="' +
        esc(g.group) +
        '"><td class="name">' +
        esc(g.group) +
        "</td>" +
        "<td>" +
        (g.watermarkMs === null ? "–" : esc(new Date(g.watermarkMs).toISOString())) +
        "</td>" +
        '<td class="num">' +
        (g.watermarkMs === null ? "–" : esc(duration(Math.max(0, Math.round((now - g.watermarkMs) / 1000)) * 1000))) +
        "</td>" +
        '<td class="num">' +
        g.partitions +
        "</td>" +
        '<td class="num" data-held>' +
        g.held +
        "</td>" +
        '<td class="num">' +
        g.idle +
        "</td>" +
        '<td class="num">' +
        g.unread +
        "</td></tr>",
    )
    .join("");
}

// ---- polling -----------------------------------------------------------------------------------
function setState(live, text) {
  $("#dot").className = "dot " + (live ? "live" : "stale");
  $("#state").textContent = text;
}

async function poll() {
  try {
    const [response, parts] = await Promise.all([fetch("api/snapshot", { cache: "no-store", signal: AbortSignal.timeout(5000) }), fetchParts()]);
    if (!response.ok) throw new Error("HTTP " + response.status + ": " + (await response.text()).trim());
    const snapshot = await response.json();
    const t = Date.parse(snapshot.generatedAt);
    const throttlers = new Map(snapshot.throttlers.map((th) => [th.id, th]));
    if (!history.length || t > history[history.length - 1].t) history.push({ t, version: snapshot.version, throttlers, parts });
    while (history.length > 2 && history[0].t < t - HISTORY_MS - 5000) history.shift();
    lastOkAt = Date.now();
    failures = 0;
    $("#banner").hidden = true;
    $("#version").textContent = "dynamic_spec v" + snapshot.version;
    showLeadership(snapshot.failover);
    showAlignment(snapshot.alignment, snapshot.generatedAt);
    $("#updated").textContent = "updated " + new Date(t).toLocaleTimeString();
    setState(true, "live");
    render();
  } catch (error) {
    failures += 1;
    const since = lastOkAt ? Math.round((Date.now() - lastOkAt) / 1000) + " s ago" : "never";
    const banner = $("#banner");
    banner.hidden = false;
    banner.textContent =
      "Cannot reach the controller (" +
      (error && error.message ? error.message : error) +
      "); last update " +
      since +
      ". Retrying every second — the charts resume when it answers.";
    setState(false, "stale");
  } finally {
    setTimeout(poll, POLL_MS);
  }
}

let resizeTimer = null;
window.addEventListener("resize", () => {
  clearTimeout(resizeTimer);
  resizeTimer = setTimeout(render, 100);
});
poll();
