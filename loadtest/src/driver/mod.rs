//! The driver seam: how the runner talks to a broker. A driver creates the
//! topic and hands out producer and consumer clients; clients report every
//! acknowledgement and every received message to their probe. Two drivers
//! implement the three traits: [`kafka::KafkaDriver`] (librdkafka over the
//! Kafka wire) and [`native::NativeDriver`] (the `sdk` crate over
//! AeroStream's native protocol). [`DriverKind`] and [`check_bootstrap`]
//! pair `loadtest run --driver` with its `--bootstrap` address.
//!
//! Contract for implementations:
//! - `ProducerClient::send` never blocks for long: when the client's queue
//!   is full it returns [`SendOutcome::Full`] and the runner retries.
//! - Every message `send` accepted is reported exactly once to
//!   [`ProducerProbe::on_ack`], with success or the failure text, by the
//!   time `flush` returns 0 pending (or when the client is dropped).
//! - `ConsumerClient::poll` passes each record's value to
//!   [`ConsumerProbe::on_message`] and reports partition assignment changes
//!   through [`ConsumerProbe::on_assignment`].

use std::sync::Arc;
use std::time::Duration;

use crate::error::LoadError;
use crate::probe::{ConsumerProbe, ProducerProbe};

pub mod kafka;
pub mod native;

/// Which driver a run uses (`loadtest run --driver`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum DriverKind {
    /// librdkafka over the Kafka wire; `--bootstrap HOST:PORT[,…]`.
    #[default]
    Kafka,
    /// The SDK over the native protocol; `--bootstrap aero://HOST:PORT`
    /// (TCP) or `aero+quic://HOST:PORT` (QUIC, once the SDK has it).
    Native,
}

impl std::str::FromStr for DriverKind {
    type Err = String;
    fn from_str(s: &str) -> Result<DriverKind, String> {
        match s.trim() {
            "kafka" => Ok(DriverKind::Kafka),
            "native" => Ok(DriverKind::Native),
            other => Err(format!("`{other}` is not a driver: use kafka or native")),
        }
    }
}

impl std::fmt::Display for DriverKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            DriverKind::Kafka => "kafka",
            DriverKind::Native => "native",
        })
    }
}

/// Where to find the agent's native port, for error messages.
const NATIVE_PORT_HINT: &str = "the agent's native listener is its --native-addr \
(default 127.0.0.1:9091), printed as native=HOST:PORT in its `aerostream listening` line";

/// The scheme of `url` (lowercase), if it has one.
fn scheme(url: &str) -> Option<String> {
    url.split_once("://").map(|(s, _)| s.to_ascii_lowercase())
}

/// Checks that `--bootstrap` suits the driver: a Kafka bootstrap list for
/// `kafka`, an `aero://` or `aero+quic://` URL for `native`.
pub fn check_bootstrap(kind: DriverKind, url: &str) -> Result<(), LoadError> {
    let bad = |why: String| Err(LoadError::Bootstrap(why));
    let url = url.trim();
    if url.is_empty() {
        return bad("--bootstrap is empty".into());
    }
    match kind {
        DriverKind::Kafka => match scheme(url).as_deref() {
            Some(s) if s.starts_with("aero") => bad(format!(
                "`{url}` is a native-protocol URL, but --driver is kafka: use --driver native \
                 for it, or give the agent's Kafka address (HOST:PORT, its --kafka-addr)"
            )),
            _ => Ok(()),
        },
        DriverKind::Native => check_native_url(url).map(|_| ()),
    }
}

/// Checks a native bootstrap URL and says which transport it names. The
/// host list is checked with the SDK's own parser; the URL itself goes to
/// the SDK unchanged (so `aero+quic://` works as soon as the SDK does).
pub fn check_native_url(url: &str) -> Result<native::Transport, LoadError> {
    let bad = |why: String| Err(LoadError::Bootstrap(why));
    let url = url.trim();
    let Some((_, rest)) = url.split_once("://") else {
        return bad(format!(
            "`{url}` looks like a Kafka bootstrap (HOST:PORT), but --driver native takes \
             aero://HOST:PORT (or aero+quic://HOST:PORT); {NATIVE_PORT_HINT}"
        ));
    };
    let transport = match scheme(url).as_deref() {
        Some("aero") => native::Transport::Tcp,
        Some("aero+quic") => native::Transport::Quic,
        Some(other) => {
            return bad(format!(
                "`{url}`: --driver native takes aero:// (TCP) or aero+quic:// (QUIC) URLs, not {other}://"
            ))
        }
        None => unreachable!("split_once found ://"),
    };
    // The SDK parses the host list the same way whatever the transport.
    if let Err(e) = sdk::bootstrap::Bootstrap::parse(&format!("aero://{rest}")) {
        return bad(format!("`{url}`: {e}"));
    }
    Ok(transport)
}

/// Whether the client took the message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SendOutcome {
    Queued,
    /// The client's local queue is full; try again shortly.
    Full,
}

/// Topic shape a run needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopicSpec {
    pub name: String,
    pub partitions: u32,
    pub replication_factor: u16,
    /// Create it (false: it must already exist).
    pub create: bool,
    /// Topic configs to set at creation.
    pub configs: std::collections::BTreeMap<String, String>,
}

/// A way of reaching a broker.
pub trait Driver: Send + Sync {
    /// Short name for reports, e.g. `kafka`.
    fn name(&self) -> &'static str;
    /// Makes the topic exist and waits until every partition has a leader.
    fn prepare_topic(&self, topic: &TopicSpec) -> Result<(), LoadError>;
    /// Removes a topic the run created.
    fn delete_topic(&self, topic: &str) -> Result<(), LoadError>;
    fn producer(
        &self,
        topic: &str,
        probe: Arc<ProducerProbe>,
    ) -> Result<Box<dyn ProducerClient>, LoadError>;
    fn consumer(
        &self,
        topic: &str,
        group: &str,
        probe: Arc<ConsumerProbe>,
    ) -> Result<Box<dyn ConsumerClient>, LoadError>;
}

/// One producer connection.
pub trait ProducerClient: Send {
    fn send(&mut self, payload: &[u8]) -> Result<SendOutcome, LoadError>;
    /// Waits up to `timeout` for every accepted message to be acknowledged
    /// or failed; returns how many are still outstanding.
    fn flush(&mut self, timeout: Duration) -> u64;
}

/// One consumer in the run's group.
pub trait ConsumerClient: Send {
    /// Waits up to `timeout` for records and reports them to the probe.
    fn poll(&mut self, timeout: Duration);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn driver_names_parse_and_print() {
        assert_eq!("kafka".parse(), Ok(DriverKind::Kafka));
        assert_eq!("native".parse(), Ok(DriverKind::Native));
        assert!("quic".parse::<DriverKind>().is_err());
        assert_eq!(DriverKind::Native.to_string(), "native");
        assert_eq!(DriverKind::default(), DriverKind::Kafka);
    }

    #[test]
    fn kafka_takes_host_port_lists_and_refuses_native_urls() {
        for ok in ["127.0.0.1:9092", "a:9092,b:9092", "PLAINTEXT://h:9092"] {
            assert!(check_bootstrap(DriverKind::Kafka, ok).is_ok(), "{ok}");
        }
        for native in ["aero://127.0.0.1:9091", "AERO+QUIC://h:9091"] {
            let err = check_bootstrap(DriverKind::Kafka, native).unwrap_err();
            assert!(err.to_string().contains("--driver native"), "{err}");
        }
        assert!(check_bootstrap(DriverKind::Kafka, " ").is_err());
    }

    #[test]
    fn native_takes_aero_urls_and_names_the_transport() {
        assert_eq!(
            check_native_url("aero://127.0.0.1:9091").unwrap(),
            native::Transport::Tcp
        );
        assert_eq!(
            check_native_url("aero://a:9091,b").unwrap(),
            native::Transport::Tcp
        );
        // Passed through: the SDK decides whether it can speak QUIC yet.
        assert_eq!(
            check_native_url("aero+quic://[::1]:9091").unwrap(),
            native::Transport::Quic
        );
        assert_eq!(native::Transport::Quic.way_in(), "native-quic");
    }

    #[test]
    fn native_refuses_kafka_addresses_other_schemes_and_bad_host_lists() {
        let err = check_bootstrap(DriverKind::Native, "127.0.0.1:9092").unwrap_err();
        let text = err.to_string();
        assert!(
            text.contains("aero://") && text.contains("--native-addr"),
            "{text}"
        );
        let err = check_bootstrap(DriverKind::Native, "http://h:9091").unwrap_err();
        assert!(err.to_string().contains("not http://"), "{err}");
        for bad in [
            "aero://",
            "aero://h:notaport",
            "aero://h:9091/path",
            "aero+quic://::1:9091",
        ] {
            assert!(check_bootstrap(DriverKind::Native, bad).is_err(), "{bad}");
        }
    }
}
