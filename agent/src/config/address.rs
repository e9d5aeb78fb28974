//! HOST:PORT as the flags give it and as clients and peers are told it,
//! with IPv6 hosts in brackets.

use anyhow::Context;

/// `host:port`, with brackets around an IPv6 host.
pub(super) fn join_host_port(host: &str, port: u16) -> String {
    if host.contains(':') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    }
}

pub(super) fn parse_host_port(s: &str, what: &str) -> anyhow::Result<(String, u16)> {
    let (host, port) = s
        .rsplit_once(':')
        .with_context(|| format!("{what} '{s}' is not HOST:PORT"))?;
    let port: u16 = port
        .parse()
        .with_context(|| format!("{what} '{s}' has a bad port"))?;
    let host = host.trim_matches(['[', ']']);
    anyhow::ensure!(!host.is_empty(), "{what} '{s}' has no host");
    Ok((host.to_string(), port))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn advertised_address_splits_host_and_port() {
        assert_eq!(
            parse_host_port("broker-1:9093", "address").expect("ok"),
            ("broker-1".to_string(), 9093)
        );
        assert_eq!(
            parse_host_port("[::1]:9093", "address").expect("ok"),
            ("::1".to_string(), 9093)
        );
    }
}
