use super::*;

#[test]
fn cluster_ids_look_like_kafkas() {
    let a = new_cluster_id();
    assert_eq!(a.len(), 22);
    assert!(a
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_'));
    assert_ne!(a, new_cluster_id());
}

mod on_a_running_metastore {
    use std::time::{Duration, Instant};

    use crate::command::{Command, Proposal};
    use crate::proposer::wall_clock_ms;
    use crate::types::{AgentAddrs, AgentRegistration};
    use crate::{ClusterControl, Metastore, MetastoreConfig};

    fn agent(id: u64) -> AgentRegistration {
        AgentRegistration {
            id,
            addrs: AgentAddrs {
                connect: None,
                kafka: Some(format!("127.0.0.1:{}", 9000 + id)),
                ..AgentAddrs::default()
            },
            rack: None,
            instance: None,
        }
    }

    async fn start(dir: &std::path::Path, lease: Duration) -> Metastore {
        Metastore::start(MetastoreConfig {
            agent_lease: lease,
            ..MetastoreConfig::embedded(dir)
        })
        .await
        .expect("the metastore starts")
    }

    async fn eventually(what: &str, mut check: impl FnMut() -> bool) {
        let start = Instant::now();
        while !check() {
            assert!(
                start.elapsed() < Duration::from_secs(20),
                "timed out waiting for: {what}"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    fn fenced(ms: &Metastore, id: u64) -> bool {
        ms.agents().iter().any(|a| a.id == id && a.fenced)
    }

    /// Heartbeats go to the leader and are timed there: a live agent's
    /// heartbeats write nothing to the Raft log.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn heartbeats_keep_a_lease_without_writing_the_log() {
        let dir = tempfile::tempdir().expect("tmp");
        let ms = start(dir.path(), Duration::from_millis(400)).await;
        let _alive = ms.keep_agent_alive(agent(1), Duration::from_millis(50));
        eventually("agent 1 registered", || ms.agents().len() == 1).await;
        let before = ms.raft_metrics().last_log_index;
        for _ in 0..20 {
            ms.heartbeat(1).await.expect("heartbeat");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        assert_eq!(
            ms.raft_metrics().last_log_index,
            before,
            "two leases of heartbeats, not one log entry"
        );
        assert!(!fenced(&ms, 1));
        ms.shutdown().await.expect("shutdown");
    }

    /// The log holds a heartbeat stamped a minute ahead (logged by a voter
    /// whose clock ran ahead while it led). The agent then goes silent: it
    /// is fenced once this leader has not heard it for a lease, whatever
    /// the stamp says. A fenced agent's heartbeat lifts the fence.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_heartbeat_stamped_by_a_clock_ahead_does_not_keep_a_silent_agent_alive() {
        let dir = tempfile::tempdir().expect("tmp");
        let ms = start(dir.path(), Duration::from_millis(400)).await;
        ms.register_agent(agent(1)).await.expect("register");
        let skewed = Proposal {
            now_ms: wall_clock_ms() + 60_000,
            commands: vec![Command::Heartbeat { agent_id: 1 }],
            spans: Vec::new(),
        };
        ms.node
            .raft
            .client_write(skewed)
            .await
            .expect("a heartbeat stamped a minute ahead");
        eventually("the silent agent is fenced", || fenced(&ms, 1)).await;
        ms.heartbeat(1).await.expect("it is back");
        assert!(!fenced(&ms, 1), "its heartbeat lifted the fence");
        ms.shutdown().await.expect("shutdown");
    }
}
