//! Subscriptions: the server pushes one partition's records as they are
//! committed, never more bytes than the subscriber granted.
//!
//! A [`Subscription`] is a [`Stream`] of the partition's records from its
//! start on. Credit is counted in record bytes. With
//! [`SubscriptionConfig::window`] and automatic credit (the default) the
//! subscription grants its whole window at the start, then grants back
//! what the application has taken from the stream each time that reaches
//! half the window: at most one window of records is ever in flight or
//! buffered. With automatic credit off, only [`Subscription::grant`]
//! grants, and the server stops pushing when the credit is spent.
//!
//! A subscription ends with an error item when the server ends it (the
//! partition moved to another leader, the offset fell out of range, the
//! topic was deleted) or the connection is lost; open a new one from
//! [`Subscription::position`] to go on.

use std::collections::VecDeque;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use futures::Stream;

use crate::client::Client;
use crate::conn::{Conn, Pushes};
use crate::error::Error;
use crate::proto::{self, ErrorCode, Start};
use crate::record::{decode_batches, ConsumedRecord};

/// How a subscription is credited.
#[derive(Debug, Clone)]
pub struct SubscriptionConfig {
    /// Record bytes granted at the start and kept in flight at most
    /// (default 4 MiB). It must be at least the largest batch the
    /// partition may hold (the topic's `max.message.bytes`), or the
    /// subscription stalls at that batch.
    pub window: u32,
    /// Grant back what the application consumed (default true). When
    /// false, only [`Subscription::grant`] grants after the first window.
    pub auto_credit: bool,
}

impl Default for SubscriptionConfig {
    fn default() -> Self {
        SubscriptionConfig {
            window: 4 << 20,
            auto_credit: true,
        }
    }
}

/// One partition's records, pushed by the server. See the module docs.
pub struct Subscription {
    client: Client,
    conn: Arc<Conn>,
    id: u32,
    topic: Arc<str>,
    partition: u32,
    pushes: Pushes,
    buffered: VecDeque<ConsumedRecord>,
    /// The offset of the next record the stream yields.
    position: i64,
    high_watermark: i64,
    /// Record bytes of pushes whose records have all been yielded, not
    /// granted back yet.
    consumed: u64,
    /// Record bytes of the push whose records are being yielded.
    in_hand: u64,
    /// Record bytes received in all.
    received: u64,
    config: SubscriptionConfig,
    ended: bool,
}

impl std::fmt::Debug for Subscription {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Subscription")
            .field("topic", &self.topic)
            .field("partition", &self.partition)
            .field("position", &self.position)
            .field("ended", &self.ended)
            .finish()
    }
}

impl Client {
    /// Subscribes to one partition at its leader: the server pushes its
    /// records from `start` on, as they are committed.
    ///
    /// ```no_run
    /// use futures::StreamExt;
    /// use sdk::proto::Start;
    /// use sdk::{Client, SubscriptionConfig};
    ///
    /// # async fn run() -> Result<(), sdk::Error> {
    /// let client = Client::connect("aero://localhost:9091").await?;
    /// let mut sub = client
    ///     .subscribe("events", 0, Start::Earliest, SubscriptionConfig::default())
    ///     .await?;
    /// while let Some(record) = sub.next().await {
    ///     let record = record?;
    ///     println!("{}: {:?}", record.offset, record.value);
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn subscribe(
        &self,
        topic: &str,
        partition: u32,
        start: Start,
        config: SubscriptionConfig,
    ) -> Result<Subscription, Error> {
        if config.window == 0 && config.auto_credit {
            return Err(Error::Config(
                "a subscription with automatic credit needs a window above 0".into(),
            ));
        }
        self.retrying(&[topic], || {
            self.open_subscription(topic, partition, start, config.clone())
        })
        .await
    }

    /// One attempt at [`Client::subscribe`], at the leader the cached
    /// metadata names.
    pub(crate) async fn open_subscription(
        &self,
        topic: &str,
        partition: u32,
        start: Start,
        config: SubscriptionConfig,
    ) -> Result<Subscription, Error> {
        let (start_kind, start_value) = start.to_wire();
        let node = self.leader(topic, partition).await?;
        let conn = self.node_conn(node).await?;
        // over QUIC a stream of its own, so partitions never wait on each
        // other; over TCP the connection
        let conn = match conn.open_stream().await? {
            Some(stream) => Arc::new(stream),
            None => conn,
        };
        let request = proto::Subscribe {
            correlation: 0,
            subscription: 0,
            topic: topic.to_owned(),
            partition,
            start_kind,
            start_value,
            credit: config.window,
        };
        let (answer, pushes) = conn.subscribe(request, self.request_timeout()).await?;
        if answer.error != ErrorCode::NONE {
            return Err(Error::server(answer.error, answer.message));
        }
        Ok(Subscription {
            client: self.clone(),
            conn,
            id: answer.subscription,
            topic: Arc::from(topic),
            partition,
            pushes,
            buffered: VecDeque::new(),
            position: answer.offset,
            high_watermark: answer.high_watermark,
            consumed: 0,
            in_hand: 0,
            received: 0,
            config,
            ended: false,
        })
    }
}

impl Subscription {
    pub fn topic(&self) -> &str {
        &self.topic
    }

    pub fn partition(&self) -> u32 {
        self.partition
    }

    /// The offset of the next record the stream yields: where to open a
    /// new subscription to go on after this one ended.
    pub fn position(&self) -> i64 {
        self.position
    }

    /// The partition's high watermark as of the last push.
    pub fn high_watermark(&self) -> i64 {
        self.high_watermark
    }

    /// Record bytes received in all.
    pub fn received_bytes(&self) -> u64 {
        self.received
    }

    /// Lets the server push `bytes` more record bytes.
    pub async fn grant(&self, bytes: u32) -> Result<(), Error> {
        self.conn
            .grant(self.id, bytes, self.client.request_timeout())
            .await
    }

    /// Ends the subscription at the server; records already pushed are
    /// dropped.
    pub async fn close(mut self) -> Result<(), Error> {
        // nothing left for the drop to do
        self.ended = true;
        let code = self
            .conn
            .unsubscribe(self.id, self.client.request_timeout())
            .await?;
        if code == ErrorCode::NONE || code == ErrorCode::UNKNOWN_SUBSCRIPTION {
            // unknown: the server had already ended it
            Ok(())
        } else {
            Err(Error::server(code, "unsubscribe refused"))
        }
    }

    /// Grants back what was consumed once it reaches half the window.
    fn credit_back(&mut self) {
        if !self.config.auto_credit || self.consumed < u64::from(self.config.window / 2).max(1) {
            return;
        }
        let bytes = u32::try_from(self.consumed).unwrap_or(u32::MAX);
        self.consumed -= u64::from(bytes);
        let (conn, id, timeout) = (
            Arc::clone(&self.conn),
            self.id,
            self.client.request_timeout(),
        );
        // The grant goes out through the connection's writer; a failed
        // one means the connection is gone, which the stream sees itself.
        self.client.runtime().spawn(async move {
            let _ = conn.grant(id, bytes, timeout).await;
        });
    }

    fn take(&mut self, push: proto::Push) -> Result<(), Error> {
        self.high_watermark = push.high_watermark;
        if push.error != ErrorCode::NONE {
            self.ended = true;
            return Err(Error::server(
                push.error,
                format!(
                    "the subscription to {}/{} ended at offset {}",
                    self.topic, self.partition, self.position
                ),
            ));
        }
        let len = push.records.len() as u64;
        self.received += len;
        let decoded = decode_batches(&self.topic, self.partition, push.records, self.position)?;
        self.buffered.extend(decoded.records);
        if self.buffered.is_empty() {
            // control batches only: nothing to yield, consumed at once
            self.consumed += len;
            self.position = self.position.max(push.next_offset);
            self.credit_back();
        } else {
            self.in_hand = len;
            self.position = self.position.max(push.next_offset);
        }
        Ok(())
    }
}

impl Stream for Subscription {
    type Item = Result<ConsumedRecord, Error>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = &mut *self;
        loop {
            if let Some(record) = this.buffered.pop_front() {
                if this.buffered.is_empty() {
                    this.consumed += std::mem::take(&mut this.in_hand);
                    this.credit_back();
                }
                return Poll::Ready(Some(Ok(record)));
            }
            if this.ended {
                return Poll::Ready(None);
            }
            match this.pushes.poll_recv(cx) {
                Poll::Ready(Some(push)) => {
                    if let Err(e) = this.take(push) {
                        this.ended = true;
                        return Poll::Ready(Some(Err(e)));
                    }
                }
                Poll::Ready(None) => {
                    this.ended = true;
                    return Poll::Ready(Some(Err(Error::Closed)));
                }
                Poll::Pending => return Poll::Pending,
            }
        }
    }
}

impl Drop for Subscription {
    fn drop(&mut self) {
        if self.ended {
            return;
        }
        let (conn, id, timeout) = (
            Arc::clone(&self.conn),
            self.id,
            self.client.request_timeout(),
        );
        // tells the server to stop pushing; best effort
        self.client.runtime().spawn(async move {
            let _ = conn.unsubscribe(id, timeout).await;
        });
    }
}
