// The AeroStream console: plain DOM over the REST API (/v1), no build step.
"use strict";

const main = document.getElementById("main");
const statusLine = document.getElementById("status");

// Builds an element: el("td", {class: "num"}, "42", child, ...). Text is
// always set as text, never parsed as HTML.
function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k.startsWith("on")) e.addEventListener(k.slice(2), v);
    else if (v !== null && v !== undefined) e.setAttribute(k, v);
  }
  for (const c of children.flat()) {
    if (c === null || c === undefined) continue;
    e.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return e;
}

function show(...nodes) {
  main.replaceChildren(...nodes);
}

async function api(method, path, body) {
  const init = { method, headers: {} };
  if (body !== undefined) {
    init.headers["content-type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  const resp = await fetch(path, init);
  const text = await resp.text();
  const data = text ? JSON.parse(text) : null;
  if (!resp.ok) {
    const err = new Error(data && data.message ? data.message : resp.statusText);
    err.code = data && data.code;
    throw err;
  }
  return data;
}

function errorBox(e) {
  return el("p", { class: "error" }, e.code ? `${e.code}: ${e.message}` : String(e.message || e));
}

// Wide tables scroll sideways inside their box, never the whole page.
function table(headers, rows) {
  return el("div", { class: "table-wrap" }, el("table", {},
    el("thead", {}, el("tr", {}, headers.map(h =>
      el("th", { class: h.num ? "num" : null }, h.label || h)))),
    el("tbody", {}, rows.length ? rows : el("tr", {}, el("td", { colspan: headers.length, class: "muted" }, "none")))));
}

function num(v) {
  return el("td", { class: "num" }, v === null || v === undefined ? "–" : v.toLocaleString());
}

function card(label, value) {
  return el("div", { class: "card" }, el("div", { class: "label" }, label), el("div", { class: "value" }, value));
}

function bytes(n) {
  if (n === null || n === undefined) return "–";
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let i = 0;
  while (n >= 1024 && i < units.length - 1) { n /= 1024; i++; }
  return `${n.toFixed(i ? 1 : 0)} ${units[i]}`;
}

const enc = encodeURIComponent;

// --- live charts -----------------------------------------------------------
//
// Every SAMPLE_MS the console samples /v1/metrics (and /v1/tiering, and the
// group on screen) and keeps WINDOW_MS of samples while it is open; charts
// are drawn from them as inline SVG, so nothing is loaded from elsewhere.

const SAMPLE_MS = 2000;
const WINDOW_MS = 5 * 60 * 1000;
const samples = { metrics: [], tiering: [], groups: new Map() };
// Redraws the open page's charts after each sample; set by the page.
let livePage = null;

function keep(list, sample) {
  list.push(sample);
  while (list.length > 1 && sample.t - list[0].t > WINDOW_MS) list.shift();
}

// The q-quantile of a histogram's counts (not cumulative, one more than
// bounds), interpolated inside its bucket; null with no counts.
function quantile(boundsSeconds, counts, q) {
  const total = counts.reduce((a, b) => a + b, 0);
  if (total === 0) return null;
  const want = q * total;
  let seen = 0;
  for (let i = 0; i < counts.length; i++) {
    if (counts[i] > 0 && seen + counts[i] >= want) {
      const lo = i === 0 ? 0 : boundsSeconds[i - 1];
      const hi = i < boundsSeconds.length ? boundsSeconds[i] : boundsSeconds[boundsSeconds.length - 1];
      return lo + (hi - lo) * ((want - seen) / counts[i]);
    }
    seen += counts[i];
  }
  return boundsSeconds[boundsSeconds.length - 1];
}

// Per-interval figures between consecutive /v1/metrics samples. A counter
// that went down (the agent restarted) gives no point for that interval.
function intervals(list) {
  const out = [];
  for (let i = 1; i < list.length; i++) {
    const a = list[i - 1].m, b = list[i].m;
    const secs = (b.at_ms - a.at_ms) / 1000;
    if (secs <= 0 || b.produced_bytes < a.produced_bytes || b.fetched_bytes < a.fetched_bytes) continue;
    const diff = b.produce_latency.counts.map((c, j) => Math.max(0, c - (a.produce_latency.counts[j] || 0)));
    const bounds = b.produce_latency.bounds_seconds;
    const p50 = quantile(bounds, diff, 0.5), p99 = quantile(bounds, diff, 0.99);
    out.push({
      t: list[i].t,
      in: (b.produced_bytes - a.produced_bytes) / secs,
      out: (b.fetched_bytes - a.fetched_bytes) / secs,
      records: Math.max(0, b.produced_records - a.produced_records) / secs,
      p50: p50 === null ? null : p50 * 1000,
      p99: p99 === null ? null : p99 * 1000,
    });
  }
  return out;
}

const SVG = "http://www.w3.org/2000/svg";
function svg(tag, attrs, ...children) {
  const e = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
  for (const c of children) e.append(c instanceof Node ? c : document.createTextNode(String(c)));
  return e;
}

function ago(ms) {
  const s = Math.round(ms / 1000);
  return s < 90 ? `${s} s ago` : `${Math.round(s / 60)} min ago`;
}

// A line chart of `series` ([{label, points: [[t, value|null], ...]}]) with
// values shown by `fmt`; `axis(t0, t1)` labels the time axis's ends
// (default: how long ago the first point was, and "now"). Fewer than two
// points: says it is collecting.
function lineChart(title, series, fmt, axis) {
  const W = 600, H = 170, L = 64, R = 8, T = 8, B = 22;
  const all = series.flatMap(s => s.points).filter(p => p[1] !== null);
  const legend = el("div", { class: "legend" }, series.map((s, i) => {
    const last = [...s.points].reverse().find(p => p[1] !== null);
    return el("span", { class: `key c${i}` }, `${s.label} `, el("b", {}, last ? fmt(last[1]) : "–"));
  }));
  const box = svg("svg", { viewBox: `0 0 ${W} ${H}`, role: "img", "aria-label": title });
  if (all.length < 2) {
    box.append(svg("text", { x: W / 2, y: H / 2, "text-anchor": "middle", class: "note" }, "collecting samples…"));
    return el("figure", { class: "chart", "data-points": "0" }, el("figcaption", {}, title), legend, box);
  }
  const t0 = Math.min(...all.map(p => p[0])), t1 = Math.max(...all.map(p => p[0]));
  const top = Math.max(...all.map(p => p[1]));
  const vmax = top > 0 ? top : 1;
  const x = t => L + (W - L - R) * (t1 === t0 ? 1 : (t - t0) / (t1 - t0));
  const y = v => T + (H - T - B) * (1 - v / (vmax * 1.1));
  // all zero: one grid line, at zero
  for (const frac of top > 0 ? [0, 0.5, 1] : [0]) {
    const v = vmax * frac;
    box.append(svg("line", { x1: L, x2: W - R, y1: y(v), y2: y(v), class: "grid" }));
    box.append(svg("text", { x: L - 6, y: y(v) + 4, "text-anchor": "end", class: "axis" }, fmt(v)));
  }
  const [first, last] = axis ? axis(t0, t1) : [ago(t1 - t0), "now"];
  box.append(svg("text", { x: L, y: H - 6, class: "axis" }, first));
  box.append(svg("text", { x: W - R, y: H - 6, "text-anchor": "end", class: "axis" }, last));
  series.forEach((s, i) => {
    let d = "", pen = "M";
    for (const [t, v] of s.points) {
      if (v === null) { pen = "M"; continue; }
      d += `${pen}${x(t).toFixed(1)},${y(v).toFixed(1)} `;
      pen = "L";
    }
    if (d) box.append(svg("path", { d, class: `series c${i}` }));
    // a lone point draws no line: a dot shows it
    const drawn = s.points.filter(p => p[1] !== null);
    if (drawn.length === 1) box.append(svg("circle", { cx: x(drawn[0][0]), cy: y(drawn[0][1]), r: 3, class: `dot c${i}` }));
  });
  return el("figure", { class: "chart", "data-points": String(all.length) }, el("figcaption", {}, title), legend, box);
}

const perSecond = v => `${bytes(v)}/s`;
const millis = v => `${v < 10 ? v.toFixed(2) : v.toFixed(0)} ms`;
const count = v => Math.round(v).toLocaleString();
const seconds = v => `${v.toFixed(1)} s`;

async function sampleTick() {
  try {
    const now = Date.now();
    keep(samples.metrics, { t: now, m: await api("GET", "/v1/metrics") });
    try { keep(samples.tiering, { t: now, v: await api("GET", "/v1/tiering") }); }
    catch (e) { if (e.code !== "tiering_disabled") throw e; }
    if (livePage) await livePage(now);
  } catch (e) {
    statusLine.textContent = `refresh failed: ${e.message || e}`;
  }
  setTimeout(sampleTick, SAMPLE_MS);
}

// Bars of local and object-storage bytes per topic, on one scale.
function storageTable(topics) {
  const most = Math.max(1, ...topics.map(t => Math.max(t.local_bytes, t.tiered_bytes)));
  const bar = (n, cls) => el("div", { class: `bar ${cls}`, style: `width: ${(100 * n / most).toFixed(1)}%` });
  return table(["Topic", { label: "Local disk", num: true }, { label: "Object storage", num: true }, "Share"],
    topics.map(t => el("tr", {},
      el("td", {}, el("a", { href: `#/topics/${enc(t.topic)}` }, t.topic)),
      el("td", { class: "num" }, bytes(t.local_bytes)),
      el("td", { class: "num" }, bytes(t.tiered_bytes)),
      el("td", { class: "bars" }, bar(t.local_bytes, "c0"), bar(t.tiered_bytes, "c1")))));
}

// --- pages ---------------------------------------------------------------

async function overview(show) {
  const c = await api("GET", "/v1/cluster");
  if (!samples.metrics.length) keep(samples.metrics, { t: Date.now(), m: await api("GET", "/v1/metrics") });
  let tiering = null;
  try { tiering = await api("GET", "/v1/tiering"); } catch (e) { if (e.code !== "tiering_disabled") throw e; }
  const traffic = el("div", { class: "charts" });
  const storage = el("div", {});
  show(
    el("h1", {}, "Overview"),
    el("div", { class: "cards" },
      card("Cluster", c.cluster_id || "–"),
      card("Agents live", `${c.agents.filter(a => a.live).length} / ${c.agents.length}`),
      card("Metastore leader", c.metastore_leader ?? "electing"),
      card("Topics", c.topics),
      card("Partitions", c.partitions),
      tiering ? card("Upload lag", `${tiering.upload_lag_seconds.toFixed(1)} s`) : null,
      tiering ? card("Cache hit ratio", `${(tiering.cache.hit_ratio * 100).toFixed(1)} %`) : null),
    el("h2", {}, "Agents"),
    table(["Agent", "Kafka address", "Rack", "State", { label: "Leads", num: true }, { label: "Follows", num: true }],
      c.agents.map(a => el("tr", {},
        el("td", {}, String(a.id), a.this_agent ? el("span", { class: "tag" }, " this agent") : null,
          a.id === c.metastore_leader ? el("span", { class: "tag" }, " metastore leader") : null),
        el("td", { class: "mono" }, a.kafka_address || "–"),
        el("td", {}, a.rack || "–"),
        el("td", { class: a.live ? "good" : "bad" }, a.live ? (a.draining ? "live, draining" : "live") : "fenced"),
        num(a.leader_of), num(a.follower_of)))),
    el("h2", {}, `Traffic on agent ${c.node_id}`),
    traffic,
    el("h2", {}, "Storage by tier"),
    storage);
  const live = () => {
    const iv = intervals(samples.metrics);
    traffic.replaceChildren(
      lineChart("Throughput", [
        { label: "in", points: iv.map(p => [p.t, p.in]) },
        { label: "out", points: iv.map(p => [p.t, p.out]) },
      ], perSecond),
      lineChart("Produce latency", [
        { label: "p50", points: iv.map(p => [p.t, p.p50]) },
        { label: "p99", points: iv.map(p => [p.t, p.p99]) },
      ], millis));
    const st = samples.metrics[samples.metrics.length - 1].m.storage;
    storage.replaceChildren(
      el("div", { class: "cards" },
        card(`Local disk (agent ${c.node_id})`, bytes(st.local_bytes)),
        card("Object storage", bytes(st.tiered_bytes))),
      storageTable(st.topics));
  };
  live();
  return live;
}

async function topics(show) {
  const list = await api("GET", "/v1/topics");
  const form = el("form", { class: "inline", onsubmit: async ev => {
    ev.preventDefault();
    const f = ev.target.elements;
    const body = { name: f.topic.value.trim() };
    if (f.partitions.value) body.partitions = Number(f.partitions.value);
    if (f.rf.value) body.replication_factor = Number(f.rf.value);
    try {
      await api("POST", "/v1/topics", body);
      location.hash = `#/topics/${enc(body.name)}`;
    } catch (e) { form.after(errorBox(e)); }
  } },
    el("label", {}, "Name", el("input", { name: "topic", class: "wide", required: "" })),
    el("label", {}, "Partitions", el("input", { name: "partitions", type: "number", min: "1", placeholder: "default" })),
    el("label", {}, "Replication", el("input", { name: "rf", type: "number", min: "1", placeholder: "default" })),
    el("button", { type: "submit" }, "Create topic"));
  show(
    el("h1", {}, "Topics"),
    table(["Name", { label: "Partitions", num: true }, { label: "Replication", num: true }, "Id"],
      list.map(t => el("tr", {},
        el("td", {}, el("a", { href: `#/topics/${enc(t.name)}` }, t.name)),
        num(t.partitions), num(t.replication_factor),
        el("td", { class: "mono muted" }, t.id)))),
    el("h2", {}, "New topic"),
    form);
}

function payload(p) {
  if (p === null || p === undefined) return el("span", { class: "muted" }, "null");
  return p.encoding === "utf8" ? p.data : el("span", {}, el("span", { class: "tag" }, "base64"), " ", p.data);
}

async function recordBrowser(name, partitions, into) {
  const out = el("div", {});
  // `from` is {offset} or {timestamp} (ms), or {} for the log start
  const load = async (partition, from, limit) => {
    let q = `partition=${partition}&limit=${limit}`;
    if (from.offset !== undefined) q += `&offset=${from.offset}`;
    if (from.timestamp !== undefined) q += `&timestamp=${from.timestamp}`;
    try {
      const page = await api("GET", `/v1/topics/${enc(name)}/records?${q}`);
      const next = el("button", { class: "secondary", type: "button", onclick: () => {
        form.elements.offset.value = page.next_offset;
        form.elements.timestamp.value = "";
        load(partition, { offset: page.next_offset }, limit);
      } }, "Next page");
      out.replaceChildren(
        el("p", { class: "muted" }, `log start ${page.log_start}, high watermark ${page.high_watermark}, next offset ${page.next_offset}`),
        table([{ label: "Offset", num: true }, "Timestamp", "Key", "Value", "Headers"],
          page.records.map(r => el("tr", {},
            num(r.offset),
            el("td", {}, new Date(r.timestamp).toISOString()),
            el("td", { class: "mono" }, payload(r.key)),
            el("td", { class: "mono" }, payload(r.value)),
            el("td", { class: "mono" }, r.headers.map(h => el("div", {}, `${h.key}: `, payload(h.value))))))),
        page.next_offset < page.high_watermark ? next : null);
    } catch (e) { out.replaceChildren(errorBox(e)); }
  };
  const form = el("form", { class: "inline", onsubmit: ev => {
    ev.preventDefault();
    const f = form.elements;
    const from = {};
    const ts = f.timestamp.value.trim();
    if (ts !== "") {
      // milliseconds since the epoch, or a date and time (ISO 8601)
      from.timestamp = /^\d+$/.test(ts) ? Number(ts) : Date.parse(ts);
      if (Number.isNaN(from.timestamp)) {
        out.replaceChildren(errorBox({ message: `"${ts}" is neither milliseconds since the epoch nor a date and time` }));
        return;
      }
    } else if (f.offset.value !== "") from.offset = f.offset.value;
    load(f.partition.value, from, f.limit.value);
  } },
    el("label", {}, "Partition", el("input", { name: "partition", type: "number", min: "0", max: String(partitions - 1), value: "0" })),
    el("label", {}, "From offset", el("input", { name: "offset", type: "number", min: "0", placeholder: "log start" })),
    el("label", {}, "or from time", el("input", { name: "timestamp", class: "wide", placeholder: "2026-12-01T09:00:00Z or ms" })),
    el("label", {}, "Records", el("input", { name: "limit", type: "number", min: "1", max: "1000", value: "20" })),
    el("button", { type: "submit" }, "Browse"));
  into.append(form, out);
  load(0, {}, 20);
}

async function topic(show, name) {
  const t = await api("GET", `/v1/topics/${enc(name)}`);
  const del = el("button", { class: "danger", type: "button", onclick: async () => {
    if (!confirm(`Delete topic ${name} and all its records?`)) return;
    try { await api("DELETE", `/v1/topics/${enc(name)}`); location.hash = "#/topics"; }
    catch (e) { del.after(errorBox(e)); }
  } }, "Delete topic");
  const records = el("div", {});
  show(
    el("h1", {}, `Topic ${t.name}`),
    el("p", { class: "muted mono" }, t.id),
    el("h2", {}, "Partitions"),
    table([{ label: "Partition", num: true }, "Leader", "Replicas", "ISR",
      { label: "Log start", num: true }, { label: "Local start", num: true }, { label: "Tiered start", num: true },
      { label: "Log end", num: true }, { label: "High watermark", num: true },
      { label: "Local bytes", num: true }, { label: "Tiered bytes", num: true },
      { label: "Dirty ratio", num: true }, { label: "Compacted away", num: true }, "Offsets from"],
      t.partitions.map(p => el("tr", {},
        num(p.partition),
        el("td", { class: p.leader === null ? "bad" : null }, p.leader ?? "none"),
        el("td", {}, p.replicas.join(", ")),
        el("td", {}, p.isr.join(", ")),
        num(p.log_start), num(p.local_log_start), num(p.tiered_start), num(p.log_end), num(p.high_watermark),
        el("td", { class: "num" }, p.local_bytes === null ? "–" : bytes(p.local_bytes)),
        el("td", { class: "num" }, bytes(p.tiered_bytes)),
        // compacted topics only: the cleaner's figures on the leader
        el("td", { class: "num" }, p.cleaner ? p.cleaner.dirty_ratio.toFixed(2) : "–"),
        el("td", { class: "num" }, p.cleaner
          ? `${bytes(p.cleaner.bytes_removed)} (${p.cleaner.records_removed} records, ${p.cleaner.runs} runs)`
          : "–"),
        el("td", { class: "muted" }, p.offsets_from)))),
    el("h2", {}, "Records"),
    records,
    el("h2", {}, "Configs"),
    table(["Name", "Value", "Default", "Source"],
      t.configs.map(c => el("tr", {},
        el("td", { class: "mono" }, c.name),
        el("td", { class: "mono" }, c.value),
        el("td", { class: "mono muted" }, c.default),
        el("td", {}, c.source === "topic" ? el("span", { class: "tag" }, "set on topic") : el("span", { class: "muted" }, "default"))))),
    el("h2", {}, "Danger zone"),
    del);
  recordBrowser(t.name, t.partitions.length, records);
}

async function groups(show) {
  const list = await api("GET", "/v1/groups");
  show(
    el("h1", {}, "Consumer groups"),
    table(["Group", "State", "Protocol type"],
      list.map(g => el("tr", {},
        el("td", {}, el("a", { href: `#/groups/${enc(g.group_id)}` }, g.group_id)),
        el("td", {}, g.state),
        el("td", {}, g.protocol_type || "–")))));
}

// Lag of a group's partitions over time: the total and up to six partitions.
function lagChart(id) {
  const list = samples.groups.get(id) || [];
  const parts = [...new Set(list.flatMap(s => Object.keys(s.lag)))].sort().slice(0, 6);
  return lineChart("Lag over time", [
    { label: "total", points: list.map(s => [s.t, s.total]) },
    ...parts.map(k => ({ label: k, points: list.map(s => [s.t, s.lag[k] ?? null]) })),
  ], count);
}

function sampleGroup(id, g, t) {
  if (!samples.groups.has(id)) samples.groups.set(id, []);
  const lag = {};
  for (const o of g.offsets) if (o.lag !== null && o.lag !== undefined) lag[`${o.topic}/${o.partition}`] = o.lag;
  keep(samples.groups.get(id), { t, total: g.total_lag, lag });
}

async function group(show, id) {
  const g = await api("GET", `/v1/groups/${enc(id)}`);
  sampleGroup(id, g, Date.now());
  const chart = el("div", { class: "charts" }, lagChart(id));
  let totalLag = card("Total lag", g.total_lag.toLocaleString());
  show(
    el("h1", {}, `Group ${g.group_id}`),
    el("div", { class: "cards" },
      card("State", g.state),
      card("Members", g.members.length),
      totalLag,
      card("Coordinator", g.coordinator),
      card("Assignor", g.protocol || "–")),
    el("h2", {}, "Members"),
    table(["Member", "Client", "Host", "Assignment"],
      g.members.map(m => el("tr", {},
        el("td", { class: "mono" }, m.member_id),
        el("td", {}, m.client_id),
        el("td", { class: "mono" }, m.client_host),
        el("td", {}, m.assignment === null ? el("span", { class: "muted" }, "not a consumer-protocol assignment")
          : m.assignment.map(a => el("div", {}, `${a.topic}: ${a.partitions.join(", ")}`)))))),
    el("h2", {}, "Committed offsets"),
    table(["Topic", { label: "Partition", num: true }, { label: "Committed", num: true },
      { label: "High watermark", num: true }, { label: "Lag", num: true }, "Metadata"],
      g.offsets.map(o => el("tr", {},
        el("td", {}, el("a", { href: `#/topics/${enc(o.topic)}` }, o.topic)),
        num(o.partition), num(o.committed_offset), num(o.high_watermark), num(o.lag),
        el("td", { class: "mono muted" }, o.metadata)))),
    el("h2", {}, "Lag"),
    chart);
  return async t => {
    const now = await api("GET", `/v1/groups/${enc(id)}`);
    sampleGroup(id, now, t);
    totalLag.replaceWith(totalLag = card("Total lag", now.total_lag.toLocaleString()));
    chart.replaceChildren(lagChart(id));
  };
}

async function tiering(show) {
  let t;
  try { t = await api("GET", "/v1/tiering"); }
  catch (e) {
    if (e.code === "tiering_disabled") { show(el("h1", {}, "Tiering"), el("p", { class: "muted" }, "This agent has no tiered storage.")); return; }
    throw e;
  }
  if (!samples.tiering.length) keep(samples.tiering, { t: Date.now(), v: t });
  const charts = el("div", { class: "charts" });
  show(
    el("h1", {}, "Tiering"),
    charts,
    el("div", { class: "cards" },
      card("Uploaded segments", t.uploaded_segments.toLocaleString()),
      card("Uploaded", bytes(t.uploaded_bytes)),
      card("Objects written", t.uploaded_objects.toLocaleString()),
      card("Objects deleted", t.deleted_objects.toLocaleString()),
      card("Upload lag", `${t.upload_lag_seconds.toFixed(1)} s`),
      card("Lag in offsets", t.upload_lag_offsets.toLocaleString()),
      card("Waiting", `${t.pending_segments} segments, ${bytes(t.pending_bytes)}`),
      card("In flight", t.uploads_in_flight),
      card("Upload failures", t.upload_failures)),
    el("h2", {}, "Local disk"),
    el("div", { class: "cards" },
      card("Partition data", bytes(t.local_bytes)),
      card("Limit", t.local_disk_limit === null ? "none" : bytes(t.local_disk_limit))),
    el("h2", {}, "Cold reads"),
    el("div", { class: "cards" },
      card("Cache hit ratio", `${(t.cache.hit_ratio * 100).toFixed(1)} %`),
      card("Cold reads", t.cold_reads.toLocaleString()),
      card("Read from object storage", bytes(t.cache.get_bytes)),
      card("Served", bytes(t.cache.bytes_served)),
      card("Errors", t.cold_read_errors + t.cache.get_errors)));
  const live = () => charts.replaceChildren(
    lineChart("Upload lag", [
      { label: "oldest waiting segment", points: samples.tiering.map(s => [s.t, s.v.upload_lag_seconds]) },
    ], seconds),
    lineChart("Waiting for upload", [
      { label: "sealed, not uploaded", points: samples.tiering.map(s => [s.t, s.v.pending_bytes]) },
    ], bytes));
  live();
  return live;
}

// --- schemas ---------------------------------------------------------------

// The schema registry's API as the HTTP listener serves it (the same
// origin as the console), under /schema-registry.

// Avro and JSON schemas one key per line, Protobuf as it is.
function pretty(schema) {
  try { return JSON.stringify(JSON.parse(schema), null, 2); } catch (_) { return schema; }
}

// A line diff (longest common subsequence): [[" "|"-"|"+", line], ...].
function diffLines(a, b) {
  const x = a.split("\n"), y = b.split("\n");
  const n = x.length, m = y.length;
  const lcs = Array.from({ length: n + 1 }, () => new Array(m + 1).fill(0));
  for (let i = n - 1; i >= 0; i--)
    for (let j = m - 1; j >= 0; j--)
      lcs[i][j] = x[i] === y[j] ? lcs[i + 1][j + 1] + 1 : Math.max(lcs[i + 1][j], lcs[i][j + 1]);
  const out = [];
  let i = 0, j = 0;
  while (i < n && j < m) {
    if (x[i] === y[j]) { out.push([" ", x[i]]); i++; j++; }
    else if (lcs[i + 1][j] >= lcs[i][j + 1]) out.push(["-", x[i++]]);
    else out.push(["+", y[j++]]);
  }
  while (i < n) out.push(["-", x[i++]]);
  while (j < m) out.push(["+", y[j++]]);
  return out;
}

function diffView(a, b) {
  return el("pre", { class: "diff mono" }, diffLines(a, b).map(([op, line]) =>
    el("div", { class: op === "+" ? "added" : op === "-" ? "removed" : null }, `${op} ${line}`)));
}

async function schemas(show) {
  const list = await api("GET", `/schema-registry/schemas?latestOnly=true`);
  const level = await api("GET", `/schema-registry/config`);
  show(
    el("h1", {}, "Schemas"),
    el("p", { class: "muted" }, `Default compatibility level: ${level.compatibilityLevel}`),
    table(["Subject", { label: "Latest version", num: true }, { label: "Id", num: true }, "Type"],
      list.map(s => el("tr", {},
        el("td", {}, el("a", { href: `#/schemas/${enc(s.subject)}` }, s.subject)),
        num(s.version), num(s.id), el("td", {}, s.schemaType || "AVRO")))));
}

async function subject(show, name, from, to) {
  const versions = await api("GET", `/schema-registry/subjects/${enc(name)}/versions`);
  const level = await api("GET", `/schema-registry/config/${enc(name)}?defaultToGlobal=true`);
  const latest = versions[versions.length - 1];
  const shownTo = Number(to) || latest;
  const shownFrom = Number(from) || (versions.length > 1 ? versions[versions.length - 2] : shownTo);
  const [a, b] = await Promise.all([shownFrom, shownTo].map(v =>
    api("GET", `/schema-registry/subjects/${enc(name)}/versions/${v}`)));
  const picker = (label, value, other, first) => el("label", {}, `${label} `,
    el("select", {
      onchange: e => {
        const [f, t] = first ? [e.target.value, other] : [other, e.target.value];
        location.hash = `#/schemas/${enc(name)}/${f}/${t}`;
      },
    }, versions.map(v => el("option", { value: v, selected: v === value ? "" : null }, `version ${v}`))));
  show(
    el("h1", {}, `Subject ${name}`),
    el("div", { class: "cards" },
      card("Versions", versions.length),
      card("Latest id", b.id),
      card("Type", b.schemaType || "AVRO"),
      card("Compatibility", level.compatibilityLevel)),
    el("h2", {}, "Versions"),
    table([{ label: "Version", num: true }, "Show"], versions.map(v => el("tr", {}, num(v),
      el("td", {}, el("a", { href: `#/schemas/${enc(name)}/${v}/${v}` }, "schema"))))),
    el("h2", {}, shownFrom === shownTo ? `Version ${shownTo} (id ${b.id})` : `Changes from version ${shownFrom} to ${shownTo}`),
    el("div", { class: "diff-pick" }, picker("from", shownFrom, shownTo, true), picker("to", shownTo, shownFrom, false)),
    shownFrom === shownTo ? el("pre", { class: "mono" }, pretty(b.schema)) : diffView(pretty(a.schema), pretty(b.schema)),
    (b.references || []).length ? el("p", { class: "muted" }, `References: ${b.references.map(r => `${r.name} = ${r.subject} v${r.version}`).join(", ")}`) : null);
}

// --- connectors ------------------------------------------------------------

// Kafka Connect's API as the HTTP listener serves it (the same origin as
// the console), under /connect; absent when the agent runs no Connect engine.

function stateCell(state) {
  return el("td", { class: state === "FAILED" ? "bad" : state === "RUNNING" ? "good" : null }, state);
}

async function connectors(show) {
  let all;
  try {
    all = await api("GET", "/connect/connectors?expand=status&expand=info");
  } catch (e) {
    show(el("h1", {}, "Connectors"), el("p", { class: "muted" },
      "This agent runs no Connect engine (--connect-addr off, or its address was taken)."));
    return;
  }
  const names = Object.keys(all).sort();
  show(
    el("h1", {}, "Connectors"),
    names.length === 0 ? el("p", { class: "muted" }, "No connectors: create one with POST /connectors (docs/connect.md).") :
      table(["Connector", "Type", "Class", "State", { label: "Tasks running", num: true }, "Worker"],
        names.map(n => {
          const st = all[n].status, info = all[n].info;
          const running = st.tasks.filter(t => t.state === "RUNNING").length;
          return el("tr", {},
            el("td", {}, el("a", { href: `#/connectors/${enc(n)}` }, n)),
            el("td", {}, st.type),
            el("td", { class: "mono" }, info.config["connector.class"]),
            stateCell(st.connector.state),
            num(`${running}/${st.tasks.length}`),
            el("td", { class: "mono" }, st.connector.worker_id));
        })));
}

async function connector(show, name) {
  const [st, config] = await Promise.all([
    api("GET", `/connect/connectors/${enc(name)}/status`),
    api("GET", `/connect/connectors/${enc(name)}/config`)]);
  const act = (label, change) => el("button", {
    onclick: async () => {
      try { await change(); setTimeout(route, 500); } catch (e) { show(errorBox(e)); }
    },
  }, label);
  show(
    el("h1", {}, `Connector ${name}`),
    el("div", { class: "cards" },
      card("State", st.connector.state),
      card("Type", st.type),
      card("Tasks", st.tasks.length),
      card("Worker", st.connector.worker_id)),
    el("div", { class: "actions" },
      act("Pause", () => api("PUT", `/connect/connectors/${enc(name)}/pause`)),
      act("Resume", () => api("PUT", `/connect/connectors/${enc(name)}/resume`)),
      act("Restart failed tasks",
        () => api("POST", `/connect/connectors/${enc(name)}/restart?includeTasks=true&onlyFailed=true`))),
    el("h2", {}, "Tasks"),
    table([{ label: "Task", num: true }, "State", "Worker", "Trace"], st.tasks.map(t => el("tr", {},
      num(t.id), stateCell(t.state), el("td", { class: "mono" }, t.worker_id),
      el("td", { class: "mono" }, t.trace ? t.trace.split("\n")[0] : "")))),
    el("h2", {}, "Config"),
    table(["Key", "Value"], Object.keys(config).sort().map(k => el("tr", {},
      el("td", { class: "mono" }, k), el("td", { class: "mono" }, config[k])))));
}

// --- pipelines ---------------------------------------------------------
//
// A stream processor's live view (docs/processor.md): the broker does not
// know its processors, so the reader gives the address a pipeline's
// `live.listen` serves (kept in the URL and in localStorage) and the page
// reads that processor's WebSocket directly. Each message is a window's
// row, `final: false` while the window is still open (early results):
// the table keeps the newest window of each key and the chart the first
// numeric aggregate per key, both updated in place until the row is final.

const PIPELINE_ADDRESS = "aerostream.pipeline.address";
const PIPELINE_KEYS = 7; // the chart's colours
let pipelineSocket = null;

function closePipeline() {
  if (pipelineSocket) {
    pipelineSocket.onclose = null;
    pipelineSocket.close();
    pipelineSocket = null;
  }
}

function clock(ms) {
  return typeof ms === "number" ? new Date(ms).toISOString().replace("T", " ").replace("Z", "") : "–";
}

async function pipelines(show, address) {
  let stored = null;
  try { stored = localStorage.getItem(PIPELINE_ADDRESS); } catch (e) { /* storage may be off */ }
  address = (address || stored || "").trim();
  const input = el("input", { class: "wide", name: "address", value: address, placeholder: "127.0.0.1:9095" });
  const form = el("form", {
    class: "inline",
    onsubmit: (e) => {
      e.preventDefault();
      const a = input.value.trim();
      if (a) location.hash = `#/pipelines/${enc(a)}`;
    },
  }, el("label", {}, "Processor live view (live.listen)", input), el("button", { type: "submit" }, "Connect"));
  const title = el("h1", {}, "Pipelines");
  if (!address) {
    show(title, el("p", { class: "muted" },
      "Give the address a pipeline's live view listens on (live: {listen: ...}, docs/processor.md); ",
      "the page reads its windows from there."), form);
    return;
  }
  try { localStorage.setItem(PIPELINE_ADDRESS, address); } catch (e) { /* storage may be off */ }
  const status = el("p", { class: "muted", id: "pipeline-status" }, `connecting to ${address}…`);
  const chartBox = el("div", { class: "charts" });
  const tableBox = el("div", {});
  show(title, form, status, chartBox, tableBox);

  let columns = [], measure = null, finals = 0, early = 0, redrawing = false;
  const latest = new Map(); // key -> the row of its newest window
  const series = new Map(); // key -> [[window_end, value, window_start], ...]
  const redraw = () => {
    redrawing = false;
    const keys = [...latest.keys()].sort();
    tableBox.replaceChildren(table(
      ["Key", "Window start", "Window end", ...columns.map(c => ({ label: c, num: true })), "State"],
      keys.map(k => {
        const r = latest.get(k);
        return el("tr", { class: r.final === false ? "early" : null, "data-key": k },
          el("td", { class: "mono" }, k), el("td", { class: "mono" }, clock(r.window_start)),
          el("td", { class: "mono" }, clock(r.window_end)), columns.map(c => num(r[c])),
          el("td", {}, el("span", { class: r.final === false ? "tag" : "tag good" }, r.final === false ? "early" : "final")));
      })));
    if (measure) {
      const shown = [...series.keys()].sort().slice(0, PIPELINE_KEYS);
      const time = t => new Date(t).toISOString().slice(11, 19);
      chartBox.replaceChildren(lineChart(`${measure} per window`,
        shown.map(k => ({ label: k, points: series.get(k).map(p => [p[0], p[1]]) })),
        v => Number(v.toPrecision(4)).toLocaleString(), (t0, t1) => [time(t0), time(t1)]));
    }
    status.textContent = `${address}: ${finals} windows closed, ${early} early results` +
      (series.size > PIPELINE_KEYS ? `; charting the first ${PIPELINE_KEYS} of ${series.size} keys` : "");
  };
  const later = () => { if (!redrawing) { redrawing = true; setTimeout(redraw, 200); } };

  closePipeline();
  const ws = new WebSocket(`${location.protocol === "https:" ? "wss" : "ws"}://${address}/ws`);
  pipelineSocket = ws;
  ws.onmessage = (e) => {
    let m;
    try { m = JSON.parse(e.data); } catch (err) { return; }
    if (m.pipeline) {
      columns = m.aggregates || [];
      title.textContent = `Pipeline ${m.pipeline} (${m.window} windows${m.early_ms ? `, early results every ${m.early_ms} ms` : ""})`;
      later();
      return;
    }
    if (m.lagged) { status.textContent = `missed ${m.lagged} rows (this page was too slow)`; return; }
    if (typeof m.key !== "string") return;
    if (m.final === false) early += 1; else finals += 1;
    const had = latest.get(m.key);
    if (!had || m.window_start >= had.window_start) latest.set(m.key, m);
    measure = measure || columns.find(c => typeof m[c] === "number") || null;
    if (measure && typeof m[measure] === "number") {
      const s = series.get(m.key) || [];
      const at = s.findIndex(p => p[2] === m.window_start);
      const point = [m.window_end, m[measure], m.window_start];
      if (at >= 0) s[at] = point; else { s.push(point); s.sort((a, b) => a[0] - b[0]); if (s.length > 300) s.shift(); }
      series.set(m.key, s);
    }
    later();
  };
  ws.onclose = () => {
    if (pipelineSocket === ws) status.textContent = `${address}: disconnected (is the processor running with live.listen there?)`;
  };
}

// --- routing -------------------------------------------------------------

// Pages render themselves through the `show` they are given, and may
// return a function that redraws their live parts after each sample. A
// page still loading when the reader moves on draws nothing: its `show`
// is for its own visit only.
let routed = 0;
async function route() {
  livePage = null;
  closePipeline();
  const mine = ++routed;
  const draw = (...nodes) => { if (mine === routed) show(...nodes); };
  const parts = location.hash.replace(/^#\/?/, "").split("/").map(decodeURIComponent);
  try {
    let live;
    if (parts[0] === "topics" && parts[1]) live = await topic(draw, parts[1]);
    else if (parts[0] === "topics") live = await topics(draw);
    else if (parts[0] === "groups" && parts[1]) live = await group(draw, parts[1]);
    else if (parts[0] === "groups") live = await groups(draw);
    else if (parts[0] === "tiering") live = await tiering(draw);
    else if (parts[0] === "schemas" && parts[1]) live = await subject(draw, parts[1], parts[2], parts[3]);
    else if (parts[0] === "schemas") live = await schemas(draw);
    else if (parts[0] === "connectors" && parts[1]) live = await connector(draw, parts[1]);
    else if (parts[0] === "connectors") live = await connectors(draw);
    else if (parts[0] === "pipelines") live = await pipelines(draw, parts[1]);
    else live = await overview(draw);
    if (mine === routed) {
      livePage = live || null;
      statusLine.textContent = `updated ${new Date().toLocaleTimeString()}`;
    }
  } catch (e) {
    draw(errorBox(e));
  }
}

window.addEventListener("hashchange", route);
route();
setTimeout(sampleTick, SAMPLE_MS);
