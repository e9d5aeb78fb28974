//! `--driver` and `--bootstrap`: which driver a run uses, and whether the
//! bootstrap address suits it (a Kafka `HOST:PORT` list, or a native
//! `aero://` / `aero+quic://` URL), with the messages that say how to fix
//! a mismatch.

use crate::error::LoadError;

/// The native protocol's transports, named by the bootstrap URL's scheme.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transport {
    /// `aero://`
    Tcp,
    /// `aero+quic://`: passed through to the SDK, which accepts it once
    /// its QUIC transport lands.
    Quic,
}

impl Transport {
    /// The way in, as reports name it.
    pub fn way_in(self) -> &'static str {
        match self {
            Transport::Tcp => "native-tcp",
            Transport::Quic => "native-quic",
        }
    }
}

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
pub fn check_native_url(url: &str) -> Result<Transport, LoadError> {
    let bad = |why: String| Err(LoadError::Bootstrap(why));
    let url = url.trim();
    let Some((_, rest)) = url.split_once("://") else {
        return bad(format!(
            "`{url}` looks like a Kafka bootstrap (HOST:PORT), but --driver native takes \
             aero://HOST:PORT (or aero+quic://HOST:PORT); {NATIVE_PORT_HINT}"
        ));
    };
    let transport = match scheme(url).as_deref() {
        Some("aero") => Transport::Tcp,
        Some("aero+quic") => Transport::Quic,
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
            Transport::Tcp
        );
        assert_eq!(check_native_url("aero://a:9091,b").unwrap(), Transport::Tcp);
        // Passed through: the SDK decides whether it can speak QUIC yet.
        assert_eq!(
            check_native_url("aero+quic://[::1]:9091").unwrap(),
            Transport::Quic
        );
        assert_eq!(Transport::Quic.way_in(), "native-quic");
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
