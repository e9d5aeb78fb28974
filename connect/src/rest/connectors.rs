//! Creating, reading, changing and deleting connectors.
//!
//! A config is validated by its plugin and split into task configs here,
//! on the agent that was asked; the metastore stores both at once
//! (`ConnectCommand::Put`), so every worker sees a connector with its
//! tasks, never one without.

use std::collections::BTreeMap;

use axum::extract::State;
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use metastore::connect::{ConnectCommand, ConnectOutput, Connector, TargetState};
use serde::Deserialize;
use serde_json::Value;

use super::entities::{self, ConnectorInfo};
use super::{empty, ApiError, Body, Params, QueryParams, Rest};
use crate::config::{Config, Problem};
use crate::plugins::{self, Plugin};

/// The body of `POST /connectors`.
#[derive(Debug, Deserialize)]
pub(super) struct CreateRequest {
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    config: Option<BTreeMap<String, Value>>,
    /// KIP-980: `RUNNING` (the default), `PAUSED` or `STOPPED`.
    #[serde(default)]
    initial_state: Option<String>,
}

/// A config value as Connect's JSON mapper takes it: strings, and numbers
/// and booleans as their text (`"tasks.max": 1`); `None` for null.
fn text(key: &str, value: &Value) -> Result<Option<String>, ApiError> {
    match value {
        Value::String(s) => Ok(Some(s.clone())),
        Value::Number(n) => Ok(Some(n.to_string())),
        Value::Bool(b) => Ok(Some(b.to_string())),
        Value::Null => Ok(None),
        Value::Array(_) | Value::Object(_) => Err(ApiError::bad_request(format!(
            "Cannot deserialize the request body: the value of {key} must be a string"
        ))),
    }
}

/// A config from JSON, null values left out.
pub(super) fn config_of(raw: BTreeMap<String, Value>) -> Result<Config, ApiError> {
    let mut config = Config::new();
    for (key, value) in raw {
        if let Some(v) = text(&key, &value)? {
            config.insert(key, v);
        }
    }
    Ok(config)
}

/// A config as Java prints a map (`{a=b, c=d}`), for Connect's messages.
fn java_map(config: &Config) -> String {
    let items: Vec<String> = config.iter().map(|(k, v)| format!("{k}={v}")).collect();
    format!("{{{}}}", items.join(", "))
}

/// The plugin `config` names, or Connect's refusal.
pub(super) fn plugin_of(config: &Config) -> Result<(Plugin, &str), ApiError> {
    let Some(class) = config.get("connector.class") else {
        return Err(ApiError::bad_request(format!(
            "Connector config {} contains no connector type",
            java_map(config)
        )));
    };
    Plugin::find(class)
        .map(|p| (p, class.as_str()))
        .ok_or_else(|| unknown_class(class))
}

/// An unknown class, answered as Connect does: with what is available.
fn unknown_class(class: &str) -> ApiError {
    let available: Vec<String> = plugins::ALL
        .iter()
        .map(|p| {
            format!(
                "{} (alias {}, {}, version {})",
                p.class(),
                p.alias(),
                p.kind().as_str(),
                plugins::VERSION
            )
        })
        .collect();
    ApiError::bad_request(format!(
        "Failed to find any class that implements Connector and which name matches {class}, \
         available connectors are: {}",
        available.join(", ")
    ))
}

/// Connect's refusal of an invalid config: every problem, one a line.
pub(super) fn invalid_config(problems: &[Problem]) -> ApiError {
    let mut message = format!(
        "Connector configuration is invalid and contains the following {} error(s):",
        problems.len()
    );
    for (_, m) in problems {
        message.push('\n');
        message.push_str(m);
    }
    message.push_str(
        "\nYou can also find the above list of errors at the endpoint \
         `/connector-plugins/{connectorType}/config/validate`",
    );
    ApiError::bad_request(message)
}

/// Puts `name` into `config`, or refuses a `name` that differs.
fn put_name(name: &str, config: &mut Config) -> Result<(), ApiError> {
    match config.get("name") {
        Some(given) if given != name => Err(ApiError::bad_request(format!(
            "Connector name configuration ({given}) doesn't match connector name in the URL ({name})"
        ))),
        Some(_) => Ok(()),
        None => {
            config.insert("name".into(), name.to_owned());
            Ok(())
        }
    }
}

/// One connector as the metastore holds it on this replica.
pub(super) fn read(rest: &Rest, name: &str) -> Result<Connector, ApiError> {
    rest.meta
        .read(|s| s.connect().connector(name).cloned())
        .ok_or_else(|| ApiError::connector_not_found(name))
}

/// Validates `config`, splits it into tasks and stores both; whether it
/// was created, and the connector as it now is.
async fn put(
    rest: &Rest,
    name: &str,
    config: Config,
    create_only: bool,
    initial: TargetState,
) -> Result<(bool, ConnectorInfo), ApiError> {
    let (plugin, _) = plugin_of(&config)?;
    let here = rest.agent_problems(plugin, &config);
    let tasks = match plugin.task_configs(&config) {
        Ok(tasks) if here.is_empty() => tasks,
        Ok(_) => return Err(invalid_config(&here)),
        Err(mut problems) => {
            problems.extend(here);
            return Err(invalid_config(&problems));
        }
    };
    let out = rest
        .meta
        .connect_command(ConnectCommand::Put {
            name: name.to_owned(),
            config: config.clone(),
            tasks: tasks.clone(),
            create_only,
            initial,
        })
        .await?;
    let created = matches!(out, ConnectOutput::Put { created: true });
    // read back (the write is applied on this replica): a STOPPED
    // connector shows no tasks; deleted meanwhile, it shows what was put
    let info = match read(rest, name) {
        Ok(c) => entities::info(name, &c),
        Err(_) => ConnectorInfo {
            name: name.to_owned(),
            kind: entities::kind_of(&config),
            tasks: (0..u32::try_from(tasks.len()).unwrap_or(u32::MAX))
                .map(|task| entities::TaskId {
                    connector: name.to_owned(),
                    task,
                })
                .collect(),
            config,
        },
    };
    Ok((created, info))
}

/// `/connectors/{name}`, its characters outside URL-safe ones escaped.
fn location(name: &str) -> String {
    let mut out = String::from("/connectors/");
    for b in name.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

fn created(info: ConnectorInfo) -> Response {
    let loc = location(&info.name);
    (StatusCode::CREATED, [(header::LOCATION, loc)], Json(info)).into_response()
}

/// `GET /connectors`: the names, or with `?expand=status` and/or
/// `?expand=info` a map of name to what was asked.
pub(super) async fn list(State(rest): State<Rest>, query: QueryParams) -> Response {
    let expand: Vec<&str> = query.all("expand").collect();
    if expand.is_empty() {
        let names: Vec<String> = rest.meta.read(|s| {
            s.connect()
                .connectors()
                .map(|(n, _)| n.to_owned())
                .collect()
        });
        return Json(names).into_response();
    }
    let worker = rest.info.worker_id.as_str();
    let agents: Vec<metastore::AgentInfo> = rest.meta.read(|s| s.agents().cloned().collect());
    let gone = entities::gone_workers(&agents);
    let out: BTreeMap<String, BTreeMap<&str, Value>> = rest.meta.read(|s| {
        s.connect()
            .connectors()
            .map(|(name, c)| {
                let mut shown = BTreeMap::new();
                for e in &expand {
                    // unknown expansions are ignored, as in Connect
                    let v = match *e {
                        "status" => serde_json::to_value(
                            entities::status(name, c, worker).unassign_gone(&gone),
                        ),
                        "info" => serde_json::to_value(entities::info(name, c)),
                        _ => continue,
                    };
                    if let Ok(v) = v {
                        shown.insert(*e, v);
                    }
                }
                (name.to_owned(), shown)
            })
            .collect()
    });
    Json(out).into_response()
}

/// `POST /connectors`: 201 with the new connector, 409 when the name is
/// taken.
pub(super) async fn create(
    State(rest): State<Rest>,
    Body(req): Body<CreateRequest>,
) -> Result<Response, ApiError> {
    let Some(raw) = req.config else {
        return Err(ApiError::bad_request(
            "The request has no connector config (config)",
        ));
    };
    let mut config = config_of(raw)?;
    let name = match req.name.as_deref().map(str::trim) {
        Some(n) => n.to_owned(),
        // a name given only in the config is taken from there
        None => config
            .get("name")
            .map(|n| n.trim().to_owned())
            .unwrap_or_default(),
    };
    if name.is_empty() {
        return Err(ApiError::bad_request(
            "A connector name must be given (name)",
        ));
    }
    put_name(&name, &mut config)?;
    let initial = match req.initial_state.as_deref().map(str::to_ascii_uppercase) {
        None => TargetState::Running,
        Some(s) if s == "RUNNING" => TargetState::Running,
        Some(s) if s == "PAUSED" => TargetState::Paused,
        Some(s) if s == "STOPPED" => TargetState::Stopped,
        Some(s) => {
            return Err(ApiError::bad_request(format!(
                "Invalid initial state {s}: RUNNING, PAUSED or STOPPED"
            )))
        }
    };
    let (_, info) = put(&rest, &name, config, true, initial).await?;
    Ok(created(info))
}

/// `GET /connectors/{name}`.
pub(super) async fn info(
    State(rest): State<Rest>,
    Params(name): Params<String>,
) -> Result<Json<ConnectorInfo>, ApiError> {
    read(&rest, &name).map(|c| Json(entities::info(&name, &c)))
}

/// `GET /connectors/{name}/config`.
pub(super) async fn config(
    State(rest): State<Rest>,
    Params(name): Params<String>,
) -> Result<Json<Config>, ApiError> {
    read(&rest, &name).map(|c| Json(c.config))
}

/// `PUT /connectors/{name}/config`: 201 when it creates the connector,
/// 200 when it replaces its config.
pub(super) async fn put_config(
    State(rest): State<Rest>,
    Params(name): Params<String>,
    Body(raw): Body<BTreeMap<String, Value>>,
) -> Result<Response, ApiError> {
    let mut config = config_of(raw)?;
    put_name(&name, &mut config)?;
    let (was_created, info) = put(&rest, &name, config, false, TargetState::Running).await?;
    Ok(if was_created {
        created(info)
    } else {
        Json(info).into_response()
    })
}

/// `PATCH /connectors/{name}/config` (KIP-477): the keys given replace
/// theirs, null removes a key; 200 with the connector.
pub(super) async fn patch_config(
    State(rest): State<Rest>,
    Params(name): Params<String>,
    Body(raw): Body<BTreeMap<String, Value>>,
) -> Result<Json<ConnectorInfo>, ApiError> {
    let mut config = read(&rest, &name)?.config;
    for (key, value) in raw {
        match text(&key, &value)? {
            Some(v) => config.insert(key, v),
            None => config.remove(&key),
        };
    }
    put_name(&name, &mut config)?;
    let (_, info) = put(&rest, &name, config, false, TargetState::Running).await?;
    Ok(Json(info))
}

/// `DELETE /connectors/{name}`: 204.
pub(super) async fn delete(
    State(rest): State<Rest>,
    Params(name): Params<String>,
) -> Result<Response, ApiError> {
    rest.meta
        .connect_command(ConnectCommand::Delete { name })
        .await?;
    Ok(empty(StatusCode::NO_CONTENT))
}

#[cfg(test)]
#[path = "connectors_tests.rs"]
mod tests;
