// The Epochs page: overview, grid (paged, filtered), epoch detail, barriers and timeline, polled.
// Everything comes from the JSON API beside this file; text is set with textContent only.
"use strict";

const STATES = ["sealed", "voting", "open", "aborted", "rolled_back"];
const LABEL = { sealed: "sealed", voting: "voting", open: "open", aborted: "aborted", rolled_back: "rolled back" };
const POLL_MS = 2000;
const query = new URLSearchParams(window.location.search);
const view = {
  pipeline: query.get("pipeline"), dagId: query.get("dag_id"), runId: query.get("run_id"),
  offset: 0, limit: 50, states: new Set(), before: null,
  epoch: query.get("epoch") ? Number(query.get("epoch")) : null, timelineAt: 0,
};

function $(id) { return document.getElementById(id); }

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === null || value === undefined) continue;
    if (key === "class") node.className = value;
    else if (key === "onclick") node.addEventListener("click", value);
    else node.setAttribute(key, value);
  }
  for (const child of children) {
    if (child === null || child === undefined) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

async function api(path) {
  const answer = await fetch(path, { credentials: "same-origin", headers: { Accept: "application/json" } });
  if (!answer.ok) {
    let detail = answer.statusText;
    try { detail = (await answer.json()).detail || detail; } catch (e) { /* not JSON */ }
    const error = new Error(`${answer.status}: ${detail}`);
    error.status = answer.status;
    throw error;
  }
  return answer.json();
}

function when(seconds) {
  if (!seconds) return "-";
  return new Date(seconds * 1000).toISOString().replace("T", " ").replace(/\.\d+Z$/, " UTC");
}

// An ISO time (the API's lease times: microseconds, "+00:00") as the page writes every time: to the
// second, in UTC.
function isoWhen(text) {
  if (!text) return "-";
  const at = new Date(text);
  return Number.isNaN(at.getTime()) ? String(text) : when(at.getTime() / 1000);
}

// A manifest: the first characters in the cell, the whole (as the API gives it) a click away.
function manifestCell(text) {
  if (!text) return el("td", { class: "manifest" }, "-");
  if (text.length <= 80) return el("td", { class: "manifest" }, text);
  return el("td", { class: "manifest" }, el("details", {}, el("summary", {}, text.slice(0, 80) + " ..."),
    el("pre", { class: "manifest-full" }, text)));
}

// A partition's rows: with several producers, the sum is shown as the sum it is, with each producer's
// part (a producer that re-counts another's output would double it: the parts say so).
function rowsCell(p) {
  if (p.summary.rows === undefined) return el("td", {}, "-");
  const parts = p.producers.filter((v) => v.current && v.summary && v.summary.rows !== undefined);
  if (parts.length < 2) return el("td", {}, p.summary.rows.toLocaleString());
  return el("td", { title: "the sum of the producers' manifests" }, `${p.summary.rows.toLocaleString()} = `
    + parts.map((v) => `${v.producer} ${v.summary.rows.toLocaleString()}`).join(" + "));
}

function ago(seconds) {
  if (!seconds) return "-";
  const s = Math.max(0, Date.now() / 1000 - seconds);
  if (s < 90) return `${s.toFixed(0)} s ago`;
  if (s < 5400) return `${(s / 60).toFixed(0)} min ago`;
  if (s < 172800) return `${(s / 3600).toFixed(1)} h ago`;
  return `${(s / 86400).toFixed(1)} days ago`;
}

function duration(seconds) {
  if (seconds === null || seconds === undefined) return "-";
  return seconds < 120 ? `${seconds.toFixed(2)} s` : `${(seconds / 60).toFixed(1)} min`;
}

function message(text) {
  $("message").hidden = !text;
  $("message").textContent = text || "";
}

function cellText(cell) {
  if (cell.state === "voting" || (cell.state === "aborted" && cell.votes)) return `${cell.votes} of ${cell.needed}`;
  return LABEL[cell.state];
}

function base() { return `api/pipelines/${encodeURIComponent(view.pipeline)}`; }

async function loadPipelines() {
  const path = view.dagId ? `api/pipelines?dag_id=${encodeURIComponent(view.dagId)}` : "api/pipelines";
  const { pipelines } = await api(path);
  const select = $("pipeline");
  select.replaceChildren(...pipelines.map((p) => el("option", { value: p.pipeline },
    p.exists ? p.pipeline : `${p.pipeline} (not started)`)));
  $("scope").textContent = view.dagId ? `DAG ${view.dagId}` : "";
  if (!pipelines.length) {
    $("content").hidden = true;
    message(view.dagId ? `DAG ${view.dagId} drives no epoch pipeline you may see.`
      : "No epoch pipeline: none of the DAGs you may read opens epochs (OpenEpochOperator).");
    return false;
  }
  if (view.runId && view.dagId) {
    try {
      const run = await api(`api/runs/${encodeURIComponent(view.dagId)}/${encodeURIComponent(view.runId)}`);
      view.pipeline = run.pipeline;
      view.epoch = run.epoch;
    } catch (e) { message(`This run has not opened an epoch yet (${e.message}).`); }
  }
  if (!view.pipeline || !pipelines.some((p) => p.pipeline === view.pipeline)) {
    view.pipeline = (pipelines.find((p) => p.exists) || pipelines[0]).pipeline;
  }
  select.value = view.pipeline;
  $("content").hidden = false;
  return true;
}

function renderOverview(o) {
  $("frontier").textContent = o.frontier;
  $("frontier-sub").textContent = `epochs ${o.first_epoch}..${o.last_epoch}; last seal ${ago(o.last_seal_at)}`;
  $("leader").textContent = o.leader || "none";
  $("leader-sub").textContent = o.leader
    ? `${o.leader_since ? "since " + when(o.leader_since) + ", " : ""}${o.leader_expired ? "lease expired" : "lease until"} ${isoWhen(o.leader_until)}`
    : "no lease recorded";
  const f = o.in_flight;
  $("flight").textContent = f ? `epoch ${f.epoch}` : "none";
  $("flight-sub").replaceChildren(...(f ? [el("span", { class: `tag state-${f.state}` }, LABEL[f.state]),
    ` attempt ${f.attempt} (${f.attempt_state}) by ${f.owner}`] : ["every opened epoch is sealed"]));
  $("lag").textContent = `${o.lag_epochs} epoch${o.lag_epochs === 1 ? "" : "s"}`;
  $("lag-sub").textContent = Object.keys(o.consumers).length
    ? "consumers: " + Object.entries(o.consumers).map(([c, a]) => `${c} at ${a}`).join(", ") : "opened, not sealed";
  const c = o.counts;
  $("health").replaceChildren(...STATES.filter((s) => c[s]).map((s) =>
    el("span", { class: `state-${s}`, style: `flex: ${c[s]}`, title: `${LABEL[s]}: ${c[s]}` })));
  $("counts").replaceChildren(...STATES.map((s) => el("span", { "data-count": s },
    el("span", { class: `dot state-${s}` }), `${LABEL[s]} ${c[s].toLocaleString()}`)),
    el("span", { class: "muted" }, `total ${c.total.toLocaleString()} · read in ${o.read_ms} ms`));
  $("barriers").replaceChildren(...(o.barriers.length ? o.barriers.map((b) => barrierRow(b, true))
    : [el("tr", {}, el("td", { colspan: 6, class: "muted" }, "no barrier in the epoch in flight"))]));
}

function barrierRow(b, withEpoch) {
  return el("tr", { "data-barrier": b.name },
    withEpoch ? el("td", {}, b.epoch) : null, el("td", {}, b.name), el("td", {}, b.policy || "not declared"),
    el("td", { "data-testid": "arrived" }, `${b.arrived.length} of ${b.registered.length}`),
    el("td", { "data-testid": "stragglers" }, (b.stragglers.join(", ") || "none") + (b.late > b.stragglers.length ? ` and ${b.late - b.stragglers.length} more` : "")),
    el("td", { "data-testid": "decision" }, b.decision || (b.declared ? "waiting" : "-")));
}

function renderGrid(page) {
  $("grid-head").replaceChildren(el("tr", {}, el("th", {}, "epoch"), el("th", {}, "state"), el("th", {}, "attempt"),
    el("th", {}, "owner"), ...page.partitions.map((p) => el("th", {}, p))));
  const rows = page.rows.map((row) => {
    const cells = new Map(row.cells.map((c) => [c.partition, c]));
    return el("tr", { "data-epoch": row.epoch, "data-state": row.state, class: row.epoch === view.epoch ? "selected" : null,
      onclick: () => { view.epoch = row.epoch; refreshDetail(); refreshGrid(); } },
      el("td", {}, row.epoch), el("td", {}, el("span", { class: `tag state-${row.state}` }, LABEL[row.state])),
      el("td", {}, `${row.attempt} (${row.attempt_state})`), el("td", {}, row.owner),
      ...page.partitions.map((p) => {
        const cell = cells.get(p);
        return el("td", {}, cell ? el("span", { class: `cell state-${cell.state}`, "data-partition": p,
          "data-state": cell.state, "data-votes": cell.votes, "data-needed": cell.needed }, cellText(cell)) : "");
      }));
  });
  $("grid-body").replaceChildren(...(rows.length ? rows
    : [el("tr", {}, el("td", { colspan: 4 + page.partitions.length, class: "muted" }, "no epoch matches"))]));
  const first = page.matching ? page.offset + 1 : 0;
  const last = page.offset + page.rows.length;
  $("range").textContent = `${first.toLocaleString()}–${last.toLocaleString()} of ${page.matching.toLocaleString()} (read in ${page.read_ms} ms)`;
  $("prev").disabled = page.offset === 0;
  $("next").disabled = last >= page.matching;
}

// The predicted seal (typical / late quantile) and the deadline; a late partition is marked LATE,
// naming the producers it still waits for (sealed late: by how much).
function deadlineCell(d) {
  if (!d) return el("td", {}, "-");
  const predicted = d.status === "predicted" ? `${when(d.typical_at)} (q${d.quantile}: ${when(d.late_at)})`
    : d.status === "too_little_history" ? "too little history" : d.status;
  const deadline = d.deadline_at ? `deadline ${when(d.deadline_at)}` : "no deadline";
  const late = d.state === "late" ? `LATE, waiting for ${d.missing.map((m) => m.producer).join(", ")}`
    : d.state === "sealed_late" ? `SEALED LATE${d.late_by === null ? "" : ` by ${duration(d.late_by)}`}` : "";
  return el("td", { class: d.late ? "late" : null, "data-testid": "deadline" }, `${predicted}; ${deadline}`,
    late ? el("span", { class: "tag late-mark" }, ` ${late}${d.alerted ? " (alerted)" : ""}`) : "");
}

// A re-sealed partition names its version and the correction that re-sealed it; a partition whose
// newer version is being re-produced says that the version shown is stale, and by which correction.
function versionTags(p) {
  const tags = [];
  if (p.version > 1) {
    tags.push(" ", el("span", { class: "tag version", title: `correction ${p.correction}, re-sealed ${when(p.resealed_at)}` },
      `v${p.version}`));
  }
  if (p.stale_by) tags.push(" ", el("span", { class: "tag stale", title: `correction ${p.stale_by}` }, `stale: ${p.stale_by}`));
  return tags;
}

function renderDetail(d) {
  const r = d.row;
  $("detail").hidden = false;
  $("detail-title").replaceChildren(`Epoch ${r.epoch} `, el("span", { class: `tag state-${r.state}` }, LABEL[r.state]));
  $("detail-summary").textContent = `attempt ${r.attempt} (${r.attempt_state}) by ${r.owner}; config version `
    + `${r.config_version}, generation ${r.generation}; opened ${when(d.opened_at)}; sealed ${when(d.sealed_at)}; `
    + `end to end ${duration(d.seconds_to_seal)}; acknowledged ${d.partitions.filter((p) => p.state === "sealed").length}`
    + ` of ${d.partitions.length} partitions${d.history_loaded ? "" : " (history still loading)"}`;
  $("detail-partitions").replaceChildren(...d.partitions.map((p) => el("tr", { "data-partition": p.partition },
    el("td", {}, p.partition, ...versionTags(p)), el("td", {}, el("span", { class: `tag state-${p.state}` }, LABEL[p.state])),
    el("td", {}, `${p.votes} of ${p.needed}`), el("td", {}, p.sealed_by === null ? "-" : `attempt ${p.sealed_by}`),
    el("td", {}, when(p.sealed_at)), el("td", {}, duration(p.seconds_to_seal)), deadlineCell(p.deadline),
    rowsCell(p),
    el("td", {}, p.summary.bytes === undefined ? "-" : p.summary.bytes.toLocaleString()),
    el("td", { class: "manifest", title: JSON.stringify(p.snapshots) }, Object.keys(p.snapshots).length
      ? Object.entries(p.snapshots).map(([producer, s]) => `${producer}: ${(s && s.path) || JSON.stringify(s)}`).join(", ")
      : "-"),
    el("td", {}, Object.keys(p.lineage).length ? Object.entries(p.lineage).map(([k, v]) => `${k}@${v}`).join(", ") : "-"),
    // the Iceberg table(s) the sealed partition is published to, with the snapshot of this epoch
    el("td", { class: "published" }, (p.published || []).length
      ? p.published.map((t) => `${t.table} @ snapshot ${t.snapshot_id}`).join(", ") : "-"))));
  $("detail-votes").replaceChildren(...d.partitions.flatMap((p) => p.producers.map((v) =>
    el("tr", { "data-producer": v.producer }, el("td", {}, p.partition), el("td", {}, v.producer),
      el("td", { class: v.voted && !v.current ? "stale" : null }, v.voted ? (v.current ? "voted" : "superseded attempt") : "waiting"),
      el("td", {}, v.attempt === null ? "-" : v.attempt),
      manifestCell(v.manifest)))));
  $("detail-barriers").replaceChildren(...(d.barriers.length ? d.barriers.map((b) => barrierRow(b, false))
    : [el("tr", {}, el("td", { colspan: 5, class: "muted" }, "none"))]));
  $("detail-attempts").replaceChildren(...(d.attempts.length ? d.attempts.map((a) => el("tr", {},
    el("td", {}, a.attempt || "-"), el("td", {}, a.owner), el("td", {}, a.event), el("td", {}, when(a.at)), el("td", {}, a.note)))
    : [el("tr", {}, el("td", { colspan: 5, class: "muted" }, d.history_loaded ? "none recorded" : "history still loading"))]));
}

async function refreshOverview() { renderOverview(await api(base())); }

async function refreshGrid() {
  const params = new URLSearchParams({ offset: view.offset, limit: view.limit });
  if (view.states.size) params.set("state", [...view.states].join(","));
  if (view.before !== null) params.set("before", view.before);
  renderGrid(await api(`${base()}/epochs?${params}`));
}

async function refreshDetail() {
  if (view.epoch === null) { $("detail").hidden = true; return; }
  try { renderDetail(await api(`${base()}/epochs/${view.epoch}`)); } catch (e) {
    if (e.status === 404) { $("detail").hidden = true; view.epoch = null; } else throw e;
  }
}

async function refreshTimeline() {
  if (Date.now() - view.timelineAt < 10000) return;  // the picture changes slowly; redraw every 10 s
  view.timelineAt = Date.now();
  const answer = await fetch(`${base()}/timeline.svg`, { credentials: "same-origin" });
  if (!answer.ok) return;
  // a history still loading is asked for again within a poll or two, not after the 10 s redraw
  if (answer.headers.get("X-Epochs-History") === "loading") view.timelineAt = Date.now() - 8000;
  const svg = new DOMParser().parseFromString(await answer.text(), "image/svg+xml").documentElement;
  $("timeline").replaceChildren(document.importNode(svg, true));
}

async function refresh() {
  if (!view.pipeline) return;
  try {
    await Promise.all([refreshOverview(), refreshGrid(), refreshDetail()]);
    await refreshTimeline();  // after the grid: the first view never waits for the history
    message("");
    $("updated").textContent = `updated ${new Date().toISOString().slice(11, 19)} UTC`;
  } catch (e) {
    message(e.status === 404 ? `Pipeline ${view.pipeline} has no state in ZooKeeper yet: no epoch of it was opened.`
      : `Could not read ${view.pipeline}: ${e.message}`);
  }
}

function setUpFilters() {
  $("state-filters").replaceChildren(...STATES.map((s) => {
    const box = el("input", { type: "checkbox", value: s, "data-testid": `filter-${s}` });
    box.addEventListener("change", () => {
      if (box.checked) view.states.add(s); else view.states.delete(s);
      view.offset = 0; refreshGrid();
    });
    return el("label", { class: "chip" }, box, " ", el("span", { class: `dot state-${s}` }), LABEL[s]);
  }));
  $("before").addEventListener("change", () => {
    view.before = $("before").value === "" ? null : Number($("before").value); view.offset = 0; refreshGrid();
  });
  $("limit").addEventListener("change", () => { view.limit = Number($("limit").value); view.offset = 0; refreshGrid(); });
  $("prev").addEventListener("click", () => { view.offset = Math.max(0, view.offset - view.limit); refreshGrid(); });
  $("next").addEventListener("click", () => { view.offset += view.limit; refreshGrid(); });
  $("pipeline").addEventListener("change", () => {
    view.pipeline = $("pipeline").value; view.offset = 0; view.epoch = null; view.timelineAt = 0; refresh();
  });
}

async function start() {
  setUpFilters();
  try {
    if (!(await loadPipelines())) return;
  } catch (e) {
    message(e.status === 401 || e.status === 403 ? "Log in to Airflow to see the epochs." : `Could not list pipelines: ${e.message}`);
    return;
  }
  await refresh();
  setInterval(() => { if (!document.hidden) refresh(); }, POLL_MS);
}

start();
