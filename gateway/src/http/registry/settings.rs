//! `/config` and `/mode`: compatibility levels and modes, global and per
//! subject. The two work alike, with their own names and codes ([`Kind`]).

use std::str::FromStr;

use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::response::Response;
use axum::routing::get;
use axum::Router;
use metastore::acl::AclOperation;
use metastore::registry::{code, RegistryCommand, Setting};
use registry::{Compatibility, Mode};
use serde_json::Value;

use super::request::{body, subject_not_found, Flags};
use super::{authz, json, Answer, RegistryError};
use crate::broker::Broker;
use crate::http::{Caller, HttpState};

/// One of the two settings, as the API names it.
struct Kind {
    setting: Setting,
    /// The field of a PUT's body and of its answer.
    put_field: &'static str,
    /// The field of a GET's answer.
    get_field: &'static str,
    /// A value the registry knows, spelled as it answers it.
    parse: fn(&str) -> Result<&'static str, RegistryError>,
    /// 40408 or 40409: the subject has no setting of its own.
    not_set: u32,
    what: &'static str,
}

const LEVEL: Kind = Kind {
    setting: Setting::Compatibility,
    put_field: "compatibility",
    get_field: "compatibilityLevel",
    parse: parse_level,
    not_set: 40408,
    what: "compatibility",
};

const MODE: Kind = Kind {
    setting: Setting::Mode,
    put_field: "mode",
    get_field: "mode",
    parse: parse_mode,
    not_set: 40409,
    what: "mode",
};

fn parse_level(text: &str) -> Result<&'static str, RegistryError> {
    Compatibility::from_str(text)
        .map(Compatibility::as_str)
        .map_err(|e| RegistryError::new(code::INVALID_COMPATIBILITY, e))
}

fn parse_mode(text: &str) -> Result<&'static str, RegistryError> {
    Mode::from_str(text)
        .map(Mode::as_str)
        .map_err(|e| RegistryError::new(code::INVALID_MODE, e))
}

/// `{field: value}`.
fn one(field: &str, value: &str) -> Value {
    let mut m = serde_json::Map::new();
    m.insert(field.to_owned(), Value::String(value.to_owned()));
    Value::Object(m)
}

pub fn routes(r: Router<HttpState>) -> Router<HttpState> {
    r.route("/config", global(&LEVEL))
        .route("/config/{subject}", subject(&LEVEL))
        .route("/mode", global(&MODE))
        .route("/mode/{subject}", subject(&MODE))
}

fn global(k: &'static Kind) -> axum::routing::MethodRouter<HttpState> {
    get(move |State(st): State<HttpState>| async move { get_global(k, &st.broker) })
        .put(
            move |State(st): State<HttpState>, caller: Caller, bytes: Bytes| async move {
                put(k, &st.broker, &caller, None, &bytes).await
            },
        )
        .delete(
            move |State(st): State<HttpState>, caller: Caller| async move {
                delete(k, &st.broker, &caller, None).await
            },
        )
}

fn subject(k: &'static Kind) -> axum::routing::MethodRouter<HttpState> {
    get(
        move |State(st): State<HttpState>, caller: Caller, Path(s): Path<String>, f: Flags| async move {
            get_subject(k, &st.broker, &caller, &s, &f)
        },
    )
    .put(
        move |State(st): State<HttpState>, caller: Caller, Path(s): Path<String>, bytes: Bytes| async move {
            put(k, &st.broker, &caller, Some(s), &bytes).await
        },
    )
    .delete(
        move |State(st): State<HttpState>, caller: Caller, Path(s): Path<String>| async move {
            delete(k, &st.broker, &caller, Some(s)).await
        },
    )
}

/// Global settings need ALTER_CONFIGS on the cluster, a subject's on its topic.
fn may_change(b: &Broker, caller: &Caller, subject: Option<&str>) -> Result<(), RegistryError> {
    match subject {
        Some(s) => authz::require(b, caller, AclOperation::AlterConfigs, s),
        None => authz::require_on_cluster(b, caller, AclOperation::AlterConfigs),
    }
}

async fn set(
    b: &Broker,
    k: &Kind,
    subject: Option<String>,
    value: Option<&str>,
) -> Result<(), RegistryError> {
    let value = value.map(str::to_owned);
    let command = match k.setting {
        Setting::Compatibility => RegistryCommand::SetCompatibility {
            subject,
            level: value,
        },
        Setting::Mode => RegistryCommand::SetMode {
            subject,
            mode: value,
        },
    };
    b.node.catalog.registry_command(command).await?;
    Ok(())
}

fn get_global(k: &Kind, b: &Broker) -> Response {
    let v = b
        .node
        .catalog
        .read(|s| s.registry().setting(k.setting, None).to_owned());
    json(&one(k.get_field, &v))
}

fn get_subject(k: &Kind, b: &Broker, caller: &Caller, subject: &str, f: &Flags) -> Answer {
    authz::require(b, caller, AclOperation::Describe, subject)?;
    let (own, effective) = b.node.catalog.read(|s| {
        let reg = s.registry();
        (
            reg.own_setting(k.setting, Some(subject)).map(str::to_owned),
            reg.setting(k.setting, Some(subject)).to_owned(),
        )
    });
    match (own, f.default_to_global) {
        (Some(v), _) => Ok(json(&one(k.get_field, &v))),
        (None, true) => Ok(json(&one(k.get_field, &effective))),
        (None, false) => Err(RegistryError::new(
            k.not_set,
            format!(
                "Subject '{subject}' does not have subject-level {} configured",
                k.what
            ),
        )),
    }
}

async fn put(
    k: &Kind,
    b: &Broker,
    caller: &Caller,
    subject: Option<String>,
    bytes: &Bytes,
) -> Answer {
    may_change(b, caller, subject.as_deref())?;
    let req: Value = body(bytes)?;
    let Some(text) = req.get(k.put_field).and_then(Value::as_str) else {
        return Err(RegistryError::new(
            400,
            format!("the body must be {{\"{}\": ...}}", k.put_field),
        ));
    };
    let v = (k.parse)(text)?;
    set(b, k, subject, Some(v)).await?;
    Ok(json(&one(k.put_field, v)))
}

/// Clears a setting; answers what it was.
async fn delete(k: &Kind, b: &Broker, caller: &Caller, subject: Option<String>) -> Answer {
    may_change(b, caller, subject.as_deref())?;
    let (own, effective) = b.node.catalog.read(|s| {
        let reg = s.registry();
        (
            reg.own_setting(k.setting, subject.as_deref())
                .map(str::to_owned),
            reg.setting(k.setting, subject.as_deref()).to_owned(),
        )
    });
    let before = match (&subject, own) {
        (Some(s), None) => return Err(subject_not_found(s)),
        (_, Some(v)) => v,
        (None, None) => effective,
    };
    set(b, k, subject, None).await?;
    Ok(json(&one(k.get_field, &before)))
}
