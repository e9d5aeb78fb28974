//! The brokers Kafka clients are told about: every live agent the metastore
//! knows (Metadata, DescribeCluster), the controller (the metastore leader,
//! or this agent while the leader is unknown or not a live agent)
//! and which agent coordinates a consumer group (FindCoordinator: the
//! holder of the group's coordinator slot, `metastore::coordinators`).
//!
//! All of it is read from the local metastore replica, so two agents may
//! briefly disagree after a change; clients refresh their metadata on the
//! errors that follow (NOT_LEADER_OR_FOLLOWER, NOT_COORDINATOR).

use metastore::{AgentInfo, ClusterControl, Groups, Metastore};

use crate::broker::BrokerConfig;

/// One broker as Kafka clients see it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BrokerEntry {
    pub id: i32,
    pub host: String,
    pub port: i32,
    pub rack: Option<String>,
}

/// `host:port` (brackets allowed around an IPv6 host) as Kafka's host and port.
fn split_addr(addr: &str) -> Option<(String, i32)> {
    let (host, port) = addr.rsplit_once(':')?;
    let port: u16 = port.parse().ok()?;
    let host = host.trim_matches(['[', ']']);
    (!host.is_empty()).then(|| (host.to_owned(), i32::from(port)))
}

fn entry(agent: &AgentInfo) -> Option<BrokerEntry> {
    let (host, port) = split_addr(agent.addrs.kafka.as_deref()?)?;
    Some(BrokerEntry {
        id: i32::try_from(agent.id).ok()?,
        host,
        port,
        rack: agent.rack.clone(),
    })
}

/// The broker id a load-balanced cluster shows its clients: the whole
/// cluster is one broker at the balancer's address.
pub const LOAD_BALANCER_ID: i32 = 0;

/// The brokers clients are told about: every live agent, or in
/// load-balancer mode the one broker that stands for the cluster.
pub fn live(catalog: &Metastore, config: &BrokerConfig) -> Vec<BrokerEntry> {
    if config.load_balanced {
        return vec![BrokerEntry {
            id: LOAD_BALANCER_ID,
            host: config.advertised_host.clone(),
            port: config.advertised_port,
            rack: None,
        }];
    }
    agents(catalog, config)
}

/// `entries` as a client in `zone` is to see them: in load-balancer mode
/// the balancer's address in that zone, when one is configured
/// (`BrokerConfig::zone_addrs`), instead of the advertised one.
pub fn for_zone(
    config: &BrokerConfig,
    zone: Option<&str>,
    mut entries: Vec<BrokerEntry>,
) -> Vec<BrokerEntry> {
    if !config.load_balanced {
        return entries;
    }
    if let Some((host, port)) = zone.and_then(|z| config.zone_addrs.get(z)) {
        for e in entries.iter_mut().filter(|e| e.id == LOAD_BALANCER_ID) {
            e.host = host.clone();
            e.port = *port;
        }
    }
    entries
}

/// How long Metadata keeps listing an agent that crashed (its lease
/// lapsed) after this agent first saw it fenced. librdkafka forgets a
/// broker missing from Metadata at once, and when that broker led a
/// partition it parks the partition's queued records on an internal broker
/// until its next leader query, about a second later, even though the same
/// answer names the new leader; listed a little longer, the records move
/// straight to the new leader. The dead agent leads and coordinates nothing
/// meanwhile, and connections to it fail fast. An agent that shut down
/// (controlled shutdown) is dropped at once: its clients already moved, and
/// a listed broker that is down grows a reconnect back-off in the client
/// that would delay them when the agent returns.
pub const CRASHED_LISTING: std::time::Duration = std::time::Duration::from_secs(5);

pub use crate::fenced::FencedSince;

/// The brokers Metadata lists: [`live`], plus agents whose lease lapsed
/// less than [`CRASHED_LISTING`] ago (see there).
pub fn listed(catalog: &Metastore, config: &BrokerConfig, since: &FencedSince) -> Vec<BrokerEntry> {
    listed_at(catalog, config, since, std::time::Instant::now())
}

fn listed_at(
    catalog: &Metastore,
    config: &BrokerConfig,
    since: &FencedSince,
    now: std::time::Instant,
) -> Vec<BrokerEntry> {
    let mut out = live(catalog, config);
    if config.load_balanced {
        return out;
    }
    let all = catalog.agents();
    let mut seen = since.lock();
    seen.retain(|id, _| all.iter().any(|a| a.id == *id && a.fenced && !a.shut_down));
    for a in all.iter().filter(|a| a.fenced && !a.shut_down) {
        let first = *seen.entry(a.id).or_insert(now);
        if now.saturating_duration_since(first) < CRASHED_LISTING {
            if let Some(e) = entry(a).filter(|e| e.id != config.node_id) {
                out.push(e);
            }
        }
    }
    out.sort_by_key(|e| e.id);
    out
}

/// A broker id as clients see it: the agent's own, or the balancer's.
pub fn shown_id(config: &BrokerConfig, agent: i32) -> i32 {
    if config.load_balanced {
        LOAD_BALANCER_ID
    } else {
        agent
    }
}

/// Every live (not fenced) agent with a Kafka address, by id. This node is
/// always in the list, as its own settings say, even before its
/// registration is read back or while its lease is lapsed: the client is
/// talking to it.
pub fn agents(catalog: &Metastore, config: &BrokerConfig) -> Vec<BrokerEntry> {
    let mut out: Vec<BrokerEntry> = catalog
        .agents()
        .iter()
        .filter(|a| !a.fenced)
        .filter_map(entry)
        .filter(|e| e.id != config.node_id)
        .collect();
    out.push(BrokerEntry {
        id: config.node_id,
        host: config.advertised_host.clone(),
        port: config.advertised_port,
        rack: config.rack.clone(),
    });
    out.sort_by_key(|e| e.id);
    out
}

/// Every live agent with a native-protocol address, by id; this node
/// first-hand when its native listener is on.
pub fn native_agents(catalog: &Metastore, config: &BrokerConfig) -> Vec<BrokerEntry> {
    let mut out: Vec<BrokerEntry> = catalog
        .agents()
        .iter()
        .filter(|a| !a.fenced && i64::try_from(a.id).ok() != Some(i64::from(config.node_id)))
        .filter_map(|a| {
            let (host, port) = split_addr(a.addrs.native.as_deref()?)?;
            Some(BrokerEntry {
                id: i32::try_from(a.id).ok()?,
                host,
                port,
                rack: a.rack.clone(),
            })
        })
        .collect();
    if let Some((host, port)) = &config.native_advertised {
        out.push(BrokerEntry {
            id: config.node_id,
            host: host.clone(),
            port: *port,
            rack: config.rack.clone(),
        });
    }
    out.sort_by_key(|e| e.id);
    out
}

/// Kafka's controller id: the metastore leader while it is a live agent,
/// else this agent. Any agent serves the requests Kafka clients send to
/// the controller (CreateTopics, DeleteTopics, CreatePartitions, ...:
/// their metastore writes go to the leader from wherever they start), and
/// Apache Kafka in KRaft mode also names a live broker here, never the
/// controller quorum. An id that is no broker of the same answer, such as
/// -1 during a metastore election, makes clients like kafkajs fail the
/// request outright ("Broker -1 not found in the cached metadata").
pub fn controller(catalog: &Metastore, config: &BrokerConfig) -> i32 {
    controller_among(catalog.metastore_leader(), &live(catalog, config), config)
}

fn controller_among(leader: Option<u64>, live: &[BrokerEntry], config: &BrokerConfig) -> i32 {
    let leader = leader
        .and_then(|l| i32::try_from(l).ok())
        .filter(|id| live.iter().any(|e| e.id == *id));
    shown_id(config, leader.unwrap_or(config.node_id))
}

/// The broker clients must ask about group (or transactional id) `key`:
/// the agent holding its coordinator slot, or in load-balancer mode the
/// balancer. `None` until an agent holds slots, and while the holder is an
/// agent whose lease lapsed (its slots move to a live agent within a
/// lease driver tick, and the client asks again).
pub fn coordinator(catalog: &Metastore, config: &BrokerConfig, key: &str) -> Option<BrokerEntry> {
    if config.load_balanced {
        return live(catalog, config).into_iter().next();
    }
    let holder = catalog.coordinator(key)?.holder.agent;
    agents(catalog, config)
        .into_iter()
        .find(|e| u64::try_from(e.id).ok() == Some(holder))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_split_into_host_and_port() {
        assert_eq!(split_addr("broker-1:9092"), Some(("broker-1".into(), 9092)));
        assert_eq!(split_addr("[::1]:9092"), Some(("::1".into(), 9092)));
        assert_eq!(split_addr("nohost"), None);
        assert_eq!(split_addr(":9092"), None);
        assert_eq!(split_addr("h:99999"), None);
    }

    async fn register(b: &crate::broker::Broker, id: u64) {
        b.node
            .catalog
            .register_agent(metastore::AgentRegistration {
                id,
                addrs: metastore::AgentAddrs {
                    kafka: Some(format!("127.0.0.1:{}", 19090 + id)),
                    ..Default::default()
                },
                ..Default::default()
            })
            .await
            .expect("agent registers");
    }

    fn ids(entries: &[BrokerEntry]) -> Vec<i32> {
        entries.iter().map(|e| e.id).collect()
    }

    #[tokio::test]
    async fn a_crashed_agent_stays_listed_a_few_seconds_and_one_that_shut_down_leaves_at_once() {
        use metastore::command::Command;
        let t = crate::testing::TestBroker::start(crate::testing::Logs::Disk).await;
        let b = &t.broker;
        let me = b.config.node_id;
        register(b, 2).await;
        register(b, 3).await;
        let generation = b
            .node
            .catalog
            .agents()
            .iter()
            .find(|a| a.id == 2)
            .map(|a| a.lease_generation)
            .expect("agent 2 is known");
        b.node
            .catalog
            .submit(vec![Command::FenceAgent {
                agent_id: 2,
                observed_generation: Some(generation),
                observed_heartbeat_ms: None,
            }])
            .await
            .expect("the fence is logged")
            .remove(0)
            .expect("agent 2 is fenced as if its lease lapsed");
        b.node
            .catalog
            .shutdown_agent(3)
            .await
            .expect("agent 3 shuts down");

        let since = FencedSince::default();
        let t0 = std::time::Instant::now();
        let mut want = vec![me, 2];
        want.sort_unstable();
        assert_eq!(
            ids(&live(&b.node.catalog, &b.config)),
            vec![me],
            "neither is live"
        );
        assert_eq!(
            ids(&listed_at(&b.node.catalog, &b.config, &since, t0)),
            want
        );
        let later = t0 + CRASHED_LISTING - std::time::Duration::from_millis(1);
        assert_eq!(
            ids(&listed_at(&b.node.catalog, &b.config, &since, later)),
            want
        );
        let gone = t0 + CRASHED_LISTING;
        assert_eq!(
            ids(&listed_at(&b.node.catalog, &b.config, &since, gone)),
            vec![me]
        );

        // back: listed as live, and its fence forgotten
        b.node
            .catalog
            .heartbeat(2)
            .await
            .expect("agent 2 heartbeats");
        assert_eq!(
            ids(&listed_at(&b.node.catalog, &b.config, &since, gone)),
            want
        );
        assert!(since.lock().is_empty(), "forgotten once back");
    }

    #[tokio::test]
    async fn the_controller_is_the_metastore_leader_while_it_is_a_live_agent_and_else_this_agent() {
        let t = crate::testing::TestBroker::start(crate::testing::Logs::Disk).await;
        let b = &t.broker;
        let leader = b
            .node
            .catalog
            .metastore_leader()
            .expect("the single voter leads");
        assert_eq!(
            i64::from(controller(&b.node.catalog, &b.config)),
            i64::try_from(leader).expect("ids are small")
        );

        let mut me = b.config.clone();
        me.node_id = 9;
        let listed = |ids: &[i32]| -> Vec<BrokerEntry> {
            ids.iter()
                .map(|&id| BrokerEntry {
                    id,
                    host: "127.0.0.1".into(),
                    port: 9092,
                    rack: None,
                })
                .collect()
        };
        assert_eq!(controller_among(Some(2), &listed(&[2, 9]), &me), 2);
        assert_eq!(
            controller_among(Some(2), &listed(&[3, 9]), &me),
            9,
            "a leader that is no live agent (fenced, or a voter only): this agent stands in"
        );
        assert_eq!(
            controller_among(None, &listed(&[2, 9]), &me),
            9,
            "during an election: this agent, never -1"
        );
        me.load_balanced = true;
        assert_eq!(
            controller_among(Some(2), &listed(&[2, 9]), &me),
            LOAD_BALANCER_ID
        );
    }

    #[test]
    fn behind_a_balancer_a_client_in_a_configured_zone_sees_the_zones_address() {
        let mut config = BrokerConfig {
            load_balanced: true,
            advertised_host: "lb".into(),
            advertised_port: 9092,
            ..BrokerConfig::default()
        };
        config
            .zone_addrs
            .insert("az-b".into(), ("lb-b.example".into(), 9192));
        let lb = || {
            vec![BrokerEntry {
                id: LOAD_BALANCER_ID,
                host: "lb".into(),
                port: 9092,
                rack: None,
            }]
        };
        let seen = |c: &BrokerConfig, zone| {
            for_zone(c, zone, lb())
                .into_iter()
                .map(|e| (e.host, e.port))
                .collect::<Vec<_>>()
        };
        assert_eq!(seen(&config, Some("az-b")), [("lb-b.example".into(), 9192)]);
        assert_eq!(
            seen(&config, Some("az-c")),
            [("lb".into(), 9092)],
            "no address for az-c"
        );
        assert_eq!(seen(&config, None), [("lb".into(), 9092)]);
        config.load_balanced = false;
        assert_eq!(
            seen(&config, Some("az-b")),
            [("lb".into(), 9092)],
            "without a balancer clients reach the agents themselves"
        );
    }
}
