//! The queue between a producer's handles and its background task, and the
//! rule for when a send wakes that task.
//!
//! Waking the task is the expensive part of a send: a hand-off between
//! threads, often a context switch. Most sends need not wake it, because
//! their record would only wait in its batch anyway. A send wakes the task
//! only when:
//! - it is the first record queued since the task last looked, and the
//!   task is not already due to look within `linger` (the earliest this
//!   record's batch could be due);
//! - the task is overdue: it meant to look by now (its timer can fire up to
//!   a millisecond late, and a batch it would send is due);
//! - the records queued since the task last looked reach `wake_bytes` (a
//!   full batch's worth, which should go out now);
//! - it is not a record (a flush, a new producer id): those always wake it.
//!
//! A task that is awake for any reason takes everything queued before it
//! waits again, and [`Inbox::wait`] refuses to let it wait while anything
//! is queued, so no record is left behind. Records taken late keep their
//! place in time: [`Inbox::take`] says when the first of them was queued,
//! and their linger counts from then.

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use tokio::sync::Notify;

/// Why a command was not queued: the background task is gone.
#[derive(Debug)]
pub(crate) struct Gone;

/// What the task is doing, as the senders see it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Task {
    /// Running, or woken: it looks at the queue before it waits again.
    Busy,
    /// Waiting, until this instant at the latest (forever with `None`).
    Waiting(Option<Instant>),
}

struct State<C> {
    queued: Vec<C>,
    /// Bytes of the records queued.
    bytes: usize,
    /// When the first command now queued was queued.
    since: Option<Instant>,
    task: Task,
    /// Every sender is gone: the task ends once it has taken the rest.
    closed: bool,
    /// The task took its last command and will take no more.
    gone: bool,
}

/// The queue, shared by the senders and the task.
pub(crate) struct Inbox<C> {
    state: Mutex<State<C>>,
    wake: Notify,
    linger: Duration,
    wake_bytes: usize,
}

impl<C> Inbox<C> {
    pub(crate) fn new(linger: Duration, wake_bytes: usize) -> Arc<Inbox<C>> {
        Arc::new(Inbox {
            state: Mutex::new(State {
                queued: Vec::new(),
                bytes: 0,
                since: None,
                task: Task::Busy,
                closed: false,
                gone: false,
            }),
            wake: Notify::new(),
            linger,
            wake_bytes: wake_bytes.max(1),
        })
    }

    fn lock(&self) -> MutexGuard<'_, State<C>> {
        // the state stays consistent whatever panicked while holding it
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Queues a record's command of `bytes`, waking the task only when it
    /// needs to know now (see the module docs).
    pub(crate) fn send_record(&self, command: C, bytes: usize) -> Result<(), Gone> {
        self.push(command, Some(bytes))
    }

    /// Queues a command that is not a record, waking the task.
    pub(crate) fn send_now(&self, command: C) -> Result<(), Gone> {
        self.push(command, None)
    }

    fn push(&self, command: C, bytes: Option<usize>) -> Result<(), Gone> {
        let mut s = self.lock();
        if s.gone {
            return Err(Gone);
        }
        let first = s.queued.is_empty();
        if first {
            s.since = Some(Instant::now());
        }
        s.queued.push(command);
        s.bytes = s.bytes.saturating_add(bytes.unwrap_or(0));
        let wake = match (s.task, bytes) {
            (Task::Busy, _) => false,
            (Task::Waiting(_), None) => true,
            (Task::Waiting(_), Some(_)) if s.bytes >= self.wake_bytes => true,
            (Task::Waiting(None), Some(_)) => true,
            (Task::Waiting(Some(until)), Some(_)) => {
                let now = match s.since {
                    Some(since) if first => since,
                    _ => Instant::now(),
                };
                // overdue (a timer fires up to a millisecond late), or
                // not looking before this record's linger ends
                until <= now || (first && until > now + self.linger)
            }
        };
        if wake {
            s.task = Task::Busy;
        }
        drop(s);
        if wake {
            self.wake.notify_one();
        }
        Ok(())
    }

    /// Every sender is gone: wakes the task to take what is left and end.
    pub(crate) fn close(&self) {
        self.lock().closed = true;
        self.wake.notify_one();
    }

    /// Moves every queued command into `into` (which should be empty; its
    /// buffer is kept for the next call) and marks the task busy. Answers
    /// when the first of them was queued, and whether the senders are all
    /// gone (nothing more will come).
    pub(crate) fn take(&self, into: &mut Vec<C>) -> (Option<Instant>, bool) {
        let mut s = self.lock();
        std::mem::swap(&mut s.queued, into);
        s.bytes = 0;
        s.task = Task::Busy;
        (s.since.take(), s.closed)
    }

    /// The task is about to wait until `until` (or until woken): refused,
    /// with `false`, while commands are queued (take them first).
    pub(crate) fn wait(&self, until: Option<Instant>) -> bool {
        let mut s = self.lock();
        if !s.queued.is_empty() || s.closed {
            return false;
        }
        s.task = Task::Waiting(until);
        true
    }

    /// Resolves when a sender wakes the task.
    pub(crate) async fn woken(&self) {
        self.wake.notified().await;
    }

    /// The task ends: later sends fail, and commands still queued are
    /// dropped (their answers with them).
    pub(crate) fn end(&self) {
        let left = {
            let mut s = self.lock();
            s.gone = true;
            std::mem::take(&mut s.queued)
        };
        drop(left);
    }
}

#[cfg(test)]
#[path = "inbox_tests.rs"]
mod tests;
