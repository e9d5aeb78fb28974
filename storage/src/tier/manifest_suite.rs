//! The [`Manifest`] contract as checks any backend can run (the `testing`
//! feature): the same scenarios for the in-memory manifest here and for the
//! metastore-backed one in the gateway, so a test double cannot drift from
//! production.
//!
//! ```ignore
//! #[tokio::test]
//! async fn my_manifest_keeps_the_manifest_contract() {
//!     storage::tier::manifest_suite::run_all(|| async { MyManifest::start().await }).await;
//! }
//! ```
//!
//! Every check uses partitions of fresh random topic ids, so one manifest
//! may serve them all; each panics with a message naming the broken rule.

use std::future::Future;

use async_trait::async_trait;
use uuid::Uuid;

use super::manifest::{Manifest, MemoryManifest, TieredSegment};
use super::PartitionKey;

/// A manifest backend under test: a [`Manifest`] plus the one thing the
/// trait leaves to the rest of the system, deleting a topic.
#[async_trait]
pub trait ManifestUnderTest: Manifest {
    /// A fresh topic with at least two partitions, for which the backend
    /// accepts entries (a backend that checks topics must create it).
    async fn new_topic(&self) -> Uuid;
    /// Deletes a topic as the backend's topic deletion does: the entries of
    /// its partitions move to [`Manifest::deleted_topics`].
    async fn delete_topic(&self, topic_id: Uuid);
}

#[async_trait]
impl ManifestUnderTest for MemoryManifest {
    async fn new_topic(&self) -> Uuid {
        Uuid::new_v4()
    }

    async fn delete_topic(&self, topic_id: Uuid) {
        MemoryManifest::delete_topic(self, topic_id);
    }
}

/// Runs every check, each on a fresh manifest from `make`.
pub async fn run_all<M, F, Fut>(make: F)
where
    M: ManifestUnderTest,
    F: Fn() -> Fut,
    Fut: Future<Output = M>,
{
    commit_is_idempotent(&make().await).await;
    an_entry_recorded_differently_is_refused(&make().await).await;
    overlapping_entries_are_refused(&make().await).await;
    straddling_entries_serve_only_offsets_no_other_entry_serves(&make().await).await;
    entries_are_sorted_and_kept_per_partition(&make().await).await;
    trim_removes_exactly_the_entries_wholly_below(&make().await).await;
    a_commit_wholly_below_a_trim_or_the_log_start_is_refused(&make().await).await;
    deleted_topics_are_listed_until_forgotten(&make().await).await;
    log_start_is_durable_monotonic_and_per_partition(&make().await).await;
    replace_swaps_an_entry_in_place_and_is_idempotent(&make().await).await;
    replace_is_refused_unless_the_old_entry_serves_the_same_offsets(&make().await).await;
    consecutive_entries_are_replaced_by_one_merged_copy(&make().await).await;
}

/// Partition 0 of a fresh topic.
async fn partition(m: &impl ManifestUnderTest) -> PartitionKey {
    PartitionKey::new(m.new_topic().await, 0)
}

/// An entry as the uploader would commit it for `[base, last]`.
pub fn entry(p: PartitionKey, base: i64, last: i64) -> TieredSegment {
    TieredSegment {
        key: format!(
            "suite/topics/{}/{}/{base:020}-{last:020}.seg",
            p.topic_id, p.partition
        ),
        base_offset: base,
        last_offset: last,
        first_timestamp: 1_000 + base,
        max_timestamp: 1_000 + last,
        size: 100 * (last - base + 1) as u64,
        checksum: 0xC0FF_EE00 ^ base as u32,
        index_size: 8,
        time_index_size: 12,
        served_from: None,
        pack: None,
    }
}

/// A compacted copy of `[base, last]` under the keys of `generation`: the
/// same offsets, a smaller object.
pub fn compacted(p: PartitionKey, base: i64, last: i64, generation: u64) -> TieredSegment {
    let old = entry(p, base, last);
    TieredSegment {
        key: old.key.replace(".seg", &format!(".c{generation}.seg")),
        size: old.size / 2,
        checksum: old.checksum ^ 0x5555,
        index_size: 4,
        ..old
    }
}

/// An entry for the object `[base, last]` serving only `from..=last`, as a
/// new leader commits a segment straddling the end of the manifest.
pub fn straddling(p: PartitionKey, base: i64, from: i64, last: i64) -> TieredSegment {
    TieredSegment {
        served_from: Some(from),
        pack: None,
        ..entry(p, base, last)
    }
}

fn served(entries: &[TieredSegment]) -> Vec<(i64, i64)> {
    entries
        .iter()
        .map(|e| (e.first_served(), e.last_offset))
        .collect()
}

fn ranges(entries: &[TieredSegment]) -> Vec<(i64, i64)> {
    entries
        .iter()
        .map(|e| (e.base_offset, e.last_offset))
        .collect()
}

/// The same entry committed twice is one entry.
pub async fn commit_is_idempotent(m: &impl ManifestUnderTest) {
    let p = partition(m).await;
    let e = entry(p, 0, 9);
    m.commit(p, e.clone()).await.expect("first commit");
    m.commit(p, e.clone())
        .await
        .expect("committing the same entry again must succeed");
    assert_eq!(m.segments(p), vec![e], "a repeated commit is one entry");
}

/// A key already recorded with other content is refused for good.
pub async fn an_entry_recorded_differently_is_refused(m: &impl ManifestUnderTest) {
    let p = partition(m).await;
    let e = entry(p, 0, 9);
    m.commit(p, e.clone()).await.expect("commit");
    let mut other = e.clone();
    other.size += 1;
    let err = m
        .commit(p, other)
        .await
        .expect_err("a key recorded with other content must be refused");
    assert!(!err.retriable, "refused for good, not retriable: {err}");
    assert_eq!(m.segments(p), vec![e]);
}

/// Entries of a partition never overlap; adjacent and gapped ones are fine.
pub async fn overlapping_entries_are_refused(m: &impl ManifestUnderTest) {
    let p = partition(m).await;
    m.commit(p, entry(p, 0, 9)).await.expect("commit");
    for (base, last) in [(5, 14), (0, 0), (9, 20), (-5, 0)] {
        let err = m
            .commit(p, entry(p, base, last))
            .await
            .expect_err("an overlapping entry must be refused");
        assert!(!err.retriable, "overlap [{base}, {last}]: {err}");
    }
    m.commit(p, entry(p, 10, 19)).await.expect("adjacent entry");
    m.commit(p, entry(p, 30, 39))
        .await
        .expect("entry after a gap");
    assert_eq!(ranges(&m.segments(p)), vec![(0, 9), (10, 19), (30, 39)]);
}

/// Objects of different leaders may overlap; the offsets their entries
/// serve may not, and entries are sorted (and trimmed) by those.
pub async fn straddling_entries_serve_only_offsets_no_other_entry_serves(
    m: &impl ManifestUnderTest,
) {
    let p = partition(m).await;
    m.commit(p, entry(p, 0, 9)).await.expect("commit");
    m.commit(p, entry(p, 10, 19)).await.expect("commit");
    for (base, from, last) in [(15, 15, 30), (5, 19, 30), (5, 4, 30), (5, 31, 30)] {
        let err = m
            .commit(p, straddling(p, base, from, last))
            .await
            .expect_err("an entry serving offsets another serves, or outside its object");
        assert!(!err.retriable, "[{base}, {last}] from {from}: {err}");
    }
    m.commit(p, straddling(p, 15, 20, 30))
        .await
        .expect("a segment straddling the manifest's end serves what follows");
    m.commit(p, straddling(p, 15, 20, 30))
        .await
        .expect("and may be committed again");
    m.commit(p, straddling(p, 3, 31, 40))
        .await
        .expect("a third leader's segment, based below every earlier one");
    assert_eq!(
        served(&m.segments(p)),
        vec![(0, 9), (10, 19), (20, 30), (31, 40)],
        "sorted by the offsets served"
    );
    assert_eq!(
        ranges(&m.trim(p, 31).await.expect("trim")),
        vec![(0, 9), (10, 19), (15, 30)],
        "trimmed by last offset"
    );
    assert_eq!(served(&m.segments(p)), vec![(31, 40)]);
}

/// `segments` is sorted by the offsets served whatever the commit order, and
/// partitions do not see each other's entries.
pub async fn entries_are_sorted_and_kept_per_partition(m: &impl ManifestUnderTest) {
    let p = partition(m).await;
    let q = PartitionKey::new(p.topic_id, 1);
    for (base, last) in [(20, 29), (0, 9), (10, 19)] {
        m.commit(p, entry(p, base, last)).await.expect("commit");
    }
    m.commit(q, entry(q, 0, 4)).await.expect("commit");
    assert_eq!(ranges(&m.segments(p)), vec![(0, 9), (10, 19), (20, 29)]);
    assert_eq!(ranges(&m.segments(q)), vec![(0, 4)]);
    assert!(
        m.segments(partition(m).await).is_empty(),
        "a partition without entries"
    );
}

/// `trim` removes the entries wholly below the offset and returns them; an
/// entry straddling the offset stays.
pub async fn trim_removes_exactly_the_entries_wholly_below(m: &impl ManifestUnderTest) {
    let p = partition(m).await;
    for (base, last) in [(0, 9), (10, 19), (20, 29)] {
        m.commit(p, entry(p, base, last)).await.expect("commit");
    }
    let removed = m.trim(p, 15).await.expect("trim");
    assert_eq!(ranges(&removed), vec![(0, 9)], "removed and returned");
    assert_eq!(ranges(&m.segments(p)), vec![(10, 19), (20, 29)]);
    assert!(
        m.trim(p, 10).await.expect("trim").is_empty(),
        "nothing is wholly below 10 any more"
    );
    let removed = m.trim(p, 30).await.expect("trim");
    assert_eq!(ranges(&removed), vec![(10, 19), (20, 29)]);
    assert!(m.segments(p).is_empty());
    assert!(m
        .trim(partition(m).await, 100)
        .await
        .expect("trim of a partition without entries")
        .is_empty());
}

/// After a trim, an entry wholly below it (a late commit of a segment the
/// trim already covered) is refused: it would move the log start back.
/// The same for the log start; entries straddling either still go in.
pub async fn a_commit_wholly_below_a_trim_or_the_log_start_is_refused(m: &impl ManifestUnderTest) {
    let p = partition(m).await;
    for (base, last) in [(0, 9), (10, 19)] {
        m.commit(p, entry(p, base, last)).await.expect("commit");
    }
    m.trim(p, 20).await.expect("trim");
    let err = m
        .commit(p, entry(p, 0, 9))
        .await
        .expect_err("a late commit below the trim");
    assert!(!err.retriable, "{err}");
    assert!(m.segments(p).is_empty(), "the log start did not move back");
    m.commit(p, straddling(p, 15, 20, 29))
        .await
        .expect("an entry reaching past the trim");
    m.set_log_start(p, 40).await.expect("set");
    let err = m
        .commit(p, entry(p, 30, 39))
        .await
        .expect_err("an entry below the log start");
    assert!(!err.retriable, "{err}");
    m.commit(p, entry(p, 30, 49))
        .await
        .expect("an entry straddling the log start");
    assert_eq!(served(&m.segments(p)), vec![(20, 29), (30, 49)]);
}

/// A deleted topic's entries are listed, per partition, until forgotten,
/// and are no longer the partitions' entries.
pub async fn deleted_topics_are_listed_until_forgotten(m: &impl ManifestUnderTest) {
    let p0 = partition(m).await;
    let p1 = PartitionKey::new(p0.topic_id, 1);
    let kept = partition(m).await;
    m.commit(p0, entry(p0, 0, 9)).await.expect("commit");
    m.commit(p1, entry(p1, 0, 4)).await.expect("commit");
    m.commit(kept, entry(kept, 0, 9)).await.expect("commit");
    m.delete_topic(p0.topic_id).await;
    assert!(m.segments(p0).is_empty() && m.segments(p1).is_empty());
    assert_eq!(ranges(&m.segments(kept)), vec![(0, 9)], "other topics stay");
    let deleted = m.deleted_topics();
    let d = deleted
        .iter()
        .find(|d| d.topic_id == p0.topic_id)
        .expect("the deleted topic is listed");
    assert_eq!(d.segments.get(&0).map(|e| ranges(e)), Some(vec![(0, 9)]));
    assert_eq!(d.segments.get(&1).map(|e| ranges(e)), Some(vec![(0, 4)]));
    m.forget_deleted_topic(p0.topic_id).await.expect("forget");
    assert!(
        !m.deleted_topics().iter().any(|d| d.topic_id == p0.topic_id),
        "forgotten"
    );
}

/// The log start is read back at once, only ever rises, is kept per
/// partition, and a negative one is refused.
pub async fn log_start_is_durable_monotonic_and_per_partition(m: &impl ManifestUnderTest) {
    let p = partition(m).await;
    let q = PartitionKey::new(p.topic_id, 1);
    assert_eq!(m.log_start(p), None, "nothing recorded yet");
    m.set_log_start(p, 10).await.expect("set");
    assert_eq!(m.log_start(p), Some(10), "this process's own write is seen");
    m.set_log_start(p, 5)
        .await
        .expect("a lower start is a no-op");
    assert_eq!(m.log_start(p), Some(10), "the log start never goes down");
    m.set_log_start(p, 10).await.expect("the same start again");
    m.set_log_start(p, 25).await.expect("set");
    assert_eq!(m.log_start(p), Some(25));
    assert_eq!(m.log_start(q), None, "per partition");
    let err = m
        .set_log_start(q, -1)
        .await
        .expect_err("a negative log start is refused");
    assert!(!err.retriable, "{err}");
    assert_eq!(m.log_start(q), None);
}

/// `replace` swaps an entry for a compacted copy of the same offsets in
/// place; retried after it landed, it succeeds and changes nothing; the
/// copy may be replaced in turn.
pub async fn replace_swaps_an_entry_in_place_and_is_idempotent(m: &impl ManifestUnderTest) {
    let p = partition(m).await;
    for (base, last) in [(0, 9), (10, 19), (20, 29)] {
        m.commit(p, entry(p, base, last)).await.expect("commit");
    }
    let old = entry(p, 10, 19);
    let new = compacted(p, 10, 19, 7);
    m.replace(p, std::slice::from_ref(&old.key), new.clone())
        .await
        .expect("replace");
    let after = m.segments(p);
    assert_eq!(ranges(&after), vec![(0, 9), (10, 19), (20, 29)], "in place");
    assert_eq!(after[1], new, "the new entry, whole");
    m.replace(p, std::slice::from_ref(&old.key), new.clone())
        .await
        .expect("a retry after the replace landed must succeed");
    assert_eq!(m.segments(p), after, "and change nothing");
    let newer = compacted(p, 10, 19, 8);
    m.replace(p, std::slice::from_ref(&new.key), newer.clone())
        .await
        .expect("a compacted copy is replaced in turn");
    assert_eq!(m.segments(p)[1], newer);
    let err = m
        .replace(p, std::slice::from_ref(&old.key), new.clone())
        .await
        .expect_err("a late retry of the first replace, once superseded");
    assert!(!err.retriable, "{err}");
    assert_eq!(m.segments(p)[1], newer, "the newest copy stays");
    let straddling_old = straddling(p, 25, 30, 39);
    m.commit(p, straddling_old.clone()).await.expect("commit");
    let straddling_new = TieredSegment {
        key: straddling_old.key.replace(".seg", ".c1.seg"),
        size: 10,
        ..straddling_old.clone()
    };
    m.replace(
        p,
        std::slice::from_ref(&straddling_old.key),
        straddling_new.clone(),
    )
    .await
    .expect("an entry serving from above its base keeps serving from there");
    assert_eq!(served(&m.segments(p))[3], (30, 39));
    assert_eq!(m.segments(p)[3], straddling_new);
    let trimmed = m.trim(p, 20).await.expect("trim");
    assert_eq!(
        trimmed.iter().map(|e| e.key.clone()).collect::<Vec<_>>(),
        vec![entry(p, 0, 9).key, newer.key.clone()],
        "trim returns the replacing entry, whose objects are the live ones"
    );
}

/// `replace` is refused for good when the old entry is not recorded, when
/// the new one serves other offsets (or none of its object's), when it
/// reuses the old key, and when its key is recorded with other content;
/// a refused replace changes nothing.
pub async fn replace_is_refused_unless_the_old_entry_serves_the_same_offsets(
    m: &impl ManifestUnderTest,
) {
    let p = partition(m).await;
    for (base, last) in [(0, 9), (10, 19)] {
        m.commit(p, entry(p, base, last)).await.expect("commit");
    }
    let before = m.segments(p);
    let old = entry(p, 10, 19);
    let missing = entry(p, 20, 29);
    let refusals = [
        (
            missing.key.clone(),
            compacted(p, 20, 29, 1),
            "no such entry",
        ),
        (
            old.key.clone(),
            TieredSegment {
                last_offset: 18,
                ..compacted(p, 10, 19, 1)
            },
            "fewer offsets",
        ),
        (
            old.key.clone(),
            TieredSegment {
                last_offset: 25,
                ..compacted(p, 10, 19, 1)
            },
            "more offsets",
        ),
        (
            old.key.clone(),
            TieredSegment {
                served_from: Some(11),
                pack: None,
                ..compacted(p, 10, 19, 1)
            },
            "serving from elsewhere",
        ),
        (
            old.key.clone(),
            TieredSegment {
                base_offset: 12,
                served_from: Some(10),
                pack: None,
                ..compacted(p, 10, 19, 1)
            },
            "serving offsets outside its object",
        ),
        (
            old.key.clone(),
            TieredSegment {
                size: 1,
                ..old.clone()
            },
            "the old key itself",
        ),
        (
            old.key.clone(),
            TieredSegment {
                key: entry(p, 0, 9).key,
                ..compacted(p, 10, 19, 1)
            },
            "a key another entry holds",
        ),
    ];
    for (old_key, new, why) in refusals {
        let err = m
            .replace(p, &[old_key], new)
            .await
            .expect_err(&format!("a replace with {why} must be refused"));
        assert!(!err.retriable, "{why}: {err}");
        assert_eq!(m.segments(p), before, "{why}: nothing changed");
    }
}

/// `replace` swaps several consecutive entries for one merged copy serving
/// exactly their offsets together, in one step and idempotently; old
/// entries that are not consecutive, leave a gap, or whose span the new
/// entry does not serve exactly are refused for good, changing nothing.
pub async fn consecutive_entries_are_replaced_by_one_merged_copy(m: &impl ManifestUnderTest) {
    let p = partition(m).await;
    for (base, last) in [(0, 9), (10, 19), (20, 29), (40, 49), (50, 59)] {
        m.commit(p, entry(p, base, last)).await.expect("commit");
    }
    let before = m.segments(p);
    let keys = |spans: &[(i64, i64)]| -> Vec<String> {
        spans.iter().map(|(b, l)| entry(p, *b, *l).key).collect()
    };
    let merged = |base: i64, last: i64| TieredSegment {
        size: 7,
        ..compacted(p, base, last, 1)
    };
    let refusals = [
        (keys(&[(0, 9), (20, 29)]), merged(0, 29), "not consecutive"),
        (keys(&[(10, 19), (0, 9)]), merged(0, 19), "out of order"),
        (
            keys(&[(20, 29), (40, 49)]),
            merged(20, 49),
            "a gap between them",
        ),
        (keys(&[(0, 9), (10, 19)]), merged(0, 18), "fewer offsets"),
        (keys(&[(0, 9), (10, 19)]), merged(0, 20), "more offsets"),
        (Vec::new(), merged(0, 9), "no old entry"),
    ];
    for (olds, new, why) in refusals {
        let err = m
            .replace(p, &olds, new)
            .await
            .expect_err(&format!("a replace with {why} must be refused"));
        assert!(!err.retriable, "{why}: {err}");
        assert_eq!(m.segments(p), before, "{why}: nothing changed");
    }
    let olds = keys(&[(0, 9), (10, 19), (20, 29)]);
    let new = merged(0, 29);
    m.replace(p, &olds, new.clone()).await.expect("replace");
    let after = m.segments(p);
    assert_eq!(ranges(&after), vec![(0, 29), (40, 49), (50, 59)]);
    assert_eq!(after[0], new, "the new entry, whole");
    m.replace(p, &olds, new.clone())
        .await
        .expect("a retry after the replace landed must succeed");
    assert_eq!(m.segments(p), after, "and change nothing");
    let olds = vec![new.key.clone()];
    let newer = TieredSegment {
        key: new.key.replace(".c1.", ".c2."),
        size: 5,
        ..new.clone()
    };
    m.replace(p, &olds, newer.clone())
        .await
        .expect("a merged copy is replaced in turn");
    assert_eq!(m.segments(p)[0], newer);
}
