//! The consumer's side of group membership ([`Membership::Group`]):
//! subscribing, closing, and applying, while the stream is polled, the
//! changes the group task (`group.rs`) asks for. Everything else the
//! consumer does is the same for both memberships: the group drives it
//! through the consumer's own assignment and positions.

use std::sync::Arc;
use std::task::{Context, Poll};

use super::{Consumer, Membership, OffsetReset, Part, StartAt, Tp};
use crate::error::Error;
use crate::group::{Change, Group, Start};

impl Consumer {
    /// Joins the consumer's group ([`Membership::Group`]) as a reader of
    /// `topics`: the group's coordinator assigns this consumer a share of
    /// their partitions, each read from the group's committed offset (or
    /// from where [`ConsumerConfig::offset_reset`](crate::ConsumerConfig::offset_reset)
    /// says when the group committed none), and moves them between the
    /// members as members join, leave or stop heartbeating. Assignments
    /// arrive while the stream is polled, so poll it (within the rebalance
    /// timeout) for a rebalance to go on; the stream does not end while
    /// subscribed. The group decides the assignment: do not
    /// [`assign`](Consumer::assign) or [`unassign`](Consumer::unassign)
    /// partitions yourself meanwhile.
    ///
    /// ```no_run
    /// # async fn run() -> Result<(), sdk::Error> {
    /// use futures::StreamExt;
    /// use sdk::{Client, ConsumerConfig, GroupOptions, Membership};
    ///
    /// let client = Client::connect("aero://localhost:9091").await?;
    /// let mut consumer = client.consumer(ConsumerConfig {
    ///     group: Some("billing".into()),
    ///     membership: Membership::Group(GroupOptions::default()),
    ///     ..ConsumerConfig::default()
    /// })?;
    /// consumer.subscribe(&["events"])?;
    /// for _ in 0..100 {
    ///     let Some(record) = consumer.next().await else { break };
    ///     let record = record?;
    ///     println!("{}@{}: {:?}", record.partition, record.offset, record.value);
    /// }
    /// // commits the positions reached and leaves, so the others take over
    /// consumer.close().await?;
    /// # Ok(()) }
    /// ```
    pub fn subscribe(&mut self, topics: &[&str]) -> Result<(), Error> {
        let Membership::Group(options) = &self.config.membership else {
            return Err(Error::Config(
                "subscribing needs Membership::Group; assign partitions otherwise".into(),
            ));
        };
        let Some(group) = self.config.group.clone() else {
            return Err(Error::Config("group membership needs a group name".into()));
        };
        if self.group.is_some() {
            return Err(Error::Config("the consumer is subscribed already".into()));
        }
        let topics = topics.iter().map(|t| (*t).to_owned()).collect();
        self.group = Some(Group::start(
            self.client.clone(),
            group,
            topics,
            options.clone(),
        )?);
        Ok(())
    }

    /// Ends the consumer: in a group, commits the positions reached (with
    /// [`GroupOptions::auto_commit`](crate::GroupOptions::auto_commit)) and leaves the group, so its
    /// partitions go to the other members at once. The error is the
    /// commit's. Dropping the consumer leaves too, without waiting.
    pub async fn close(mut self) -> Result<(), Error> {
        match self.group.take() {
            Some(group) => group.leave(self.positions()).await,
            None => Ok(()),
        }
    }

    /// `(topic, partition, position)` of every partition that has one.
    fn positions(&self) -> Vec<(String, u32, i64)> {
        self.assignment()
            .into_iter()
            .filter_map(|(t, p)| {
                let position = self.position(&t, p)?;
                Some((t, p, position))
            })
            .collect()
    }

    /// Applies the group task's changes: gives partitions up (answering
    /// with their positions) and takes new ones.
    pub(super) fn follow_group(&mut self, cx: &mut Context<'_>) {
        loop {
            let change = match self.group.as_mut().map(|g| g.poll_change(cx)) {
                Some(Poll::Ready(change)) => change,
                None | Some(Poll::Pending) => return,
            };
            match change {
                Some(Change::Revoke(reply)) => {
                    let positions = self.positions();
                    for (topic, _) in self.assignment() {
                        self.unassign(&topic, None);
                    }
                    let _ = reply.send(positions);
                }
                Some(Change::Assign(parts)) => {
                    for (topic, partition, start) in parts {
                        self.take_assigned(topic, partition, start);
                    }
                }
                Some(Change::Failed(e)) => self.errors.push_back(e),
                None => self.group = None,
            }
        }
    }

    /// Starts reading a partition the group assigned; its offset is looked
    /// up while polling when not known.
    fn take_assigned(&mut self, topic: String, partition: u32, start: Start) {
        let tp: Tp = (Arc::from(topic.as_str()), partition);
        let (start, pause) = match (start, self.config.offset_reset) {
            (Start::At(offset), _) => (StartAt::Offset(offset), false),
            (Start::Committed, _) => (StartAt::Committed, false),
            (Start::Reset, OffsetReset::Earliest) => (StartAt::Earliest, false),
            (Start::Reset, OffsetReset::Latest) => (StartAt::Latest, false),
            (Start::Reset, OffsetReset::Fail) => (StartAt::Earliest, true),
        };
        if pause {
            self.errors.push_back(Error::Config(format!(
                "{topic}/{partition} has no committed offset and offset_reset is Fail: seek it"
            )));
        }
        self.drop_buffered(&tp);
        let mut part = Part::new(start);
        part.paused = pause;
        self.parts.insert(tp, part);
    }
}

impl Drop for Consumer {
    /// Leaves the group (committing with auto-commit) in the background.
    fn drop(&mut self) {
        if let Some(group) = self.group.take() {
            group.leave_in_background(self.positions());
        }
    }
}
