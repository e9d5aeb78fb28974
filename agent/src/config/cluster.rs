//! How this agent takes part in a cluster: the metastore voters and the
//! address peers dial, checked against each other before anything starts.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use anyhow::Context;

use super::address::{join_host_port, parse_host_port};
use super::args::ServeArgs;
use super::file::FileSettings;

/// How this agent takes part in a cluster (`--voters` given).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterSettings {
    /// Bound UDP address of the agent's QUIC endpoint.
    pub cluster_addr: SocketAddr,
    /// HOST:PORT peers dial.
    pub advertised_cluster_addr: String,
    /// The metastore voters: id -> HOST:PORT.
    pub voters: BTreeMap<u64, String>,
    /// Where ca.pem and node-ID.{pem,key} are.
    pub certs_dir: PathBuf,
}

impl ClusterSettings {
    /// Whether `node` is one of the metastore voters (else it joins as a learner).
    pub fn is_voter(&self, node: u64) -> bool {
        self.voters.contains_key(&node)
    }

    /// `1@host:port, 2@host:port, ...` for messages.
    pub fn describe_voters(&self, except: Option<u64>) -> String {
        self.voters
            .iter()
            .filter(|(id, _)| Some(**id) != except)
            .map(|(id, a)| format!("{id}@{a}"))
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// Largest voter count a cluster may have: more voters only slow writes down.
const MAX_VOTERS: usize = 5;

/// Parses `ID@HOST:PORT,...`: 1, 3 or 5 voters, distinct ids and addresses,
/// ids that fit a Kafka broker id.
pub fn parse_voters(s: &str) -> anyhow::Result<BTreeMap<u64, String>> {
    let mut voters = BTreeMap::new();
    let mut addrs = std::collections::BTreeSet::new();
    for entry in s.split(',').map(str::trim).filter(|e| !e.is_empty()) {
        let (id, addr) = entry.split_once('@').with_context(|| {
            format!("--voters entry '{entry}' is not ID@HOST:PORT (for example 1@10.0.0.1:9093)")
        })?;
        let id: u64 = id.trim().parse().with_context(|| {
            format!(
                "--voters entry '{entry}' has an id that is not a number from 0 to {}",
                i32::MAX
            )
        })?;
        anyhow::ensure!(
            id <= i32::MAX as u64,
            "--voters entry '{entry}': node ids must fit a Kafka broker id (at most {})",
            i32::MAX
        );
        let (host, port) = parse_host_port(addr.trim(), "--voters entry")?;
        let addr = join_host_port(&host, port);
        anyhow::ensure!(
            voters.insert(id, addr.clone()).is_none(),
            "node {id} appears twice in --voters"
        );
        anyhow::ensure!(
            addrs.insert(addr.clone()),
            "address {addr} appears twice in --voters"
        );
    }
    let n = voters.len();
    anyhow::ensure!(
        n > 0,
        "--voters is empty; list the voters as ID@HOST:PORT,..."
    );
    anyhow::ensure!(
        n % 2 == 1 && n <= MAX_VOTERS,
        "--voters lists {n} voters; the metastore needs 1, 3 or 5 (an odd number, at most {MAX_VOTERS})"
    );
    Ok(voters)
}

/// The cluster part of the settings, checked: see [`ClusterSettings`].
pub(super) fn resolve_cluster(
    args: &ServeArgs,
    file: &FileSettings,
    node_id: i32,
    data_dir: &Path,
) -> anyhow::Result<Option<ClusterSettings>> {
    let voters = args.voters.clone().or_else(|| file.voters.clone());
    let cluster_addr = args.cluster_addr.or(file.cluster_addr);
    let advertised = args
        .advertised_cluster_addr
        .clone()
        .or_else(|| file.advertised_cluster_addr.clone());
    let certs = args
        .cluster_certs
        .clone()
        .or_else(|| file.cluster_certs.clone());
    let Some(voters) = voters else {
        for (set, flag) in [
            (cluster_addr.is_some(), "--cluster-addr"),
            (advertised.is_some(), "--advertised-cluster-addr"),
            (certs.is_some(), "--cluster-certs"),
        ] {
            anyhow::ensure!(
                !set,
                "{flag} is set but --voters is not: a cluster needs the list of metastore voters"
            );
        }
        return Ok(None);
    };
    let voters = parse_voters(&voters)?;
    let node = u64::try_from(node_id).context("--node-id must not be negative")?;
    let cluster_addr = cluster_addr.unwrap_or_else(|| SocketAddr::from(([127, 0, 0, 1], 9093)));
    let advertised = match advertised {
        Some(a) => {
            let (host, port) = parse_host_port(&a, "--advertised-cluster-addr")?;
            Some(join_host_port(&host, port))
        }
        None => None,
    };
    let advertised_cluster_addr = match (voters.get(&node), advertised) {
        (Some(mine), Some(a)) => {
            anyhow::ensure!(
                *mine == a,
                "node {node} is listed in --voters as {node}@{mine} but advertises {a}; \
                 peers dial the address in --voters, so the two must be the same"
            );
            a
        }
        (Some(mine), None) => mine.clone(),
        (None, Some(a)) => a,
        (None, None) => {
            anyhow::ensure!(
                !cluster_addr.ip().is_unspecified(),
                "--cluster-addr {cluster_addr} cannot be dialled by other agents; \
                 set --advertised-cluster-addr to this agent's reachable HOST:PORT"
            );
            cluster_addr.to_string()
        }
    };
    Ok(Some(ClusterSettings {
        cluster_addr,
        advertised_cluster_addr,
        voters,
        certs_dir: certs.unwrap_or_else(|| data_dir.join("certs")),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Settings;
    use std::io::Write;

    fn cluster_args(node_id: i32, voters: &str) -> ServeArgs {
        ServeArgs {
            node_id: Some(node_id),
            voters: Some(voters.into()),
            ..Default::default()
        }
    }

    fn error_of(args: &ServeArgs) -> String {
        format!("{:#}", Settings::resolve(args).expect_err("refused"))
    }

    #[test]
    fn without_voters_the_agent_is_the_embedded_single_node() {
        let s = Settings::resolve(&ServeArgs::default()).expect("valid");
        assert_eq!(s.cluster, None);
        assert_eq!(s.rack, None);
        let err = error_of(&ServeArgs {
            cluster_addr: Some("127.0.0.1:9093".parse().expect("addr")),
            ..Default::default()
        });
        assert!(err.contains("--voters is not"), "{err}");
    }

    #[test]
    fn a_voter_advertises_its_entry_and_a_learner_its_cluster_address() {
        let voters = "1@127.0.0.1:19093, 2@127.0.0.1:29093,3@[::1]:39093";
        let s = Settings::resolve(&ServeArgs {
            rack: Some("az-1".into()),
            ..cluster_args(2, voters)
        })
        .expect("valid");
        let c = s.cluster.expect("cluster mode");
        assert_eq!(c.voters.len(), 3);
        assert_eq!(c.voters[&3], "[::1]:39093");
        assert!(c.is_voter(2));
        assert_eq!(
            c.advertised_cluster_addr, "127.0.0.1:29093",
            "from --voters"
        );
        assert_eq!(c.cluster_addr.port(), 9093, "default bind");
        assert_eq!(c.certs_dir, PathBuf::from("./data/certs"));
        assert_eq!(s.rack.as_deref(), Some("az-1"));

        let s = Settings::resolve(&ServeArgs {
            cluster_addr: Some("127.0.0.1:49093".parse().expect("addr")),
            cluster_certs: Some("/etc/aerostream/certs".into()),
            ..cluster_args(4, voters)
        })
        .expect("valid");
        let c = s.cluster.expect("cluster mode");
        assert!(!c.is_voter(4));
        assert_eq!(c.advertised_cluster_addr, "127.0.0.1:49093");
        assert_eq!(c.certs_dir, PathBuf::from("/etc/aerostream/certs"));
    }

    #[test]
    fn bad_voter_lists_are_refused_with_the_reason() {
        for (voters, expected) in [
            ("1@a:1,2@b:2", "needs 1, 3 or 5"),
            (
                "1@a:1,2@b:2,3@c:3,4@d:4,5@e:5,6@f:6,7@g:7",
                "needs 1, 3 or 5",
            ),
            ("1@a:1,1@b:2,3@c:3", "node 1 appears twice"),
            ("1@a:1,2@a:1,3@c:3", "address a:1 appears twice"),
            ("1-a:1", "is not ID@HOST:PORT"),
            ("x@a:1", "not a number"),
            ("1@a", "is not HOST:PORT"),
            ("1@a:port", "bad port"),
            ("3000000000@a:1", "fit a Kafka broker id"),
            (" , ", "--voters is empty"),
        ] {
            let err = error_of(&cluster_args(1, voters));
            assert!(err.contains(expected), "{voters}: {err}");
        }
    }

    #[test]
    fn a_voter_advertising_another_address_than_its_entry_is_refused() {
        let err = error_of(&ServeArgs {
            advertised_cluster_addr: Some("10.0.0.9:9093".into()),
            ..cluster_args(1, "1@10.0.0.1:9093")
        });
        assert!(err.contains("must be the same"), "{err}");
        let err = error_of(&ServeArgs {
            cluster_addr: Some("0.0.0.0:9093".parse().expect("addr")),
            ..cluster_args(4, "1@10.0.0.1:9093")
        });
        assert!(err.contains("--advertised-cluster-addr"), "{err}");
    }

    #[test]
    fn cluster_settings_come_from_the_file_too() {
        let mut f = tempfile::NamedTempFile::new().expect("tmp");
        writeln!(
            f,
            "node_id = 3\nvoters = [\"1@h1:9093\", \"2@h2:9093\", \"3@h3:9093\"]\n\
             cluster_addr = \"0.0.0.0:9093\"\nrack = \"b\"\ncluster_certs = \"/c\""
        )
        .expect("write");
        let s = Settings::resolve(&ServeArgs {
            config: Some(f.path().to_path_buf()),
            ..Default::default()
        })
        .expect("valid");
        let c = s.cluster.expect("cluster mode");
        assert_eq!(c.advertised_cluster_addr, "h3:9093");
        assert_eq!(c.cluster_addr.to_string(), "0.0.0.0:9093");
        assert_eq!(c.certs_dir, PathBuf::from("/c"));
        assert_eq!(s.rack.as_deref(), Some("b"));
    }
}
