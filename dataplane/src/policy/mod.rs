//! Policy applied to every front end's requests: who may do what
//! ([`authz`], Kafka's ACL semantics) and how fast each client may go
//! ([`quota`], Kafka's client quotas). Both read their rules from the
//! metastore and know nothing of the wire a request came in on.

pub mod authz;
pub mod quota;
