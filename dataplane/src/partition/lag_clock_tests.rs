//! A follower's replica lag is measured on the monotonic clock: a step of
//! the wall clock (NTP, an operator) must neither empty the ISR at once (a
//! step forward past `replica.lag.time.max.ms`) nor freeze it (a step
//! back, after which no follower would ever lag). Paused tokio time moves
//! the monotonic clock and leaves the wall clock alone, so a leader that
//! reads the wall clock would not see the lag grow here.

use std::sync::Arc;
use std::time::Duration;

use tokio::runtime::Handle;
use uuid::Uuid;

use super::*;
use crate::backend::disk::DiskLogFactory;
use crate::partition::replication::replica_set::Assignment;
use crate::testing::scratch_dir;
use crate::topic_config::{log_settings, LogDefaults};

const LAG_MS: i64 = 10_000;

#[tokio::test(start_paused = true)]
async fn the_lag_clock_moves_with_monotonic_time_and_not_with_the_wall_clock() {
    let t0 = monotonic_ms();
    let wall = now_ms();
    std::thread::sleep(Duration::from_millis(20));
    assert!(now_ms() > wall, "the wall clock moved");
    assert_eq!(monotonic_ms(), t0, "the monotonic clock is paused");
    tokio::time::advance(Duration::from_secs(31)).await;
    assert_eq!(monotonic_ms() - t0, 31_000);
}

#[tokio::test]
async fn a_silent_follower_leaves_the_isr_after_the_lag_time_of_the_monotonic_clock() {
    let dir = scratch_dir();
    let registry = Arc::new(Partitions::new(
        vec![Handle::current()],
        Arc::new(DiskLogFactory::new(dir.path()).expect("factory")),
    ));
    let h = registry
        .get_or_open("t", Uuid::new_v4(), 0, || {
            log_settings(&Default::default(), &LogDefaults::default())
        })
        .await
        .expect("open");
    // from here on only the monotonic clock moves, and only when told
    tokio::time::pause();
    let (isr_requests, mut proposals) = tokio::sync::mpsc::unbounded_channel();
    h.lead(Leadership {
        me: 1,
        assignment: Assignment {
            leader_epoch: 0,
            partition_epoch: 0,
            replicas: vec![1, 2],
            isr: vec![1, 2],
        },
        min_insync: 1,
        lag_max_ms: LAG_MS,
        ineligible: Vec::new(),
        isr_requests,
    })
    .await
    .expect("lead");
    // follower 2 never fetches
    tokio::time::sleep(Duration::from_millis(LAG_MS as u64 - 1_000)).await;
    assert!(proposals.try_recv().is_err(), "within the lag time");
    tokio::time::sleep(Duration::from_millis(2_000)).await;
    let shrink = proposals.try_recv().expect("the silent follower leaves");
    assert_eq!(shrink.change.isr, vec![1]);
    registry.close_all().await;
}
