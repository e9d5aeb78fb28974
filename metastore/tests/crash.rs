//! A metastore process killed with SIGKILL at random moments loses no
//! acknowledged write.
//!
//! The process that gets killed is this test binary again, running only
//! [`writer_process`]: it writes until killed and prints every write it had
//! acknowledged.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeSet;
use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Duration;

use metastore::{AgentAddrs, AgentRegistration, CreateTopic, Metastore, MetastoreConfig};
use metastore::{ClusterControl, Groups, Topics};
use rand::Rng;

/// Set in the child process: the data directory to write into.
const WRITER_DIR: &str = "METASTORE_CRASH_WRITER_DIR";
const WRITERS: usize = 8;

#[derive(Default)]
struct Acked {
    topics: BTreeSet<String>,
    /// End of the highest producer id block handed out.
    pid_end: i64,
}

/// Runs the writer process until it has acknowledged `writes` more writes, then SIGKILLs it.
fn run_and_kill(dir: &std::path::Path, writes: usize, acked: &mut Acked) {
    let mut child = Command::new(std::env::current_exe().expect("this test binary"))
        .args(["writer_process", "--exact", "--ignored", "--nocapture"])
        .env(WRITER_DIR, dir)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("start the writer");
    // the test harness prints its own lines around the writer's
    let mut lines = BufReader::new(child.stdout.take().unwrap())
        .lines()
        .map(|l| l.unwrap())
        .filter(|l| l == "READY" || l.starts_with("ACK "));
    assert_eq!(lines.next().expect("the writer starts"), "READY");
    let mut seen = 0;
    while seen < writes {
        let line = lines.next().expect("writer ended early");
        let parts: Vec<&str> = line.split(' ').collect();
        match parts.as_slice() {
            ["ACK", "topic", name] => {
                acked.topics.insert((*name).to_owned());
            }
            ["ACK", "pids", _, end] => acked.pid_end = acked.pid_end.max(end.parse().unwrap()),
            _ => panic!("unexpected line {line:?}"),
        }
        seen += 1;
    }
    child.kill().unwrap(); // SIGKILL: no shutdown path runs
    child.wait().unwrap();
}

#[test]
fn sigkill_at_random_moments_loses_no_acknowledged_write() {
    let dir = tempfile::tempdir().unwrap();
    let mut acked = Acked::default();
    let mut rng = rand::thread_rng();
    for _ in 0..3 {
        run_and_kill(dir.path(), rng.gen_range(20..120), &mut acked);
    }
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let ms = Metastore::start(MetastoreConfig::embedded(dir.path()))
            .await
            .unwrap();
        let topics: BTreeSet<String> = ms.topics().into_iter().map(|t| t.name.clone()).collect();
        let missing: Vec<_> = acked.topics.difference(&topics).collect();
        assert!(missing.is_empty(), "acknowledged topics lost: {missing:?}");
        assert!(
            acked.topics.len() >= 20,
            "the writer made progress: {}",
            acked.topics.len()
        );
        let next = ms.allocate_producer_ids(1).await.unwrap();
        assert!(
            next.start >= acked.pid_end,
            "producer ids {next:?} reuse an acknowledged block ending at {}",
            acked.pid_end
        );
        ms.shutdown().await.unwrap();
    });
}

/// The process the test kills: writes until killed, printing `READY`, then
/// `ACK topic <name>` / `ACK pids <start> <end>` per acknowledged write.
#[test]
#[ignore = "run by sigkill_at_random_moments_loses_no_acknowledged_write in a child process"]
fn writer_process() {
    let Some(dir) = std::env::var_os(WRITER_DIR).map(PathBuf::from) else {
        return;
    };
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let config = MetastoreConfig {
            agent_lease: Duration::from_secs(3600),
            ..MetastoreConfig::embedded(dir)
        };
        let node = Metastore::start(config).await.unwrap();
        let registration = AgentRegistration {
            id: 1,
            addrs: AgentAddrs {
                connect: None,
                kafka: Some("127.0.0.1:9093".into()),
                ..AgentAddrs::default()
            },
            rack: None,
            instance: None,
        };
        node.register_agent(registration).await.unwrap();
        say("READY");
        let mut tasks = Vec::new();
        for w in 0..WRITERS {
            let node = node.clone();
            tasks.push(tokio::spawn(async move {
                for i in 0u64.. {
                    if i % 4 == 3 {
                        let ids = node.allocate_producer_ids(100).await.unwrap();
                        say(&format!("ACK pids {} {}", ids.start, ids.end));
                    } else {
                        let name = format!("w{w}-{}", uuid::Uuid::new_v4().simple());
                        node.create_topic(CreateTopic::new(name.clone(), 1, 1), false)
                            .await
                            .unwrap();
                        say(&format!("ACK topic {name}"));
                    }
                }
            }));
        }
        for t in tasks {
            t.await.unwrap();
        }
    });
}

/// One whole line, flushed at once: the parent may kill this process any time.
fn say(line: &str) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{line}");
    let _ = out.flush();
}
