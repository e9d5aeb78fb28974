//! Event-time windows closed by a watermark: tumbling, sliding and session
//! windows.
//!
//! Tumbling and sliding windows are aligned to the epoch:
//! `[k*slide, k*slide + size)` for every integer `k` (tumbling: `slide ==
//! size`). Records are aggregated once, into *panes* of `slide` (the pane of
//! `t` starts at `floor(t / slide) * slide`); a window's figures are its
//! `size / slide` panes merged when it closes, so a record costs the same
//! whatever the overlap. A pane is dropped once the last window holding it
//! has closed.
//!
//! Session windows are per key: a record at `t` opens `[t, t + gap)`, and
//! windows of one key that overlap are merged, so a session is
//! `[first event, last event + gap)`.
//!
//! Per key and window the figures are the record count and, per aggregated
//! field, the count of values, their sum, min and max; per weighted
//! average the weighted sum and the sum of weights; per approximate
//! aggregate its sketch ([`crate::sketch`]).
//!
//! The watermark is the minimum, over the partitions read, of the largest
//! event time seen in each (filtered-out records included), minus the
//! allowed lateness; it never goes back. A window is closed, and emitted,
//! once the watermark reaches its end. A record all of whose windows have
//! closed is late: it is counted and dropped (a sliding window record
//! whose newer windows are still open counts in those only).
//!
//! Early results ([`Windows::early`]): every open window whose figures
//! changed since its last early result, as they stand. Adding a record only
//! sets its pane's (or session's) `changed` flag; the windows are merged
//! when the early results are asked for, once per interval. An early result
//! changes nothing else: the window still closes, once, as before.
//!
//! A partition that has been read to its end and has brought no record for
//! the idle timeout no longer holds the watermark back. When every
//! partition is idle like that, the watermark moves to the end of the
//! newest open window, so every open window closes: what has been written
//! is then in the output, at the price that a record arriving later for
//! one of those windows is late.
//!
//! For incremental checkpoints the windows keep a dirty set: the (key,
//! start) of every pane or session added to, opened, merged away or closed
//! since the set was last taken. Marking costs one hash lookup by `&str`
//! per record (an allocation only the first time a window is touched); a
//! checkpoint takes the set and reads the current figures of those
//! windows, and a window no longer open is a deletion, unless its first
//! touch since the checkpoint was its creation (it never was in one).

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

pub use crate::acc::{FieldAcc, Layout, WeightedAcc, WindowAcc};
use crate::decode::Columns;
use crate::pipeline::{Pipeline, WindowSpec};

const LOG_EVERY: Duration = Duration::from_secs(10);
/// Window ends a watermark step is walked through one by one; a longer
/// jump looks at the open panes instead.
const MAX_STEPS: i64 = 4096;

/// A window of one key with its figures: an open one in a checkpoint, or
/// a closed one on its way to the sink.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct WindowRow {
    pub key: String,
    pub start: i64,
    pub end: i64,
    pub acc: WindowAcc,
}

/// Names an open window: its key and start.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct WindowId {
    pub key: String,
    pub start: i64,
}

/// The windows changed or removed since a checkpoint: key -> start ->
/// whether the window was first touched by its creation (then it was not
/// in that checkpoint, and once closed it needs no deletion).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Dirty(HashMap<String, BTreeMap<i64, bool>>);

impl Dirty {
    /// Window (`key`, `start`) changed or went.
    fn mark(&mut self, key: &str, start: i64) {
        self.touch(key, start, false);
    }

    /// Window (`key`, `start`) was created.
    fn created(&mut self, key: &str, start: i64) {
        self.touch(key, start, true);
    }

    fn touch(&mut self, key: &str, start: i64, created: bool) {
        match self.0.get_mut(key) {
            Some(starts) => {
                starts.entry(start).or_insert(created);
            }
            None => {
                self.0
                    .insert(key.to_owned(), BTreeMap::from([(start, created)]));
            }
        }
    }

    /// Adds the windows of `older`, taken before these were touched.
    pub fn merge(&mut self, older: Dirty) {
        for (key, starts) in older.0 {
            let mine = self.0.entry(key).or_default();
            for (start, created) in starts {
                // the first touch is the older one's
                mine.insert(start, created);
            }
        }
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// How many windows.
    pub fn len(&self) -> usize {
        self.0.values().map(BTreeMap::len).sum()
    }
}

/// What a checkpoint keeps of the windows.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct WindowsSnapshot {
    /// Windows ending at or before it are closed.
    pub watermark: Option<i64>,
    /// Per partition, the largest event time seen.
    pub max_event_time: BTreeMap<i32, i64>,
    /// Open panes (tumbling and sliding windows) or open sessions.
    pub open: Vec<WindowRow>,
}

/// The figures of an open pane or session.
struct Figures {
    acc: WindowAcc,
    /// Records came in since the last early result.
    changed: bool,
}

impl Figures {
    fn new(acc: WindowAcc) -> Figures {
        Figures { acc, changed: true }
    }
}

/// What is open: panes of aligned windows, or sessions.
enum Open {
    /// (pane start, key) -> figures; ordered by start, so what closes is a
    /// prefix.
    Panes {
        size: i64,
        slide: i64,
        panes: BTreeMap<(i64, String), Figures>,
    },
    Sessions {
        gap: i64,
        /// key -> start -> (end, figures)
        by_key: BTreeMap<String, BTreeMap<i64, (i64, Figures)>>,
        /// (end, key, start) of every open session, to close in end order.
        by_end: BTreeSet<(i64, String, i64)>,
    },
}

struct PartitionClock {
    max_event_time: Option<i64>,
    /// When the partition last brought a record (or reading began).
    last_record: Instant,
    /// Whether the last fetch read it to its high watermark.
    caught_up: bool,
}

/// The open windows of every key, and the watermark that closes them.
pub struct Windows {
    open: Open,
    lateness: i64,
    idle_timeout: Duration,
    layout: Layout,
    clocks: BTreeMap<i32, PartitionClock>,
    watermark: Option<i64>,
    /// Some pane or session changed since the last early result.
    changed: bool,
    dirty: Dirty,
    /// Records dropped because their windows had closed.
    pub late: u64,
    late_since_log: u64,
    last_log: Option<Instant>,
}

impl Windows {
    /// No window open yet, reading `partitions` from `now`.
    pub fn new(pipeline: &Pipeline, partitions: &[i32], now: Instant) -> Windows {
        let open = match pipeline.windows() {
            WindowSpec::Aligned { size, slide } => Open::Panes {
                size,
                slide,
                panes: BTreeMap::new(),
            },
            WindowSpec::Session { gap } => Open::Sessions {
                gap,
                by_key: BTreeMap::new(),
                by_end: BTreeSet::new(),
            },
        };
        Windows {
            open,
            lateness: pipeline.lateness_ms(),
            idle_timeout: pipeline.source.idle_timeout,
            layout: Layout::new(pipeline),
            clocks: partitions
                .iter()
                .map(|p| {
                    (
                        *p,
                        PartitionClock {
                            max_event_time: None,
                            last_record: now,
                            caught_up: false,
                        },
                    )
                })
                .collect(),
            watermark: None,
            changed: false,
            dirty: Dirty::default(),
            late: 0,
            late_since_log: 0,
            last_log: None,
        }
    }

    /// Takes up the windows and event times a checkpoint kept.
    pub fn restore(&mut self, snapshot: &WindowsSnapshot) {
        self.watermark = snapshot.watermark;
        self.dirty = Dirty::default();
        for (p, t) in &snapshot.max_event_time {
            if let Some(c) = self.clocks.get_mut(p) {
                c.max_event_time = Some(*t);
            }
        }
        let layout = &self.layout;
        // restored windows are new to whoever watches the early results
        let fit = |acc: &WindowAcc| Figures::new(acc.clone().fit(layout));
        self.changed = !snapshot.open.is_empty();
        match &mut self.open {
            Open::Panes { panes, .. } => {
                *panes = snapshot
                    .open
                    .iter()
                    .map(|w| ((w.start, w.key.clone()), fit(&w.acc)))
                    .collect();
            }
            Open::Sessions { by_key, by_end, .. } => {
                by_key.clear();
                by_end.clear();
                for w in &snapshot.open {
                    by_key
                        .entry(w.key.clone())
                        .or_default()
                        .insert(w.start, (w.end, fit(&w.acc)));
                    by_end.insert((w.end, w.key.clone(), w.start));
                }
            }
        }
    }

    /// The windows and event times a checkpoint keeps.
    pub fn snapshot(&self) -> WindowsSnapshot {
        let open = match &self.open {
            Open::Panes { slide, panes, .. } => panes
                .iter()
                .map(|((start, key), f)| WindowRow {
                    key: key.clone(),
                    start: *start,
                    end: start.saturating_add(*slide),
                    acc: f.acc.clone(),
                })
                .collect(),
            Open::Sessions { by_key, .. } => by_key
                .iter()
                .flat_map(|(key, sessions)| {
                    sessions.iter().map(|(start, (end, f))| WindowRow {
                        key: key.clone(),
                        start: *start,
                        end: *end,
                        acc: f.acc.clone(),
                    })
                })
                .collect(),
        };
        WindowsSnapshot {
            watermark: self.watermark,
            max_event_time: self.max_event_times(),
            open,
        }
    }

    pub fn watermark(&self) -> Option<i64> {
        self.watermark
    }

    /// Per partition, the largest event time seen.
    pub fn max_event_times(&self) -> BTreeMap<i32, i64> {
        self.clocks
            .iter()
            .filter_map(|(p, c)| Some((*p, c.max_event_time?)))
            .collect()
    }

    /// The windows changed or removed since the last call (or the restore).
    pub fn take_dirty(&mut self) -> Dirty {
        std::mem::take(&mut self.dirty)
    }

    /// Marks `dirty` changed again (its checkpoint did not commit).
    pub fn mark_dirty(&mut self, dirty: Dirty) {
        self.dirty.merge(dirty);
    }

    /// Whether no window changed since the last [`Windows::take_dirty`].
    pub fn is_clean(&self) -> bool {
        self.dirty.is_empty()
    }

    /// The current figures of the windows of `dirty` still open, and the
    /// ids of those no longer open (but for those created and closed since
    /// the checkpoint).
    pub fn changes(&self, dirty: &Dirty) -> (Vec<WindowRow>, Vec<WindowId>) {
        let mut changed = Vec::new();
        let mut removed = Vec::new();
        for (key, starts) in &dirty.0 {
            for (&start, &created) in starts {
                let open = match &self.open {
                    Open::Panes { slide, panes, .. } => panes
                        .get(&(start, key.clone()))
                        .map(|f| (start.saturating_add(*slide), &f.acc)),
                    Open::Sessions { by_key, .. } => by_key
                        .get(key)
                        .and_then(|s| s.get(&start))
                        .map(|(end, f)| (*end, &f.acc)),
                };
                match open {
                    Some((end, acc)) => changed.push(WindowRow {
                        key: key.clone(),
                        start,
                        end,
                        acc: acc.clone(),
                    }),
                    None if created => {}
                    None => removed.push(WindowId {
                        key: key.clone(),
                        start,
                    }),
                }
            }
        }
        (changed, removed)
    }

    /// Open panes (tumbling and sliding windows) or sessions.
    pub fn open_windows(&self) -> usize {
        match &self.open {
            Open::Panes { panes, .. } => panes.len(),
            Open::Sessions { by_end, .. } => by_end.len(),
        }
    }

    /// Adds one partition's decoded records; the partition's event time
    /// moves to `cols.max_event_time` (records filtered out count there).
    pub fn add(&mut self, partition: i32, cols: &Columns, now: Instant) {
        self.add_keeping_late(partition, cols, now, &mut Vec::new());
    }

    /// [`Windows::add`], pushing the rows of `cols` that were late onto
    /// `late_rows`.
    pub fn add_keeping_late(
        &mut self,
        partition: i32,
        cols: &Columns,
        now: Instant,
        late_rows: &mut Vec<usize>,
    ) {
        let Some(max) = cols.max_event_time else {
            return;
        };
        let before = late_rows.len();
        let (watermark, layout, dirty) = (self.watermark, &self.layout, &mut self.dirty);
        match &mut self.open {
            Open::Panes {
                size, slide, panes, ..
            } => add_to_panes(
                panes,
                (*size, *slide),
                watermark,
                cols,
                layout,
                late_rows,
                dirty,
            ),
            Open::Sessions {
                gap,
                by_key,
                by_end,
            } => add_to_sessions(
                by_key,
                by_end,
                (*gap, watermark),
                cols,
                layout,
                late_rows,
                dirty,
            ),
        }
        let late = (late_rows.len() - before) as u64;
        self.changed |= late < cols.len() as u64;
        if let Some(c) = self.clocks.get_mut(&partition) {
            c.max_event_time = Some(c.max_event_time.map_or(max, |m| m.max(max)));
            c.last_record = now;
        }
        if late > 0 {
            self.log_late(partition, late, now);
        }
    }

    /// Whether the last fetch read `partition` to its end.
    pub fn set_caught_up(&mut self, partition: i32, caught_up: bool) {
        if let Some(c) = self.clocks.get_mut(&partition) {
            c.caught_up = caught_up;
        }
    }

    /// Moves the watermark as far as the partitions allow and returns the
    /// windows that closed, oldest end first.
    pub fn advance(&mut self, now: Instant) -> Vec<WindowRow> {
        let idle = |c: &PartitionClock| {
            c.caught_up && now.saturating_duration_since(c.last_record) >= self.idle_timeout
        };
        let candidate = if self.clocks.values().all(idle) {
            // everything there is has been read: close every open window
            let newest_event = self
                .clocks
                .values()
                .filter_map(|c| c.max_event_time)
                .max()
                .map(|t| t.saturating_sub(self.lateness));
            self.newest_end().max(newest_event)
        } else {
            let mut min: Option<i64> = None;
            let mut held = false;
            for c in self.clocks.values().filter(|c| !idle(c)) {
                match c.max_event_time {
                    Some(t) => {
                        let t = t.saturating_sub(self.lateness);
                        min = Some(min.map_or(t, |m| m.min(t)));
                    }
                    // an active partition that has shown nothing yet
                    None => held = true,
                }
            }
            if held {
                None
            } else {
                min
            }
        };
        let before = self.watermark;
        if let Some(c) = candidate {
            if self.watermark.is_none_or(|w| c > w) {
                self.watermark = Some(c);
            }
        }
        let Some(w) = self.watermark else {
            return Vec::new();
        };
        if before == Some(w) {
            return Vec::new();
        }
        let dirty = &mut self.dirty;
        match &mut self.open {
            Open::Panes {
                size, slide, panes, ..
            } => close_panes(panes, *size, *slide, before, w, dirty),
            Open::Sessions { by_key, by_end, .. } => close_sessions(by_key, by_end, w, dirty),
        }
    }

    /// Early results: each open window (of each key) with a record added
    /// since its last early result, with its figures so far, oldest end
    /// first; then every window counts as unchanged. A window is left out
    /// once the watermark has closed it, so after [`Windows::advance`] only
    /// windows still open come out.
    pub fn early(&mut self) -> Vec<WindowRow> {
        if !std::mem::take(&mut self.changed) {
            return Vec::new();
        }
        let watermark = self.watermark;
        match &mut self.open {
            Open::Panes {
                size, slide, panes, ..
            } => early_panes(panes, *size, *slide, watermark),
            Open::Sessions { by_key, .. } => {
                let mut rows = Vec::new();
                for (key, sessions) in by_key.iter_mut() {
                    for (start, (end, f)) in sessions.iter_mut() {
                        if std::mem::take(&mut f.changed) {
                            rows.push(WindowRow {
                                key: key.clone(),
                                start: *start,
                                end: *end,
                                acc: f.acc.clone(),
                            });
                        }
                    }
                }
                rows.sort_by(|a, b| (a.end, &a.key).cmp(&(b.end, &b.key)));
                rows
            }
        }
    }

    /// The end of the newest open window.
    fn newest_end(&self) -> Option<i64> {
        match &self.open {
            Open::Panes { size, panes, .. } => panes
                .keys()
                .next_back()
                .map(|(start, _)| start.saturating_add(*size)),
            Open::Sessions { by_end, .. } => by_end.last().map(|(end, _, _)| *end),
        }
    }

    fn log_late(&mut self, partition: i32, late: u64, now: Instant) {
        self.late += late;
        self.late_since_log += late;
        if self
            .last_log
            .is_some_and(|t| now.duration_since(t) < LOG_EVERY)
        {
            return;
        }
        tracing::warn!(
            partition,
            late = self.late_since_log,
            watermark = self.watermark,
            "dropping late records: their windows had closed (records since the last such line)"
        );
        self.late_since_log = 0;
        self.last_log = Some(now);
    }
}

/// Adds records to their panes; the late ones' rows go onto `late`.
fn add_to_panes(
    panes: &mut BTreeMap<(i64, String), Figures>,
    (size, slide): (i64, i64),
    watermark: Option<i64>,
    cols: &Columns,
    layout: &Layout,
    late: &mut Vec<usize>,
    dirty: &mut Dirty,
) {
    for i in 0..cols.len() {
        let t = cols.event_times.value(i);
        let pane = t.div_euclid(slide).saturating_mul(slide);
        // the newest window holding the pane starts at the pane
        if watermark.is_some_and(|w| pane.saturating_add(size) <= w) {
            late.push(i);
            continue;
        }
        let key = cols.keys.value(i);
        let f = match panes.get_mut(&(pane, key.to_owned())) {
            Some(f) => f,
            None => {
                dirty.created(key, pane);
                panes
                    .entry((pane, key.to_owned()))
                    .or_insert_with(|| Figures::new(WindowAcc::empty(layout)))
            }
        };
        f.acc.add(cols, i, layout);
        f.changed = true;
        dirty.mark(key, pane);
    }
}

/// The windows that close as the watermark moves from `before` to `w`:
/// every window holding an open pane whose end is in `(before, w]`, with
/// its panes merged per key.
fn close_panes(
    panes: &mut BTreeMap<(i64, String), Figures>,
    size: i64,
    slide: i64,
    before: Option<i64>,
    w: i64,
    dirty: &mut Dirty,
) -> Vec<WindowRow> {
    let closes = |start: i64| {
        let end = start.saturating_add(size);
        end <= w && before.is_none_or(|b| end > b)
    };
    let mut starts = BTreeSet::new();
    // a small step of the watermark: the few window ends it passes
    if let Some(b) = before.filter(|b| w.saturating_sub(*b) / slide <= MAX_STEPS) {
        let first = b.saturating_sub(size).saturating_add(1);
        let mut start = first
            .saturating_neg()
            .div_euclid(slide)
            .saturating_neg()
            .saturating_mul(slide);
        while start.saturating_add(size) <= w {
            starts.insert(start);
            start = start.saturating_add(slide);
        }
        return merge_panes(panes, size, w, starts, dirty);
    }
    // the first watermark, or a jump: the windows holding open panes
    let mut last_pane = None;
    for (pane, _) in panes.keys() {
        if *pane >= w {
            break;
        }
        if last_pane == Some(*pane) {
            continue;
        }
        last_pane = Some(*pane);
        // the windows holding this pane start at pane - size + slide ..= pane
        let mut start = pane.saturating_sub(size).saturating_add(slide);
        while start <= *pane {
            if closes(start) {
                starts.insert(start);
            }
            start = start.saturating_add(slide);
        }
    }
    merge_panes(panes, size, w, starts, dirty)
}

/// The windows starting at `starts` with their panes merged per key (those
/// holding no pane are left out); then drops the panes no window ending
/// after `w` holds.
fn merge_panes(
    panes: &mut BTreeMap<(i64, String), Figures>,
    size: i64,
    w: i64,
    starts: BTreeSet<i64>,
    dirty: &mut Dirty,
) -> Vec<WindowRow> {
    let mut closed = Vec::new();
    for start in starts {
        let end = start.saturating_add(size);
        let mut merged: BTreeMap<&str, WindowAcc> = BTreeMap::new();
        for ((_, key), f) in panes.range((start, String::new())..(end, String::new())) {
            match merged.get_mut(key.as_str()) {
                Some(m) => m.merge(&f.acc),
                None => {
                    merged.insert(key, f.acc.clone());
                }
            }
        }
        closed.extend(merged.into_iter().map(|(key, acc)| WindowRow {
            key: key.to_owned(),
            start,
            end,
            acc,
        }));
    }
    // a pane is held by windows ending up to pane + size
    while let Some(entry) = panes.first_entry() {
        if entry.key().0.saturating_add(size) > w {
            break;
        }
        let ((start, key), _) = entry.remove_entry();
        dirty.mark(&key, start);
    }
    closed
}

/// The open windows holding a changed pane, per key, with their panes
/// merged; clears the flags.
fn early_panes(
    panes: &mut BTreeMap<(i64, String), Figures>,
    size: i64,
    slide: i64,
    watermark: Option<i64>,
) -> Vec<WindowRow> {
    let mut wanted: BTreeSet<(i64, i64, String)> = BTreeSet::new();
    for ((pane, key), f) in panes.iter_mut() {
        if !std::mem::take(&mut f.changed) {
            continue;
        }
        // the windows holding this pane start at pane - size + slide ..= pane
        let mut start = pane.saturating_sub(size).saturating_add(slide);
        while start <= *pane {
            let end = start.saturating_add(size);
            if watermark.is_none_or(|w| end > w) {
                wanted.insert((end, start, key.clone()));
            }
            start = start.saturating_add(slide);
        }
    }
    let mut rows = Vec::with_capacity(wanted.len());
    for (end, start, key) in wanted {
        let mut merged: Option<WindowAcc> = None;
        // looked up by (pane start, key), the key moved in once
        let mut probe = (start, key);
        while probe.0 < end {
            if let Some(f) = panes.get(&probe) {
                match merged.as_mut() {
                    Some(m) => m.merge(&f.acc),
                    None => merged = Some(f.acc.clone()),
                }
            }
            probe.0 = probe.0.saturating_add(slide);
        }
        if let Some(acc) = merged {
            rows.push(WindowRow {
                key: probe.1,
                start,
                end,
                acc,
            });
        }
    }
    rows
}

/// Adds records to their keys' sessions, merging the sessions a record
/// bridges; the late ones' rows go onto `late`.
fn add_to_sessions(
    by_key: &mut BTreeMap<String, BTreeMap<i64, (i64, Figures)>>,
    by_end: &mut BTreeSet<(i64, String, i64)>,
    (gap, watermark): (i64, Option<i64>),
    cols: &Columns,
    layout: &Layout,
    late: &mut Vec<usize>,
    dirty: &mut Dirty,
) {
    for i in 0..cols.len() {
        let t = cols.event_times.value(i);
        let key = cols.keys.value(i);
        let mut start = t;
        let mut end = t.saturating_add(gap);
        let sessions = match by_key.get_mut(key) {
            Some(s) => s,
            None => by_key.entry(key.to_owned()).or_default(),
        };
        // open sessions overlapping [t, t + gap): disjoint and sorted, so
        // the ones starting before t + gap, newest back while they reach t
        let overlapping: Vec<i64> = sessions
            .range(..end)
            .rev()
            .take_while(|(_, (e, _))| *e > t)
            .map(|(s, _)| *s)
            .collect();
        if overlapping.is_empty() && watermark.is_some_and(|w| end <= w) {
            late.push(i);
            if sessions.is_empty() {
                by_key.remove(key);
            }
            continue;
        }
        let mut acc = WindowAcc::empty(layout);
        for s in overlapping {
            if let Some((e, a)) = sessions.remove(&s) {
                by_end.remove(&(e, key.to_owned(), s));
                dirty.mark(key, s);
                start = start.min(s);
                end = end.max(e);
                acc.merge(&a.acc);
            }
        }
        acc.add(cols, i, layout);
        // a start that was open already was marked when merged away
        dirty.created(key, start);
        sessions.insert(start, (end, Figures::new(acc)));
        by_end.insert((end, key.to_owned(), start));
    }
}

/// The sessions ending at or before `w`, oldest end first.
fn close_sessions(
    by_key: &mut BTreeMap<String, BTreeMap<i64, (i64, Figures)>>,
    by_end: &mut BTreeSet<(i64, String, i64)>,
    w: i64,
    dirty: &mut Dirty,
) -> Vec<WindowRow> {
    let mut closed = Vec::new();
    while by_end.first().is_some_and(|(end, _, _)| *end <= w) {
        let Some((end, key, start)) = by_end.pop_first() else {
            break;
        };
        let Some(sessions) = by_key.get_mut(&key) else {
            continue;
        };
        dirty.mark(&key, start);
        if let Some((_, f)) = sessions.remove(&start) {
            closed.push(WindowRow {
                key: key.clone(),
                start,
                end,
                acc: f.acc,
            });
        }
        if sessions.is_empty() {
            by_key.remove(&key);
        }
    }
    closed
}

#[cfg(test)]
#[path = "window_tests.rs"]
mod tests;
