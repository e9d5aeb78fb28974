//! The Raft log on disk: segmented, append-only files of CRC'd records.
//!
//! Why our own file rather than an embedded KV store: Raft needs exactly an
//! append-only log with tail truncation and head purging, plus one small
//! vote record. A KV store (redb, fjall) would write every entry twice
//! (its own journal, then its tree) and fsync on its own schedule, while here
//! one `fdatasync` covers every append queued behind it (group commit).
//!
//! Layout: `wal-<first index, 20 digits>.log` files. A record is
//!
//! ```text
//! u32 LE payload length | u32 LE CRC-32C of (kind, index, payload) | u8 kind | u64 LE index | payload
//! ```
//!
//! with kind 1 = a log entry (JSON of the openraft entry), 2 = the committed
//! log id (a hint that needs no fsync of its own). Recovery reads every
//! segment; a torn or corrupt record at the tail of the *last* segment is a
//! write interrupted by a crash and is cut off; anywhere else it is reported
//! as corruption. Purging writes `purged.json` first, then deletes whole
//! segments, so a crash in between leaves only extra entries that recovery
//! skips.
//!
//! This type does blocking IO and is driven by one writer thread.

use std::fs::{self, File, OpenOptions};
use std::io::{self, BufWriter, Read, Write};
use std::path::{Path, PathBuf};

use super::fsutil;

const HEADER: usize = 4 + 4 + 1 + 8;
const KIND_ENTRY: u8 = 1;
const KIND_COMMITTED: u8 = 2;
/// A record larger than this is treated as garbage (a torn length field).
const MAX_RECORD: usize = 256 << 20;

/// What recovery found on disk.
#[derive(Debug, Default)]
pub(crate) struct Recovered {
    /// Log entries in index order, with their encoded payloads.
    pub entries: Vec<(u64, Vec<u8>)>,
    /// Payload of the last committed-log-id record, if any.
    pub committed: Option<Vec<u8>>,
    /// Bytes cut off a torn tail.
    pub truncated_bytes: u64,
}

#[derive(Debug)]
struct Segment {
    first_index: u64,
    path: PathBuf,
    len: u64,
    /// (log index, byte offset of its record) for every entry record.
    entries: Vec<(u64, u64)>,
}

pub(crate) struct Wal {
    dir: PathBuf,
    segment_bytes: u64,
    segments: Vec<Segment>,
    writer: Option<BufWriter<File>>,
    dirty: bool,
}

fn corrupt(path: &Path, pos: u64, what: &str) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidData,
        format!("{} is corrupt at byte {pos}: {what}", path.display()),
    )
}

fn segment_name(first_index: u64) -> String {
    format!("wal-{first_index:020}.log")
}

fn parse_segment_name(name: &str) -> Option<u64> {
    name.strip_prefix("wal-")?
        .strip_suffix(".log")?
        .parse()
        .ok()
}

fn crc(kind: u8, index: u64, payload: &[u8]) -> u32 {
    let mut c = crc32c::crc32c(&[kind]);
    c = crc32c::crc32c_append(c, &index.to_le_bytes());
    crc32c::crc32c_append(c, payload)
}

fn encode(kind: u8, index: u64, payload: &[u8], out: &mut Vec<u8>) {
    let len = u32::try_from(payload.len()).unwrap_or(u32::MAX);
    out.extend_from_slice(&len.to_le_bytes());
    out.extend_from_slice(&crc(kind, index, payload).to_le_bytes());
    out.push(kind);
    out.extend_from_slice(&index.to_le_bytes());
    out.extend_from_slice(payload);
}

struct Parsed {
    records: Vec<(u8, u64, u64, Vec<u8>)>, // kind, index, offset, payload
    valid_len: u64,
    error: Option<String>,
}

fn parse(bytes: &[u8]) -> Parsed {
    let mut pos = 0usize;
    let mut records = Vec::new();
    while pos < bytes.len() {
        let rest = &bytes[pos..];
        if rest.len() < HEADER {
            return Parsed {
                records,
                valid_len: pos as u64,
                error: Some("short record header".into()),
            };
        }
        let word =
            |at: usize| u32::from_le_bytes([rest[at], rest[at + 1], rest[at + 2], rest[at + 3]]);
        let len = word(0) as usize;
        let sum = word(4);
        let kind = rest[8];
        let mut idx = [0u8; 8];
        idx.copy_from_slice(&rest[9..17]);
        let index = u64::from_le_bytes(idx);
        if len > MAX_RECORD || rest.len() < HEADER + len {
            return Parsed {
                records,
                valid_len: pos as u64,
                error: Some("record runs past the end".into()),
            };
        }
        let payload = &rest[HEADER..HEADER + len];
        if crc(kind, index, payload) != sum {
            return Parsed {
                records,
                valid_len: pos as u64,
                error: Some("checksum mismatch".into()),
            };
        }
        if kind != KIND_ENTRY && kind != KIND_COMMITTED {
            return Parsed {
                records,
                valid_len: pos as u64,
                error: Some(format!("unknown record kind {kind}")),
            };
        }
        records.push((kind, index, pos as u64, payload.to_vec()));
        pos += HEADER + len;
    }
    Parsed {
        records,
        valid_len: pos as u64,
        error: None,
    }
}

impl Wal {
    /// Opens (or creates) the log in `dir`, dropping entries at or below
    /// `purged_index` and cutting a torn tail.
    pub(crate) fn open(
        dir: &Path,
        segment_bytes: u64,
        purged_index: Option<u64>,
    ) -> io::Result<(Wal, Recovered)> {
        fs::create_dir_all(dir)?;
        let mut names: Vec<(u64, PathBuf)> = Vec::new();
        for e in fs::read_dir(dir)? {
            let e = e?;
            if let Some(first) = e.file_name().to_str().and_then(parse_segment_name) {
                names.push((first, e.path()));
            }
        }
        names.sort();
        let mut rec = Recovered::default();
        let mut segments = Vec::new();
        let count = names.len();
        for (i, (first_index, path)) in names.into_iter().enumerate() {
            let mut bytes = Vec::new();
            File::open(&path)?.read_to_end(&mut bytes)?;
            let parsed = parse(&bytes);
            if let Some(err) = parsed.error {
                if i + 1 < count {
                    return Err(corrupt(&path, parsed.valid_len, &err));
                }
                tracing::warn!(path = %path.display(), at = parsed.valid_len, %err, "cutting torn tail of the raft log");
                rec.truncated_bytes = bytes.len() as u64 - parsed.valid_len;
                let f = OpenOptions::new().write(true).open(&path)?;
                f.set_len(parsed.valid_len)?;
                f.sync_all()?;
            }
            let mut seg = Segment {
                first_index,
                path,
                len: parsed.valid_len,
                entries: Vec::new(),
            };
            for (kind, index, offset, payload) in parsed.records {
                if kind == KIND_COMMITTED {
                    rec.committed = Some(payload);
                    continue;
                }
                if let Some(&(last, _)) = rec.entries.last() {
                    if index != last + 1 {
                        return Err(corrupt(
                            &seg.path,
                            offset,
                            &format!("entry {index} follows entry {last}"),
                        ));
                    }
                }
                seg.entries.push((index, offset));
                if purged_index.is_none_or(|p| index > p) {
                    rec.entries.push((index, payload));
                }
            }
            segments.push(seg);
        }
        if let (Some(p), Some(&(first, _))) = (purged_index, rec.entries.first()) {
            if first != p + 1 {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!(
                        "raft log in {} resumes at entry {first} after purging up to {p}",
                        dir.display()
                    ),
                ));
            }
        }
        let mut wal = Wal {
            dir: dir.to_owned(),
            segment_bytes,
            segments,
            writer: None,
            dirty: false,
        };
        if let Some(p) = purged_index {
            wal.remove_segments_upto(p)?;
        }
        Ok((wal, rec))
    }

    /// The writer of the last segment. With `next_entry`, rolls to a new
    /// segment named after that entry when the last one is full; without,
    /// never rolls (a segment's name must be the index of its first entry).
    fn active_writer(&mut self, next_entry: Option<u64>) -> io::Result<&mut BufWriter<File>> {
        let roll = match (self.segments.last(), next_entry) {
            (None, Some(_)) => true,
            (Some(s), Some(_)) => s.len >= self.segment_bytes && !s.entries.is_empty(),
            (_, None) => false,
        };
        if let (true, Some(next_index)) = (roll, next_entry) {
            self.flush_and_sync()?;
            let path = self.dir.join(segment_name(next_index));
            let f = OpenOptions::new()
                .create_new(true)
                .append(true)
                .open(&path)?;
            fsutil::sync_dir(&self.dir)?;
            self.segments.push(Segment {
                first_index: next_index,
                path,
                len: 0,
                entries: Vec::new(),
            });
            self.writer = Some(BufWriter::with_capacity(256 << 10, f));
        }
        if self.writer.is_none() {
            let seg = self
                .segments
                .last()
                .ok_or_else(|| io::Error::other("no active segment"))?;
            let f = OpenOptions::new().append(true).open(&seg.path)?;
            self.writer = Some(BufWriter::with_capacity(256 << 10, f));
        }
        self.writer
            .as_mut()
            .ok_or_else(|| io::Error::other("no active writer"))
    }

    /// Buffers an entry record; durable after [`Wal::sync`].
    pub(crate) fn append_entry(&mut self, index: u64, payload: &[u8]) -> io::Result<()> {
        let mut buf = Vec::with_capacity(HEADER + payload.len());
        encode(KIND_ENTRY, index, payload, &mut buf);
        self.active_writer(Some(index))?.write_all(&buf)?;
        let seg = self
            .segments
            .last_mut()
            .ok_or_else(|| io::Error::other("no active segment"))?;
        seg.entries.push((index, seg.len));
        seg.len += buf.len() as u64;
        self.dirty = true;
        Ok(())
    }

    /// Records the committed log id. Needs no fsync of its own: losing it
    /// only means re-applying from the snapshot after a crash.
    pub(crate) fn append_committed(&mut self, payload: &[u8]) -> io::Result<()> {
        if self.segments.is_empty() {
            return Ok(()); // nothing logged yet, nothing to commit
        }
        let mut buf = Vec::with_capacity(HEADER + payload.len());
        encode(KIND_COMMITTED, 0, payload, &mut buf);
        self.active_writer(None)?.write_all(&buf)?;
        if let Some(seg) = self.segments.last_mut() {
            seg.len += buf.len() as u64;
        }
        Ok(())
    }

    fn flush_and_sync(&mut self) -> io::Result<()> {
        if let Some(w) = self.writer.as_mut() {
            w.flush()?;
            if self.dirty {
                w.get_ref().sync_data()?;
            }
        }
        self.dirty = false;
        Ok(())
    }

    /// Makes every appended entry durable.
    pub(crate) fn sync(&mut self) -> io::Result<()> {
        self.flush_and_sync()
    }

    /// Removes entries with index `>= since` (conflicting entries on a follower).
    pub(crate) fn truncate_from(&mut self, since: u64) -> io::Result<()> {
        // entries appended before the truncation point must stay durable
        self.flush_and_sync()?;
        self.writer = None;
        while let Some(last) = self.segments.last() {
            let whole = last
                .entries
                .first()
                .is_none_or(|&(first, _)| first >= since)
                && self.segments.len() > 1;
            if !whole {
                break;
            }
            if let Some(seg) = self.segments.pop() {
                fs::remove_file(&seg.path)?;
            }
        }
        if let Some(seg) = self.segments.last_mut() {
            let cut = seg.entries.iter().position(|&(i, _)| i >= since);
            if let Some(cut) = cut {
                let at = seg.entries[cut].1;
                seg.entries.truncate(cut);
                let f = OpenOptions::new().write(true).open(&seg.path)?;
                f.set_len(at)?;
                f.sync_data()?;
                seg.len = at;
            }
        }
        fsutil::sync_dir(&self.dir)
    }

    /// Deletes whole segments whose entries are all `<= upto`. The caller
    /// has already made the purge point durable.
    pub(crate) fn remove_segments_upto(&mut self, upto: u64) -> io::Result<()> {
        let mut removed = false;
        while self.segments.len() > 1 {
            let next_first = self.segments[1]
                .entries
                .first()
                .map(|e| e.0)
                .unwrap_or(self.segments[1].first_index);
            if next_first > upto + 1 {
                break;
            }
            let seg = self.segments.remove(0);
            fs::remove_file(&seg.path)?;
            removed = true;
        }
        if removed {
            fsutil::sync_dir(&self.dir)?;
        }
        Ok(())
    }

    #[cfg(test)]
    fn segment_count(&self) -> usize {
        self.segments.len()
    }
}

#[cfg(test)]
#[path = "wal_tests.rs"]
mod tests;
