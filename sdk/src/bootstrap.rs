//! Bootstrap URLs: `aero://host:port[,host:port…]` or
//! `aero+quic://host:port[,host:port…]`.
//!
//! The scheme names the [`Transport`]: `aero://` is TCP, `aero+quic://` is
//! QUIC over UDP on the same port number (TLS 1.3: the client must be given
//! the CA of the server's certificate, see
//! [`crate::ClientBuilder::tls_ca_file`]). Every server of the cluster is
//! reached with the bootstrap URL's transport.

use std::fmt;

use crate::error::Error;

/// The native protocol's default port.
pub const DEFAULT_PORT: u16 = 9091;

/// How frames travel to a server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Transport {
    /// One TCP connection per server (`aero://`).
    Tcp,
    /// One QUIC connection per server (`aero+quic://`): the hello and
    /// requests on its first stream, further streams for subscriptions.
    Quic,
}

/// A server address as written in a URL or advertised in metadata.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Address {
    pub host: String,
    pub port: u16,
}

impl fmt::Display for Address {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.host.contains(':') {
            write!(f, "[{}]:{}", self.host, self.port)
        } else {
            write!(f, "{}:{}", self.host, self.port)
        }
    }
}

/// A parsed bootstrap URL: the transport and the servers to try first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Bootstrap {
    pub transport: Transport,
    pub addresses: Vec<Address>,
}

impl Bootstrap {
    /// Parses `aero://host[:port][,host[:port]…]` (TCP) or the same with
    /// `aero+quic://` (QUIC). The port defaults to 9091; IPv6 hosts go in
    /// brackets (`aero://[::1]:9091`). A trailing `/` is allowed; paths,
    /// users and queries are not.
    ///
    /// ```
    /// use sdk::bootstrap::{Bootstrap, Transport};
    ///
    /// let b = Bootstrap::parse("aero://a:9191,b").unwrap();
    /// assert_eq!(b.transport, Transport::Tcp);
    /// assert_eq!(b.addresses[0].to_string(), "a:9191");
    /// assert_eq!(b.addresses[1].to_string(), "b:9091");
    ///
    /// let q = Bootstrap::parse("aero+quic://[::1]:9091").unwrap();
    /// assert_eq!(q.transport, Transport::Quic);
    /// assert_eq!(q.addresses[0].host, "::1");
    /// ```
    pub fn parse(url: &str) -> Result<Bootstrap, Error> {
        let url = url.trim();
        let Some((scheme, rest)) = url.split_once("://") else {
            return Err(Error::InvalidUrl(format!(
                "{url:?} has no scheme: write aero://host:port"
            )));
        };
        let transport = match scheme.to_ascii_lowercase().as_str() {
            "aero" => Transport::Tcp,
            "aero+quic" => Transport::Quic,
            other => {
                return Err(Error::InvalidUrl(format!(
                    "unknown scheme {other:?} in {url:?}: use aero:// (TCP) or aero+quic:// (QUIC)"
                )))
            }
        };
        let rest = rest.strip_suffix('/').unwrap_or(rest);
        if rest.contains(['/', '?', '#', '@']) {
            return Err(Error::InvalidUrl(format!(
                "{url:?}: a bootstrap URL lists host:port pairs only"
            )));
        }
        let addresses = rest
            .split(',')
            .map(|a| parse_address(a.trim(), url))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Bootstrap {
            transport,
            addresses,
        })
    }
}

fn parse_address(a: &str, url: &str) -> Result<Address, Error> {
    let bad = |why: &str| Error::InvalidUrl(format!("{url:?}: {why}"));
    if a.is_empty() {
        return Err(bad("empty host"));
    }
    let (host, port) = if let Some(v6) = a.strip_prefix('[') {
        let Some((host, after)) = v6.split_once(']') else {
            return Err(bad("unclosed [ in an IPv6 address"));
        };
        match after {
            "" => (host, None),
            p => match p.strip_prefix(':') {
                Some(p) => (host, Some(p)),
                None => return Err(bad("junk after an IPv6 address")),
            },
        }
    } else {
        match a.rsplit_once(':') {
            Some((h, _)) if h.contains(':') => {
                return Err(bad("IPv6 addresses go in brackets: [::1]:9091"))
            }
            Some((h, p)) => (h, Some(p)),
            None => (a, None),
        }
    };
    if host.is_empty() {
        return Err(bad("empty host"));
    }
    let port = match port {
        None => DEFAULT_PORT,
        Some(p) => match p.parse::<u16>() {
            Ok(p) if p != 0 => p,
            _ => return Err(bad(&format!("{p:?} is not a port"))),
        },
    };
    Ok(Address {
        host: host.to_owned(),
        port,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn addrs(url: &str) -> Vec<String> {
        Bootstrap::parse(url)
            .unwrap()
            .addresses
            .iter()
            .map(ToString::to_string)
            .collect()
    }

    #[test]
    fn one_server_a_list_default_ports_and_ipv6_parse() {
        assert_eq!(addrs("aero://localhost:9091"), ["localhost:9091"]);
        assert_eq!(addrs("aero://h1:1,h2:2"), ["h1:1", "h2:2"]);
        assert_eq!(addrs("AERO://h1, h2:7/"), ["h1:9091", "h2:7"]);
        assert_eq!(
            addrs("aero://[::1]:9000,[fe80::1]"),
            ["[::1]:9000", "[fe80::1]:9091"]
        );
        assert_eq!(addrs("aero://127.0.0.1"), ["127.0.0.1:9091"]);
    }

    #[test]
    fn quic_urls_parse_like_tcp_ones() {
        let b = Bootstrap::parse("AERO+QUIC://h:9092,127.0.0.1,[::1]").unwrap();
        assert_eq!(b.transport, Transport::Quic);
        assert_eq!(
            b.addresses
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>(),
            ["h:9092", "127.0.0.1:9091", "[::1]:9091"]
        );
        assert!(matches!(
            Bootstrap::parse("aero+quic://h:1/x"),
            Err(Error::InvalidUrl(_))
        ));
        assert!(matches!(
            Bootstrap::parse("quic://h:1"),
            Err(Error::InvalidUrl(_))
        ));
    }

    #[test]
    fn malformed_urls_say_what_is_wrong() {
        for bad in [
            "localhost:9091",
            "kafka://h:9092",
            "aero://",
            "aero://h:",
            "aero://h:0",
            "aero://h:99999",
            "aero://h:1,",
            "aero://::1",
            "aero://[::1",
            "aero://[::1]x",
            "aero://h:1/path",
            "aero://user@h:1",
        ] {
            assert!(
                matches!(Bootstrap::parse(bad), Err(Error::InvalidUrl(_))),
                "{bad} parsed"
            );
        }
    }
}
