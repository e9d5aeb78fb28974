//! `aerostream connect list|status|create|pause|resume|stop|restart|delete`:
//! the Connect engine (Kafka Connect's REST API, docs/connect.md) from the
//! command line, over HTTP to any agent's Connect listener.

use anyhow::{bail, Context};
use serde::Serialize;
use serde_json::{json, Map, Value};

use super::http::{self, segment};
use super::key_value;
use super::output::{print_json, print_text, Format, Table};

#[derive(clap::Args)]
pub struct ConnectArgs {
    /// An agent's Connect listener, host:port or http://host:port.
    #[arg(
        long,
        env = "AEROSTREAM_CONNECT",
        default_value = "127.0.0.1:8083",
        global = true
    )]
    connect: String,
    /// `table` for people, `json` for scripts.
    #[arg(long, value_enum, default_value = "table", global = true)]
    output: Format,
    #[command(subcommand)]
    command: ConnectCommand,
}

#[derive(clap::Subcommand)]
enum ConnectCommand {
    /// Every connector with its type, state and tasks.
    List,
    /// A connector's state and each task's, with the worker running it and
    /// why a task failed.
    Status { name: String },
    /// Creates a connector from a JSON file of its config (a flat object,
    /// or Connect's `{"name", "config"}`) and/or KEY=VALUE settings.
    Create {
        name: String,
        /// A JSON file of the config (`-` for standard input).
        #[arg(long)]
        file: Option<String>,
        /// A config KEY=VALUE (repeatable; wins over the file).
        #[arg(long = "set", value_parser = key_value)]
        settings: Vec<(String, String)>,
    },
    /// Pauses a connector's tasks.
    Pause { name: String },
    /// Resumes a paused or stopped connector.
    Resume { name: String },
    /// Stops a connector's tasks (their configs are kept; offsets may then
    /// be changed).
    Stop { name: String },
    /// Restarts a connector, and its tasks with --include-tasks.
    Restart {
        name: String,
        #[arg(long)]
        include_tasks: bool,
        /// Only what failed.
        #[arg(long)]
        only_failed: bool,
    },
    /// Deletes a connector.
    Delete { name: String },
}

struct Connect {
    addr: String,
}

impl Connect {
    /// The JSON answer (`null` for an empty one), or Connect's error as
    /// one line.
    async fn call(&self, method: &str, path: &str, body: Option<&Value>) -> anyhow::Result<Value> {
        http::json_call(
            "the Connect engine",
            &self.addr,
            method,
            path,
            body,
            "application/json",
            None,
        )
        .await
    }
}

#[derive(Serialize)]
struct Listed {
    name: String,
    kind: String,
    state: String,
    tasks_running: usize,
    tasks: usize,
    worker: String,
}

fn listed(name: &str, status: &Value) -> Listed {
    let tasks = status["tasks"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default();
    Listed {
        name: name.to_owned(),
        kind: status["type"].as_str().unwrap_or_default().to_owned(),
        state: status["connector"]["state"]
            .as_str()
            .unwrap_or_default()
            .to_owned(),
        tasks_running: tasks.iter().filter(|t| t["state"] == "RUNNING").count(),
        tasks: tasks.len(),
        worker: status["connector"]["worker_id"]
            .as_str()
            .unwrap_or_default()
            .to_owned(),
    }
}

fn read_config(file: Option<&str>, name: &str) -> anyhow::Result<Map<String, Value>> {
    let Some(file) = file else {
        return Ok(Map::new());
    };
    let text = if file == "-" {
        let mut s = String::new();
        std::io::Read::read_to_string(&mut std::io::stdin(), &mut s)
            .context("read the config from standard input")?;
        s
    } else {
        std::fs::read_to_string(file).with_context(|| format!("read the config from {file}"))?
    };
    let value: Value =
        serde_json::from_str(&text).with_context(|| format!("{file} is not JSON"))?;
    // Connect's own request shape, or a flat config
    let config = match value.get("config") {
        Some(c) => c.clone(),
        None => value,
    };
    let Value::Object(mut map) = config else {
        bail!("{file}: the config is a JSON object of KEY: VALUE");
    };
    map.insert("name".into(), Value::String(name.to_owned()));
    Ok(map)
}

pub async fn run(args: ConnectArgs) -> anyhow::Result<()> {
    let connect = Connect {
        addr: http::address(&args.connect, "--connect")?.to_owned(),
    };
    let out = args.output;
    let action = |verb: &str, name: &str| format!("/connectors/{}/{verb}", segment(name));
    match args.command {
        ConnectCommand::List => {
            let all = connect
                .call("GET", "/connectors?expand=status", None)
                .await?;
            let mut rows: Vec<Listed> = all
                .as_object()
                .map(|m| m.iter().map(|(n, v)| listed(n, &v["status"])).collect())
                .unwrap_or_default();
            rows.sort_by(|a, b| a.name.cmp(&b.name));
            match out {
                Format::Json => print_json(&rows)?,
                Format::Table => {
                    let mut t = Table::new(&["NAME", "TYPE", "STATE", "TASKS RUNNING", "WORKER"]);
                    for r in &rows {
                        t.row(vec![
                            r.name.clone(),
                            r.kind.clone(),
                            r.state.clone(),
                            format!("{}/{}", r.tasks_running, r.tasks),
                            r.worker.clone(),
                        ]);
                    }
                    t.print();
                }
            }
        }
        ConnectCommand::Status { name } => {
            let s = connect.call("GET", &action("status", &name), None).await?;
            match out {
                Format::Json => print_json(&s)?,
                Format::Table => {
                    let l = listed(&name, &s);
                    print_text(&format!(
                        "connector: {} ({})\nstate: {} on {}\n",
                        l.name, l.kind, l.state, l.worker
                    ));
                    let mut t = Table::new(&["TASK", "STATE", "WORKER", "TRACE"]);
                    for task in s["tasks"].as_array().map(Vec::as_slice).unwrap_or_default() {
                        t.row(vec![
                            task["id"].to_string(),
                            task["state"].as_str().unwrap_or_default().to_owned(),
                            task["worker_id"].as_str().unwrap_or_default().to_owned(),
                            task["trace"]
                                .as_str()
                                .and_then(|t| t.lines().next())
                                .unwrap_or_default()
                                .to_owned(),
                        ]);
                    }
                    t.print();
                }
            }
        }
        ConnectCommand::Create {
            name,
            file,
            settings,
        } => {
            let mut config = read_config(file.as_deref(), &name)?;
            for (k, v) in settings {
                config.insert(k, Value::String(v));
            }
            config.insert("name".into(), Value::String(name.clone()));
            if !config.contains_key("connector.class") {
                bail!("the config has no connector.class (DatagenSource, ObjectStoreSink, ...)");
            }
            let created = connect
                .call(
                    "POST",
                    "/connectors",
                    Some(&json!({ "name": name, "config": config })),
                )
                .await?;
            match out {
                Format::Json => print_json(&created)?,
                Format::Table => print_text(&format!(
                    "created {} connector {name} with {} task(s)",
                    created["type"].as_str().unwrap_or_default(),
                    created["tasks"].as_array().map_or(0, Vec::len)
                )),
            }
        }
        ConnectCommand::Pause { name } => {
            connect.call("PUT", &action("pause", &name), None).await?;
            print_text(&format!("pausing {name}"));
        }
        ConnectCommand::Resume { name } => {
            connect.call("PUT", &action("resume", &name), None).await?;
            print_text(&format!("resuming {name}"));
        }
        ConnectCommand::Stop { name } => {
            connect.call("PUT", &action("stop", &name), None).await?;
            print_text(&format!("stopping {name}"));
        }
        ConnectCommand::Restart {
            name,
            include_tasks,
            only_failed,
        } => {
            let path = format!(
                "{}?includeTasks={include_tasks}&onlyFailed={only_failed}",
                action("restart", &name)
            );
            connect.call("POST", &path, None).await?;
            print_text(&format!("restarting {name}"));
        }
        ConnectCommand::Delete { name } => {
            connect
                .call("DELETE", &format!("/connectors/{}", segment(&name)), None)
                .await?;
            print_text(&format!("deleted {name}"));
        }
    }
    Ok(())
}
