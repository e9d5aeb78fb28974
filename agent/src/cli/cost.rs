//! `aerostream cost`: an agent's cost report (`GET /v1/cost`) as a table,
//! or several agents' summed when `--http` is given once per agent.
//!
//! Agents do not register their HTTP address in the metastore, so the
//! command cannot find every agent from one; it sums exactly the agents it
//! is given. Prices: the (first) agent's, then `--prices FILE`, then
//! `--price KEY=USD`; the estimate is recomputed here at those prices with
//! the same arithmetic the agent uses (`gateway::cost`).

use std::collections::BTreeMap;
use std::path::PathBuf;

use anyhow::{bail, Context};
use gateway::cost::{self, CostReport, Prices};

use super::http;
use super::output::{print_json, print_text, Format, Table};

#[derive(clap::Args)]
pub struct CostArgs {
    /// An agent's REST address (host:port of its `--http-addr`); give it
    /// once per agent to sum several.
    #[arg(long = "http", value_delimiter = ',', default_value = "127.0.0.1:9001")]
    agents: Vec<String>,
    /// USER:PASSWORD for the REST API's Basic login, when the cluster
    /// authenticates clients.
    #[arg(long, env = "AEROSTREAM_HTTP_AUTH")]
    basic_auth: Option<String>,
    /// A price to value the counts at, KEY=USD (repeatable): put_per_1000,
    /// get_per_1000, delete_per_1000, storage_per_gb_month,
    /// local_storage_per_gb_month, cross_zone_per_gb.
    #[arg(long = "price")]
    prices: Vec<String>,
    /// A TOML file of prices, `KEY = USD` per line (applied before `--price`).
    #[arg(long = "prices")]
    prices_file: Option<PathBuf>,
    /// `table` for people, `json` for scripts.
    #[arg(long, value_enum, default_value = "table")]
    output: Format,
    /// Same as `--output json`.
    #[arg(long)]
    json: bool,
}

/// The prices: `base`, then the file's, then the flags'.
fn prices(base: Prices, file: Option<&str>, flags: &[String]) -> anyhow::Result<Prices> {
    let mut prices = base;
    if let Some(text) = file {
        let table: BTreeMap<String, f64> =
            toml::from_str(text).context("the prices file must hold KEY = USD lines")?;
        for (k, v) in table {
            prices.set(&k, &v.to_string())?;
        }
    }
    prices.apply(flags)?;
    Ok(prices)
}

async fn fetch(agent: &str, auth: Option<&str>) -> anyhow::Result<CostReport> {
    let addr = http::address(agent, "--http")?;
    let (status, body) = http::request(addr, "GET", "/v1/cost", None, "", auth)
        .await
        .with_context(|| format!("ask {addr} for its cost report"))?;
    if status != 200 {
        bail!("the REST API at {addr} answered {status}: {}", body.trim());
    }
    serde_json::from_str(&body).with_context(|| format!("decode {addr}'s cost report"))
}

pub async fn run(a: CostArgs) -> anyhow::Result<()> {
    let file = match &a.prices_file {
        Some(path) => Some(
            std::fs::read_to_string(path)
                .with_context(|| format!("cannot read the prices file {}", path.display()))?,
        ),
        None => None,
    };
    let mut reports = Vec::with_capacity(a.agents.len());
    for agent in &a.agents {
        reports.push(fetch(agent, a.basic_auth.as_deref()).await?);
    }
    let Some(first) = reports.first() else {
        bail!("give at least one agent with --http");
    };
    let prices = prices(first.prices.clone(), file.as_deref(), &a.prices)?;
    let report = if reports.len() == 1 {
        first.clone().valued(prices)
    } else {
        cost::sum(&reports, prices)
    };
    if a.json || a.output == Format::Json {
        return print_json(&report);
    }
    print_text(&render(&report, reports.len()));
    Ok(())
}

fn rate(v: f64) -> String {
    if v >= 100.0 {
        format!("{v:.0}")
    } else {
        format!("{v:.2}")
    }
}

fn usd(v: f64) -> String {
    format!("{v:.2}")
}

/// The report as tables, one per part.
fn render(r: &CostReport, agents: usize) -> String {
    let mut out = String::new();
    let who = if agents > 1 {
        format!("{agents} agents summed")
    } else {
        match &r.rack {
            Some(rack) => format!("agent {} (rack {rack})", r.node_id),
            None => format!("agent {} (no rack)", r.node_id),
        }
    };
    out.push_str(&format!(
        "{who}: counts over {:.2} h since start\n\n",
        r.uptime_seconds / 3600.0
    ));
    let q = &r.object_store.requests;
    let hours = r.uptime_seconds / 3600.0;
    let per_hour = |n: u64| {
        if agents > 1 || hours <= 0.0 {
            // summed agents each have their own uptime: rates are in the totals below
            String::new()
        } else {
            rate(n as f64 / hours)
        }
    };
    let mut t = Table::new(&["OBJECT STORE", "COUNT", "PER HOUR"]);
    for (name, n) in [
        ("put", q.put),
        ("create_multipart", q.create_multipart),
        ("put_part", q.put_part),
        ("complete_multipart", q.complete_multipart),
        ("abort_multipart", q.abort_multipart),
        ("get", q.get),
        ("head", q.head),
        ("list", q.list),
        ("delete", q.delete),
        ("copy", q.copy),
        ("rename", q.rename),
        ("failed (of the above)", q.errors),
        ("bytes written", q.bytes_written),
        ("bytes read", q.bytes_read),
    ] {
        t.row(vec![name.to_string(), n.to_string(), per_hour(n)]);
    }
    let h = &r.per_hour;
    t.row(vec![
        "= PUT/COPY/POST/LIST rate".into(),
        r.object_store.put_class.to_string(),
        rate(h.put_class_requests),
    ]);
    t.row(vec![
        "= GET/HEAD rate".into(),
        r.object_store.get_class.to_string(),
        rate(h.get_class_requests),
    ]);
    out.push_str(&t.render());
    out.push('\n');
    let mut t = Table::new(&["STORAGE", "BYTES"]);
    t.row(vec!["local disk".into(), r.storage.local_bytes.to_string()]);
    t.row(vec![
        "object storage (whole cluster)".into(),
        r.storage.object_bytes.to_string(),
    ]);
    out.push_str(&t.render());
    out.push('\n');
    let z = &r.cross_zone;
    let mut t = Table::new(&["PEER", "RACK", "CROSS-ZONE", "SENT", "RECEIVED"]);
    for p in &z.peers {
        t.row(vec![
            p.agent.to_string(),
            p.rack.clone().unwrap_or_else(|| "-".into()),
            match p.cross_zone {
                Some(true) => "yes".into(),
                Some(false) => "no".into(),
                None => "unknown".into(),
            },
            p.sent().to_string(),
            p.received().to_string(),
        ]);
    }
    t.row(vec![
        "cross-zone total".into(),
        String::new(),
        String::new(),
        z.sent_bytes.to_string(),
        z.received_bytes.to_string(),
    ]);
    out.push_str(&t.render());
    let c = &z.clients;
    out.push_str(&format!(
        "Kafka clients: {} bytes sent to and {} received from clients in another zone (in the totals above), {} with clients in this agent's zone, {} with clients that named no zone (client.rack, or aerostream_az=ZONE in the client id)\n",
        c.cross_zone_sent_bytes, c.cross_zone_received_bytes, c.same_zone_bytes, c.unknown_zone_bytes
    ));
    if z.unknown_zone_bytes > 0 {
        out.push_str(&format!(
            "{} bytes went to or came from agents of unknown zone (set --rack on every agent): not in the estimate\n",
            z.unknown_zone_bytes
        ));
    }
    out.push('\n');
    let e = &r.monthly_estimate_usd;
    let mut t = Table::new(&["MONTHLY ESTIMATE (730 h)", "USD"]);
    for (line, v) in [
        ("PUT/COPY/POST/LIST requests", e.put_requests),
        ("GET/HEAD requests", e.get_requests),
        ("DELETE requests", e.delete_requests),
        ("object storage", e.object_storage),
        ("local storage", e.local_storage),
        ("cross-zone transfer", e.cross_zone_transfer),
        ("total", e.total),
    ] {
        t.row(vec![line.into(), usd(v)]);
    }
    out.push_str(&t.render());
    let p = &r.prices;
    out.push_str(&format!(
        "\nprices: PUT ${}/1000, GET ${}/1000, DELETE ${}/1000, storage ${}/GB-month, local ${}/GB-month, cross-zone ${}/GB each way\n({})\n",
        p.put_per_1000,
        p.get_per_1000,
        p.delete_per_1000,
        p.storage_per_gb_month,
        p.local_storage_per_gb_month,
        p.cross_zone_per_gb,
        p.source
    ));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_prices_file_applies_before_the_flags() {
        let p = prices(
            Prices::default(),
            Some("put_per_1000 = 0.004\nstorage_per_gb_month = 0.0125\n"),
            &["put_per_1000=0.006".to_string()],
        )
        .expect("valid");
        assert_eq!(p.put_per_1000, 0.006);
        assert_eq!(p.storage_per_gb_month, 0.0125);
        assert_eq!(p.get_per_1000, 0.0004);
        let err = prices(Prices::default(), Some("nope = 1\n"), &[]).expect_err("unknown");
        assert!(err.to_string().contains("unknown price"), "{err}");
        assert!(prices(Prices::default(), Some("put_per_1000 = \"x\"\n"), &[]).is_err());
    }

    #[test]
    fn the_table_states_the_prices_and_their_date() {
        let r = CostReport::default().valued(Prices::default());
        let text = render(&r, 1);
        assert!(text.contains("checked 2026-12"), "{text}");
        assert!(text.contains("MONTHLY ESTIMATE"), "{text}");
    }
}
