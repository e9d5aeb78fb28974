//! A metastore process killed with SIGKILL at random moments loses no
//! acknowledged write.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeSet;
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

use metastore::{Metastore, MetastoreConfig};
use rand::Rng;

#[derive(Default)]
struct Acked {
    topics: BTreeSet<String>,
    /// End of the highest producer id block handed out.
    pid_end: i64,
}

/// Runs the writer process until it has acknowledged `writes` more writes, then SIGKILLs it.
fn run_and_kill(dir: &std::path::Path, writes: usize, acked: &mut Acked) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_metabench"))
        .args(["crash-writer", "--writers", "8", "--dir"])
        .arg(dir)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("start the writer");
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    assert_eq!(lines.next().unwrap().unwrap(), "READY");
    let mut seen = 0;
    while seen < writes {
        let line = lines.next().expect("writer ended early").unwrap();
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
