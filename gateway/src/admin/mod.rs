//! The admin service layer for groups: list and describe consumer groups,
//! read committed offsets (topic operations are [`dataplane::topics`]), called both
//! by the Kafka admin APIs ([`crate::kafka::api`]) and by the REST API
//! ([`crate::rest`]). Each front end only translates its own wire format
//! to and from these functions, so the two can never disagree on what an
//! operation does.

pub mod groups;
