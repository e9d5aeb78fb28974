//! Incremental fetch sessions (KIP-227). A consumer that asks for a session
//! (session id 0, epoch 0) gets an id; later fetches with that id and the next
//! epoch list only the partitions that changed, and the response carries only
//! partitions with news. Sessionless fetches (epoch -1) bypass all of this.

use std::collections::HashMap;
use std::sync::Mutex;

use uuid::Uuid;

/// One partition tracked by a session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionPartition {
    pub topic: String,
    pub topic_id: Uuid,
    pub partition: i32,
    pub fetch_offset: i64,
    pub max_bytes: i32,
    /// What the last response told the client, to decide what is news.
    pub last_high_watermark: i64,
    pub last_log_start: i64,
}

#[derive(Debug)]
struct Session {
    next_epoch: i32,
    partitions: Vec<SessionPartition>,
    last_used: u64,
}

/// Why a session fetch was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SessionError {
    NotFound,
    InvalidEpoch,
}

/// What a fetch request means for sessions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SessionMode {
    /// Epoch -1: no session (closing one if an id was given).
    Sessionless,
    /// Session id 0, epoch 0: start a session with the listed partitions.
    New,
    /// An existing session at the given epoch.
    Incremental { id: i32, epoch: i32 },
}

impl SessionMode {
    pub fn of(session_id: i32, epoch: i32) -> SessionMode {
        match (session_id, epoch) {
            (_, -1) => SessionMode::Sessionless,
            (0, _) => SessionMode::New,
            (id, epoch) => SessionMode::Incremental { id, epoch },
        }
    }
}

/// The session cache, bounded by `max.incremental.fetch.session.cache.slots`.
pub struct FetchSessions {
    slots: usize,
    inner: Mutex<Inner>,
}

#[derive(Default)]
struct Inner {
    sessions: HashMap<i32, Session>,
    next_id: i32,
    clock: u64,
}

impl FetchSessions {
    pub fn new(slots: usize) -> Self {
        FetchSessions {
            slots,
            inner: Mutex::new(Inner::default()),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Starts a session; `None` when sessions are disabled (no slots).
    pub fn create(&self, partitions: Vec<SessionPartition>) -> Option<i32> {
        if self.slots == 0 {
            return None;
        }
        let mut g = self.lock();
        if g.sessions.len() >= self.slots {
            // Evict the least recently used session.
            let oldest = g
                .sessions
                .iter()
                .min_by_key(|(_, s)| s.last_used)
                .map(|(id, _)| *id);
            if let Some(id) = oldest {
                g.sessions.remove(&id);
            }
        }
        g.clock += 1;
        let clock = g.clock;
        let id = loop {
            g.next_id = g.next_id.wrapping_add(1).max(1);
            let candidate = g.next_id;
            if !g.sessions.contains_key(&candidate) {
                break candidate;
            }
        };
        g.sessions.insert(
            id,
            Session {
                next_epoch: 1,
                partitions,
                last_used: clock,
            },
        );
        Some(id)
    }

    pub fn close(&self, id: i32) {
        self.lock().sessions.remove(&id);
    }

    /// Applies an incremental request: `updates` are added or replace existing
    /// entries, `forgotten` are dropped. Returns the session's partitions.
    pub fn update(
        &self,
        id: i32,
        epoch: i32,
        updates: Vec<SessionPartition>,
        forgotten: &[(Uuid, String, i32)],
    ) -> Result<Vec<SessionPartition>, SessionError> {
        let mut g = self.lock();
        g.clock += 1;
        let clock = g.clock;
        let s = g.sessions.get_mut(&id).ok_or(SessionError::NotFound)?;
        if s.next_epoch != epoch {
            return Err(SessionError::InvalidEpoch);
        }
        s.next_epoch = s.next_epoch.wrapping_add(1).max(1);
        s.last_used = clock;
        s.partitions.retain(|p| {
            !forgotten.iter().any(|(tid, name, part)| {
                p.partition == *part && (p.topic_id == *tid || p.topic == *name)
            })
        });
        for u in updates {
            match s
                .partitions
                .iter_mut()
                .find(|p| p.topic_id == u.topic_id && p.partition == u.partition)
            {
                Some(existing) => {
                    existing.fetch_offset = u.fetch_offset;
                    existing.max_bytes = u.max_bytes;
                }
                None => s.partitions.push(u),
            }
        }
        Ok(s.partitions.clone())
    }

    /// Records what the last response told the client.
    pub fn remember(&self, id: i32, sent: &[(Uuid, i32, i64, i64)]) {
        let mut g = self.lock();
        if let Some(s) = g.sessions.get_mut(&id) {
            for (tid, part, hw, ls) in sent {
                if let Some(p) = s
                    .partitions
                    .iter_mut()
                    .find(|p| p.topic_id == *tid && p.partition == *part)
                {
                    p.last_high_watermark = *hw;
                    p.last_log_start = *ls;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn part(p: i32, offset: i64) -> SessionPartition {
        SessionPartition {
            topic: "t".into(),
            topic_id: Uuid::nil(),
            partition: p,
            fetch_offset: offset,
            max_bytes: 1024,
            last_high_watermark: -1,
            last_log_start: -1,
        }
    }

    #[test]
    fn incremental_fetch_keeps_partitions_and_applies_changes() {
        let s = FetchSessions::new(10);
        let id = s.create(vec![part(0, 0), part(1, 0)]).expect("session");
        let now = s.update(id, 1, vec![part(1, 5)], &[]).expect("epoch 1");
        assert_eq!(now.len(), 2);
        assert_eq!(now[1].fetch_offset, 5);
        let now = s
            .update(id, 2, vec![], &[(Uuid::nil(), "t".into(), 0)])
            .expect("epoch 2");
        assert_eq!(now, vec![part(1, 5)]);
    }

    #[test]
    fn wrong_epoch_or_unknown_session_is_refused() {
        let s = FetchSessions::new(10);
        let id = s.create(vec![part(0, 0)]).expect("session");
        assert_eq!(
            s.update(id, 5, vec![], &[]),
            Err(SessionError::InvalidEpoch)
        );
        assert_eq!(
            s.update(id + 1, 1, vec![], &[]),
            Err(SessionError::NotFound)
        );
        s.close(id);
        assert_eq!(s.update(id, 1, vec![], &[]), Err(SessionError::NotFound));
    }

    #[test]
    fn full_cache_evicts_the_least_recently_used_session() {
        let s = FetchSessions::new(2);
        let a = s.create(vec![]).expect("a");
        let b = s.create(vec![]).expect("b");
        s.update(a, 1, vec![], &[]).expect("touch a");
        let _c = s.create(vec![]).expect("c");
        assert!(s.update(a, 2, vec![], &[]).is_ok());
        assert_eq!(s.update(b, 1, vec![], &[]), Err(SessionError::NotFound));
    }
}
