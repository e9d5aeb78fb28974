//! Who sent an HTTP request, and what the ACLs let them do there.
//!
//! The login middleware (`auth.rs`) puts a [`Caller`] on every request it
//! lets through; handlers take it as an extractor and ask the same
//! authorizer with the same operations the Kafka handlers for the same
//! action ask ([`Broker::may`]): a REST reader is never shown more than a
//! Kafka client with the same principal could read. With security off
//! every answer is yes.
//!
//! A refusal names the operation and the resource the request itself
//! named, and comes before any lookup, so it reads the same whether the
//! topic or group exists or not.

use std::sync::Arc;

use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use axum::http::StatusCode;
use metastore::acl::{AclOperation, ResourceType};
use security::authz::{Requester, CLUSTER_RESOURCE};

use crate::broker::Broker;
use crate::rest::ApiError;

/// The principal a request proved (or `User:ANONYMOUS`) and its address.
#[derive(Debug, Clone)]
pub struct Caller {
    principal: Arc<str>,
    /// The client's IP address in canonical form (IPv4 for an IPv4-mapped
    /// IPv6 address), as ACL hosts name it.
    host: String,
}

impl Caller {
    pub(crate) fn new(principal: impl Into<Arc<str>>, host: String) -> Caller {
        Caller {
            principal: principal.into(),
            host,
        }
    }

    pub fn principal(&self) -> &str {
        &self.principal
    }

    /// Whether the ACLs let the caller perform `operation` on the resource.
    pub fn may(
        &self,
        b: &Broker,
        operation: AclOperation,
        resource_type: ResourceType,
        name: &str,
    ) -> bool {
        b.may(
            Requester::new(&self.principal, &self.host),
            operation,
            resource_type,
            name,
        )
    }

    /// [`Self::may`] on the cluster resource.
    pub fn may_on_cluster(&self, b: &Broker, operation: AclOperation) -> bool {
        self.may(b, operation, ResourceType::Cluster, CLUSTER_RESOURCE)
    }

    /// `Ok` when [`Self::may`], else 403 `forbidden`.
    pub fn require(
        &self,
        b: &Broker,
        operation: AclOperation,
        resource_type: ResourceType,
        name: &str,
    ) -> Result<(), ApiError> {
        if self.may(b, operation, resource_type, name) {
            return Ok(());
        }
        let what = match resource_type {
            ResourceType::Cluster => "the cluster".to_string(),
            other => format!("{} '{name}'", other.name().to_lowercase()),
        };
        Err(self.forbidden(format!("{operation} on {what}")))
    }

    /// [`Self::require`] on the cluster resource.
    pub fn require_on_cluster(&self, b: &Broker, operation: AclOperation) -> Result<(), ApiError> {
        self.require(b, operation, ResourceType::Cluster, CLUSTER_RESOURCE)
    }

    /// 403 `forbidden`: the caller lacks `needed` (an operation on a resource).
    pub fn forbidden(&self, needed: String) -> ApiError {
        ApiError::new(
            StatusCode::FORBIDDEN,
            "forbidden",
            format!(
                "{} needs {needed} (an ACL) or to be a superuser",
                self.principal
            ),
        )
    }
}

impl<S: Send + Sync> FromRequestParts<S> for Caller {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, Self::Rejection> {
        // the login middleware runs before every route: no caller means the
        // request did not pass it, and nothing is answered
        parts.extensions.get::<Caller>().cloned().ok_or_else(|| {
            ApiError::new(
                StatusCode::INTERNAL_SERVER_ERROR,
                "internal",
                "the request passed no login check",
            )
        })
    }
}
