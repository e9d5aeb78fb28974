//! Client quotas as Kafka defines them (KIP-13, KIP-55, KIP-546): byte
//! rates per user, per client id, or per user and client id, with
//! `<default>` entries that apply to whoever has no entry of their own.
//! The metastore keeps the configured values; each agent enforces them on
//! the traffic it serves (as each Kafka broker does).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// Bytes a producer may send per second (per agent).
pub const PRODUCER_BYTE_RATE: &str = "producer_byte_rate";
/// Bytes a consumer may fetch per second (per agent).
pub const CONSUMER_BYTE_RATE: &str = "consumer_byte_rate";

/// The share of one thread's time (in percent, over 100 for more than a
/// thread) an agent may spend serving a client's requests.
pub const REQUEST_PERCENTAGE: &str = "request_percentage";

/// The quota keys AeroStream enforces.
pub const KEYS: [&str; 3] = [PRODUCER_BYTE_RATE, CONSUMER_BYTE_RATE, REQUEST_PERCENTAGE];

/// Kafka's entity type names.
pub const USER: &str = "user";
pub const CLIENT_ID: &str = "client-id";

/// One side of an entity: a name, or `<default>` (null on the wire).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum EntityName {
    Default,
    Named(String),
}

impl EntityName {
    /// From the wire, where null is the default entity.
    pub fn from_wire(name: Option<&str>) -> EntityName {
        match name {
            None => EntityName::Default,
            Some(n) => EntityName::Named(n.to_string()),
        }
    }

    pub fn to_wire(&self) -> Option<&str> {
        match self {
            EntityName::Default => None,
            EntityName::Named(n) => Some(n),
        }
    }
}

/// Whom a quota applies to: a user, a client id, or both.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct QuotaEntity {
    pub user: Option<EntityName>,
    pub client_id: Option<EntityName>,
}

impl QuotaEntity {
    /// The entities whose quota could apply to `user` (the principal's
    /// name, `ANONYMOUS` when the client did not authenticate) with
    /// `client_id`, most specific first: Kafka's order of precedence.
    pub fn candidates(user: &str, client_id: &str) -> [QuotaEntity; 8] {
        let u = || Some(EntityName::Named(user.to_string()));
        let c = || Some(EntityName::Named(client_id.to_string()));
        let default = || Some(EntityName::Default);
        let e = |user, client_id| QuotaEntity { user, client_id };
        [
            e(u(), c()),
            e(u(), default()),
            e(u(), None),
            e(default(), c()),
            e(default(), default()),
            e(default(), None),
            e(None, c()),
            e(None, default()),
        ]
    }

    /// Why Kafka would refuse this entity, if it would.
    pub fn invalid(&self) -> Option<String> {
        let empty =
            |n: &Option<EntityName>| matches!(n, Some(EntityName::Named(s)) if s.is_empty());
        if self.user.is_none() && self.client_id.is_none() {
            return Some("a quota entity names a user, a client id or both".into());
        }
        if empty(&self.user) || empty(&self.client_id) {
            return Some("an entity name must not be empty (null is <default>)".into());
        }
        None
    }
}

/// A configured quota value. Kept as its bits so the state stays `Eq`.
#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
pub struct QuotaValue(pub f64);

#[cfg(test)]
#[path = "quota_tests.rs"]
mod tests;

impl PartialEq for QuotaValue {
    fn eq(&self, other: &Self) -> bool {
        self.0.to_bits() == other.0.to_bits()
    }
}

impl Eq for QuotaValue {}

/// Changes to one entity's quotas: per key, the new value or `None` to
/// remove it.
pub type QuotaOps = Vec<(String, Option<QuotaValue>)>;

/// Every configured entity with its values, key -> value.
pub type QuotaTable = BTreeMap<QuotaEntity, BTreeMap<String, QuotaValue>>;

/// A [`QuotaTable`] kept in the state as a list of (entity, values) pairs:
/// the state is stored as JSON, whose map keys must be strings.
pub(crate) mod table_as_list {
    use std::collections::BTreeMap;

    use serde::{Deserialize, Deserializer, Serializer};

    use super::{QuotaEntity, QuotaTable, QuotaValue};

    pub fn serialize<S: Serializer>(table: &QuotaTable, s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(table.iter())
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<QuotaTable, D::Error> {
        let pairs: Vec<(QuotaEntity, BTreeMap<String, QuotaValue>)> = Vec::deserialize(d)?;
        Ok(pairs.into_iter().collect())
    }
}

/// Why Kafka would refuse to set `key` to `value`, if it would.
pub fn invalid_value(key: &str, value: f64) -> Option<String> {
    if !KEYS.contains(&key) {
        return Some(format!(
            "quota {key} is not supported: use {}",
            KEYS.join(", ")
        ));
    }
    if !(value.is_finite() && value > 0.0) {
        return Some(format!("{key} must be a positive number, not {value}"));
    }
    None
}
