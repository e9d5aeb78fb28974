//! Authorization with Kafka's ACLs ([`metastore::acl`]), decided as Kafka's
//! `StandardAuthorizer` decides:
//!
//! 1. Authorization off (no client is authenticated): everything is allowed.
//! 2. A superuser is allowed everything.
//! 3. A DENY binding for the principal (or `User:*`), the client's host (or
//!    `*`) and the operation (or ALL) on a pattern covering the resource
//!    denies it.
//! 4. With no binding at all on the resource, the answer is
//!    [`AuthzConfig::allow_if_no_acl`] (`allow.everyone.if.no.acl.found`,
//!    false by default).
//! 5. Otherwise an ALLOW binding of an operation that implies the wanted one
//!    ([`AclOperation::implies`]) allows it; anything else is denied.
//!
//! `RequestContext::may` (in `kafka::api`) asks; the bindings are read
//! from the local metastore replica on every check,
//! so a CreateAcls or DeleteAcls takes effect for open connections as soon
//! as the replica applied it.

use metastore::acl::{AclBinding, AclOperation, AclPermission, ResourceType, WILDCARD};

pub use metastore::acl::CLUSTER_RESOURCE;

/// The principal of a connection that did not authenticate, as Kafka names it.
pub const ANONYMOUS: &str = "User:ANONYMOUS";

/// How requests are authorized.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AuthzConfig {
    /// Whether requests are checked against ACLs at all; on when the Kafka
    /// listener authenticates clients (SASL or mutual TLS).
    pub enabled: bool,
    /// Principals allowed everything (`User:admin`), Kafka's `super.users`.
    pub superusers: Vec<String>,
    /// Kafka's `allow.everyone.if.no.acl.found`.
    pub allow_if_no_acl: bool,
}

/// Who asks: the authenticated principal and the client's address.
#[derive(Debug, Clone, Copy)]
pub struct Requester<'a> {
    /// `User:alice`, or [`ANONYMOUS`].
    pub principal: &'a str,
    /// The client's IP address, as ACL hosts name it (no leading `/`).
    pub host: &'a str,
}

impl<'a> Requester<'a> {
    /// From a principal and a host as Kafka prints it (`/127.0.0.1`).
    pub fn new(principal: &'a str, host: &'a str) -> Self {
        Requester {
            principal,
            host: host.strip_prefix('/').unwrap_or(host),
        }
    }
}

fn applies(b: &AclBinding, who: Requester<'_>) -> bool {
    let principal = b.principal == who.principal
        || (b.principal == "User:*" && who.principal.starts_with("User:"));
    principal && (b.host == WILDCARD || b.host == who.host)
}

/// Decides one request for one resource against `bindings`, the ACLs
/// (every binding; those of other resources are skipped).
pub fn decide<'b>(
    config: &AuthzConfig,
    bindings: impl IntoIterator<Item = &'b AclBinding>,
    who: Requester<'_>,
    operation: AclOperation,
    resource_type: ResourceType,
    name: &str,
) -> bool {
    if !config.enabled || config.superusers.iter().any(|s| s == who.principal) {
        return true;
    }
    let mut any_on_resource = false;
    let mut allowed = false;
    for b in bindings
        .into_iter()
        .filter(|b| b.resource_type == resource_type && b.covers(name))
    {
        any_on_resource = true;
        if !applies(b, who) {
            continue;
        }
        match b.permission {
            AclPermission::Deny if b.operation == operation || b.operation == AclOperation::All => {
                return false
            }
            AclPermission::Deny => {}
            AclPermission::Allow => allowed |= b.operation.implies(operation),
        }
    }
    allowed || (!any_on_resource && config.allow_if_no_acl)
}

/// Whether some resource of `resource_type` exists that `who` may
/// `operation`: an ALLOW binding that applies to it and grants the
/// operation, not undone by a DENY of the same pattern (Kafka's
/// `authorizeByResourceType`, used for idempotent producers).
pub fn decide_on_some<'b>(
    config: &AuthzConfig,
    bindings: impl IntoIterator<Item = &'b AclBinding> + Clone,
    who: Requester<'_>,
    operation: AclOperation,
    resource_type: ResourceType,
) -> bool {
    if !config.enabled || config.superusers.iter().any(|s| s == who.principal) {
        return true;
    }
    let relevant = |b: &&AclBinding| b.resource_type == resource_type && applies(b, who);
    let denied = |allow: &AclBinding| {
        bindings.clone().into_iter().filter(relevant).any(|d| {
            d.permission == AclPermission::Deny
                && (d.operation == operation || d.operation == AclOperation::All)
                && ((d.pattern == metastore::acl::PatternType::Literal
                    && d.resource_name == WILDCARD)
                    || (d.pattern == allow.pattern && d.resource_name == allow.resource_name)
                    || (d.pattern == metastore::acl::PatternType::Prefixed
                        && allow.resource_name.starts_with(d.resource_name.as_str())))
        })
    };
    bindings.clone().into_iter().filter(relevant).any(|b| {
        b.permission == AclPermission::Allow && b.operation.implies(operation) && !denied(b)
    })
}

#[cfg(test)]
#[path = "authz_tests.rs"]
mod tests;
