//! The uploader engine: decides which sealed segments to upload and commit,
//! when to retry, and how far each partition may delete locally.
//!
//! Pure: no IO, no clock. The driver feeds it [`Event`]s with a monotonic
//! `now` in milliseconds and a jitter drawn from its own randomness, and
//! performs the [`Action`]s it returns.
//!
//! Rules, step by step:
//! 1. A partition reports its sealed segments (at registration, then after
//!    every roll). A segment whose offsets the manifest already serves is
//!    done, whoever committed them: this agent, or an earlier leader of the
//!    partition whose segment boundaries differ (a follower rolls its
//!    segments on its own). The engine learns the manifest's entries at
//!    registration, from its own commits, and from the driver's reads of
//!    the manifest ([`Event::ManifestRead`]). Offsets below the manifest's
//!    first entry count as served: entries leave the manifest only at its
//!    start (retention, DeleteRecords), and rule 3 keeps gaps out of it.
//!    The other segments wait for upload, oldest report first across the
//!    agent.
//! 2. A segment is uploaded only when its last offset is below the
//!    partition's high watermark, with at most `max_in_flight` uploads on the
//!    agent and `max_in_flight_per_partition` per partition. A follower's
//!    high watermark stays `i64::MIN`: it uploads nothing, and its segments
//!    become done (and deletable, rule 5) as its leader's commits reach the
//!    manifest.
//! 3. An uploaded segment is committed once every older segment of its
//!    partition is: uploads run in parallel, commits in offset order, so
//!    the manifest never has a gap a later leader would have to fill. A
//!    segment that straddles the end `M` of what the manifest serves (a new
//!    leader's first segment after a failover) is committed whole but
//!    serving only `M + 1..=last` (`served_from`), computed afresh at each
//!    attempt.
//! 4. A failed upload or commit is retried after `retry.delay(attempt,
//!    jitter)`, for ever: the local segment stays until its commit succeeds
//!    or the manifest serves its offsets.
//! 5. `deletable_below` of a partition is the base offset of its oldest
//!    segment not yet done, or, when none waits, the end of the newest
//!    reported segment. Everything below it is in object storage (or was
//!    deleted by DeleteRecords), so local retention may remove it.
//!
//! Re-uploads of compacted segments (a compacted topic, see
//! `docs/tiering.md`), step by step:
//! 6. A leader whose local compaction rewrote a segment whose offsets one
//!    manifest entry, or several consecutive ones (local compaction merged
//!    their segments), serve exactly reports it ([`Event::Recompacted`]). The engine
//!    schedules a re-upload: it shares the upload slots (agent and
//!    partition), waits for them behind first uploads (those free local
//!    disk), and is retried with the same backoff, for ever. A newer report
//!    for the same base replaces an older one still waiting or in flight
//!    (whose completion is then ignored).
//! 7. Once uploaded under new keys, the entry (or the consecutive entries,
//!    by one) is replaced in the manifest ([`Action::Replace`]), retried
//!    with backoff while the manifest is unavailable, dropped when refused
//!    for good.
//! 8. A re-upload leaves the engine when replaced, skipped (no entry serves
//!    the segment's offsets exactly any more, or the copy is not smaller),
//!    refused, or dropped (truncation, DeleteRecords, the partition
//!    closed); [`Action::Released`] then says so, because the partition
//!    neither compacts nor evicts a segment while its re-upload is pending
//!    (the uploader reads its files by name). A compacted copy uploaded but
//!    never recorded is handed back for deletion ([`Action::Discard`]).
//!    Re-uploads never move `deletable_below`: the offsets are in object
//!    storage already.

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;

use cache::RetrySchedule;

use super::manifest::TieredSegment;
use super::PartitionKey;
use crate::segment::SegmentInfo;

/// A sealed local segment and the files that go to object storage.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SealedSegment {
    pub base_offset: i64,
    /// Inclusive.
    pub last_offset: i64,
    pub size: u64,
    pub path: PathBuf,
    pub offset_index_path: PathBuf,
    pub time_index_path: PathBuf,
    /// -1 when unknown.
    pub first_timestamp: i64,
    /// -1 when unknown.
    pub max_timestamp: i64,
    /// CRC-32C of the log file kept while it was written, when known.
    pub crc32c: Option<u32>,
    /// The producer snapshot taken when the segment was sealed (state at
    /// its end), uploaded with it when the file is there.
    pub producer_snapshot_path: PathBuf,
    /// The aborted transactions whose marker is in the segment
    /// (`crate::txn`), uploaded with it when the file is there.
    pub txn_index_path: PathBuf,
}

impl SealedSegment {
    /// The uploadable view of a sealed, non-empty segment.
    pub fn from_info(info: &SegmentInfo) -> Option<SealedSegment> {
        if !info.sealed || info.last_offset < info.base_offset {
            return None;
        }
        Some(SealedSegment {
            base_offset: info.base_offset,
            last_offset: info.last_offset,
            size: info.size,
            path: info.path.clone(),
            offset_index_path: info.offset_index_path.clone(),
            time_index_path: info.time_index_path.clone(),
            first_timestamp: info.first_timestamp.unwrap_or(-1),
            max_timestamp: info.max_timestamp.unwrap_or(-1),
            crc32c: info.crc32c,
            producer_snapshot_path: crate::files::offset_path(
                info.path.parent().unwrap_or(std::path::Path::new(".")),
                info.last_offset.saturating_add(1),
                crate::files::SNAPSHOT_EXT,
            ),
            txn_index_path: crate::files::offset_path(
                info.path.parent().unwrap_or(std::path::Path::new(".")),
                info.base_offset,
                crate::txn::TXN_INDEX_EXT,
            ),
        })
    }

    pub fn next_offset(&self) -> i64 {
        self.last_offset.saturating_add(1)
    }
}

/// Identifies one upload or commit in flight, so a late completion of an
/// operation the engine has since forgotten is ignored.
pub type OpId = u64;

/// Limits of the engine.
#[derive(Debug, Clone)]
pub struct EngineConfig {
    /// Segment uploads in flight on the whole agent.
    pub max_in_flight: usize,
    /// Segment uploads in flight for one partition.
    pub max_in_flight_per_partition: usize,
    /// Backoff between attempts of one upload or commit.
    pub retry: RetrySchedule,
}

impl Default for EngineConfig {
    fn default() -> Self {
        EngineConfig {
            max_in_flight: 4,
            max_in_flight_per_partition: 2,
            retry: RetrySchedule::default(),
        }
    }
}

/// What happened.
#[derive(Debug, Clone)]
pub enum Event {
    /// A partition opened: `committed` holds the offsets its manifest
    /// entries serve (`(first served, last)`), `sealed` its sealed local
    /// segments.
    Register {
        partition: PartitionKey,
        /// Tells this opening of the partition from earlier and later ones.
        registration: u64,
        committed: Vec<(i64, i64)>,
        sealed: Vec<SealedSegment>,
        high_watermark: i64,
    },
    /// Segments sealed since the last report.
    Sealed {
        partition: PartitionKey,
        segments: Vec<SealedSegment>,
        high_watermark: i64,
    },
    HighWatermark {
        partition: PartitionKey,
        high_watermark: i64,
    },
    /// DeleteRecords removed everything below `log_start`: nothing below it
    /// needs uploading any more.
    LogStartRaised {
        partition: PartitionKey,
        log_start: i64,
    },
    /// Follower truncation: the local segments from `from` on were cut or
    /// deleted (all of them when `from` is `i64::MIN`), so the sealed
    /// segments reported there no longer exist as reported and are dropped
    /// (an upload or commit in flight for one completes into nothing). The
    /// upload bound moves down to `high_watermark`; segments sealed after
    /// the truncation are reported again.
    Truncated {
        partition: PartitionKey,
        from: i64,
        high_watermark: i64,
    },
    /// A fresh read of the partition's manifest, with entries other agents
    /// committed: `committed` holds the offsets each entry serves (`(first
    /// served, last)`). Sealed segments it serves entirely are done.
    ManifestRead {
        partition: PartitionKey,
        committed: Vec<(i64, i64)>,
    },
    /// The partition closed (topic deleted, node stopping). Ignored when the
    /// partition was registered again since.
    Unregister {
        partition: PartitionKey,
        registration: u64,
    },
    UploadDone {
        op: OpId,
        entry: TieredSegment,
    },
    /// `jitter` is uniform in `[0, 1)`.
    UploadFailed {
        op: OpId,
        jitter: f64,
    },
    CommitDone {
        op: OpId,
    },
    CommitFailed {
        op: OpId,
        jitter: f64,
    },
    /// The commit was not attempted: the uploaded objects may be gone by
    /// now (a packed object no entry read from for its grace period is
    /// deleted), so the segment is uploaded again.
    CommitStale {
        op: OpId,
    },
    /// Local compaction rewrote these sealed segments of a leader, each
    /// with the offsets of one manifest entry or of several consecutive
    /// ones; `generation` (above 0) names
    /// the compacted copies' keys (see `cache::layout`).
    Recompacted {
        partition: PartitionKey,
        registration: u64,
        segments: Vec<SealedSegment>,
        generation: u64,
    },
    /// The compacted copy is in object storage as `entry`, to replace the
    /// consecutive entries `old` (several where local compaction merged
    /// their segments into one).
    ReuploadDone {
        op: OpId,
        old: Vec<TieredSegment>,
        entry: TieredSegment,
    },
    ReuploadFailed {
        op: OpId,
        jitter: f64,
    },
    /// Nothing to re-upload: no entry serves the segment's offsets exactly,
    /// or the local copy is not smaller than the one in object storage.
    ReuploadSkipped {
        op: OpId,
    },
    ReplaceDone {
        op: OpId,
    },
    /// `retriable: false`: refused for good (the old entry is gone, a later
    /// leader took over); the driver deletes the copy's objects.
    ReplaceFailed {
        op: OpId,
        jitter: f64,
        retriable: bool,
    },
}

/// What the driver must do.
#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    /// Upload the segment's objects and report `UploadDone`/`UploadFailed`.
    Upload {
        op: OpId,
        partition: PartitionKey,
        segment: SealedSegment,
        attempt: u32,
    },
    /// Commit the entry to the manifest and report `CommitDone`/`CommitFailed`.
    Commit {
        op: OpId,
        partition: PartitionKey,
        entry: TieredSegment,
        attempt: u32,
    },
    /// Local retention may now delete segments wholly below this offset.
    Deletable {
        partition: PartitionKey,
        deletable_below: i64,
    },
    /// Upload the compacted local segment under the keys of `generation`
    /// (or a higher one), if one manifest entry serves exactly its offsets
    /// with a larger object, or several consecutive entries do together;
    /// report `ReuploadDone`, `ReuploadFailed` or
    /// `ReuploadSkipped`.
    Reupload {
        op: OpId,
        partition: PartitionKey,
        segment: SealedSegment,
        generation: u64,
        attempt: u32,
    },
    /// Replace the consecutive entries `old` by `entry` in the manifest,
    /// then delete their objects after the grace period; report
    /// `ReplaceDone` or `ReplaceFailed`.
    Replace {
        op: OpId,
        partition: PartitionKey,
        old: Vec<TieredSegment>,
        entry: TieredSegment,
        attempt: u32,
    },
    /// The re-upload of the segment at `base_offset` left the engine: the
    /// partition (that opening of it) may compact and evict it again.
    Released {
        partition: PartitionKey,
        registration: u64,
        base_offset: i64,
    },
    /// A compacted copy that is in object storage but not in the manifest:
    /// delete its objects (after the grace period: a replace whose answer
    /// was lost may have recorded it).
    Discard {
        partition: PartitionKey,
        entry: TieredSegment,
    },
}

#[derive(Debug, Clone, PartialEq)]
enum State {
    /// Waiting for an upload slot (or for its backoff to end).
    Waiting {
        not_before: u64,
    },
    Uploading {
        op: OpId,
    },
    /// Uploaded; the commit waits for its backoff to end.
    CommitWaiting {
        entry: TieredSegment,
        not_before: u64,
    },
    Committing {
        op: OpId,
        entry: TieredSegment,
    },
}

/// Where a re-upload stands.
#[derive(Debug, Clone, PartialEq)]
enum Redo {
    /// Waiting for an upload slot (or for its backoff to end).
    Waiting {
        not_before: u64,
    },
    Uploading {
        op: OpId,
    },
    /// Uploaded; the replace waits for its backoff to end.
    ReplaceWaiting {
        old: Vec<TieredSegment>,
        entry: TieredSegment,
        not_before: u64,
    },
    Replacing {
        op: OpId,
        old: Vec<TieredSegment>,
        entry: TieredSegment,
    },
}

/// A compacted segment to upload again and swap into the manifest.
#[derive(Debug, Clone)]
struct Reupload {
    segment: SealedSegment,
    generation: u64,
    state: Redo,
    attempt: u32,
    seq: u64,
}

#[derive(Debug, Clone)]
struct Pending {
    segment: SealedSegment,
    state: State,
    attempt: u32,
    /// Arrival order across the agent: smaller uploads first.
    seq: u64,
    /// When the segment was reported, for the lag in seconds.
    reported_at: u64,
}

#[derive(Debug, Default)]
struct Part {
    registration: u64,
    high_watermark: i64,
    /// Not yet committed, by base offset.
    pending: BTreeMap<i64, Pending>,
    /// Compacted segments to upload again, by base offset.
    reuploads: BTreeMap<i64, Reupload>,
    /// `(first served -> last)` of the manifest entries known to the
    /// engine; they never overlap.
    committed: BTreeMap<i64, i64>,
    /// Offset after the newest segment reported (committed or not).
    reported_end: i64,
    log_start: i64,
    uploads: usize,
    /// Last `deletable_below` announced.
    announced: Option<i64>,
}

impl Part {
    fn deletable_below(&self) -> i64 {
        self.pending
            .keys()
            .next()
            .copied()
            .unwrap_or(self.reported_end)
    }

    /// The first offset at or after `from` the manifest does not serve,
    /// walking across adjacent entries; offsets below its first entry count
    /// as served (rule 1).
    fn served_until(&self, from: i64) -> i64 {
        let Some(first) = self.committed.keys().next() else {
            return from;
        };
        let mut at = from.max(*first);
        while let Some((_, last)) = self.committed.range(..=at).next_back() {
            if *last < at {
                break;
            }
            if *last == i64::MAX {
                return i64::MAX;
            }
            at = last + 1;
        }
        at
    }

    /// Whether the manifest serves every offset of `seg`.
    fn serves(&self, seg: &SealedSegment) -> bool {
        self.served_until(seg.base_offset) > seg.last_offset
    }

    /// Learns committed ranges; forgets known ones wholly below `from`
    /// (trimmed from the manifest since).
    fn learn(&mut self, committed: Vec<(i64, i64)>, trimmed_below: Option<i64>) {
        if let Some(below) = trimmed_below {
            self.committed.retain(|_, last| *last >= below);
        }
        self.committed.extend(committed);
    }

    /// Removes pending segments the manifest serves entirely.
    fn take_served(&mut self) -> Vec<Pending> {
        let served: Vec<i64> = self
            .pending
            .iter()
            .filter(|(_, s)| self.serves(&s.segment))
            .map(|(b, _)| *b)
            .collect();
        served
            .into_iter()
            .filter_map(|b| self.pending.remove(&b))
            .collect()
    }
}

/// Counters of the engine's current state.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct EngineStats {
    pub partitions: usize,
    /// Sealed segments not yet committed.
    pub pending_segments: usize,
    pub pending_bytes: u64,
    pub uploads_in_flight: usize,
    pub commits_in_flight: usize,
    /// Age of the oldest pending segment's report (0 when none waits).
    pub oldest_pending_ms: u64,
    /// Compacted segments waiting to replace their manifest entries.
    pub reuploads_pending: usize,
}

/// What an operation in flight refers to.
#[derive(Debug, Clone, Copy)]
struct OpRef {
    partition: PartitionKey,
    /// `None` once the segment was dropped while the operation ran.
    base: Option<i64>,
    /// An upload holds one of its partition's upload slots until it completes.
    holds_slot: bool,
}

/// The uploader engine. See the module docs for its rules.
#[derive(Debug)]
pub struct UploaderEngine {
    config: EngineConfig,
    parts: HashMap<PartitionKey, Part>,
    ops: HashMap<OpId, OpRef>,
    next_op: OpId,
    next_seq: u64,
    in_flight: usize,
}

impl UploaderEngine {
    pub fn new(config: EngineConfig) -> Self {
        UploaderEngine {
            config,
            parts: HashMap::new(),
            ops: HashMap::new(),
            next_op: 1,
            next_seq: 0,
            in_flight: 0,
        }
    }

    /// Applies one event and returns what to do now.
    pub fn handle(&mut self, now: u64, event: Event) -> Vec<Action> {
        let mut out = Vec::new();
        match event {
            Event::Register {
                partition,
                registration,
                committed,
                sealed,
                high_watermark,
            } => {
                if let Some(old) = self.parts.remove(&partition) {
                    self.drop_pending(partition, old.pending.into_values());
                    self.drop_reuploads(partition, old.registration, old.reuploads, &mut out);
                }
                let mut part = Part {
                    registration,
                    high_watermark,
                    ..Part::default()
                };
                part.learn(committed, None);
                part.reported_end = part
                    .committed
                    .iter()
                    .next_back()
                    .map_or(0, |(_, last)| last.saturating_add(1));
                self.parts.insert(partition, part);
                self.add_sealed(now, partition, sealed);
            }
            Event::Sealed {
                partition,
                segments,
                high_watermark,
            } => {
                if let Some(p) = self.parts.get_mut(&partition) {
                    p.high_watermark = p.high_watermark.max(high_watermark);
                }
                self.add_sealed(now, partition, segments);
            }
            Event::HighWatermark {
                partition,
                high_watermark,
            } => {
                if let Some(p) = self.parts.get_mut(&partition) {
                    p.high_watermark = p.high_watermark.max(high_watermark);
                }
            }
            Event::LogStartRaised {
                partition,
                log_start,
            } => {
                let mut gone = Vec::new();
                if let Some(p) = self.parts.get_mut(&partition) {
                    p.log_start = p.log_start.max(log_start);
                    p.reported_end = p.reported_end.max(log_start);
                    let below: Vec<i64> = p
                        .pending
                        .iter()
                        .filter(|(_, s)| s.segment.last_offset < log_start)
                        .map(|(b, _)| *b)
                        .collect();
                    for base in below {
                        gone.extend(p.pending.remove(&base));
                    }
                }
                self.drop_pending(partition, gone);
                self.drop_reuploads_where(partition, &mut out, |s| s.last_offset < log_start);
            }
            Event::Truncated {
                partition,
                from,
                high_watermark,
            } => {
                let mut gone = Vec::new();
                if let Some(p) = self.parts.get_mut(&partition) {
                    p.high_watermark = high_watermark;
                    let cut: Vec<i64> = p
                        .pending
                        .iter()
                        .filter(|(_, s)| s.segment.last_offset >= from)
                        .map(|(b, _)| *b)
                        .collect();
                    for base in cut {
                        gone.extend(p.pending.remove(&base));
                    }
                    let committed_end = p
                        .committed
                        .values()
                        .next_back()
                        .map_or(0, |last| last.saturating_add(1));
                    p.reported_end = p.reported_end.min(from.max(committed_end));
                }
                self.drop_pending(partition, gone);
                self.drop_reuploads_where(partition, &mut out, |s| s.last_offset >= from);
            }
            Event::ManifestRead {
                partition,
                committed,
            } => {
                let mut gone = Vec::new();
                if let Some(p) = self.parts.get_mut(&partition) {
                    let start = committed.iter().map(|(first, _)| *first).min();
                    p.learn(committed, start);
                    gone = p.take_served();
                }
                self.drop_pending(partition, gone);
            }
            Event::Unregister {
                partition,
                registration,
            } => {
                let current = self
                    .parts
                    .get(&partition)
                    .is_some_and(|p| p.registration == registration);
                if let Some(p) = current.then(|| self.parts.remove(&partition)).flatten() {
                    self.drop_pending(partition, p.pending.into_values());
                    self.drop_reuploads(partition, p.registration, p.reuploads, &mut out);
                }
            }
            Event::UploadDone { op, entry } => {
                if let Some(s) = self.complete_upload(op) {
                    s.state = State::CommitWaiting {
                        entry,
                        not_before: now,
                    };
                    s.attempt = 0;
                }
            }
            Event::UploadFailed { op, jitter } => {
                let retry = self.config.retry.clone();
                if let Some(s) = self.complete_upload(op) {
                    let wait = retry.delay(s.attempt, jitter);
                    s.attempt = s.attempt.saturating_add(1);
                    s.state = State::Waiting {
                        not_before: now.saturating_add(millis(wait)),
                    };
                }
            }
            Event::CommitDone { op } => {
                if let Some((partition, base)) = self.complete_commit(op) {
                    if let Some(p) = self.parts.get_mut(&partition) {
                        if let Some(s) = p.pending.remove(&base) {
                            if let State::Committing { entry, .. } = s.state {
                                p.committed.insert(entry.first_served(), entry.last_offset);
                            }
                        }
                    }
                }
            }
            Event::CommitStale { op } => {
                if let Some((partition, base)) = self.complete_commit(op) {
                    if let Some(s) = self
                        .parts
                        .get_mut(&partition)
                        .and_then(|p| p.pending.get_mut(&base))
                    {
                        s.state = State::Waiting { not_before: now };
                    }
                }
            }
            Event::CommitFailed { op, jitter } => {
                let retry = self.config.retry.clone();
                if let Some((partition, base)) = self.complete_commit(op) {
                    if let Some(s) = self
                        .parts
                        .get_mut(&partition)
                        .and_then(|p| p.pending.get_mut(&base))
                    {
                        if let State::Committing { entry, .. } = s.state.clone() {
                            let wait = retry.delay(s.attempt, jitter);
                            s.attempt = s.attempt.saturating_add(1);
                            s.state = State::CommitWaiting {
                                entry,
                                not_before: now.saturating_add(millis(wait)),
                            };
                        }
                    }
                }
            }
            Event::Recompacted {
                partition,
                registration,
                segments,
                generation,
            } => self.add_reuploads(now, partition, registration, segments, generation, &mut out),
            Event::ReuploadDone { op, old, entry } => match self.complete_reupload(op) {
                (_, Some((partition, base))) => {
                    if let Some(r) = self.reupload_mut(partition, base) {
                        r.state = Redo::ReplaceWaiting {
                            old,
                            entry,
                            not_before: now,
                        };
                        r.attempt = 0;
                    }
                }
                (Some(partition), None) => out.push(Action::Discard { partition, entry }),
                (None, None) => {}
            },
            Event::ReuploadFailed { op, jitter } => {
                let retry = self.config.retry.clone();
                if let (_, Some((partition, base))) = self.complete_reupload(op) {
                    if let Some(r) = self.reupload_mut(partition, base) {
                        let wait = retry.delay(r.attempt, jitter);
                        r.attempt = r.attempt.saturating_add(1);
                        r.state = Redo::Waiting {
                            not_before: now.saturating_add(millis(wait)),
                        };
                    }
                }
            }
            Event::ReuploadSkipped { op } => {
                if let (_, Some((partition, base))) = self.complete_reupload(op) {
                    self.finish_reupload(partition, base, &mut out);
                }
            }
            Event::ReplaceDone { op } => {
                if let Some((partition, base)) = self.complete_replace(op) {
                    self.finish_reupload(partition, base, &mut out);
                }
            }
            Event::ReplaceFailed {
                op,
                jitter,
                retriable,
            } => {
                if let Some((partition, base)) = self.complete_replace(op) {
                    if retriable {
                        let retry = self.config.retry.clone();
                        if let Some(r) = self.reupload_mut(partition, base) {
                            if let Redo::Replacing { old, entry, .. } = r.state.clone() {
                                let wait = retry.delay(r.attempt, jitter);
                                r.attempt = r.attempt.saturating_add(1);
                                r.state = Redo::ReplaceWaiting {
                                    old,
                                    entry,
                                    not_before: now.saturating_add(millis(wait)),
                                };
                            }
                        }
                    } else {
                        self.finish_reupload(partition, base, &mut out);
                    }
                }
            }
        }
        self.schedule(now, &mut out);
        out
    }

    /// Starts whatever became possible by `now` (backoffs that ended).
    pub fn tick(&mut self, now: u64) -> Vec<Action> {
        let mut out = Vec::new();
        self.schedule(now, &mut out);
        out
    }

    /// The earliest time a backoff ends, if any waits.
    pub fn next_wake(&self, now: u64) -> Option<u64> {
        let uploads = self
            .parts
            .values()
            .flat_map(|p| p.pending.values())
            .filter_map(|s| match s.state {
                State::Waiting { not_before } | State::CommitWaiting { not_before, .. } => {
                    Some(not_before)
                }
                _ => None,
            });
        let reuploads = self
            .parts
            .values()
            .flat_map(|p| p.reuploads.values())
            .filter_map(|r| match r.state {
                Redo::Waiting { not_before } | Redo::ReplaceWaiting { not_before, .. } => {
                    Some(not_before)
                }
                _ => None,
            });
        uploads.chain(reuploads).filter(|at| *at > now).min()
    }

    /// Where local retention of `partition` may delete up to, if registered.
    pub fn deletable_below(&self, partition: PartitionKey) -> Option<i64> {
        self.parts.get(&partition).map(Part::deletable_below)
    }

    pub fn stats(&self, now: u64) -> EngineStats {
        let mut st = EngineStats {
            partitions: self.parts.len(),
            uploads_in_flight: self.in_flight,
            ..EngineStats::default()
        };
        for s in self.parts.values().flat_map(|p| p.pending.values()) {
            st.pending_segments += 1;
            st.pending_bytes += s.segment.size;
            if matches!(s.state, State::Committing { .. }) {
                st.commits_in_flight += 1;
            }
            st.oldest_pending_ms = st.oldest_pending_ms.max(now.saturating_sub(s.reported_at));
        }
        st.reuploads_pending = self.parts.values().map(|p| p.reuploads.len()).sum();
        st
    }

    fn add_sealed(&mut self, now: u64, partition: PartitionKey, segments: Vec<SealedSegment>) {
        let Some(p) = self.parts.get_mut(&partition) else {
            return;
        };
        for seg in segments {
            p.reported_end = p.reported_end.max(seg.next_offset());
            let already = p.serves(&seg)
                || p.pending.contains_key(&seg.base_offset)
                || seg.last_offset < p.log_start;
            if already {
                continue;
            }
            self.next_seq += 1;
            p.pending.insert(
                seg.base_offset,
                Pending {
                    segment: seg,
                    state: State::Waiting { not_before: now },
                    attempt: 0,
                    seq: self.next_seq,
                    reported_at: now,
                },
            );
        }
    }

    /// Forgets segments that no longer need uploading; operations still in
    /// flight for them complete into nothing.
    fn drop_pending(&mut self, partition: PartitionKey, gone: impl IntoIterator<Item = Pending>) {
        for s in gone {
            let op = match s.state {
                State::Uploading { op } | State::Committing { op, .. } => op,
                State::Waiting { .. } | State::CommitWaiting { .. } => continue,
            };
            if let Some(r) = self.ops.get_mut(&op) {
                r.base = None;
                if r.holds_slot {
                    r.holds_slot = false;
                    if let Some(p) = self.parts.get_mut(&partition) {
                        p.uploads = p.uploads.saturating_sub(1);
                    }
                }
            }
        }
    }

    /// Ends an upload: frees its slots; the segment if it still waits for it.
    fn complete_upload(&mut self, op: OpId) -> Option<&mut Pending> {
        let r = self.ops.remove(&op)?;
        self.in_flight = self.in_flight.saturating_sub(1);
        let p = self.parts.get_mut(&r.partition)?;
        if r.holds_slot {
            p.uploads = p.uploads.saturating_sub(1);
        }
        p.pending
            .get_mut(&r.base?)
            .filter(|s| matches!(s.state, State::Uploading { op: o } if o == op))
    }

    /// Ends a commit; the segment it was for, if it still waits for it.
    fn complete_commit(&mut self, op: OpId) -> Option<(PartitionKey, i64)> {
        let r = self.ops.remove(&op)?;
        let base = r.base?;
        let current = self
            .parts
            .get(&r.partition)?
            .pending
            .get(&base)
            .is_some_and(|s| matches!(s.state, State::Committing { op: o, .. } if o == op));
        current.then_some((r.partition, base))
    }

    fn reupload_mut(&mut self, partition: PartitionKey, base: i64) -> Option<&mut Reupload> {
        self.parts
            .get_mut(&partition)
            .and_then(|p| p.reuploads.get_mut(&base))
    }

    /// Schedules re-uploads of compacted segments (rule 6); a newer report
    /// for a base replaces the older one.
    fn add_reuploads(
        &mut self,
        now: u64,
        partition: PartitionKey,
        registration: u64,
        segments: Vec<SealedSegment>,
        generation: u64,
        out: &mut Vec<Action>,
    ) {
        let release = |out: &mut Vec<Action>, base_offset: i64| {
            out.push(Action::Released {
                partition,
                registration,
                base_offset,
            })
        };
        let Some(p) = self
            .parts
            .get_mut(&partition)
            .filter(|p| p.registration == registration)
        else {
            for seg in segments {
                release(out, seg.base_offset);
            }
            return;
        };
        let mut stale = Vec::new();
        for seg in segments {
            if seg.last_offset < p.log_start {
                release(out, seg.base_offset);
                continue;
            }
            self.next_seq += 1;
            let base = seg.base_offset;
            let redo = Reupload {
                segment: seg,
                generation,
                state: Redo::Waiting { not_before: now },
                attempt: 0,
                seq: self.next_seq,
            };
            stale.extend(p.reuploads.insert(base, redo));
        }
        for r in stale {
            self.detach_reupload(partition, r, out);
        }
    }

    /// Forgets a re-upload's operations (they complete into nothing) and
    /// hands back a copy it uploaded but did not record.
    fn detach_reupload(&mut self, partition: PartitionKey, r: Reupload, out: &mut Vec<Action>) {
        match r.state {
            Redo::Uploading { op } | Redo::Replacing { op, .. } => {
                if let Some(o) = self.ops.get_mut(&op) {
                    o.base = None;
                    if o.holds_slot {
                        o.holds_slot = false;
                        if let Some(p) = self.parts.get_mut(&partition) {
                            p.uploads = p.uploads.saturating_sub(1);
                        }
                    }
                }
            }
            Redo::ReplaceWaiting { entry, .. } => out.push(Action::Discard { partition, entry }),
            Redo::Waiting { .. } => {}
        }
    }

    /// Drops re-uploads (rule 8) of a partition's opening `registration`.
    fn drop_reuploads(
        &mut self,
        partition: PartitionKey,
        registration: u64,
        gone: BTreeMap<i64, Reupload>,
        out: &mut Vec<Action>,
    ) {
        for (base, r) in gone {
            self.detach_reupload(partition, r, out);
            out.push(Action::Released {
                partition,
                registration,
                base_offset: base,
            });
        }
    }

    /// Drops the partition's re-uploads whose segment matches `cut`.
    fn drop_reuploads_where(
        &mut self,
        partition: PartitionKey,
        out: &mut Vec<Action>,
        cut: impl Fn(&SealedSegment) -> bool,
    ) {
        let Some(p) = self.parts.get_mut(&partition) else {
            return;
        };
        let bases: Vec<i64> = p
            .reuploads
            .iter()
            .filter(|(_, r)| cut(&r.segment))
            .map(|(b, _)| *b)
            .collect();
        let gone: BTreeMap<i64, Reupload> = bases
            .into_iter()
            .filter_map(|b| p.reuploads.remove(&b).map(|r| (b, r)))
            .collect();
        let registration = p.registration;
        self.drop_reuploads(partition, registration, gone, out);
    }

    /// A re-upload that is done (replaced, skipped, refused) leaves.
    fn finish_reupload(&mut self, partition: PartitionKey, base: i64, out: &mut Vec<Action>) {
        if let Some(p) = self.parts.get_mut(&partition) {
            if p.reuploads.remove(&base).is_some() {
                out.push(Action::Released {
                    partition,
                    registration: p.registration,
                    base_offset: base,
                });
            }
        }
    }

    /// Ends a re-upload's upload: frees its slots. Returns the partition
    /// the operation was for, and, when the re-upload still waits for it,
    /// its partition and base.
    fn complete_reupload(
        &mut self,
        op: OpId,
    ) -> (Option<PartitionKey>, Option<(PartitionKey, i64)>) {
        let Some(r) = self.ops.remove(&op) else {
            return (None, None);
        };
        self.in_flight = self.in_flight.saturating_sub(1);
        let Some(p) = self.parts.get_mut(&r.partition) else {
            return (Some(r.partition), None);
        };
        if r.holds_slot {
            p.uploads = p.uploads.saturating_sub(1);
        }
        let live = r.base.filter(|b| {
            p.reuploads
                .get(b)
                .is_some_and(|x| matches!(x.state, Redo::Uploading { op: o } if o == op))
        });
        (Some(r.partition), live.map(|b| (r.partition, b)))
    }

    /// Ends a replace; the re-upload it was for, if it still waits for it.
    fn complete_replace(&mut self, op: OpId) -> Option<(PartitionKey, i64)> {
        let r = self.ops.remove(&op)?;
        let base = r.base?;
        let current = self
            .parts
            .get(&r.partition)?
            .reuploads
            .get(&base)
            .is_some_and(|x| matches!(x.state, Redo::Replacing { op: o, .. } if o == op));
        current.then_some((r.partition, base))
    }

    fn new_op(&mut self, partition: PartitionKey, base: i64, holds_slot: bool) -> OpId {
        let op = self.next_op;
        self.next_op += 1;
        self.ops.insert(
            op,
            OpRef {
                partition,
                base: Some(base),
                holds_slot,
            },
        );
        op
    }

    fn schedule(&mut self, now: u64, out: &mut Vec<Action>) {
        // Commits: the oldest segment of each partition, once uploaded and
        // its backoff ended, serving what the manifest does not yet serve.
        let mut commits = Vec::new();
        for (key, p) in &self.parts {
            let Some((base, s)) = p.pending.iter().next() else {
                continue;
            };
            if let State::CommitWaiting { entry, not_before } = &s.state {
                if *not_before <= now {
                    let mut entry = entry.clone();
                    let from = p.served_until(entry.base_offset);
                    entry.served_from = (from > entry.base_offset).then_some(from);
                    commits.push((*key, *base, entry, s.attempt));
                }
            }
        }
        for (key, base, entry, attempt) in commits {
            let op = self.new_op(key, base, false);
            if let Some(s) = self
                .parts
                .get_mut(&key)
                .and_then(|p| p.pending.get_mut(&base))
            {
                s.state = State::Committing {
                    op,
                    entry: entry.clone(),
                };
            }
            out.push(Action::Commit {
                op,
                partition: key,
                entry,
                attempt,
            });
        }
        // Uploads: oldest report first, within the limits.
        let per_partition = self.config.max_in_flight_per_partition.max(1);
        while self.in_flight < self.config.max_in_flight.max(1) {
            let next = self
                .parts
                .iter()
                .filter(|(_, p)| p.uploads < per_partition)
                .flat_map(|(key, p)| {
                    p.pending
                        .iter()
                        .filter(move |(_, s)| {
                            s.segment.last_offset < p.high_watermark
                                && matches!(s.state, State::Waiting { not_before } if not_before <= now)
                        })
                        .map(move |(base, s)| (s.seq, *key, *base))
                })
                .min();
            let Some((_, key, base)) = next else { break };
            let op = self.new_op(key, base, true);
            let Some(p) = self.parts.get_mut(&key) else {
                break;
            };
            let Some(s) = p.pending.get_mut(&base) else {
                break;
            };
            s.state = State::Uploading { op };
            p.uploads += 1;
            self.in_flight += 1;
            out.push(Action::Upload {
                op,
                partition: key,
                segment: s.segment.clone(),
                attempt: s.attempt,
            });
        }
        // Replaces of compacted copies uploaded, once their backoff ended.
        let mut replaces = Vec::new();
        for (key, p) in &self.parts {
            for (base, r) in &p.reuploads {
                if let Redo::ReplaceWaiting {
                    old,
                    entry,
                    not_before,
                } = &r.state
                {
                    if *not_before <= now {
                        replaces.push((*key, *base, old.clone(), entry.clone(), r.attempt));
                    }
                }
            }
        }
        for (key, base, old, entry, attempt) in replaces {
            let op = self.new_op(key, base, false);
            if let Some(r) = self.reupload_mut(key, base) {
                r.state = Redo::Replacing {
                    op,
                    old: old.clone(),
                    entry: entry.clone(),
                };
            }
            out.push(Action::Replace {
                op,
                partition: key,
                old,
                entry,
                attempt,
            });
        }
        // Re-uploads of compacted segments: in the slots first uploads
        // left, oldest report first.
        while self.in_flight < self.config.max_in_flight.max(1) {
            let next = self
                .parts
                .iter()
                .filter(|(_, p)| p.uploads < per_partition)
                .flat_map(|(key, p)| {
                    p.reuploads
                        .iter()
                        .filter(move |(_, r)| {
                            r.segment.last_offset < p.high_watermark
                                && matches!(r.state, Redo::Waiting { not_before } if not_before <= now)
                        })
                        .map(move |(base, r)| (r.seq, *key, *base))
                })
                .min();
            let Some((_, key, base)) = next else { break };
            let op = self.new_op(key, base, true);
            let Some(p) = self.parts.get_mut(&key) else {
                break;
            };
            let Some(r) = p.reuploads.get_mut(&base) else {
                break;
            };
            r.state = Redo::Uploading { op };
            p.uploads += 1;
            self.in_flight += 1;
            out.push(Action::Reupload {
                op,
                partition: key,
                segment: r.segment.clone(),
                generation: r.generation,
                attempt: r.attempt,
            });
        }
        // Local deletion follows the prefix the manifest serves.
        for (key, p) in self.parts.iter_mut() {
            let below = p.deletable_below();
            if p.announced != Some(below) {
                p.announced = Some(below);
                out.push(Action::Deletable {
                    partition: *key,
                    deletable_below: below,
                });
            }
        }
    }
}

fn millis(d: std::time::Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

#[cfg(test)]
#[path = "engine_tests.rs"]
mod tests;
