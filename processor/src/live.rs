//! The live view: `live: {listen: "127.0.0.1:9095"}` serves each window's
//! row the moment it closes, for dashboards, and the processor's metrics.
//!
//! - `GET /ws`: a WebSocket; the first message describes the pipeline
//!   (`{"pipeline", "window", "aggregates", "early_ms"}`), then every
//!   closed window is one text message, the JSON object the topic sink
//!   writes plus `"final": true`. With `window.early`, the figures so far
//!   of each open window that changed come every that much processing time
//!   with `"final": false`; a window's final row replaces its early ones
//!   (same `key` and `window_start`). A client too slow to keep up is told
//!   how many rows it missed (`{"lagged": n}`) and goes on from the newest;
//!   the processor never waits for a client. Any origin may connect (the
//!   broker's console does, from its own address).
//! - `GET /recent`: the last closed rows (up to 1,000), then the newest
//!   early row of each window still open (up to 1,000), as a JSON array.
//! - `GET /metrics`: the counters in the Prometheus text format
//!   ([`crate::metrics`]).
//! - `GET /`: a page charting the first numeric aggregate per key.
//!
//! Rows are sent when their window closes, before the checkpoint that makes
//! them durable: after a crash the windows written again are sent again.
//! Early rows go to the live view only, never to a sink or a checkpoint.

use std::collections::{BTreeMap, VecDeque};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::Context;
use axum::extract::ws::{Message, WebSocket, WebSocketUpgrade};
use axum::extract::State;
use axum::response::{Html, IntoResponse};
use axum::routing::get;
use axum::{Json, Router};
use tokio::sync::broadcast;

use crate::metrics::Metrics;
use crate::pipeline::{Pipeline, WindowKind};
use crate::sink::{json, Plan};
use crate::window::{WindowRow, Windows};

/// Rows a client may fall behind by before it is told it lagged.
const BACKLOG: usize = 4_096;
/// Rows `/recent` keeps.
const RECENT: usize = 1_000;

#[derive(Clone)]
struct Shared {
    rows: broadcast::Sender<Arc<str>>,
    recent: Arc<Mutex<Recent>>,
    hello: Arc<str>,
    metrics: Arc<Metrics>,
}

/// What `/recent` answers.
#[derive(Default)]
struct Recent {
    closed: VecDeque<serde_json::Value>,
    /// (key, window start) -> the newest early row of a window still open
    early: BTreeMap<(String, i64), serde_json::Value>,
}

impl Recent {
    /// Keeps closed rows; their windows' early rows go (a session's also
    /// under the starts of the sessions merged into it).
    fn closed(&mut self, rows: &[WindowRow], values: Vec<serde_json::Value>, sessions: bool) {
        for (row, v) in rows.iter().zip(values) {
            if sessions {
                let first = (row.key.clone(), row.start);
                let after = (row.key.clone(), row.end);
                let gone: Vec<_> = self
                    .early
                    .range(first..after)
                    .map(|(k, _)| k.clone())
                    .collect();
                for k in gone {
                    self.early.remove(&k);
                }
            } else {
                self.early.remove(&(row.key.clone(), row.start));
            }
            if self.closed.len() == RECENT {
                self.closed.pop_front();
            }
            self.closed.push_back(v);
        }
    }

    /// Keeps the newest early row of each window.
    fn early(&mut self, rows: &[WindowRow], values: Vec<serde_json::Value>) {
        for (row, v) in rows.iter().zip(values) {
            self.early.insert((row.key.clone(), row.start), v);
        }
        while self.early.len() > RECENT {
            self.early.pop_first();
        }
    }

    /// Closed rows, oldest first, then early ones.
    fn rows(&self) -> Vec<serde_json::Value> {
        self.closed
            .iter()
            .chain(self.early.values())
            .cloned()
            .collect()
    }
}

/// The live view's server, fed with closed windows and early results.
pub struct Live {
    shared: Shared,
    plan: Plan,
    pipeline: Pipeline,
    /// Where it listens (the port chosen when the file said 0).
    pub addr: SocketAddr,
    /// The counters `/metrics` shows; the loop updates them.
    pub metrics: Arc<Metrics>,
}

impl Live {
    /// Listens on `listen` and serves until the process ends.
    pub async fn start(pipeline: &Pipeline, listen: &str) -> anyhow::Result<Live> {
        let listener = tokio::net::TcpListener::bind(listen)
            .await
            .with_context(|| format!("cannot listen for the live view on {listen}"))?;
        let addr = listener.local_addr()?;
        let (rows, _) = broadcast::channel(BACKLOG);
        let hello = serde_json::json!({
            "pipeline": pipeline.name,
            "window": pipeline.window.kind.name(),
            "aggregates": pipeline.aggregates.iter().map(|a| a.name.clone()).collect::<Vec<_>>(),
            "early_ms": pipeline.window.early.map(|d| d.as_millis() as u64),
        })
        .to_string();
        let metrics = Arc::new(Metrics::new(&pipeline.name));
        let shared = Shared {
            rows,
            recent: Arc::new(Mutex::new(Recent::default())),
            hello: Arc::from(hello),
            metrics: metrics.clone(),
        };
        let app = Router::new()
            .route("/", get(page))
            .route("/ws", get(upgrade))
            .route("/recent", get(recent))
            .route("/metrics", get(metrics_text))
            .with_state(shared.clone());
        tokio::spawn(async move {
            if let Err(e) = axum::serve(listener, app).await {
                tracing::warn!("the live view stopped: {e}");
            }
        });
        tracing::info!(
            %addr,
            "serving the live view: GET / (a chart), /ws (WebSocket), /recent, /metrics"
        );
        Ok(Live {
            shared,
            plan: Plan::new(pipeline),
            pipeline: pipeline.clone(),
            addr,
            metrics,
        })
    }

    /// Sends closed windows to every client, without waiting for any.
    pub fn publish(&self, rows: &[WindowRow]) {
        let values = self.send(rows, true);
        if values.is_empty() {
            return;
        }
        let sessions = self.pipeline.window.kind == WindowKind::Session;
        if let Ok(mut recent) = self.shared.recent.lock() {
            recent.closed(rows, values, sessions);
        }
    }

    /// When early results are due (`window.early`; `next_early` is the
    /// loop's own timer, each loop feeding the view keeps one), sends the
    /// figures so far of the open windows that changed since the last ones.
    pub fn publish_early(
        &self,
        windows: &mut Windows,
        next_early: &mut Option<Instant>,
        now: Instant,
    ) {
        let every = self.pipeline.window.early;
        let (Some(due), Some(every)) = (*next_early, every) else {
            return;
        };
        if now < due {
            return;
        }
        *next_early = Some(now + every.max(Duration::from_millis(1)));
        let rows = windows.early();
        let values = self.send(&rows, false);
        self.metrics.early_sent(values.len());
        if let Ok(mut recent) = self.shared.recent.lock() {
            recent.early(&rows, values);
        }
    }

    /// The rows as JSON marked final or not, sent to every client.
    fn send(&self, rows: &[WindowRow], final_: bool) -> Vec<serde_json::Value> {
        let values: Vec<serde_json::Value> = rows
            .iter()
            .map(|r| {
                let mut v = json(&self.pipeline, &self.plan, r);
                if let Some(o) = v.as_object_mut() {
                    o.insert(crate::pipeline::FINAL.into(), final_.into());
                }
                v
            })
            .collect();
        if self.shared.rows.receiver_count() > 0 {
            for v in &values {
                // (an error only means every client left meanwhile)
                let _ = self.shared.rows.send(Arc::from(v.to_string()));
            }
        }
        values
    }
}

async fn upgrade(ws: WebSocketUpgrade, State(shared): State<Shared>) -> impl IntoResponse {
    ws.on_upgrade(move |socket| client(socket, shared))
}

/// One WebSocket client: the hello, then every row until it leaves.
async fn client(mut socket: WebSocket, shared: Shared) {
    let mut rows = shared.rows.subscribe();
    if socket
        .send(Message::Text(shared.hello.to_string().into()))
        .await
        .is_err()
    {
        return;
    }
    loop {
        let out = tokio::select! {
            row = rows.recv() => match row {
                Ok(text) => text.to_string(),
                Err(broadcast::error::RecvError::Lagged(n)) => {
                    serde_json::json!({"lagged": n}).to_string()
                }
                Err(broadcast::error::RecvError::Closed) => return,
            },
            incoming = socket.recv() => match incoming {
                Some(Ok(Message::Close(_))) | Some(Err(_)) | None => return,
                // pings are answered by the library; anything else is ignored
                Some(Ok(_)) => continue,
            },
        };
        if socket.send(Message::Text(out.into())).await.is_err() {
            return;
        }
    }
}

async fn recent(State(shared): State<Shared>) -> Json<Vec<serde_json::Value>> {
    let rows = shared.recent.lock().map(|r| r.rows()).unwrap_or_default();
    Json(rows)
}

async fn metrics_text(State(shared): State<Shared>) -> impl IntoResponse {
    (
        [(
            axum::http::header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        shared.metrics.render(),
    )
}

async fn page() -> Html<&'static str> {
    Html(PAGE)
}

/// The chart: one line per key (the 12 busiest) of the first numeric
/// aggregate over window ends, and the newest rows, from `/ws`; an early
/// row updates its window's point and table row in place (in italics until
/// the window closes).
const PAGE: &str = r##"<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>AeroStream live view</title><link rel="icon" href="data:,">
<style>
body{font:14px system-ui,sans-serif;margin:1.5em;color:#1d2430}
h1{font-size:1.2em} #status{color:#5a6475} canvas{border:1px solid #d7dce4;width:100%;max-width:960px}
table{border-collapse:collapse;margin-top:1em} td,th{padding:2px 8px;border-bottom:1px solid #eef0f4;text-align:right}
tr.early{font-style:italic;color:#5a6475}
</style></head><body>
<h1 id="title">AeroStream live view</h1>
<div id="status">connecting…</div>
<canvas id="chart" width="960" height="360"></canvas>
<table id="rows"><thead></thead><tbody></tbody></table>
<script>
const series = new Map(), shown = new Map(); let columns = []; let measure = null; let received = 0, early = 0;
const palette = ["#2f6fde","#d1495b","#00798c","#edae49","#66a182","#8d6cab","#c05f2b","#3d405b","#81b29a","#e07a5f","#5c946e","#a05195"];
function draw() {
  const c = document.getElementById("chart"), g = c.getContext("2d");
  g.clearRect(0, 0, c.width, c.height);
  const keys = [...series.keys()].sort((a, b) => series.get(b).length - series.get(a).length).slice(0, 12);
  const points = keys.flatMap(k => series.get(k));
  if (!points.length) return;
  const xs = points.map(p => p[0]), ys = points.map(p => p[1]);
  const x0 = Math.min(...xs), x1 = Math.max(...xs) || x0 + 1, y0 = Math.min(...ys), y1 = Math.max(...ys);
  const sx = x => 40 + (x - x0) / Math.max(1, x1 - x0) * (c.width - 60);
  const sy = y => c.height - 20 - (y - y0) / Math.max(1e-9, y1 - y0) * (c.height - 40);
  g.fillStyle = "#5a6475"; g.fillText(y1.toPrecision(6), 2, 14); g.fillText(y0.toPrecision(6), 2, c.height - 22);
  keys.forEach((k, i) => {
    g.strokeStyle = palette[i % palette.length]; g.beginPath();
    series.get(k).forEach((p, j) => j ? g.lineTo(sx(p[0]), sy(p[1])) : g.moveTo(sx(p[0]), sy(p[1])));
    g.stroke(); g.fillStyle = g.strokeStyle; g.fillText(k, c.width - 120, 16 + 14 * i);
  });
}
// a window's row, updated in place while it is early
function row(r) {
  const body = document.querySelector("#rows tbody"), id = r.key + "\u0000" + r.window_start;
  let tr = shown.get(id);
  if (!tr) {
    tr = document.createElement("tr"); tr.dataset.id = id; body.prepend(tr); shown.set(id, tr);
    while (body.rows.length > 20) { shown.delete(body.rows[body.rows.length - 1].dataset.id); body.deleteRow(-1); }
  }
  tr.replaceChildren(); tr.className = r.final === false ? "early" : "";
  for (const col of ["key", "window_start", "window_end", ...columns]) {
    const td = document.createElement("td"); td.textContent = r[col] === null ? "" : r[col]; tr.appendChild(td);
  }
  const td = document.createElement("td"); td.textContent = r.final === false ? "early" : "final"; tr.appendChild(td);
}
const ws = new WebSocket((location.protocol === "https:" ? "wss://" : "ws://") + location.host + "/ws");
ws.onmessage = e => {
  const m = JSON.parse(e.data);
  if (m.pipeline) {
    columns = m.aggregates; document.getElementById("title").textContent = "AeroStream live view: " + m.pipeline + " (" + m.window + " windows)";
    const head = document.querySelector("#rows thead"); head.innerHTML = "";
    const tr = document.createElement("tr");
    for (const col of ["key", "window_start", "window_end", ...columns, "state"]) { const th = document.createElement("th"); th.textContent = col; tr.appendChild(th); }
    head.appendChild(tr); return;
  }
  if (m.lagged) { document.getElementById("status").textContent = "missed " + m.lagged + " rows (too slow)"; return; }
  if (m.final === false) early++; else received++;
  measure = measure || columns.find(col => typeof m[col] === "number");
  if (measure && typeof m[measure] === "number") {
    const s = series.get(m.key) || [], at = s.findIndex(p => p[2] === m.window_start), point = [m.window_end, m[measure], m.window_start];
    if (at >= 0) s[at] = point; else { s.push(point); s.sort((a, b) => a[0] - b[0]); if (s.length > 300) s.shift(); }
    series.set(m.key, s);
  }
  row(m);
  document.getElementById("status").textContent = received + " windows received" + (early ? "; " + early + " early results" : "") + "; charting " + (measure || "nothing yet");
  draw();
};
ws.onclose = () => { document.getElementById("status").textContent = "disconnected"; };
</script></body></html>
"##;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::acc::{Layout, WindowAcc};

    fn rows(windows: &[(&str, i64, i64)]) -> (Vec<WindowRow>, Vec<serde_json::Value>) {
        let p = Pipeline::parse(
            r#"
name: t
source: {bootstrap: "b:9092", topic: t, format: json, event_time: ts, key: k}
window: {type: tumbling, size: 1s}
aggregates: [{op: count, as: n}]
sink: {type: parquet, url: "file:///tmp/x"}
"#,
        )
        .unwrap();
        let rows: Vec<WindowRow> = windows
            .iter()
            .map(|(key, start, end)| WindowRow {
                key: (*key).into(),
                start: *start,
                end: *end,
                acc: WindowAcc::empty(&Layout::new(&p)),
            })
            .collect();
        let values = rows
            .iter()
            .map(
                |r| serde_json::json!({"key": r.key, "window_start": r.start, "window_end": r.end}),
            )
            .collect();
        (rows, values)
    }

    fn shown(recent: &Recent) -> Vec<(String, i64, i64)> {
        recent
            .rows()
            .iter()
            .map(|v| {
                (
                    v["key"].as_str().unwrap().to_owned(),
                    v["window_start"].as_i64().unwrap(),
                    v["window_end"].as_i64().unwrap(),
                )
            })
            .collect()
    }

    #[test]
    fn recent_holds_one_early_row_per_open_window_until_its_final_row() {
        let mut recent = Recent::default();
        let (r, v) = rows(&[("a", 0, 1000), ("b", 0, 1000)]);
        recent.early(&r, v);
        let (r, v) = rows(&[("a", 0, 1000)]);
        recent.early(&r, v);
        assert_eq!(
            shown(&recent),
            vec![("a".into(), 0, 1000), ("b".into(), 0, 1000)],
            "a's newer early row replaced its older one"
        );
        let (r, v) = rows(&[("a", 0, 1000)]);
        recent.closed(&r, v, false);
        assert_eq!(
            shown(&recent),
            vec![("a".into(), 0, 1000), ("b".into(), 0, 1000)],
            "closed rows first, then the early rows still open"
        );
        assert_eq!(recent.early.len(), 1, "a's early row is gone");
    }

    #[test]
    fn a_closed_session_removes_the_early_rows_of_the_sessions_it_merged() {
        let mut recent = Recent::default();
        let (r, v) = rows(&[("a", 500, 1500), ("a", 100, 1100), ("a", 3000, 4000)]);
        recent.early(&r, v);
        let (r, v) = rows(&[("a", 100, 1500)]);
        recent.closed(&r, v, true);
        assert_eq!(
            shown(&recent),
            vec![("a".into(), 100, 1500), ("a".into(), 3000, 4000)]
        );
    }
}
