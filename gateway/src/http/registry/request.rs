//! What the registry's endpoints read from a request: query flags as any
//! client spells them, and a JSON body, refused in the registry's terms.

use axum::body::Bytes;
use axum::extract::Query;
use serde::Deserialize;

use super::RegistryError;
use metastore::registry::code;

/// Query parameters; booleans as any client spells them (`true`, `True`).
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Query_ {
    deleted: Option<String>,
    permanent: Option<String>,
    verbose: Option<String>,
    default_to_global: Option<String>,
    pub(super) subject_prefix: Option<String>,
    pub(super) format: Option<String>,
    latest_only: Option<String>,
}

#[derive(Debug, Default)]
pub(super) struct Flags {
    pub(super) deleted: bool,
    pub(super) permanent: bool,
    pub(super) verbose: bool,
    pub(super) default_to_global: bool,
    pub(super) subject_prefix: Option<String>,
    /// `serialized`: a Protobuf schema as the base64 of its
    /// FileDescriptorProto, as Confluent's Protobuf deserializers ask.
    pub(super) format: Option<String>,
    pub(super) latest_only: bool,
}

fn truthy(v: Option<&str>) -> bool {
    v.is_some_and(|v| v.eq_ignore_ascii_case("true") || v == "1")
}

impl<S: Send + Sync> axum::extract::FromRequestParts<S> for Flags {
    type Rejection = RegistryError;

    async fn from_request_parts(
        parts: &mut axum::http::request::Parts,
        state: &S,
    ) -> Result<Self, Self::Rejection> {
        let Query(q) = Query::<Query_>::from_request_parts(parts, state)
            .await
            .map_err(|e| RegistryError::new(400, format!("bad query parameters: {e}")))?;
        Ok(Flags {
            deleted: truthy(q.deleted.as_deref()),
            permanent: truthy(q.permanent.as_deref()),
            verbose: truthy(q.verbose.as_deref()),
            default_to_global: truthy(q.default_to_global.as_deref()),
            subject_prefix: q.subject_prefix,
            format: q.format,
            latest_only: truthy(q.latest_only.as_deref()),
        })
    }
}

pub(super) fn body<T: for<'de> Deserialize<'de>>(bytes: &Bytes) -> Result<T, RegistryError> {
    serde_json::from_slice(bytes).map_err(|e| {
        RegistryError::new(400, format!("the request body is not what it must be: {e}"))
    })
}

pub(super) fn subject_not_found(subject: &str) -> RegistryError {
    RegistryError::new(
        code::SUBJECT_NOT_FOUND,
        format!("Subject '{subject}' not found."),
    )
}
