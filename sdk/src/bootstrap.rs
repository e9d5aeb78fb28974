//! Bootstrap URLs: `aero://host:port[,host:port…]`.
//!
//! The scheme names the transport. `aero://` is TCP; `aero+quic://` is
//! reserved for QUIC, which this build does not have yet: the
//! [`Transport`] enum is the seam it will plug into.

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
    /// Parses `aero://host[:port][,host[:port]…]`. The port defaults to
    /// 9091; IPv6 hosts go in brackets (`aero://[::1]:9091`). A trailing
    /// `/` is allowed; paths, users and queries are not.
    ///
    /// ```
    /// use sdk::bootstrap::{Bootstrap, Transport};
    ///
    /// let b = Bootstrap::parse("aero://a:9191,b").unwrap();
    /// assert_eq!(b.transport, Transport::Tcp);
    /// assert_eq!(b.addresses[0].to_string(), "a:9191");
    /// assert_eq!(b.addresses[1].to_string(), "b:9091");
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
            "aero+quic" => {
                return Err(Error::Config(
                    "QUIC transport is not available in this build yet".into(),
                ))
            }
            other => {
                return Err(Error::InvalidUrl(format!(
                    "unknown scheme {other:?} in {url:?}: use aero://"
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
    fn quic_says_it_is_not_in_this_build() {
        let e = Bootstrap::parse("aero+quic://h:9092").unwrap_err();
        assert!(
            matches!(&e, Error::Config(m) if m == "QUIC transport is not available in this build yet")
        );
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
