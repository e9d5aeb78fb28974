use std::path::PathBuf;

use super::*;

fn waiting(op: OpId, size: u64, since: Instant) -> Waiting {
    Waiting {
        op,
        partition: PartitionKey::new(uuid::Uuid::nil(), 0),
        segment: SealedSegment {
            base_offset: 0,
            last_offset: 0,
            size,
            path: PathBuf::new(),
            offset_index_path: PathBuf::new(),
            time_index_path: PathBuf::new(),
            first_timestamp: -1,
            max_timestamp: -1,
            crc32c: None,
            producer_snapshot_path: PathBuf::new(),
            txn_index_path: PathBuf::new(),
        },
        attempt: 0,
        since,
    }
}

fn config() -> PackConfig {
    PackConfig {
        target_bytes: 100,
        floor_bytes: 40,
        linger: Duration::from_secs(10),
        max_wait: Duration::from_secs(60),
        max_uploading: 1,
        ..PackConfig::default()
    }
}

fn ops(pack: Option<Vec<Waiting>>) -> Vec<OpId> {
    pack.unwrap_or_default().iter().map(|w| w.op).collect()
}

#[test]
fn a_pack_goes_at_its_target_size_and_never_past_it_unless_one_segment_is_larger() {
    let t0 = Instant::now();
    let mut p = Packer::new(config());
    p.add(waiting(1, 30, t0));
    p.add(waiting(2, 30, t0));
    assert!(p.take(t0).is_none(), "60 bytes wait for company");
    p.add(waiting(3, 30, t0));
    p.add(waiting(4, 30, t0));
    assert_eq!(ops(p.take(t0)), [1, 2, 3], "120 waiting: the first 90 go");
    assert!(p.take(t0).is_none(), "30 left, and one pack is uploading");
    p.finished();
    p.add(waiting(5, 500, t0));
    assert_eq!(
        ops(p.take(t0)),
        [4],
        "the large segment does not join a pack past its target"
    );
    p.finished();
    assert_eq!(ops(p.take(t0)), [5], "alone, it goes as its own pack");
}

#[test]
fn small_packs_wait_for_the_floor_until_the_longest_wait_forces_them() {
    let t0 = Instant::now();
    let mut p = Packer::new(config());
    p.add(waiting(1, 10, t0));
    assert!(
        p.take(t0 + Duration::from_secs(11)).is_none(),
        "below the floor after linger"
    );
    p.add(waiting(2, 35, t0 + Duration::from_secs(5)));
    assert_eq!(
        ops(p.take(t0 + Duration::from_secs(11))),
        [1, 2],
        "at the floor once the oldest lingered"
    );
    p.finished();
    p.add(waiting(3, 10, t0));
    assert!(p.take(t0 + Duration::from_secs(59)).is_none());
    assert_eq!(ops(p.take(t0 + Duration::from_secs(60))), [3], "max wait");
}

#[test]
fn an_entry_is_committed_only_while_its_pack_is_well_inside_the_grace_period() {
    let grace = Duration::from_secs(600);
    let packed_at = |ms: i64| TieredSegment {
        pack: Some(PackedAt {
            key: format!("c1/{PACKS_DIR}/{ms:013}-0123abcd.{PACK_EXT}"),
            ..PackedAt::default()
        }),
        ..TieredSegment::default()
    };
    let now = now_ms();
    assert!(!too_old_to_commit(&packed_at(now - 1_000), grace));
    assert!(!too_old_to_commit(&packed_at(now - 290_000), grace));
    assert!(
        too_old_to_commit(&packed_at(now - 310_000), grace),
        "past half the grace"
    );
    assert!(
        !too_old_to_commit(&TieredSegment::default(), grace),
        "unpacked entries never"
    );
    let unreadable = TieredSegment {
        pack: Some(PackedAt {
            key: "c1/packs/odd.pack".into(),
            ..PackedAt::default()
        }),
        ..TieredSegment::default()
    };
    assert!(
        too_old_to_commit(&unreadable, grace),
        "a key without its time is not trusted"
    );
}
