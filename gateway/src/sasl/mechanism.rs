//! The SASL mechanisms the Kafka listener can offer.

use metastore::ScramMechanism;

/// A SASL mechanism the listener can offer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mechanism {
    Plain,
    Scram(ScramMechanism),
    /// RFC 7628: a JWT from the configured issuer ([`super::oauthbearer`]).
    OAuthBearer,
}

impl Mechanism {
    pub fn name(self) -> &'static str {
        match self {
            Mechanism::Plain => "PLAIN",
            Mechanism::Scram(m) => m.name(),
            Mechanism::OAuthBearer => "OAUTHBEARER",
        }
    }

    pub fn from_name(name: &str) -> Option<Mechanism> {
        if name.eq_ignore_ascii_case("PLAIN") {
            return Some(Mechanism::Plain);
        }
        if name.eq_ignore_ascii_case("OAUTHBEARER") {
            return Some(Mechanism::OAuthBearer);
        }
        ScramMechanism::from_name(name).map(Mechanism::Scram)
    }
}
