#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::{Duration, Instant};

use futures::FutureExt;

use super::*;

const LINGER: Duration = Duration::from_millis(5);

fn inbox() -> Arc<Inbox<u32>> {
    Inbox::new(LINGER, 1000)
}

fn woken(inbox: &Inbox<u32>) -> bool {
    inbox.woken().now_or_never().is_some()
}

fn take(inbox: &Inbox<u32>) -> (Vec<u32>, Option<Instant>, bool) {
    let mut into = Vec::new();
    let (since, closed) = inbox.take(&mut into);
    (into, since, closed)
}

#[test]
fn the_first_record_wakes_a_task_with_nothing_to_do() {
    let inbox = inbox();
    assert!(inbox.wait(None));
    inbox.send_record(1, 10).unwrap();
    assert!(woken(&inbox));
    // the task is marked busy: later records do not wake it again
    inbox.send_record(2, 10).unwrap();
    assert!(!woken(&inbox));
    let (taken, since, closed) = take(&inbox);
    assert_eq!(taken, [1, 2]);
    assert!(since.is_some());
    assert!(!closed);
}

#[test]
fn a_record_does_not_wake_a_task_due_to_look_within_its_linger() {
    let inbox = inbox();
    let before = Instant::now();
    assert!(inbox.wait(Some(before + LINGER / 2)));
    inbox.send_record(1, 10).unwrap();
    inbox.send_record(2, 10).unwrap();
    assert!(
        !woken(&inbox),
        "the task looks before the record's linger ends"
    );
    let (taken, since, _) = take(&inbox);
    assert_eq!(taken, [1, 2]);
    // the records' linger counts from when the first was queued
    let since = since.unwrap();
    assert!(since >= before && since <= Instant::now());
}

#[test]
fn a_record_wakes_a_task_due_to_look_only_after_its_linger() {
    let inbox = inbox();
    assert!(inbox.wait(Some(Instant::now() + 10 * LINGER)));
    inbox.send_record(1, 10).unwrap();
    assert!(woken(&inbox));
}

#[test]
fn a_record_wakes_a_task_past_the_time_it_meant_to_look() {
    let inbox: Arc<Inbox<u32>> = Inbox::new(Duration::from_millis(50), 1000);
    let due = Instant::now() + Duration::from_millis(20);
    assert!(inbox.wait(Some(due)));
    inbox.send_record(1, 10).unwrap();
    assert!(!woken(&inbox));
    while Instant::now() < due {
        std::thread::sleep(Duration::from_millis(5));
    }
    inbox.send_record(2, 10).unwrap();
    assert!(woken(&inbox), "its timer is late: the record wakes it");
}

#[test]
fn records_worth_a_batch_wake_the_task() {
    let inbox = inbox();
    assert!(inbox.wait(Some(Instant::now() + LINGER / 2)));
    inbox.send_record(1, 600).unwrap();
    assert!(!woken(&inbox));
    inbox.send_record(2, 400).unwrap();
    assert!(
        woken(&inbox),
        "1000 bytes queued: a full batch goes out now"
    );
}

#[test]
fn a_busy_task_is_not_woken_and_cannot_wait_while_commands_are_queued() {
    let inbox = inbox();
    // a new inbox's task is busy (it has not waited yet)
    inbox.send_record(1, 5000).unwrap();
    assert!(!woken(&inbox));
    assert!(!inbox.wait(None), "a queued record must be taken first");
    let (taken, _, _) = take(&inbox);
    assert_eq!(taken, [1]);
    assert!(inbox.wait(None));
}

#[test]
fn commands_that_are_not_records_always_wake_the_task() {
    let inbox = inbox();
    assert!(inbox.wait(Some(Instant::now())));
    inbox.send_now(7).unwrap();
    assert!(woken(&inbox));
}

#[test]
fn closing_wakes_the_task_and_an_ended_task_takes_nothing_more() {
    let inbox = inbox();
    inbox.send_record(1, 10).unwrap();
    assert!(inbox.wait(None) || !take(&inbox).0.is_empty());
    inbox.close();
    assert!(woken(&inbox));
    assert!(
        !inbox.wait(None),
        "a closed inbox does not let the task wait"
    );
    let (_, _, closed) = take(&inbox);
    assert!(closed);
    inbox.end();
    assert!(inbox.send_record(2, 10).is_err());
    assert!(inbox.send_now(3).is_err());
}

#[test]
fn commands_still_queued_when_the_task_ends_are_dropped() {
    let inbox: Arc<Inbox<Arc<()>>> = Inbox::new(LINGER, 1000);
    let command = Arc::new(());
    inbox.send_record(Arc::clone(&command), 10).unwrap();
    inbox.end();
    assert_eq!(Arc::strong_count(&command), 1, "its answer goes with it");
}
