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

// --- pages ---------------------------------------------------------------

async function overview() {
  const c = await api("GET", "/v1/cluster");
  let tiering = null;
  try { tiering = await api("GET", "/v1/tiering"); } catch (e) { if (e.code !== "tiering_disabled") throw e; }
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
        num(a.leader_of), num(a.follower_of)))));
}

async function topics() {
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
  const load = async (partition, offset, limit) => {
    let q = `partition=${partition}&limit=${limit}`;
    if (offset !== "") q += `&offset=${offset}`;
    try {
      const page = await api("GET", `/v1/topics/${enc(name)}/records?${q}`);
      const next = el("button", { class: "secondary", type: "button", onclick: () => {
        form.elements.offset.value = page.next_offset;
        load(partition, page.next_offset, limit);
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
    load(f.partition.value, f.offset.value, f.limit.value);
  } },
    el("label", {}, "Partition", el("input", { name: "partition", type: "number", min: "0", max: String(partitions - 1), value: "0" })),
    el("label", {}, "From offset", el("input", { name: "offset", type: "number", min: "0", placeholder: "log start" })),
    el("label", {}, "Records", el("input", { name: "limit", type: "number", min: "1", max: "1000", value: "20" })),
    el("button", { type: "submit" }, "Browse"));
  into.append(form, out);
  load(0, "", 20);
}

async function topic(name) {
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
      { label: "Log end", num: true }, { label: "High watermark", num: true }, "Offsets from"],
      t.partitions.map(p => el("tr", {},
        num(p.partition),
        el("td", { class: p.leader === null ? "bad" : null }, p.leader ?? "none"),
        el("td", {}, p.replicas.join(", ")),
        el("td", {}, p.isr.join(", ")),
        num(p.log_start), num(p.local_log_start), num(p.tiered_start), num(p.log_end), num(p.high_watermark),
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

async function groups() {
  const list = await api("GET", "/v1/groups");
  show(
    el("h1", {}, "Consumer groups"),
    table(["Group", "State", "Protocol type"],
      list.map(g => el("tr", {},
        el("td", {}, el("a", { href: `#/groups/${enc(g.group_id)}` }, g.group_id)),
        el("td", {}, g.state),
        el("td", {}, g.protocol_type || "–")))));
}

async function group(id) {
  const g = await api("GET", `/v1/groups/${enc(id)}`);
  show(
    el("h1", {}, `Group ${g.group_id}`),
    el("div", { class: "cards" },
      card("State", g.state),
      card("Members", g.members.length),
      card("Total lag", g.total_lag.toLocaleString()),
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
        el("td", { class: "mono muted" }, o.metadata)))));
}

async function tiering() {
  let t;
  try { t = await api("GET", "/v1/tiering"); }
  catch (e) {
    if (e.code === "tiering_disabled") { show(el("h1", {}, "Tiering"), el("p", { class: "muted" }, "This agent has no tiered storage.")); return; }
    throw e;
  }
  show(
    el("h1", {}, "Tiering"),
    el("div", { class: "cards" },
      card("Uploaded segments", t.uploaded_segments.toLocaleString()),
      card("Uploaded", bytes(t.uploaded_bytes)),
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
}

// --- routing -------------------------------------------------------------

async function route() {
  const parts = location.hash.replace(/^#\/?/, "").split("/").map(decodeURIComponent);
  try {
    if (parts[0] === "topics" && parts[1]) await topic(parts[1]);
    else if (parts[0] === "topics") await topics();
    else if (parts[0] === "groups" && parts[1]) await group(parts[1]);
    else if (parts[0] === "groups") await groups();
    else if (parts[0] === "tiering") await tiering();
    else await overview();
    statusLine.textContent = `updated ${new Date().toLocaleTimeString()}`;
  } catch (e) {
    show(errorBox(e));
  }
}

window.addEventListener("hashchange", route);
route();
