//! Incremental fetch sessions (KIP-227). A consumer that asks for a session
//! (session id 0, epoch 0) gets an id; later fetches with that id and the next
//! epoch list only the partitions that changed, and the response carries only
//! partitions with news. Sessionless fetches (epoch -1) bypass all of this.

use std::collections::{HashMap, HashSet};
use std::sync::Mutex;

use indexmap::IndexMap;
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
    /// The connection that created the session; no other may use it.
    connection: u64,
    next_epoch: i32,
    partitions: IndexMap<(Uuid, i32), SessionPartition>,
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
    /// Epoch 0: start a session with the listed partitions. With a session
    /// id, that session is closed first: a client that lost track of its
    /// session's epoch (a fetch it gave up on was served) starts over this
    /// way, keeping its id, as KIP-227 has it and Kafka's broker does.
    New,
    /// An existing session at the given epoch.
    Incremental { id: i32, epoch: i32 },
}

impl SessionMode {
    pub fn of(session_id: i32, epoch: i32) -> SessionMode {
        match (session_id, epoch) {
            (_, -1) => SessionMode::Sessionless,
            (0, _) | (_, 0) => SessionMode::New,
            (id, epoch) => SessionMode::Incremental { id, epoch },
        }
    }
}

/// The session cache, bounded by `max.incremental.fetch.session.cache.slots`.
///
/// Session ids are random, and a session answers only on the connection that
/// created it: another client cannot guess, use or close it, and a
/// connection's sessions go when it closes (clients then start a new one, as
/// after FETCH_SESSION_ID_NOT_FOUND).
pub struct FetchSessions {
    slots: usize,
    inner: Mutex<Inner>,
}

#[derive(Default)]
struct Inner {
    sessions: HashMap<i32, Session>,
    clock: u64,
}

fn key(p: &SessionPartition) -> (Uuid, i32) {
    (p.topic_id, p.partition)
}

/// A random positive session id (never 0, which means "no session").
fn random_id() -> i32 {
    let bits = Uuid::new_v4().as_u128() as u32;
    (bits & 0x7fff_ffff).max(1) as i32
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

    /// Starts a session for `connection`; `None` when sessions are disabled
    /// (no slots).
    pub fn create(&self, connection: u64, partitions: Vec<SessionPartition>) -> Option<i32> {
        if self.slots == 0 {
            return None;
        }
        let mut g = self.lock();
        if g.sessions.len() >= self.slots {
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
            let candidate = random_id();
            if !g.sessions.contains_key(&candidate) {
                break candidate;
            }
        };
        g.sessions.insert(
            id,
            Session {
                connection,
                next_epoch: 1,
                partitions: partitions.into_iter().map(|p| (key(&p), p)).collect(),
                last_used: clock,
            },
        );
        Some(id)
    }

    /// Closes a session of `connection` (another connection's is left alone).
    pub fn close(&self, connection: u64, id: i32) {
        let mut g = self.lock();
        if g.sessions
            .get(&id)
            .is_some_and(|s| s.connection == connection)
        {
            g.sessions.remove(&id);
        }
    }

    /// Drops every session of a closed connection.
    pub fn close_connection(&self, connection: u64) {
        self.lock()
            .sessions
            .retain(|_, s| s.connection != connection);
    }

    /// Number of sessions held.
    pub fn len(&self) -> usize {
        self.lock().sessions.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Applies an incremental request: `updates` are added or replace existing
    /// entries, `forgotten` are dropped. Returns the session's partitions.
    pub fn update(
        &self,
        connection: u64,
        id: i32,
        epoch: i32,
        updates: Vec<SessionPartition>,
        forgotten: &[(Uuid, String, i32)],
    ) -> Result<Vec<SessionPartition>, SessionError> {
        let mut g = self.lock();
        g.clock += 1;
        let clock = g.clock;
        let s = g
            .sessions
            .get_mut(&id)
            .filter(|s| s.connection == connection)
            .ok_or(SessionError::NotFound)?;
        if s.next_epoch != epoch {
            return Err(SessionError::InvalidEpoch);
        }
        s.next_epoch = s.next_epoch.wrapping_add(1).max(1);
        s.last_used = clock;
        if !forgotten.is_empty() {
            let by_id: HashSet<(Uuid, i32)> =
                forgotten.iter().map(|(tid, _, p)| (*tid, *p)).collect();
            let by_name: HashSet<(&str, i32)> = forgotten
                .iter()
                .map(|(_, name, p)| (name.as_str(), *p))
                .collect();
            s.partitions.retain(|k, p| {
                !by_id.contains(k) && !by_name.contains(&(p.topic.as_str(), p.partition))
            });
        }
        for u in updates {
            match s.partitions.get_mut(&key(&u)) {
                Some(existing) => {
                    existing.fetch_offset = u.fetch_offset;
                    existing.max_bytes = u.max_bytes;
                }
                None => {
                    s.partitions.insert(key(&u), u);
                }
            }
        }
        Ok(s.partitions.values().cloned().collect())
    }

    /// Records what the last response told the client.
    pub fn remember(&self, id: i32, sent: &[(Uuid, i32, i64, i64)]) {
        let mut g = self.lock();
        if let Some(s) = g.sessions.get_mut(&id) {
            for (tid, part, hw, ls) in sent {
                if let Some(p) = s.partitions.get_mut(&(*tid, *part)) {
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

    const C: u64 = 7;

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
        let id = s.create(C, vec![part(0, 0), part(1, 0)]).expect("session");
        let now = s.update(C, id, 1, vec![part(1, 5)], &[]).expect("epoch 1");
        assert_eq!(now.len(), 2);
        assert_eq!(now[1].fetch_offset, 5);
        let now = s
            .update(C, id, 2, vec![], &[(Uuid::nil(), "t".into(), 0)])
            .expect("epoch 2");
        assert_eq!(now, vec![part(1, 5)]);
    }

    #[test]
    fn wrong_epoch_or_unknown_session_is_refused() {
        let s = FetchSessions::new(10);
        let id = s.create(C, vec![part(0, 0)]).expect("session");
        assert_eq!(
            s.update(C, id, 5, vec![], &[]),
            Err(SessionError::InvalidEpoch)
        );
        assert_eq!(
            s.update(C, id.wrapping_add(1), 1, vec![], &[]),
            Err(SessionError::NotFound)
        );
        s.close(C, id);
        assert_eq!(s.update(C, id, 1, vec![], &[]), Err(SessionError::NotFound));
    }

    #[test]
    fn epoch_zero_starts_a_session_whatever_the_id() {
        assert_eq!(SessionMode::of(0, 0), SessionMode::New);
        assert_eq!(SessionMode::of(1234, 0), SessionMode::New);
        assert_eq!(SessionMode::of(1234, -1), SessionMode::Sessionless);
        assert_eq!(
            SessionMode::of(1234, 3),
            SessionMode::Incremental { id: 1234, epoch: 3 }
        );
    }

    #[test]
    fn full_cache_evicts_the_least_recently_used_session() {
        let s = FetchSessions::new(2);
        let a = s.create(C, vec![]).expect("a");
        let b = s.create(C, vec![]).expect("b");
        s.update(C, a, 1, vec![], &[]).expect("touch a");
        let _c = s.create(C, vec![]).expect("c");
        assert!(s.update(C, a, 2, vec![], &[]).is_ok());
        assert_eq!(s.update(C, b, 1, vec![], &[]), Err(SessionError::NotFound));
    }

    #[test]
    fn another_connection_can_neither_use_nor_close_a_session() {
        let s = FetchSessions::new(10);
        let id = s.create(C, vec![part(0, 0)]).expect("session");
        assert_eq!(
            s.update(C + 1, id, 1, vec![], &[]),
            Err(SessionError::NotFound)
        );
        s.close(C + 1, id);
        assert!(s.update(C, id, 1, vec![], &[]).is_ok(), "still there");
    }

    #[test]
    fn a_closed_connection_takes_its_sessions_with_it() {
        let s = FetchSessions::new(10);
        s.create(C, vec![part(0, 0)]).expect("mine");
        let other = s.create(C + 1, vec![part(0, 0)]).expect("other");
        s.close_connection(C);
        assert_eq!(s.len(), 1);
        assert!(s.update(C + 1, other, 1, vec![], &[]).is_ok());
    }

    #[test]
    fn session_ids_are_not_sequential() {
        let s = FetchSessions::new(100);
        let ids: Vec<i32> = (0..50).map(|_| s.create(C, vec![]).expect("id")).collect();
        let sequential = ids.windows(2).filter(|w| w[1] == w[0] + 1).count();
        assert!(sequential < 5, "ids look sequential: {ids:?}");
        assert!(ids.iter().all(|id| *id > 0));
    }
}
