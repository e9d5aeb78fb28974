//! Access control lists as Kafka defines them (KIP-140, KIP-290): a binding
//! says that a principal from a host is allowed or denied an operation on
//! the resources a pattern names. The metastore keeps the bindings; the
//! gateway's authorizer reads them. Numbers are Kafka's wire codes, so the
//! CreateAcls, DescribeAcls and DeleteAcls handlers pass them through.

use serde::{Deserialize, Serialize};

/// The name of the one cluster resource, as Kafka names it.
pub const CLUSTER_RESOURCE: &str = "kafka-cluster";

/// The name (or principal, or host) that matches every other.
pub const WILDCARD: &str = "*";

macro_rules! kafka_codes {
    ($(#[$m:meta])* $name:ident { $($variant:ident = $code:literal => $text:literal),* $(,)? }) => {
        $(#[$m])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
        pub enum $name {
            $($variant),*
        }

        impl $name {
            /// Every value, in code order.
            pub const ALL: &'static [$name] = &[$($name::$variant),*];

            /// Kafka's wire code.
            pub fn code(self) -> i8 {
                match self {
                    $($name::$variant => $code),*
                }
            }

            /// The value for a wire code; `None` for UNKNOWN, ANY and codes
            /// Kafka does not define.
            pub fn from_code(code: i8) -> Option<$name> {
                match code {
                    $($code => Some($name::$variant),)*
                    _ => None,
                }
            }

            /// Kafka's name for it (`TOPIC`, `DESCRIBE_CONFIGS`, ...).
            pub fn name(self) -> &'static str {
                match self {
                    $($name::$variant => $text),*
                }
            }

            /// The value Kafka names so, ignoring case and `-` for `_`.
            pub fn from_name(name: &str) -> Option<$name> {
                let wanted = name.replace('-', "_");
                Self::ALL
                    .iter()
                    .copied()
                    .find(|v| v.name().eq_ignore_ascii_case(&wanted))
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.name())
            }
        }
    };
}

kafka_codes! {
    /// What kind of thing a binding protects.
    ResourceType {
        Topic = 2 => "TOPIC",
        Group = 3 => "GROUP",
        Cluster = 4 => "CLUSTER",
        TransactionalId = 5 => "TRANSACTIONAL_ID",
        DelegationToken = 6 => "DELEGATION_TOKEN",
        User = 7 => "USER",
    }
}

kafka_codes! {
    /// How a binding's resource name matches names.
    PatternType {
        Literal = 3 => "LITERAL",
        Prefixed = 4 => "PREFIXED",
    }
}

kafka_codes! {
    /// What a principal may do.
    AclOperation {
        All = 2 => "ALL",
        Read = 3 => "READ",
        Write = 4 => "WRITE",
        Create = 5 => "CREATE",
        Delete = 6 => "DELETE",
        Alter = 7 => "ALTER",
        Describe = 8 => "DESCRIBE",
        ClusterAction = 9 => "CLUSTER_ACTION",
        DescribeConfigs = 10 => "DESCRIBE_CONFIGS",
        AlterConfigs = 11 => "ALTER_CONFIGS",
        IdempotentWrite = 12 => "IDEMPOTENT_WRITE",
        CreateTokens = 13 => "CREATE_TOKENS",
        DescribeTokens = 14 => "DESCRIBE_TOKENS",
    }
}

kafka_codes! {
    /// Whether a binding allows or denies.
    AclPermission {
        Deny = 2 => "DENY",
        Allow = 3 => "ALLOW",
    }
}

impl AclOperation {
    /// The operations a binding for `self` also grants, as Kafka's
    /// authorizer implies them: READ, WRITE, DELETE and ALTER each imply
    /// DESCRIBE; ALTER_CONFIGS implies DESCRIBE_CONFIGS. Only ALLOW bindings
    /// imply; a DENY denies only what it names (and ALL).
    pub fn implies(self, wanted: AclOperation) -> bool {
        use AclOperation::*;
        self == wanted
            || self == All
            || (wanted == Describe && matches!(self, Read | Write | Delete | Alter))
            || (wanted == DescribeConfigs && self == AlterConfigs)
    }
}

/// One ACL: `principal` from `host` is `permission`ed `operation` on the
/// resources `(resource_type, resource_name, pattern)` matches.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct AclBinding {
    pub resource_type: ResourceType,
    pub resource_name: String,
    pub pattern: PatternType,
    /// `Type:name`, e.g. `User:alice`; `User:*` is every user.
    pub principal: String,
    /// A client IP address, or `*` for any.
    pub host: String,
    pub operation: AclOperation,
    pub permission: AclPermission,
}

impl AclBinding {
    /// Why Kafka would refuse to create this binding, if it would.
    pub fn invalid(&self) -> Option<String> {
        if self.resource_name.is_empty() {
            return Some("the resource name must not be empty".into());
        }
        if self.resource_type == ResourceType::Cluster && self.resource_name != CLUSTER_RESOURCE {
            return Some(format!(
                "the cluster resource is named {CLUSTER_RESOURCE}, not {}",
                self.resource_name
            ));
        }
        if self.pattern == PatternType::Prefixed && self.resource_name == WILDCARD {
            return Some("a PREFIXED pattern cannot be the wildcard *".into());
        }
        match self.principal.split_once(':') {
            Some((kind, name)) if !kind.is_empty() && !name.is_empty() => {}
            _ => {
                return Some(format!(
                    "principal {:?} is not of the form Type:name (User:alice)",
                    self.principal
                ))
            }
        }
        if self.host.is_empty() {
            return Some("the host must be an address or *".into());
        }
        None
    }

    /// Whether this binding's pattern covers the resource `name` of its type.
    pub fn covers(&self, name: &str) -> bool {
        match self.pattern {
            PatternType::Literal => self.resource_name == WILDCARD || self.resource_name == name,
            PatternType::Prefixed => name.starts_with(self.resource_name.as_str()),
        }
    }
}

/// How a filter selects by pattern type (Kafka's PatternType filter values).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum PatternFilter {
    /// Bindings of any pattern type whose resource name equals the filter's.
    Any,
    /// Bindings that would apply to a resource of the filter's name: literal
    /// equal or `*`, and prefixes of it.
    Match,
    Exactly(PatternType),
}

impl PatternFilter {
    pub fn from_code(code: i8) -> Option<PatternFilter> {
        match code {
            1 => Some(PatternFilter::Any),
            2 => Some(PatternFilter::Match),
            c => PatternType::from_code(c).map(PatternFilter::Exactly),
        }
    }
}

/// What DescribeAcls and DeleteAcls select; `None` fields match anything.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AclFilter {
    pub resource_type: Option<ResourceType>,
    pub resource_name: Option<String>,
    pub pattern: PatternFilter,
    pub principal: Option<String>,
    pub host: Option<String>,
    pub operation: Option<AclOperation>,
    pub permission: Option<AclPermission>,
}

impl AclFilter {
    /// The filter that selects every binding.
    pub fn any() -> AclFilter {
        AclFilter {
            resource_type: None,
            resource_name: None,
            pattern: PatternFilter::Any,
            principal: None,
            host: None,
            operation: None,
            permission: None,
        }
    }

    pub fn matches(&self, b: &AclBinding) -> bool {
        let eq = |want: &Option<String>, have: &str| want.as_deref().is_none_or(|w| w == have);
        let resource = match self.pattern {
            PatternFilter::Any => eq(&self.resource_name, &b.resource_name),
            PatternFilter::Exactly(p) => {
                p == b.pattern && eq(&self.resource_name, &b.resource_name)
            }
            PatternFilter::Match => self.resource_name.as_deref().is_none_or(|n| b.covers(n)),
        };
        self.resource_type.is_none_or(|t| t == b.resource_type)
            && resource
            && eq(&self.principal, &b.principal)
            && eq(&self.host, &b.host)
            && self.operation.is_none_or(|o| o == b.operation)
            && self.permission.is_none_or(|p| p == b.permission)
    }
}

#[cfg(test)]
#[path = "acl_tests.rs"]
mod tests;
