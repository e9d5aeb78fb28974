//! The admin service layer: one implementation of each administrative
//! operation (create or delete a topic, describe its configs and offsets,
//! list and describe consumer groups, read committed offsets), called both
//! by the Kafka admin APIs ([`crate::kafka::api`]) and by the REST API
//! ([`crate::rest`]). Each front end only translates its own wire format
//! to and from these functions, so the two can never disagree on what an
//! operation does.

pub mod groups;
pub mod topics;
