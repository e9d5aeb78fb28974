//! `/config` and `/mode`: compatibility levels and modes, global and per
//! subject.

use std::str::FromStr;

use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::response::Response;
use axum::routing::get;
use axum::Router;
use metastore::acl::AclOperation;
use metastore::registry::{code, RegistryCommand};
use registry::{Compatibility, Mode};
use serde::Deserialize;
use serde_json::json as value;

use super::request::{body, subject_not_found, Flags};
use super::{authz, json, Answer, RegistryError};
use crate::broker::Broker;
use crate::http::{Caller, HttpState};

pub fn routes(r: Router<HttpState>) -> Router<HttpState> {
    r.route(
        "/config",
        get(get_global_config)
            .put(put_global_config)
            .delete(delete_global_config),
    )
    .route(
        "/config/{subject}",
        get(get_config).put(put_config).delete(delete_config),
    )
    .route("/mode", get(get_global_mode).put(put_global_mode))
    .route(
        "/mode/{subject}",
        get(get_mode).put(put_mode).delete(delete_mode),
    )
}

#[derive(Deserialize)]
struct ConfigBody {
    compatibility: String,
}

#[derive(Deserialize)]
struct ModeBody {
    mode: String,
}

fn parse_level(text: &str) -> Result<Compatibility, RegistryError> {
    Compatibility::from_str(text).map_err(|e| RegistryError::new(code::INVALID_COMPATIBILITY, e))
}

fn parse_mode(text: &str) -> Result<Mode, RegistryError> {
    Mode::from_str(text).map_err(|e| RegistryError::new(code::INVALID_MODE, e))
}

async fn set_level(
    b: &Broker,
    subject: Option<String>,
    level: Option<Compatibility>,
) -> Result<(), RegistryError> {
    b.node
        .catalog
        .registry_command(RegistryCommand::SetCompatibility {
            subject,
            level: level.map(|l| l.as_str().to_owned()),
        })
        .await?;
    Ok(())
}

async fn set_mode(
    b: &Broker,
    subject: Option<String>,
    mode: Option<Mode>,
) -> Result<(), RegistryError> {
    b.node
        .catalog
        .registry_command(RegistryCommand::SetMode {
            subject,
            mode: mode.map(|m| m.as_str().to_owned()),
        })
        .await?;
    Ok(())
}

async fn get_global_config(State(st): State<HttpState>) -> Response {
    let level = st
        .broker
        .node
        .catalog
        .read(|s| s.registry().compatibility(None).to_owned());
    json(&value!({ "compatibilityLevel": level }))
}

async fn put_global_config(State(st): State<HttpState>, caller: Caller, bytes: Bytes) -> Answer {
    let b = &st.broker;
    authz::require_on_cluster(b, &caller, AclOperation::AlterConfigs)?;
    let req: ConfigBody = body(&bytes)?;
    let level = parse_level(&req.compatibility)?;
    set_level(b, None, Some(level)).await?;
    Ok(json(&value!({ "compatibility": level.as_str() })))
}

async fn delete_global_config(State(st): State<HttpState>, caller: Caller) -> Answer {
    let b = &st.broker;
    authz::require_on_cluster(b, &caller, AclOperation::AlterConfigs)?;
    let before = b
        .node
        .catalog
        .read(|s| s.registry().compatibility(None).to_owned());
    set_level(b, None, None).await?;
    Ok(json(&value!({ "compatibilityLevel": before })))
}

async fn get_config(
    State(st): State<HttpState>,
    caller: Caller,
    Path(subject): Path<String>,
    f: Flags,
) -> Answer {
    let b = &st.broker;
    authz::require(b, &caller, AclOperation::Describe, &subject)?;
    let (own, effective) = b.node.catalog.read(|s| {
        let reg = s.registry();
        (
            reg.own_compatibility(Some(&subject)).map(str::to_owned),
            reg.compatibility(Some(&subject)).to_owned(),
        )
    });
    match (own, f.default_to_global) {
        (Some(level), _) => Ok(json(&value!({ "compatibilityLevel": level }))),
        (None, true) => Ok(json(&value!({ "compatibilityLevel": effective }))),
        (None, false) => Err(RegistryError::new(
            40408,
            format!("Subject '{subject}' does not have subject-level compatibility configured"),
        )),
    }
}

async fn put_config(
    State(st): State<HttpState>,
    caller: Caller,
    Path(subject): Path<String>,
    bytes: Bytes,
) -> Answer {
    let b = &st.broker;
    authz::require(b, &caller, AclOperation::AlterConfigs, &subject)?;
    let req: ConfigBody = body(&bytes)?;
    let level = parse_level(&req.compatibility)?;
    set_level(b, Some(subject), Some(level)).await?;
    Ok(json(&value!({ "compatibility": level.as_str() })))
}

async fn delete_config(
    State(st): State<HttpState>,
    caller: Caller,
    Path(subject): Path<String>,
) -> Answer {
    let b = &st.broker;
    authz::require(b, &caller, AclOperation::AlterConfigs, &subject)?;
    let Some(before) = b.node.catalog.read(|s| {
        s.registry()
            .own_compatibility(Some(&subject))
            .map(str::to_owned)
    }) else {
        return Err(subject_not_found(&subject));
    };
    set_level(b, Some(subject), None).await?;
    Ok(json(&value!({ "compatibilityLevel": before })))
}

async fn get_global_mode(State(st): State<HttpState>) -> Response {
    let mode = st
        .broker
        .node
        .catalog
        .read(|s| s.registry().mode(None).to_owned());
    json(&value!({ "mode": mode }))
}

async fn put_global_mode(State(st): State<HttpState>, caller: Caller, bytes: Bytes) -> Answer {
    let b = &st.broker;
    authz::require_on_cluster(b, &caller, AclOperation::AlterConfigs)?;
    let req: ModeBody = body(&bytes)?;
    let mode = parse_mode(&req.mode)?;
    set_mode(b, None, Some(mode)).await?;
    Ok(json(&value!({ "mode": mode.as_str() })))
}

async fn get_mode(
    State(st): State<HttpState>,
    caller: Caller,
    Path(subject): Path<String>,
    f: Flags,
) -> Answer {
    let b = &st.broker;
    authz::require(b, &caller, AclOperation::Describe, &subject)?;
    let (own, effective) = b.node.catalog.read(|s| {
        let reg = s.registry();
        (
            reg.own_mode(Some(&subject)).map(str::to_owned),
            reg.mode(Some(&subject)).to_owned(),
        )
    });
    match (own, f.default_to_global) {
        (Some(mode), _) => Ok(json(&value!({ "mode": mode }))),
        (None, true) => Ok(json(&value!({ "mode": effective }))),
        (None, false) => Err(RegistryError::new(
            40409,
            format!("Subject '{subject}' does not have subject-level mode configured"),
        )),
    }
}

async fn put_mode(
    State(st): State<HttpState>,
    caller: Caller,
    Path(subject): Path<String>,
    bytes: Bytes,
) -> Answer {
    let b = &st.broker;
    authz::require(b, &caller, AclOperation::AlterConfigs, &subject)?;
    let req: ModeBody = body(&bytes)?;
    let mode = parse_mode(&req.mode)?;
    set_mode(b, Some(subject), Some(mode)).await?;
    Ok(json(&value!({ "mode": mode.as_str() })))
}

async fn delete_mode(
    State(st): State<HttpState>,
    caller: Caller,
    Path(subject): Path<String>,
) -> Answer {
    let b = &st.broker;
    authz::require(b, &caller, AclOperation::AlterConfigs, &subject)?;
    let Some(before) = b
        .node
        .catalog
        .read(|s| s.registry().own_mode(Some(&subject)).map(str::to_owned))
    else {
        return Err(subject_not_found(&subject));
    };
    set_mode(b, Some(subject), None).await?;
    Ok(json(&value!({ "mode": before })))
}
