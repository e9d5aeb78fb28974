//! security: who a client is and what it may do, whatever front end it came
//! in on.
//!
//! - Authentication engines: SCRAM (RFC 5802) with credentials from the
//!   metastore ([`scram`]), password checks by those credentials for PLAIN
//!   and HTTP Basic, their cost bounded per address ([`Passwords`]), and
//!   OAUTHBEARER tokens checked
//!   against the issuer's keys ([`oauthbearer`]); every refusal is a
//!   [`LoginError`]. The SASL exchanges that carry them are the front
//!   ends' (`gateway::sasl`, the native protocol's hello).
//! - Authorization: Kafka's ACL semantics over the metastore's bindings
//!   ([`authz`]).
//! - Client quotas: byte-rate and request-time windows per user and client
//!   id ([`quota`]).
//!
//! It depends on the metastore only; the front ends hold the decisions'
//! inputs (the principal, the operation, the resource) and answer in their
//! own wire format.

pub mod authz;
mod error;
mod login_limit;
pub mod oauthbearer;
mod password;
pub mod quota;
mod recent_failures;
pub mod scram;

pub use error::LoginError;
pub use login_limit::FailedLoginLimit;
pub use password::Passwords;
