//! The Kafka-protocol client behind the admin commands is the
//! `kafka-client` crate (one connection per broker, request versions from
//! ApiVersions, TLS and SASL); here are the flags that configure it.

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::bail;

pub use kafka_client::{
    broker, describe_error, error_name, is_retriable, named, topic_name, Client, Login,
};

/// How to reach brokers whose Kafka listener speaks TLS (the `SSL`
/// security protocol).
#[derive(clap::Args, Clone, Debug, Default)]
pub struct TlsArgs {
    /// Speak TLS, trusting the CA certificates (PEM) in this file.
    #[arg(long, global = true)]
    pub tls_ca: Option<PathBuf>,
    /// Client certificate (PEM) for a listener that asks for one (mutual
    /// TLS); with --tls-key.
    #[arg(long, global = true, requires = "tls_key")]
    pub tls_cert: Option<PathBuf>,
    /// Private key (PEM) of --tls-cert.
    #[arg(long, global = true, requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,
}

impl TlsArgs {
    /// The TLS client settings, or `None` for plaintext.
    pub fn config(&self) -> anyhow::Result<Option<Arc<rustls::ClientConfig>>> {
        let Some(ca) = &self.tls_ca else {
            if self.tls_cert.is_some() {
                bail!("--tls-cert needs --tls-ca: the CA that issued the broker's certificate");
            }
            return Ok(None);
        };
        let client_cert = match (&self.tls_cert, &self.tls_key) {
            (Some(cert), Some(key)) => Some((cert.as_path(), key.as_path())),
            _ => None,
        };
        Ok(Some(kafka_client::tls_config(ca, client_cert)?))
    }
}

/// How to log in to brokers whose Kafka listener requires SASL
/// (`SASL_PLAINTEXT`, or `SASL_SSL` with the TLS flags).
#[derive(clap::Args, Clone, Debug, Default)]
pub struct SaslArgs {
    /// SASL mechanism: SCRAM-SHA-512, SCRAM-SHA-256 or PLAIN; with
    /// --sasl-username.
    #[arg(long, global = true, requires = "sasl_username")]
    pub sasl_mechanism: Option<String>,
    /// The user to log in as (SCRAM-SHA-512 unless --sasl-mechanism says
    /// otherwise).
    #[arg(long, global = true)]
    pub sasl_username: Option<String>,
    /// Its password; read from AEROSTREAM_SASL_PASSWORD when not given, so
    /// it stays out of the shell's history and the process list.
    #[arg(
        long,
        global = true,
        env = "AEROSTREAM_SASL_PASSWORD",
        hide_env_values = true
    )]
    pub sasl_password: Option<String>,
}

impl SaslArgs {
    /// The login the flags describe; `None` without --sasl-username.
    pub fn login(&self) -> anyhow::Result<Option<Login>> {
        let Some(user) = &self.sasl_username else {
            return Ok(None);
        };
        let mechanism = self.sasl_mechanism.as_deref().unwrap_or("SCRAM-SHA-512");
        let Some(password) = &self.sasl_password else {
            bail!("--sasl-username needs a password: --sasl-password or AEROSTREAM_SASL_PASSWORD");
        };
        Login::new(mechanism, user, password)
            .map(Some)
            .map_err(|_| {
                anyhow::anyhow!(
                "--sasl-mechanism {mechanism} is not one of SCRAM-SHA-512, SCRAM-SHA-256, PLAIN"
            )
            })
    }
}
