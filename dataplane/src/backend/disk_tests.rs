use super::*;
use crate::testing::{batch_of, scratch_dir};
use crate::topic_config::{log_settings, LogDefaults};

fn settings() -> LogSettings {
    log_settings(&Default::default(), &LogDefaults::default())
}

fn append_one(log: &mut OpenedLog, value: &[u8]) {
    let mut rec = batch_of(&[value]);
    log.log.append(&mut rec, 0, 1, None).expect("append");
}

#[test]
fn a_recreated_topic_never_sees_the_data_of_its_deleted_namesake() {
    let root = scratch_dir();
    let f = DiskLogFactory::new(root.path()).expect("factory");
    let old = Uuid::new_v4();
    let mut log = f.open("t", old, 0, &settings()).expect("open");
    append_one(&mut log, b"old");
    log.log.close().expect("close");
    // The process died before the deleted topic's files were removed.
    let log = f.open("t", Uuid::new_v4(), 0, &settings()).expect("reopen");
    assert_eq!(
        log.log.log_end_offset(),
        0,
        "fresh log for the new incarnation"
    );
    log.log.close().expect("close");
}

#[test]
fn reopening_the_same_incarnation_keeps_its_data() {
    let root = scratch_dir();
    let f = DiskLogFactory::new(root.path()).expect("factory");
    let id = Uuid::new_v4();
    let mut log = f.open("t", id, 0, &settings()).expect("open");
    append_one(&mut log, b"kept");
    log.log.close().expect("close");
    let log = f.open("t", id, 0, &settings()).expect("reopen");
    assert_eq!(log.log.log_end_offset(), 1);
}

/// A power loss soon after a partition's first open can leave its marker
/// empty (delayed allocation) while fsynced segments survive: the directory
/// is still this topic's, and its data must not be set aside.
#[test]
fn an_empty_or_torn_marker_is_claimed_not_set_aside() {
    let root = scratch_dir();
    let f = DiskLogFactory::new(root.path()).expect("factory");
    let id = Uuid::new_v4();
    for torn in [&b""[..], &b"0f3a-"[..], &[0xffu8, 0xfe][..]] {
        let mut log = f.open("t", id, 0, &settings()).expect("open");
        append_one(&mut log, b"data");
        let end = log.log.log_end_offset();
        log.log.close().expect("close");
        std::fs::write(root.path().join("t-0").join(TOPIC_ID_FILE), torn).expect("tear");
        let log = f.open("t", id, 0, &settings()).expect("reopen");
        assert_eq!(
            log.log.log_end_offset(),
            end,
            "data kept with marker {torn:?}"
        );
        log.log.close().expect("close");
        let marker = std::fs::read_to_string(root.path().join("t-0").join(TOPIC_ID_FILE))
            .expect("marker rewritten");
        assert_eq!(marker, id.to_string());
    }
}

/// `Path::with_extension` once named both partitions of `orders.v1`
/// `orders.<id>.deleted`, so the second rename failed and the partition
/// never opened again.
#[test]
fn each_partition_of_a_dotted_topic_is_set_aside_on_its_own() {
    let root = scratch_dir();
    let f = DiskLogFactory::new(root.path()).expect("factory");
    let old = Uuid::new_v4();
    for p in 0..2 {
        let mut log = f.open("orders.v1", old, p, &settings()).expect("open");
        append_one(&mut log, b"old");
        log.log.close().expect("close");
    }
    let new = Uuid::new_v4();
    for p in 0..2 {
        let log = f.open("orders.v1", new, p, &settings()).expect("reopen");
        assert_eq!(log.log.log_end_offset(), 0);
        log.log.close().expect("close");
    }
    // (The names cannot be listed here: the factory's sweep may already
    // have removed them.)
    assert_eq!(
        set_aside_path(&root.path().join("orders.v1-7"), old),
        root.path().join(format!("orders.v1-7.{old}.deleted"))
    );
}

#[test]
fn set_aside_directories_are_removed_when_the_factory_starts() {
    let root = scratch_dir();
    let stale = root.path().join(format!("t-0.{}.deleted", Uuid::new_v4()));
    std::fs::create_dir_all(&stale).expect("mkdir");
    std::fs::write(stale.join("00000000000000000000.log"), b"old").expect("write");
    let live = root.path().join("t-1");
    std::fs::create_dir_all(&live).expect("mkdir");
    let _f = DiskLogFactory::new(root.path()).expect("factory");
    for _ in 0..500 {
        if !stale.exists() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    assert!(!stale.exists(), "the set-aside directory is removed");
    assert!(live.exists(), "live partitions are left alone");
}
