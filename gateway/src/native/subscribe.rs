//! Subscriptions: the server pushes a partition's batches as they are
//! committed, within the credit the client granted.
//!
//! Each subscription is a task of its connection (or QUIC stream). It
//! waits for credit, long-polls the partition through the Kafka fetch
//! handler (so leadership, follower reads, tiered reads and the high
//! watermark are exactly what a fetch sees), keeps the whole batches that
//! fit in the credit left, and queues them as a [`proto::Push`] on the
//! connection's push queue. The subscribe answer is queued on the same
//! queue before the task starts, so it always precedes the first push.
//!
//! Credit is counted in record bytes (the `records` of each push, not the
//! frame around them) and only ever spent by pushes: the client is never
//! sent more than it granted. A batch larger than the credit left waits
//! until more is granted; a client must grant at least the largest batch
//! it may meet (the topic's `max.message.bytes`).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::{BrokerId, FetchRequest, ListOffsetsRequest, TopicName};
use sdk::proto::{self, ErrorCode, Start};
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;

use super::ops::{partition_index, refine};
use super::{frame_of, Answer};
use crate::broker::Broker;
use crate::kafka::api::{bridge, s, Client};
use crate::kafka::response::ResponseFrame;

/// Subscriptions one connection (or QUIC stream) may hold open at once.
pub const MAX_SUBSCRIPTIONS: usize = 1024;

/// How long one long poll of a subscription waits for new records before
/// it polls again (a shutdown or a new batch ends it sooner).
const POLL_WAIT_MS: i32 = 5_000;

/// Push frames queued per connection before subscription tasks wait for
/// the connection to write them.
pub const PUSH_QUEUE: usize = 32;

struct Open {
    credit: Arc<watch::Sender<u64>>,
    task: JoinHandle<()>,
}

/// The open subscriptions of one connection (or QUIC stream), and the
/// queue their pushes go out through. Dropping it ends them all.
pub struct Subscriptions {
    open: Mutex<HashMap<u32, Open>>,
    pushes: mpsc::Sender<ResponseFrame>,
}

impl Drop for Subscriptions {
    fn drop(&mut self) {
        for (_, o) in self.lock().drain() {
            o.task.abort();
        }
    }
}

/// What a subscription task needs to serve.
struct Served {
    broker: Arc<Broker>,
    client: Client,
    client_id: Arc<str>,
    id: u32,
    topic: String,
    partition: u32,
    pushes: mpsc::Sender<ResponseFrame>,
}

impl Subscriptions {
    pub fn new(pushes: mpsc::Sender<ResponseFrame>) -> Subscriptions {
        Subscriptions {
            open: Mutex::new(HashMap::new()),
            pushes,
        }
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<u32, Open>> {
        // every critical section is a single insert, lookup or removal
        self.open.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Opens a subscription. Its answer goes out on the push queue (ahead
    /// of its pushes), so the request itself is answered with nothing.
    pub async fn subscribe(
        &self,
        broker: &Arc<Broker>,
        client: &Client,
        client_id: &Arc<str>,
        req: proto::Subscribe,
    ) -> Answer {
        let refuse = |error: ErrorCode, message: String| {
            Answer::Frame(frame_of(&proto::SubscribeResponse {
                correlation: req.correlation,
                error,
                subscription: req.subscription,
                offset: -1,
                high_watermark: -1,
                message,
            }))
        };
        {
            let mut open = self.lock();
            // a subscription ended by an error push frees its id
            open.retain(|_, o| !o.task.is_finished());
            if open.contains_key(&req.subscription) {
                return refuse(
                    ErrorCode::DUPLICATE_SUBSCRIPTION,
                    format!("subscription {} is already open", req.subscription),
                );
            }
            if open.len() >= MAX_SUBSCRIPTIONS {
                return refuse(
                    ErrorCode::TOO_MANY_SUBSCRIPTIONS,
                    format!("at most {MAX_SUBSCRIPTIONS} subscriptions per connection"),
                );
            }
        }
        let Some(start) = req.start() else {
            return refuse(
                ErrorCode::INVALID_REQUEST,
                format!(
                    "start kind {} with value {} is not a start (0 offset ≥ 0, 1 earliest, 2 latest, 3 timestamp ≥ 0)",
                    req.start_kind, req.start_value
                ),
            );
        };
        let served = Served {
            broker: broker.clone(),
            client: client.clone(),
            client_id: client_id.clone(),
            id: req.subscription,
            topic: req.topic,
            partition: req.partition,
            pushes: self.pushes.clone(),
        };
        let (offset, high_watermark) = match served.resolve(start).await {
            Ok(found) => found,
            Err((error, message)) => return refuse(error, message),
        };
        let answer = frame_of(&proto::SubscribeResponse {
            correlation: req.correlation,
            error: ErrorCode::NONE,
            subscription: req.subscription,
            offset,
            high_watermark,
            message: String::new(),
        });
        let (credit, _) = watch::channel(u64::from(req.credit));
        let credit = Arc::new(credit);
        let mut open = self.lock();
        // checked again: another subscribe of the same id may have raced
        // this one through the lookup above
        if open.contains_key(&req.subscription) {
            return refuse(
                ErrorCode::DUPLICATE_SUBSCRIPTION,
                format!("subscription {} is already open", req.subscription),
            );
        }
        // queued under the lock, before the task exists: the answer
        // precedes every push, and an unsubscribe cannot overtake it
        if self.pushes.try_send(answer).is_err() {
            // the queue is full or the connection is going away: say so
            // in the answer rather than wait while holding the table
            return refuse(
                ErrorCode::NOT_AVAILABLE,
                "the connection has too many pushes waiting to be written".into(),
            );
        }
        let task = tokio::spawn(served.run(offset, credit.clone()));
        open.insert(req.subscription, Open { credit, task });
        Answer::Nothing
    }

    /// Adds credit to an open subscription; unknown ids are ignored (the
    /// subscription may have just ended).
    pub fn credit(&self, c: &proto::Credit) {
        if let Some(o) = self.lock().get(&c.subscription) {
            o.credit
                .send_modify(|left| *left = left.saturating_add(u64::from(c.bytes)));
        }
    }

    /// Ends a subscription: no push of it is queued after the answer.
    pub fn unsubscribe(&self, u: &proto::Unsubscribe) -> Answer {
        let error = match self.lock().remove(&u.subscription) {
            Some(o) => {
                o.task.abort();
                ErrorCode::NONE
            }
            None => ErrorCode::UNKNOWN_SUBSCRIPTION,
        };
        // A push the task queued before it was aborted is already ahead
        // in the queue; the answer goes behind it, so "nothing after the
        // answer" holds.
        let answer = frame_of(&proto::UnsubscribeResponse {
            correlation: u.correlation,
            error,
        });
        match self.pushes.try_send(answer) {
            Ok(()) => Answer::Nothing,
            Err(mpsc::error::TrySendError::Full(f) | mpsc::error::TrySendError::Closed(f)) => {
                Answer::Frame(f)
            }
        }
    }
}

/// Whole batches at the start of `records` that fit in `room` bytes: their
/// length and the offset after the last of them.
pub(crate) fn whole_batches_within(records: &[u8], room: usize) -> (usize, Option<i64>) {
    let mut at = 0usize;
    let mut next = None;
    while let Some(head) = records.get(at..at + 27) {
        let base = i64::from_be_bytes(head[0..8].try_into().unwrap_or([0; 8]));
        let len = u32::from_be_bytes(head[8..12].try_into().unwrap_or([0; 4])) as usize;
        let delta = i32::from_be_bytes(head[23..27].try_into().unwrap_or([0; 4]));
        let end = at + 12 + len;
        if end > records.len() || end > room {
            break;
        }
        next = Some(base + i64::from(delta) + 1);
        at = end;
    }
    (at, next)
}

impl Served {
    /// The offset a start stands for, and the high watermark now.
    async fn resolve(&self, start: Start) -> Result<(i64, i64), (ErrorCode, String)> {
        let spec = match start {
            Start::Offset(_) | Start::Latest => -1,
            Start::Earliest => -2,
            Start::Timestamp(t) => t,
        };
        let mut found = self.list_offset(spec).await?;
        let latest = if spec == -1 {
            found
        } else {
            self.list_offset(-1).await?
        };
        if let Start::Offset(o) = start {
            found = o;
        } else if found < 0 {
            // a timestamp later than every record: from the high watermark
            found = latest;
        }
        Ok((found, latest))
    }

    async fn list_offset(&self, spec: i64) -> Result<i64, (ErrorCode, String)> {
        let req = ListOffsetsRequest::default()
            .with_replica_id(BrokerId(-1))
            .with_topics(vec![ListOffsetsTopic::default()
                .with_name(TopicName(s(self.topic.clone())))
                .with_partitions(vec![ListOffsetsPartition::default()
                    .with_partition_index(partition_index(self.partition))
                    .with_current_leader_epoch(-1)
                    .with_timestamp(spec)])]);
        let resp = bridge::list_offsets(&self.broker, &self.client, &self.client_id, req).await;
        let Some(p) = resp.topics.first().and_then(|t| t.partitions.first()) else {
            return Err((
                ErrorCode::UNKNOWN_SERVER_ERROR,
                "the offset lookup gave no answer".into(),
            ));
        };
        let error = refine(&self.broker, &self.topic, p.error_code);
        if error != ErrorCode::NONE {
            return Err((error, String::new()));
        }
        Ok(p.offset)
    }

    fn fetch_request(&self, offset: i64, room: u64) -> FetchRequest {
        let room = i32::try_from(room).unwrap_or(i32::MAX);
        FetchRequest::default()
            .with_replica_id(BrokerId(-1))
            .with_max_wait_ms(POLL_WAIT_MS)
            .with_min_bytes(1)
            .with_max_bytes(room)
            .with_session_id(0)
            .with_session_epoch(-1)
            .with_topics(vec![FetchTopic::default()
                .with_topic(TopicName(s(self.topic.clone())))
                .with_partitions(vec![FetchPartition::default()
                    .with_partition(partition_index(self.partition))
                    .with_fetch_offset(offset)
                    .with_current_leader_epoch(-1)
                    .with_log_start_offset(-1)
                    .with_partition_max_bytes(room)])])
    }

    fn push(&self, p: &proto::Push, records: Bytes) -> ResponseFrame {
        let mut f = ResponseFrame::native(proto::op::PUSH | proto::RESPONSE);
        let mut head = BytesMut::with_capacity(proto::Push::HEAD_LEN);
        p.put_head(&mut head, records.len());
        f.push_bytes(head.freeze());
        if !records.is_empty() {
            f.push_bytes(records);
        }
        f
    }

    /// Pushes until the subscription fails, is ended, or the connection
    /// goes away.
    async fn run(self, mut offset: i64, credit: Arc<watch::Sender<u64>>) {
        let mut left = credit.subscribe();
        let mut ending = proto::Push {
            subscription: self.id,
            error: ErrorCode::NONE,
            high_watermark: -1,
            log_start_offset: -1,
            next_offset: offset,
            records: Bytes::new(),
        };
        loop {
            // at least one byte of credit before reading anything
            let Ok(room) = left.wait_for(|l| *l > 0).await.map(|r| *r) else {
                return;
            };
            let req = self.fetch_request(offset, room);
            let (resp, records, wait) =
                bridge::fetch(&self.broker, &self.client, &self.client_id, req).await;
            if wait > 0 {
                // over a consumer quota: the next read waits
                tokio::time::sleep(std::time::Duration::from_millis(wait)).await;
            }
            let Some(p) = resp.responses.first().and_then(|t| t.partitions.first()) else {
                ending.error = ErrorCode::UNKNOWN_SERVER_ERROR;
                break;
            };
            let error = refine(&self.broker, &self.topic, p.error_code);
            if error != ErrorCode::NONE {
                ending.error = error;
                ending.high_watermark = p.high_watermark;
                ending.log_start_offset = p.log_start_offset;
                break;
            }
            let r = records
                .into_iter()
                .next()
                .unwrap_or_else(dataplane::backend::Records::empty);
            if r.is_empty() {
                if self.broker.is_shutting_down() {
                    ending.error = ErrorCode::NOT_AVAILABLE;
                    break;
                }
                continue;
            }
            let bytes = match r.to_bytes() {
                Ok(b) => b,
                Err(e) => {
                    tracing::warn!(topic = %self.topic, partition = self.partition, error = %e, "reading records for a subscription failed");
                    ending.error = ErrorCode::STORAGE_ERROR;
                    break;
                }
            };
            let room_now = usize::try_from(room).unwrap_or(usize::MAX);
            let (len, next) = whole_batches_within(&bytes, room_now);
            let Some(next) = next else {
                // the next batch is larger than the credit left: wait for
                // the client to grant more
                if left.wait_for(|l| *l > room).await.is_err() {
                    return;
                }
                continue;
            };
            // spent before the push is queued; a grant arriving meanwhile
            // adds to what is left
            credit.send_modify(|l| *l = l.saturating_sub(len as u64));
            let push = proto::Push {
                subscription: self.id,
                error: ErrorCode::NONE,
                high_watermark: p.high_watermark,
                log_start_offset: p.log_start_offset,
                next_offset: next,
                records: Bytes::new(),
            };
            if self
                .pushes
                .send(self.push(&push, bytes.slice(..len)))
                .await
                .is_err()
            {
                return;
            }
            offset = next;
            ending.next_offset = offset;
        }
        let frame = self.push(&ending, Bytes::new());
        let _ = self.pushes.send(frame).await;
    }
}

#[cfg(test)]
mod tests {
    use super::whole_batches_within;

    fn batch(base: i64, delta: i32, len: usize) -> Vec<u8> {
        let mut b = vec![0u8; len];
        b[0..8].copy_from_slice(&base.to_be_bytes());
        b[8..12].copy_from_slice(&((len - 12) as u32).to_be_bytes());
        b[23..27].copy_from_slice(&delta.to_be_bytes());
        b
    }

    #[test]
    fn only_whole_batches_within_the_room_are_kept() {
        let mut r = batch(10, 4, 100);
        r.extend(batch(15, 0, 80));
        assert_eq!(whole_batches_within(&r, 1000), (180, Some(16)));
        assert_eq!(whole_batches_within(&r, 179), (100, Some(15)));
        assert_eq!(whole_batches_within(&r, 99), (0, None));
        // a batch cut short is never counted
        assert_eq!(whole_batches_within(&r[..150], 1000), (100, Some(15)));
        assert_eq!(whole_batches_within(&[], 1000), (0, None));
    }
}
