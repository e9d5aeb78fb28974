//! The follower side of replication: a follower log fed the bytes a leader
//! log returns from `read` ends up holding the same batches, epochs and
//! producer state, refuses input that does not continue it, and can be
//! truncated back to where a new leader's log diverges.
#![allow(clippy::unwrap_used)]

mod common;

use std::os::unix::fs::MetadataExt;
use std::path::Path;

use kafka_protocol::records::Compression;
use storage::batch::BatchIter;
use storage::{AppendOutcome, PartitionLog, StorageError};

const TS: i64 = 1_700_000_000_000;
/// Fetch size of the follower: several batches, never a whole segment.
const FETCH_BYTES: usize = 48 << 10;

fn open(dir: &Path) -> PartitionLog {
    PartitionLog::open(dir, common::small_segments()).unwrap()
}

/// A ~10 KiB batch of 50 records; `tag` makes its values unique.
fn produce(log: &mut PartitionLog, epoch: i32, tag: u64) {
    let mut b = common::batch_with(50, 200, TS + tag as i64, Compression::None, None, tag);
    log.append(&mut b, epoch, TS).unwrap();
}

/// Fetches from `leader` at the follower's log end until it has caught up.
fn replicate(leader: &PartitionLog, follower: &mut PartitionLog) {
    while follower.log_end_offset() < leader.log_end_offset() {
        let at = follower.log_end_offset();
        let slice = leader
            .read(at, FETCH_BYTES, leader.log_end_offset())
            .unwrap();
        let bytes = slice.read_to_bytes().unwrap();
        let done = follower.append_replicated(&bytes, TS).unwrap();
        assert_eq!(done.first_offset, at);
        assert_eq!(done.log_end_offset, slice.next_offset);
        assert_eq!(done.bytes, bytes.len());
    }
}

/// Every byte of the log from its start to its end, as fetches see it.
fn bytes_of(log: &PartitionLog) -> Vec<u8> {
    let mut out = Vec::new();
    let mut at = log.log_start_offset();
    while at < log.log_end_offset() {
        let s = log.read(at, 1 << 20, log.log_end_offset()).unwrap();
        out.extend_from_slice(&s.read_to_bytes().unwrap());
        at = s.next_offset;
    }
    out
}

/// The leader's batches from `from` on, one byte vector each.
fn batches_from(log: &PartitionLog, from: i64) -> Vec<Vec<u8>> {
    let s = log.read(from, 1 << 20, log.log_end_offset()).unwrap();
    let bytes = s.read_to_bytes().unwrap();
    BatchIter::new(&bytes)
        .map(|b| b.unwrap().1.to_vec())
        .collect()
}

fn same_epoch_answers(a: &PartitionLog, b: &PartitionLog) {
    for epoch in -1..=6 {
        assert_eq!(
            a.epoch_end_offset(epoch),
            b.epoch_end_offset(epoch),
            "OffsetForLeaderEpoch of epoch {epoch}"
        );
    }
    assert_eq!(a.latest_epoch(), b.latest_epoch());
}

/// A leader with 120 batches at epoch 1, then 120 at epoch 3 (about five
/// segments of 1 MiB).
fn leader_with_two_epochs(dir: &Path) -> PartitionLog {
    let mut leader = open(dir);
    for i in 0..120 {
        produce(&mut leader, 1, i);
    }
    for i in 120..240 {
        produce(&mut leader, 3, i);
    }
    assert!(leader.segments().len() >= 3);
    leader
}

#[test]
fn a_follower_fed_the_leaders_batches_holds_the_same_bytes_offsets_and_epochs() {
    let (ld, fd) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let leader = leader_with_two_epochs(ld.path());
    let mut follower = open(fd.path());

    replicate(&leader, &mut follower);

    assert_eq!(follower.log_end_offset(), leader.log_end_offset());
    assert_eq!(bytes_of(&follower), bytes_of(&leader));
    assert!(follower.segments().len() >= 3, "the follower rolls too");
    assert!(follower.segments().iter().rev().skip(1).all(|s| s.sealed));
    same_epoch_answers(&leader, &follower);
    assert_eq!(follower.epoch_end_offset(1), Some((1, 120 * 50)));
    assert_eq!(follower.epoch_end_offset(2), Some((1, 120 * 50)));
    // Reads through the follower's own indexes land on the same batches.
    for at in [0, 49, 50, 3_333, 120 * 50, 240 * 50 - 1] {
        let l = leader.read(at, 1, i64::MAX).unwrap();
        let f = follower.read(at, 1, i64::MAX).unwrap();
        assert_eq!(
            (l.first_offset, l.next_offset),
            (f.first_offset, f.next_offset)
        );
        assert_eq!(l.read_to_bytes().unwrap(), f.read_to_bytes().unwrap());
    }
    let empty = follower.append_replicated(&[], TS).unwrap();
    assert_eq!(
        (empty.batches, empty.bytes, empty.log_end_offset),
        (0, 0, leader.log_end_offset())
    );
}

#[test]
fn input_that_does_not_continue_the_follower_log_is_refused_and_writes_nothing() {
    let (ld, fd) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let mut leader = open(ld.path());
    for i in 0..6 {
        produce(&mut leader, 2, i);
    }
    let batches = batches_from(&leader, 0);
    let mut follower = open(fd.path());
    follower
        .append_replicated(&[batches[0].clone(), batches[1].clone()].concat(), TS)
        .unwrap();
    let before = bytes_of(&follower);
    let end = follower.log_end_offset();
    assert_eq!(end, 100);

    let refused = |follower: &mut PartitionLog, input: Vec<u8>| {
        let e = follower.append_replicated(&input, TS).unwrap_err();
        assert_eq!(follower.log_end_offset(), end, "{e}");
        assert_eq!(bytes_of(follower), before, "{e}");
        e
    };

    // A gap: the batch at 150 without the one at 100.
    let e = refused(&mut follower, batches[3].clone());
    assert!(
        matches!(
            e,
            StorageError::ReplicaOffsetMismatch {
                expected: 100,
                got: 150
            }
        ),
        "{e}"
    );
    // An overlap: the batch at 50 again.
    let e = refused(&mut follower, batches[1].clone());
    assert!(
        matches!(
            e,
            StorageError::ReplicaOffsetMismatch {
                expected: 100,
                got: 50
            }
        ),
        "{e}"
    );
    // A gap inside the input, after a batch that would fit.
    let e = refused(
        &mut follower,
        [batches[2].clone(), batches[4].clone()].concat(),
    );
    assert!(
        matches!(
            e,
            StorageError::ReplicaOffsetMismatch {
                expected: 150,
                got: 200
            }
        ),
        "{e}"
    );
    // A bad CRC in the second batch refuses the first one too.
    let mut damaged = batches[3].clone();
    let last = damaged.len() - 1;
    damaged[last] ^= 0x01;
    let e = refused(&mut follower, [batches[2].clone(), damaged].concat());
    assert!(matches!(e, StorageError::CorruptBatch { .. }), "{e}");
    // A torn batch.
    let e = refused(&mut follower, batches[2][..batches[2].len() - 3].to_vec());
    assert!(matches!(e, StorageError::CorruptBatch { .. }), "{e}");
    // An epoch below the log's latest (the epoch lies outside the CRC).
    let mut old_epoch = batches[2].clone();
    storage::batch::stamp(&mut old_epoch, 100, 1);
    let e = refused(&mut follower, old_epoch);
    assert!(
        matches!(
            e,
            StorageError::StaleLeaderEpoch {
                received: 1,
                latest: 2
            }
        ),
        "{e}"
    );
    // Epochs going backwards inside the input.
    let mut newer = batches[2].clone();
    storage::batch::stamp(&mut newer, 100, 5);
    let e = refused(&mut follower, [newer, batches[3].clone()].concat());
    assert!(
        matches!(
            e,
            StorageError::StaleLeaderEpoch {
                received: 2,
                latest: 5
            }
        ),
        "{e}"
    );
    assert_eq!(follower.latest_epoch(), Some(2));
    // The right continuation is still accepted.
    follower
        .append_replicated(&batches[2..].concat(), TS)
        .unwrap();
    assert_eq!(bytes_of(&follower), bytes_of(&leader));
}

#[test]
fn a_promoted_follower_answers_a_retry_of_a_replicated_batch_as_a_duplicate() {
    let (ld, fd) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let mut leader = open(ld.path());
    let pid = 4_242;
    produce(&mut leader, 0, 0);
    for seq in [0, 5, 10] {
        let mut b = common::idem_batch(pid, 3, seq, 5);
        assert!(matches!(
            leader.append(&mut b, 0, TS).unwrap(),
            AppendOutcome::Appended(_)
        ));
    }
    let mut follower = open(fd.path());
    replicate(&leader, &mut follower);
    assert_eq!(follower.producer_count(), 1);

    // The follower becomes leader at epoch 1; the producer retries its
    // last batch (its acknowledgement was lost with the old leader).
    let mut retry = common::idem_batch(pid, 3, 10, 5);
    let outcome = follower.append(&mut retry, 1, TS).unwrap();
    let AppendOutcome::Duplicate(info) = outcome else {
        panic!("a retry must be a duplicate, got {outcome:?}");
    };
    assert_eq!((info.base_offset, info.last_offset), (60, 64));
    assert_eq!(follower.log_end_offset(), 65, "nothing written");

    // Its next batch continues the sequence; a gap is still refused.
    let mut gap = common::idem_batch(pid, 3, 20, 5);
    assert!(matches!(
        follower.append(&mut gap, 1, TS).unwrap_err(),
        StorageError::OutOfOrderSequence { expected: 15, .. }
    ));
    let mut next = common::idem_batch(pid, 3, 15, 5);
    let outcome = follower.append(&mut next, 1, TS).unwrap();
    assert!(
        matches!(outcome, AppendOutcome::Appended(i) if i.base_offset == 65),
        "{outcome:?}"
    );
    assert_eq!(follower.epoch_end_offset(0), Some((0, 65)));
}

#[test]
fn a_follower_truncated_to_a_new_leaders_divergence_point_takes_its_tail() {
    let (ad, bd, fd) = (
        tempfile::tempdir().unwrap(),
        tempfile::tempdir().unwrap(),
        tempfile::tempdir().unwrap(),
    );
    // Old leader A: epoch 1 up to 120 batches, and the follower has it all.
    let mut a = open(ad.path());
    for i in 0..120 {
        produce(&mut a, 1, i);
    }
    let mut follower = open(fd.path());
    replicate(&a, &mut follower);
    // A wrote a tail at epoch 2 that only the follower saw.
    for i in 120..200 {
        produce(&mut a, 2, i);
    }
    replicate(&a, &mut follower);
    // New leader B had only A's first 70 batches, then led at epoch 3.
    let mut b = open(bd.path());
    while b.log_end_offset() < 70 * 50 {
        let s = a.read(b.log_end_offset(), FETCH_BYTES, 70 * 50).unwrap();
        b.append_replicated(&s.read_to_bytes().unwrap(), TS)
            .unwrap();
    }
    for i in 1_000..1_090 {
        produce(&mut b, 3, i);
    }

    // OffsetForLeaderEpoch against the new leader, as a follower asks it.
    let asked = follower.latest_epoch().unwrap();
    assert_eq!(asked, 2);
    let (epoch, end) = b.epoch_end_offset(asked).unwrap();
    assert_eq!((epoch, end), (1, 70 * 50));
    let (_, own_end) = follower.epoch_end_offset(epoch).unwrap();
    follower.truncate_to(end.min(own_end)).unwrap();
    assert_eq!(follower.log_end_offset(), 70 * 50);
    assert_eq!(follower.latest_epoch(), Some(1), "epoch 2 is gone");

    replicate(&b, &mut follower);
    assert_eq!(bytes_of(&follower), bytes_of(&b));
    same_epoch_answers(&b, &follower);

    // Tiering takes a segment's checksum from its appends: a truncated one
    // must not claim the checksum of bytes it no longer holds.
    let kept = |log: &PartitionLog| {
        let mut known = 0;
        for s in log.segments() {
            if let Some(crc) = s.crc32c {
                let bytes = std::fs::read(&s.path).unwrap();
                assert_eq!((crc32c::crc32c(&bytes), bytes.len() as u64), (crc, s.size));
                known += 1;
            }
        }
        known
    };
    assert_eq!(
        kept(&a),
        a.segments().len(),
        "written whole by this process"
    );
    assert_eq!(kept(&b), b.segments().len());
    let cut = follower
        .segments()
        .into_iter()
        .find(|s| s.base_offset <= 70 * 50 && 70 * 50 <= s.last_offset + 1)
        .unwrap();
    assert_eq!(cut.crc32c, None, "{cut:?}");
    assert!(kept(&follower) > 0);
}

/// Idempotent producer `pid`'s batch of `n` records from `seq`, appended
/// as leader at `epoch`; its base offset.
fn produce_idem(log: &mut PartitionLog, epoch: i32, pid: i64, seq: i32, n: usize) -> i64 {
    let mut b = common::idem_batch(pid, 0, seq, n);
    match log.append(&mut b, epoch, TS).unwrap() {
        AppendOutcome::Appended(i) => i.base_offset,
        other => panic!("sequence {seq} of producer {pid} was not written: {other:?}"),
    }
}

/// A leader's link flaps: its tail past what its follower fetched, with
/// batches of an idempotent producer and a roll (whose producer snapshot
/// lies past the cut), is cut when the follower takes over; the follower
/// writes the producer's retries and next batches; the old leader fetches
/// them and leads again. Its producer state is the new leader's, whether
/// rebuilt by the truncation or by a reopen: a retry of a batch only the
/// new leader wrote is a duplicate with the new leader's offsets, and the
/// producer's next sequence follows the last one the new leader took.
#[test]
fn a_leader_cut_back_then_fed_its_successors_batches_continues_the_producers_sequence() {
    let (ad, bd) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let pid = 1_000;
    let mut a = open(ad.path());
    let mut b = open(bd.path());
    // Epoch 0 at A: the producer's first batches between another's, all
    // fetched by B.
    let mut seq = 0;
    for i in 0..60 {
        produce(&mut a, 0, i);
        produce_idem(&mut a, 0, pid, seq, 3);
        seq += 3;
    }
    replicate(&a, &mut b);
    let cut = a.log_end_offset();
    // A's tail that B never fetched: more of the producer's batches, and
    // enough other data to roll a segment past the cut.
    let segments = a.segments().len();
    let mut tail = Vec::new();
    for i in 60..200 {
        produce(&mut a, 0, i);
        tail.push((seq, 1));
        produce_idem(&mut a, 0, pid, seq, 1);
        seq += 1;
    }
    assert!(a.segments().len() > segments, "the tail rolled a segment");

    // B leads at epoch 1: the producer retries its unacknowledged batches
    // there, then goes on.
    let mut at_b = Vec::new();
    for &(s, n) in &tail[..5] {
        at_b.push((s, produce_idem(&mut b, 1, pid, s, n)));
    }
    let next = tail[5].0;

    // A follows B: it cuts back to where epoch 0 ends at B, and fetches
    // B's epoch 1.
    let (epoch, end) = b.epoch_end_offset(a.latest_epoch().unwrap()).unwrap();
    assert_eq!((epoch, end), (0, cut));
    a.truncate_to(end).unwrap();
    assert_eq!(a.log_end_offset(), cut);
    replicate(&b, &mut a);
    assert_eq!(bytes_of(&a), bytes_of(&b));

    let check = |a: &mut PartitionLog, epoch: i32, next: i32| {
        // a retry of the newest batch B wrote is answered with B's offsets
        let (s, base) = *at_b.last().unwrap();
        let mut retry = common::idem_batch(pid, 0, s, 1);
        let outcome = a.append(&mut retry, epoch, TS).unwrap();
        assert!(
            matches!(outcome, AppendOutcome::Duplicate(i) if i.base_offset == base),
            "{outcome:?}"
        );
        // a gap is still one
        let mut gap = common::idem_batch(pid, 0, next + 1, 1);
        assert!(matches!(
            a.append(&mut gap, epoch, TS).unwrap_err(),
            StorageError::OutOfOrderSequence { expected, .. } if expected == next
        ));
        // and the next sequence is written
        produce_idem(a, epoch, pid, next, 1);
    };
    // A leads again at epoch 2
    check(&mut a, 2, next);
    // and once more after a reopen, from its snapshots and batch headers
    let end = a.log_end_offset();
    drop(a);
    let mut a = open(ad.path());
    assert_eq!(a.log_end_offset(), end);
    // (the five newest batches are remembered: B's last four and `next`)
    for &(s, base) in &at_b[1..] {
        let mut retry = common::idem_batch(pid, 0, s, 1);
        let outcome = a.append(&mut retry, 3, TS).unwrap();
        assert!(
            matches!(outcome, AppendOutcome::Duplicate(i) if i.base_offset == base),
            "retry of sequence {s}: {outcome:?}"
        );
    }
    check(&mut a, 3, next + 1);
}

#[test]
fn truncation_below_the_local_start_restarts_the_follower_there() {
    let (ld, fd) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let leader = leader_with_two_epochs(ld.path());
    let mut follower = open(fd.path());
    replicate(&leader, &mut follower);
    follower.delete_records_before(100 * 50).unwrap();
    assert_eq!(follower.log_start_offset(), 100 * 50);

    follower.truncate_to(40 * 50).unwrap();
    assert_eq!(follower.log_start_offset(), 40 * 50);
    assert_eq!(follower.log_end_offset(), 40 * 50);
    assert_eq!(follower.latest_epoch(), None);

    replicate(&leader, &mut follower);
    let from_leader = {
        let mut out = Vec::new();
        let mut at = 40 * 50;
        while at < leader.log_end_offset() {
            let s = leader.read(at, 1 << 20, i64::MAX).unwrap();
            out.extend_from_slice(&s.read_to_bytes().unwrap());
            at = s.next_offset;
        }
        out
    };
    assert_eq!(bytes_of(&follower), from_leader);
    assert_eq!(follower.epoch_end_offset(3), leader.epoch_end_offset(3));
    assert_eq!(follower.epoch_end_offset(1), Some((1, 120 * 50)));
}

#[test]
fn truncating_into_a_segment_hard_linked_elsewhere_leaves_the_links_bytes_alone() {
    let (ld, fd, od) = (
        tempfile::tempdir().unwrap(),
        tempfile::tempdir().unwrap(),
        tempfile::tempdir().unwrap(),
    );
    let leader = leader_with_two_epochs(ld.path());
    let mut follower = open(fd.path());
    replicate(&leader, &mut follower);
    // What the local object store does with an uploaded segment: hard-link
    // its three files under other names.
    let sealed = follower.segments()[1].clone();
    assert!(sealed.sealed);
    let links: Vec<_> = [
        &sealed.path,
        &sealed.offset_index_path,
        &sealed.time_index_path,
    ]
    .iter()
    .enumerate()
    .map(|(i, p)| {
        let link = od.path().join(format!("object-{i}"));
        std::fs::hard_link(p, &link).unwrap();
        (link.clone(), std::fs::read(&link).unwrap())
    })
    .collect();

    let cut = sealed.base_offset + (sealed.last_offset - sealed.base_offset) / 2;
    follower.truncate_to(cut).unwrap();
    assert!(follower.log_end_offset() <= cut);
    assert!(follower.log_end_offset() > sealed.base_offset);

    for (link, bytes) in &links {
        assert!(
            std::fs::read(link).unwrap() == *bytes,
            "{} changed",
            link.display()
        );
        assert_eq!(std::fs::metadata(link).unwrap().nlink(), 1);
    }
    let active = follower.segments().last().unwrap().clone();
    assert_eq!(active.path, sealed.path);
    assert_eq!(std::fs::metadata(&active.path).unwrap().nlink(), 1);
    assert_eq!(std::fs::metadata(&active.path).unwrap().len(), active.size);

    // The follower carries on from there, and a reopen finds it whole.
    replicate(&leader, &mut follower);
    assert_eq!(bytes_of(&follower), bytes_of(&leader));
    follower.close().unwrap();
    let follower = open(fd.path());
    assert_eq!(bytes_of(&follower), bytes_of(&leader));
    for (link, bytes) in &links {
        assert!(std::fs::read(link).unwrap() == *bytes);
    }
}

#[test]
fn a_follower_log_survives_close_and_an_unclean_reopen_with_its_epochs_and_producers() {
    let (ld, fd) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let mut leader = leader_with_two_epochs(ld.path());
    let pid = 77;
    for seq in [0, 4] {
        leader
            .append(&mut common::idem_batch(pid, 0, seq, 4), 4, TS)
            .unwrap();
    }
    let mut follower = open(fd.path());
    replicate(&leader, &mut follower);
    follower.close().unwrap();

    // Clean reopen.
    let mut follower = open(fd.path());
    assert_eq!(bytes_of(&follower), bytes_of(&leader));
    same_epoch_answers(&leader, &follower);
    for i in 0..3 {
        produce(&mut leader, 5, 5_000 + i);
    }
    replicate(&leader, &mut follower);
    // Unclean: dropped without close, so the next open scans and rebuilds.
    drop(follower);
    std::fs::remove_file(fd.path().join("leader-epoch-checkpoint")).unwrap();
    let mut follower = open(fd.path());
    assert_eq!(bytes_of(&follower), bytes_of(&leader));
    same_epoch_answers(&leader, &follower);
    let end = follower.log_end_offset();
    let outcome = follower
        .append(&mut common::idem_batch(pid, 0, 4, 4), 6, TS)
        .unwrap();
    assert!(
        matches!(outcome, AppendOutcome::Duplicate(_)),
        "{outcome:?}"
    );
    assert_eq!(follower.log_end_offset(), end);
}
