use std::sync::mpsc;

use openraft::{CommittedLeaderId, EntryPayload};
use uuid::Uuid;

use super::*;
use crate::command::{Command, Proposal};
use crate::types::{AgentRegistration, CreateTopic};

fn entry(index: u64, commands: Vec<Command>) -> Entry {
    Entry {
        log_id: LogId::new(CommittedLeaderId::new(1, 1), index),
        payload: EntryPayload::Normal(Proposal {
            now_ms: 1_700_000_000_000,
            commands,
            spans: Vec::new(),
        }),
    }
}

fn create(name: &str) -> Command {
    Command::CreateTopic {
        id: Uuid::new_v4(),
        spec: CreateTopic::new(name, 1, 1),
        validate_only: false,
    }
}

fn store(dir: &Path) -> StateMachineStore {
    let (events, _) = broadcast::channel(16);
    StateMachineStore::open(dir, events, None).expect("open the state machine")
}

/// While a snapshot is being serialised, `apply` (the write lock) and readers
/// go on: the builder serialises a copy, not the shared state under its lock.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_snapshot_build_does_not_hold_the_state_lock_while_it_serialises() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut sm = store(dir.path());
    let register = Command::RegisterAgent {
        registration: AgentRegistration {
            id: 1,
            ..AgentRegistration::default()
        },
    };
    sm.apply([entry(1, vec![register, create("before")])])
        .await
        .expect("apply");

    let (parked_tx, parked_rx) = mpsc::channel::<()>();
    let (release_tx, release_rx) = mpsc::channel::<()>();
    sm.hooks.on_mid_serialisation(move || {
        let _ = parked_tx.send(());
        // returns when released, or when the test ends and drops the sender
        let _ = release_rx.recv();
    });
    let mut builder = sm.get_snapshot_builder().await;
    let build = tokio::spawn(async move { builder.build_snapshot().await });
    tokio::task::spawn_blocking(move || parked_rx.recv())
        .await
        .expect("join")
        .expect("the builder reaches the pause point");

    // the builder is parked mid-serialisation
    let shared = sm.shared();
    assert!(
        shared.try_write().is_some(),
        "the snapshot builder holds the state lock while serialising"
    );
    sm.apply([entry(2, vec![create("during")])])
        .await
        .expect("apply while a snapshot is being built");
    assert!(
        shared.read().state.topic("during").is_some(),
        "readers see writes applied during the build"
    );

    release_tx.send(()).expect("release the builder");
    let snapshot = build.await.expect("join").expect("build the snapshot");
    assert_eq!(snapshot.meta.last_log_id.map(|l| l.index), Some(1));
    let state: MetaState =
        serde_json::from_slice(snapshot.snapshot.get_ref()).expect("decode the snapshot");
    assert!(state.topic("before").is_some());
    assert!(
        state.topic("during").is_none(),
        "the snapshot holds exactly the state at its log id"
    );
}

/// Two snapshots in `dir` (up to entries 1 and 2), the newest damaged.
async fn two_snapshots_the_newest_damaged(dir: &Path) -> PathBuf {
    let mut sm = store(dir);
    let register = Command::RegisterAgent {
        registration: AgentRegistration {
            id: 1,
            ..AgentRegistration::default()
        },
    };
    sm.apply([entry(1, vec![register])]).await.expect("apply");
    sm.build_snapshot().await.expect("older snapshot");
    sm.apply([entry(2, vec![create("later")])])
        .await
        .expect("apply");
    sm.build_snapshot().await.expect("newest snapshot");
    let newest = snapshot_files(dir)
        .expect("list")
        .pop()
        .expect("a snapshot");
    let mut bytes = std::fs::read(&newest).expect("read");
    let mid = bytes.len() / 2;
    bytes[mid] ^= 0x01;
    std::fs::write(&newest, bytes).expect("damage");
    newest
}

#[tokio::test]
async fn a_damaged_newest_snapshot_refuses_to_start_once_the_log_is_purged_past_the_older_one() {
    let dir = tempfile::tempdir().expect("tempdir");
    let newest = two_snapshots_the_newest_damaged(dir.path()).await;
    let (events, _) = broadcast::channel(16);
    let err = StateMachineStore::open(dir.path(), events, Some(2))
        .err()
        .expect("refused");
    let text = err.to_string();
    let name = newest.file_name().expect("name").to_string_lossy();
    assert!(text.contains(&*name), "{text}");
    assert!(text.contains("purged up to entry 2"), "{text}");
}

#[tokio::test]
async fn a_damaged_newest_snapshot_falls_back_while_the_log_reaches_the_older_one() {
    let dir = tempfile::tempdir().expect("tempdir");
    two_snapshots_the_newest_damaged(dir.path()).await;
    for purged in [None, Some(1)] {
        let (events, _) = broadcast::channel(16);
        let sm = StateMachineStore::open(dir.path(), events, purged).expect("falls back");
        let a = sm.shared();
        let a = a.read();
        assert_eq!(a.last_applied.map(|l| l.index), Some(1));
        assert!(a.state.topic("later").is_none(), "the log replays the rest");
    }
}

#[tokio::test]
async fn a_purged_log_without_a_readable_snapshot_refuses_to_start() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (events, _) = broadcast::channel(16);
    let err = StateMachineStore::open(dir.path(), events, Some(7))
        .err()
        .expect("refused");
    assert!(err.to_string().contains("purged up to entry 7"), "{err}");
}
