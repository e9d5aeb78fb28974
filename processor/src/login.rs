//! How the processor reaches the brokers: TLS and a SASL login from the
//! pipeline's `source.tls` and `source.sasl` (the password from the
//! environment variable the file names), for the Kafka protocol and for
//! the native one.

use anyhow::Context;

use crate::pipeline::Source;

/// The password `source.sasl` names, from the environment.
fn password(source: &Source) -> anyhow::Result<Option<(String, String, String)>> {
    let Some(sasl) = &source.sasl else {
        return Ok(None);
    };
    let password = std::env::var(&sasl.password_env).with_context(|| {
        format!(
            "source.sasl: the password of {} is read from ${}, which is not set",
            sasl.username, sasl.password_env
        )
    })?;
    Ok(Some((
        sasl.mechanism.to_ascii_uppercase(),
        sasl.username.clone(),
        password,
    )))
}

/// A Kafka-protocol client of `source`'s brokers.
pub fn kafka_client(source: &Source) -> anyhow::Result<kafka_client::Client> {
    let tls = match &source.tls {
        Some(t) => {
            let pair = t.cert.as_deref().zip(t.key.as_deref());
            Some(kafka_client::tls_config(&t.ca, pair).context("source.tls")?)
        }
        None => None,
    };
    let login = match password(source)? {
        Some((mechanism, user, password)) => {
            Some(kafka_client::Login::new(&mechanism, &user, &password)?)
        }
        None => None,
    };
    Ok(kafka_client::Client::new(&source.bootstrap, tls, login)
        .with_client_id("aerostream-process"))
}

/// The native protocol's credentials for `source`'s login.
pub fn native_credentials(source: &Source) -> anyhow::Result<Option<sdk::Credentials>> {
    Ok(
        password(source)?.map(|(mechanism, user, password)| match mechanism.as_str() {
            "PLAIN" => sdk::Credentials::plain(user, password),
            "SCRAM-SHA-256" => sdk::Credentials::scram_sha256(user, password),
            _ => sdk::Credentials::scram_sha512(user, password),
        }),
    )
}

/// The user and password for the agents' REST API (HTTP Basic), from
/// `source.sasl`: the REST API checks a SCRAM user's password as SASL/PLAIN
/// does.
pub fn basic_auth(source: &Source) -> anyhow::Result<Option<(String, String)>> {
    Ok(password(source)?.map(|(_, user, password)| (user, password)))
}
