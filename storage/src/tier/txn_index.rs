//! Aborted-transaction indexes in object storage: each sealed segment's
//! `.txnindex` (the aborted transactions whose ABORT marker is in it, see
//! `crate::txn`) goes up beside it as `<segment key>.txnindex` when it has
//! one, and a read_committed cold read asks for the aborted transactions
//! its range overlaps, so a replica whose log restarted at the tiered end,
//! or lost its local files, still names them.
//!
//! A transaction's marker follows its first record by at most the longest
//! transaction timeout, so the segments asked are those from the one
//! holding the read's offset up to the first whose records start more than
//! that later (by their timestamps) or at or after the read's upper bound.
//! Each object is fetched once per agent and kept (as "none" when the
//! segment has none).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use cache::object_store::path::Path;
use cache::ObjectStoreHandle;

use super::engine::SealedSegment;
use super::error::TierError;
use super::manifest::{ObjectPlace, TieredSegment};
use crate::txn::{decode_entries, AbortedTxn};

/// How much later than a transaction's first record its marker may come:
/// the longest transaction timeout a coordinator grants (15 minutes), with
/// a minute for clocks and the coordinator's sweep.
const MARKER_LAG_MS: i64 = 16 * 60 * 1000;

/// Most tiered segments one read looks through for markers.
const MAX_SEGMENTS_SCANNED: usize = 2048;

/// Most indexes remembered per agent before the memory starts over.
const MAX_REMEMBERED: usize = 100_000;

/// Uploads `seg`'s aborted-transaction index to `key` if it has one;
/// returns the bytes sent (0: none).
pub(super) async fn upload(
    store: &ObjectStoreHandle,
    key: Path,
    seg: &SealedSegment,
    deadline: Duration,
) -> Result<u64, TierError> {
    match prepared(seg).await? {
        Some(bytes) => super::sidecar::put(store, &key, bytes, deadline).await,
        None => Ok(0),
    }
}

/// The bytes of `seg`'s aborted-transaction index, checked, if it has one.
pub(super) async fn prepared(seg: &SealedSegment) -> Result<Option<Vec<u8>>, TierError> {
    let path = &seg.txn_index_path;
    let bytes = match tokio::fs::read(path).await {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => {
            return Err(TierError::CorruptObject {
                key: path.display().to_string(),
                position: 0,
                reason: format!("the aborted-transaction index is unreadable: {e}"),
            })
        }
    };
    if decode_entries(&bytes).is_none() {
        // the local index is rebuilt from the markers on recovery; a
        // damaged one must not go up as the segment's record
        return Err(TierError::CorruptObject {
            key: path.display().to_string(),
            position: 0,
            reason: "the aborted-transaction index fails its checksum".into(),
        });
    }
    Ok(Some(bytes))
}

/// Indexes fetched so far, by object key (`None`: the segment has none).
#[derive(Debug, Default)]
pub struct Remembered(Mutex<HashMap<String, Option<Arc<Vec<AbortedTxn>>>>>);

impl Remembered {
    fn get(&self, key: &str) -> Option<Option<Arc<Vec<AbortedTxn>>>> {
        self.0.lock().ok()?.get(key).cloned()
    }

    fn put(&self, key: String, value: Option<Arc<Vec<AbortedTxn>>>) {
        if let Ok(mut m) = self.0.lock() {
            if m.len() >= MAX_REMEMBERED {
                m.clear();
            }
            m.insert(key, value);
        }
    }
}

/// The aborted transactions of `entries` that overlap `[from, upto)`.
pub(super) async fn aborted(
    store: &ObjectStoreHandle,
    remembered: &Remembered,
    entries: &[TieredSegment],
    from: i64,
    upto: i64,
    deadline: Duration,
) -> Result<Vec<AbortedTxn>, TierError> {
    let first = entries.partition_point(|e| e.last_offset < from);
    let Some(start) = entries.get(first) else {
        return Ok(Vec::new());
    };
    let started_ms = start.first_timestamp;
    let mut out = Vec::new();
    for e in entries[first..].iter().take(MAX_SEGMENTS_SCANNED) {
        if e.base_offset >= upto {
            break;
        }
        if started_ms >= 0 && e.first_timestamp > started_ms.saturating_add(MARKER_LAG_MS) {
            break;
        }
        let place = e.place(cache::layout::ObjectKind::TxnIndex);
        let key = format!("{}@{}", place.key, place.start);
        let index = match remembered.get(&key) {
            Some(known) => known,
            None => {
                let fetched = fetch(store, &place, deadline).await?;
                remembered.put(key, fetched.clone());
                fetched
            }
        };
        if let Some(index) = index {
            out.extend(
                index
                    .iter()
                    .filter(|t| t.last_offset >= from && t.first_offset < upto)
                    .copied(),
            );
        }
    }
    Ok(out)
}

async fn fetch(
    store: &ObjectStoreHandle,
    place: &ObjectPlace,
    deadline: Duration,
) -> Result<Option<Arc<Vec<AbortedTxn>>>, TierError> {
    let got = super::sidecar::get_placed(store, place, deadline).await?;
    let Some(bytes) = got else {
        return Ok(None);
    };
    decode_entries(&bytes)
        .map(|v| Some(Arc::new(v)))
        .ok_or_else(|| TierError::CorruptObject {
            key: place.key.clone(),
            position: place.start,
            reason: "the aborted-transaction index fails its checksum".into(),
        })
}
