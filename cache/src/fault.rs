//! [`FaultInjectingStore`]: wraps any [`ObjectStore`] and makes it fail on command.
//!
//! Callers of the object store (the uploader, the cold reader) must survive a
//! store that returns 500/503, hangs past their deadline, or is unreachable for
//! a minute. Tests drive those situations through a [`FaultController`]
//! shared with the store: rules are added and cleared at runtime, while the
//! code under test keeps running.
//!
//! The wrapper sits above the HTTP client, so an injected error is what a
//! caller sees once the client's own retries are exhausted. Every call is
//! also counted per [`Op`] and logged (bounded), which makes the wrapper a
//! counting store too: tests assert "exactly one GET" with it.
//!
//! ```
//! # use std::sync::Arc;
//! # use cache::fault::{Fault, FaultInjectingStore, FaultRule, Op};
//! # use object_store::memory::InMemory;
//! let store = FaultInjectingStore::new(Arc::new(InMemory::new()));
//! let faults = store.controller();
//! faults.inject(FaultRule::new(Fault::Status(503)).on(&[Op::Put]).times(2));
//! // ... the next two PUTs fail with 503, later ones reach the inner store.
//! ```

use std::collections::VecDeque;
use std::fmt;
use std::ops::Range;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
use futures::stream::{self, BoxStream, StreamExt};
use object_store::path::Path;
use object_store::{
    CopyOptions, GetOptions, GetResult, ListResult, MultipartUpload, ObjectMeta, ObjectStore,
    PutMultipartOptions, PutOptions, PutPayload, PutResult, RenameOptions, UploadPart,
};
use parking_lot::Mutex;
use tokio::sync::watch;
use tokio::time::Instant;

/// The kinds of object-store calls, as faults and counters see them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Op {
    Put,
    /// Starting a multipart upload.
    CreateMultipart,
    PutPart,
    CompleteMultipart,
    AbortMultipart,
    /// A GET, ranged or whole.
    Get,
    Head,
    Delete,
    List,
    Copy,
    Rename,
}

impl Op {
    pub const ALL: [Op; 11] = [
        Op::Put,
        Op::CreateMultipart,
        Op::PutPart,
        Op::CompleteMultipart,
        Op::AbortMultipart,
        Op::Get,
        Op::Head,
        Op::Delete,
        Op::List,
        Op::Copy,
        Op::Rename,
    ];
    /// Calls that change the bucket.
    pub const WRITES: [Op; 8] = [
        Op::Put,
        Op::CreateMultipart,
        Op::PutPart,
        Op::CompleteMultipart,
        Op::AbortMultipart,
        Op::Delete,
        Op::Copy,
        Op::Rename,
    ];
    /// Calls that only read.
    pub const READS: [Op; 3] = [Op::Get, Op::Head, Op::List];

    fn index(self) -> usize {
        self as usize
    }

    /// A comma-separated list of operation names (`put`, `multipart`, `part`,
    /// `complete`, `get`, `head`, `delete`, `list`, `copy`), or `reads` or
    /// `writes`; every operation when absent.
    pub fn parse_list(list: Option<&str>) -> Result<Vec<Op>, String> {
        match list {
            None => Ok(Op::ALL.to_vec()),
            Some("writes") => Ok(Op::WRITES.to_vec()),
            Some("reads") => Ok(Op::READS.to_vec()),
            Some(list) => list
                .split(',')
                .map(|name| match name {
                    "put" => Ok(Op::Put),
                    "multipart" => Ok(Op::CreateMultipart),
                    "part" => Ok(Op::PutPart),
                    "complete" => Ok(Op::CompleteMultipart),
                    "get" => Ok(Op::Get),
                    "head" => Ok(Op::Head),
                    "delete" => Ok(Op::Delete),
                    "list" => Ok(Op::List),
                    "copy" => Ok(Op::Copy),
                    other => Err(format!("unknown operation {other:?}")),
                })
                .collect(),
        }
    }
}

/// What an injected failure looks like to the caller.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// The server answered with this HTTP status (500, 503, ...).
    Status(u16),
    /// The request took `after` and then failed as timed out.
    Timeout { after: Duration },
    /// The request waits until [`FaultController::clear`] or
    /// [`FaultController::release_hung`] is called, then proceeds normally.
    /// Models a hung connection: the caller's own deadline must fire.
    Hang,
    /// The connection is refused at once.
    Unreachable,
}

/// A fault and the calls it applies to.
#[derive(Debug, Clone)]
pub struct FaultRule {
    fault: Fault,
    ops: Vec<Op>,
    path_contains: Option<String>,
    remaining: Option<u64>,
}

impl FaultRule {
    /// A rule hitting every operation, every time, until cleared.
    pub fn new(fault: Fault) -> Self {
        FaultRule {
            fault,
            ops: Op::ALL.to_vec(),
            path_contains: None,
            remaining: None,
        }
    }

    /// Only these operations.
    pub fn on(mut self, ops: &[Op]) -> Self {
        self.ops = ops.to_vec();
        self
    }

    /// Only keys containing this text.
    pub fn on_paths_containing(mut self, text: impl Into<String>) -> Self {
        self.path_contains = Some(text.into());
        self
    }

    /// Only the next `n` matching calls; then the rule retires itself.
    pub fn times(mut self, n: u64) -> Self {
        self.remaining = Some(n);
        self
    }

    fn matches(&self, op: Op, path: &Path) -> bool {
        self.remaining != Some(0)
            && self.ops.contains(&op)
            && self
                .path_contains
                .as_deref()
                .is_none_or(|text| path.as_ref().contains(text))
    }
}

/// One call seen by the store.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Call {
    pub op: Op,
    pub path: Path,
    /// Byte range asked for by a ranged GET.
    pub range: Option<Range<u64>>,
    /// Whether a fault was injected instead of (or before) the real call.
    pub faulted: bool,
}

const HISTORY_LIMIT: usize = 100_000;

#[derive(Debug)]
struct State {
    rules: Vec<FaultRule>,
    unreachable_until: Option<Instant>,
    latency: Duration,
    counts: [u64; Op::ALL.len()],
    injected: u64,
    hanging: u64,
    history: VecDeque<Call>,
}

/// Runtime control of a [`FaultInjectingStore`]; cheap to clone.
#[derive(Debug, Clone)]
pub struct FaultController {
    state: Arc<Mutex<State>>,
    /// Bumped to release every call hanging on a [`Fault::Hang`].
    releases: Arc<watch::Sender<u64>>,
}

impl Default for FaultController {
    fn default() -> Self {
        FaultController {
            state: Arc::new(Mutex::new(State {
                rules: Vec::new(),
                unreachable_until: None,
                latency: Duration::ZERO,
                counts: [0; Op::ALL.len()],
                injected: 0,
                hanging: 0,
                history: VecDeque::new(),
            })),
            releases: Arc::new(watch::Sender::new(0)),
        }
    }
}

impl FaultController {
    /// Adds a rule; earlier rules take precedence over later ones.
    pub fn inject(&self, rule: FaultRule) {
        self.state.lock().rules.push(rule);
    }

    /// Every call fails as unreachable until `window` has passed (tokio time,
    /// so a test with paused time can jump over it).
    pub fn unreachable_for(&self, window: Duration) {
        self.state.lock().unreachable_until = Some(Instant::now() + window);
    }

    /// Adds this delay before every call.
    pub fn set_latency(&self, latency: Duration) {
        self.state.lock().latency = latency;
    }

    /// Removes every rule, the unreachable window and the latency; hanging
    /// calls proceed. Counters are kept.
    pub fn clear(&self) {
        let mut state = self.state.lock();
        state.rules.clear();
        state.unreachable_until = None;
        state.latency = Duration::ZERO;
        drop(state);
        self.release_hung();
    }

    /// How many calls of `op` the store has seen (faulted ones included).
    pub fn calls(&self, op: Op) -> u64 {
        self.state.lock().counts[op.index()]
    }

    /// How many calls were failed or delayed by an injected fault.
    pub fn injected(&self) -> u64 {
        self.state.lock().injected
    }

    /// How many calls are hanging right now on a [`Fault::Hang`] rule.
    pub fn hanging(&self) -> u64 {
        self.state.lock().hanging
    }

    /// The calls seen so far, oldest first (the last 100 000).
    pub fn history(&self) -> Vec<Call> {
        self.state.lock().history.iter().cloned().collect()
    }

    /// Resets counters and history (rules stay).
    pub fn reset_counts(&self) {
        let mut state = self.state.lock();
        state.counts = [0; Op::ALL.len()];
        state.injected = 0;
        state.history.clear();
    }

    /// Lets every call hanging right now proceed (rules stay; later calls may hang again).
    pub fn release_hung(&self) {
        self.releases.send_modify(|g| *g += 1);
    }

    /// Applies a fault described as a URL query, as the broker's test-only
    /// admin endpoint receives it: one of `clear`, `unreachable=MS`,
    /// `status=CODE[&ops=put,get,...][&times=N]`, `hang[&ops=...]`,
    /// `latency=MS`. `ops` also takes `reads` and `writes`. Returns a status
    /// line, or what is wrong with the query.
    pub fn apply_query(&self, query: &str) -> Result<String, String> {
        let params: Vec<(&str, &str)> = query
            .split('&')
            .filter(|p| !p.is_empty())
            .map(|p| p.split_once('=').unwrap_or((p, "")))
            .collect();
        let get = |k: &str| params.iter().find(|(n, _)| *n == k).map(|(_, v)| *v);
        let number = |k: &str| get(k).and_then(|v| v.parse::<u64>().ok());
        let ops = Op::parse_list(get("ops"))?;
        let with_times = |rule: FaultRule| match number("times") {
            Some(n) => rule.times(n),
            None => rule,
        };
        if get("clear").is_some() {
            self.clear();
        } else if let Some(ms) = number("unreachable") {
            self.unreachable_for(Duration::from_millis(ms));
        } else if let Some(code) = number("status").and_then(|c| u16::try_from(c).ok()) {
            self.inject(with_times(FaultRule::new(Fault::Status(code)).on(&ops)));
        } else if get("hang").is_some() {
            self.inject(with_times(FaultRule::new(Fault::Hang).on(&ops)));
        } else if let Some(ms) = number("latency") {
            self.set_latency(Duration::from_millis(ms));
        } else {
            return Err("use one of: clear, unreachable=MS, status=CODE, hang, latency=MS".into());
        }
        Ok(format!(
            "ok: {} calls failed or delayed so far, {} hanging",
            self.injected(),
            self.hanging()
        ))
    }

    /// Records the call and decides its fate.
    fn admit(&self, op: Op, path: &Path, range: Option<Range<u64>>) -> (Option<Fault>, Duration) {
        let mut state = self.state.lock();
        state.counts[op.index()] += 1;
        let now = Instant::now();
        let mut fault = match state.unreachable_until {
            Some(until) if now < until => Some(Fault::Unreachable),
            Some(_) => {
                state.unreachable_until = None;
                None
            }
            None => None,
        };
        if fault.is_none() {
            if let Some(rule) = state.rules.iter_mut().find(|r| r.matches(op, path)) {
                if let Some(n) = rule.remaining.as_mut() {
                    *n -= 1;
                }
                fault = Some(rule.fault);
            }
            state.rules.retain(|r| r.remaining != Some(0));
        }
        if fault.is_some() {
            state.injected += 1;
        }
        if state.history.len() == HISTORY_LIMIT {
            state.history.pop_front();
        }
        state.history.push_back(Call {
            op,
            path: path.clone(),
            range,
            faulted: fault.is_some(),
        });
        (fault, state.latency)
    }

    /// Runs the admission for one call: delays, hangs or fails it.
    async fn gate(
        &self,
        op: Op,
        path: &Path,
        range: Option<Range<u64>>,
    ) -> object_store::Result<()> {
        // Subscribed before admission, so a release racing with this call is not missed.
        let releases = self.releases.subscribe();
        let (fault, latency) = self.admit(op, path, range);
        if !latency.is_zero() {
            tokio::time::sleep(latency).await;
        }
        match fault {
            None => Ok(()),
            Some(Fault::Status(status)) => Err(injected(op, path, InjectedFault::Status(status))),
            Some(Fault::Unreachable) => Err(injected(op, path, InjectedFault::Unreachable)),
            Some(Fault::Timeout { after }) => {
                tokio::time::sleep(after).await;
                Err(injected(op, path, InjectedFault::TimedOut(after)))
            }
            Some(Fault::Hang) => {
                self.hang_until_released(releases).await;
                Ok(())
            }
        }
    }

    /// Waits until the hung calls are released (by `clear` or `release_hung`).
    async fn hang_until_released(&self, mut releases: watch::Receiver<u64>) {
        self.state.lock().hanging += 1;
        // An error means the controller is gone: nobody can release us, so stop hanging.
        let _ = releases.changed().await;
        self.state.lock().hanging -= 1;
    }
}

/// The error carried inside `object_store::Error::Generic` for an injected fault.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum InjectedFault {
    Status(u16),
    TimedOut(Duration),
    Unreachable,
}

impl fmt::Display for InjectedFault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            InjectedFault::Status(code) => write!(f, "injected fault: server answered HTTP {code}"),
            InjectedFault::TimedOut(after) => {
                write!(f, "injected fault: request timed out after {after:?}")
            }
            InjectedFault::Unreachable => {
                write!(f, "injected fault: connection refused (store unreachable)")
            }
        }
    }
}

impl std::error::Error for InjectedFault {}

fn injected(op: Op, path: &Path, fault: InjectedFault) -> object_store::Error {
    tracing::debug!(?op, %path, %fault, "object store fault injected");
    object_store::Error::Generic {
        store: "FaultInjectingStore",
        source: Box::new(fault),
    }
}

/// Whether `err` came from an injected fault (as opposed to the inner store).
pub fn is_injected(err: &object_store::Error) -> bool {
    matches!(err, object_store::Error::Generic { source, .. } if source.downcast_ref::<InjectedFault>().is_some())
}

/// An [`ObjectStore`] that forwards to `inner` unless a [`FaultController`] rule says otherwise.
#[derive(Debug, Clone)]
pub struct FaultInjectingStore {
    inner: Arc<dyn ObjectStore>,
    controller: FaultController,
}

impl FaultInjectingStore {
    pub fn new(inner: Arc<dyn ObjectStore>) -> Self {
        FaultInjectingStore {
            inner,
            controller: FaultController::default(),
        }
    }

    /// The handle tests use to inject faults and read counters.
    pub fn controller(&self) -> FaultController {
        self.controller.clone()
    }
}

impl fmt::Display for FaultInjectingStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "FaultInjectingStore({})", self.inner)
    }
}

fn range_of(options: &GetOptions) -> Option<Range<u64>> {
    match options.range.as_ref()? {
        object_store::GetRange::Bounded(r) => Some(r.clone()),
        object_store::GetRange::Offset(o) => Some(*o..u64::MAX),
        object_store::GetRange::Suffix(n) => Some(u64::MAX - n..u64::MAX),
    }
}

#[async_trait]
impl ObjectStore for FaultInjectingStore {
    async fn put_opts(
        &self,
        location: &Path,
        payload: PutPayload,
        opts: PutOptions,
    ) -> object_store::Result<PutResult> {
        self.controller.gate(Op::Put, location, None).await?;
        self.inner.put_opts(location, payload, opts).await
    }

    async fn put_multipart_opts(
        &self,
        location: &Path,
        opts: PutMultipartOptions,
    ) -> object_store::Result<Box<dyn MultipartUpload>> {
        self.controller
            .gate(Op::CreateMultipart, location, None)
            .await?;
        let inner = self.inner.put_multipart_opts(location, opts).await?;
        Ok(Box::new(FaultInjectingUpload {
            inner,
            path: location.clone(),
            controller: self.controller.clone(),
        }))
    }

    async fn get_opts(
        &self,
        location: &Path,
        options: GetOptions,
    ) -> object_store::Result<GetResult> {
        let op = if options.head { Op::Head } else { Op::Get };
        self.controller
            .gate(op, location, range_of(&options))
            .await?;
        self.inner.get_opts(location, options).await
    }

    async fn get_ranges(
        &self,
        location: &Path,
        ranges: &[Range<u64>],
    ) -> object_store::Result<Vec<Bytes>> {
        for range in ranges {
            self.controller
                .gate(Op::Get, location, Some(range.clone()))
                .await?;
        }
        self.inner.get_ranges(location, ranges).await
    }

    fn delete_stream(
        &self,
        locations: BoxStream<'static, object_store::Result<Path>>,
    ) -> BoxStream<'static, object_store::Result<Path>> {
        // Each location passes the gate on its own, so a rule can fail some
        // deletions of a batch and not others.
        let controller = self.controller.clone();
        let inner = Arc::clone(&self.inner);
        locations
            .then(move |location| {
                let controller = controller.clone();
                let inner = Arc::clone(&inner);
                async move {
                    let location = location?;
                    controller.gate(Op::Delete, &location, None).await?;
                    let mut out =
                        inner.delete_stream(stream::once(async move { Ok(location) }).boxed());
                    match out.next().await {
                        Some(result) => result,
                        None => Err(object_store::Error::Generic {
                            store: "FaultInjectingStore",
                            source: "inner store yielded no result for a deletion".into(),
                        }),
                    }
                }
            })
            .boxed()
    }

    fn list(&self, prefix: Option<&Path>) -> BoxStream<'static, object_store::Result<ObjectMeta>> {
        let controller = self.controller.clone();
        let inner = Arc::clone(&self.inner);
        let prefix = prefix.cloned();
        stream::once(async move {
            let path = prefix.clone().unwrap_or_default();
            match controller.gate(Op::List, &path, None).await {
                Ok(()) => inner.list(prefix.as_ref()),
                Err(e) => stream::once(async move { Err(e) }).boxed(),
            }
        })
        .flatten()
        .boxed()
    }

    async fn list_with_delimiter(&self, prefix: Option<&Path>) -> object_store::Result<ListResult> {
        self.controller
            .gate(Op::List, &prefix.cloned().unwrap_or_default(), None)
            .await?;
        self.inner.list_with_delimiter(prefix).await
    }

    async fn copy_opts(
        &self,
        from: &Path,
        to: &Path,
        options: CopyOptions,
    ) -> object_store::Result<()> {
        self.controller.gate(Op::Copy, to, None).await?;
        self.inner.copy_opts(from, to, options).await
    }

    async fn rename_opts(
        &self,
        from: &Path,
        to: &Path,
        options: RenameOptions,
    ) -> object_store::Result<()> {
        self.controller.gate(Op::Rename, to, None).await?;
        self.inner.rename_opts(from, to, options).await
    }
}

/// A multipart upload whose parts and completion pass the same gate.
#[derive(Debug)]
struct FaultInjectingUpload {
    inner: Box<dyn MultipartUpload>,
    path: Path,
    controller: FaultController,
}

#[async_trait]
impl MultipartUpload for FaultInjectingUpload {
    fn put_part(&mut self, data: PutPayload) -> UploadPart {
        // The inner part future is created now (parts keep their order) but
        // only awaited once the gate lets the call through.
        let part = self.inner.put_part(data);
        let controller = self.controller.clone();
        let path = self.path.clone();
        Box::pin(async move {
            controller.gate(Op::PutPart, &path, None).await?;
            part.await
        })
    }

    async fn complete(&mut self) -> object_store::Result<PutResult> {
        self.controller
            .gate(Op::CompleteMultipart, &self.path, None)
            .await?;
        self.inner.complete().await
    }

    async fn abort(&mut self) -> object_store::Result<()> {
        self.controller
            .gate(Op::AbortMultipart, &self.path, None)
            .await?;
        self.inner.abort().await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use object_store::memory::InMemory;
    use object_store::ObjectStoreExt;

    fn store() -> (FaultInjectingStore, FaultController) {
        let s = FaultInjectingStore::new(Arc::new(InMemory::new()));
        let c = s.controller();
        (s, c)
    }

    #[tokio::test]
    async fn counted_faults_fail_exactly_that_many_calls() {
        let (s, c) = store();
        let p = Path::from("a");
        c.inject(FaultRule::new(Fault::Status(503)).on(&[Op::Put]).times(2));
        for _ in 0..2 {
            let err = s
                .put(&p, Bytes::from_static(b"x").into())
                .await
                .unwrap_err();
            assert!(is_injected(&err), "{err}");
            assert!(err.to_string().contains("503"), "{err}");
        }
        s.put(&p, Bytes::from_static(b"x").into()).await.unwrap();
        assert_eq!(c.calls(Op::Put), 3);
        assert_eq!(c.injected(), 2);
        // GETs were never affected.
        assert_eq!(
            s.get(&p).await.unwrap().bytes().await.unwrap(),
            Bytes::from_static(b"x")
        );
    }

    #[tokio::test]
    async fn rules_can_target_reads_writes_and_paths() {
        let (s, c) = store();
        s.put(&Path::from("keep/a"), Bytes::from_static(b"1").into())
            .await
            .unwrap();
        s.put(&Path::from("drop/b"), Bytes::from_static(b"2").into())
            .await
            .unwrap();
        c.inject(
            FaultRule::new(Fault::Status(500))
                .on(&Op::READS)
                .on_paths_containing("drop"),
        );
        assert!(s.get(&Path::from("keep/a")).await.is_ok());
        assert!(s.get(&Path::from("drop/b")).await.is_err());
        assert!(s.head(&Path::from("drop/b")).await.is_err());
        s.put(&Path::from("drop/c"), Bytes::from_static(b"3").into())
            .await
            .unwrap();
        c.clear();
        assert!(s.get(&Path::from("drop/b")).await.is_ok());
    }

    #[tokio::test(start_paused = true)]
    async fn unreachable_window_ends_by_itself() {
        let (s, c) = store();
        let p = Path::from("x");
        c.unreachable_for(Duration::from_secs(60));
        let err = s
            .put(&p, Bytes::from_static(b"x").into())
            .await
            .unwrap_err();
        assert!(err.to_string().contains("unreachable"), "{err}");
        let listed: Vec<_> = s.list(None).collect().await;
        assert!(listed[0].is_err());
        tokio::time::advance(Duration::from_secs(61)).await;
        s.put(&p, Bytes::from_static(b"x").into()).await.unwrap();
    }

    #[tokio::test(start_paused = true)]
    async fn timeouts_fail_after_the_delay() {
        let (s, c) = store();
        c.inject(
            FaultRule::new(Fault::Timeout {
                after: Duration::from_secs(30),
            })
            .on(&[Op::Get]),
        );
        let started = Instant::now();
        let err = s.get(&Path::from("x")).await.unwrap_err();
        assert!(err.to_string().contains("timed out"), "{err}");
        assert!(started.elapsed() >= Duration::from_secs(30));
    }

    #[tokio::test]
    async fn hung_calls_resume_when_released() {
        let (s, c) = store();
        let p = Path::from("h");
        s.put(&p, Bytes::from_static(b"v").into()).await.unwrap();
        c.inject(FaultRule::new(Fault::Hang).on(&[Op::Get]).times(1));
        let s2 = s.clone();
        let p2 = p.clone();
        let task = tokio::spawn(async move { s2.get(&p2).await.map(|_| ()) });
        while c.hanging() == 0 {
            tokio::task::yield_now().await;
        }
        // The rule hung one call only: the next GET goes straight through.
        s.get(&p).await.unwrap();
        assert!(!task.is_finished());
        c.release_hung();
        task.await.unwrap().unwrap();
        assert_eq!(c.hanging(), 0);
    }
    #[tokio::test]
    async fn multipart_parts_and_completion_pass_the_gate() {
        let (s, c) = store();
        let p = Path::from("mp");
        c.inject(
            FaultRule::new(Fault::Status(503))
                .on(&[Op::CompleteMultipart])
                .times(1),
        );
        let mut up = s.put_multipart(&p).await.unwrap();
        up.put_part(Bytes::from(vec![1u8; 10]).into())
            .await
            .unwrap();
        assert!(up.complete().await.is_err());
        up.complete().await.unwrap();
        assert_eq!(c.calls(Op::PutPart), 1);
        assert_eq!(c.calls(Op::CompleteMultipart), 2);
        assert_eq!(s.get(&p).await.unwrap().bytes().await.unwrap().len(), 10);
    }

    #[tokio::test]
    async fn history_records_ranged_gets() {
        let (s, c) = store();
        let p = Path::from("r");
        s.put(&p, Bytes::from(vec![0u8; 100]).into()).await.unwrap();
        s.get_range(&p, 10..20).await.unwrap();
        let gets: Vec<_> = c
            .history()
            .into_iter()
            .filter(|call| call.op == Op::Get)
            .collect();
        assert_eq!(gets.len(), 1);
        assert_eq!(gets[0].range, Some(10..20));
    }
}
