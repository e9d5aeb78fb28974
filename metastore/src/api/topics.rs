//! [`Topics`]: topics and their configs.

use std::sync::Arc;

use uuid::Uuid;

use super::{unexpected, Metastore};
use crate::command::{Command, CommandOutput};
use crate::error::MetaError;
use crate::types::{ConfigOp, CreateTopic, TopicInfo};

/// Topics and their configs: create and delete topics, add partitions,
/// change configs, and look topics up by name or id.
///
/// Writes go through Raft (forwarded to the leader, wherever it is) and
/// resolve once committed and applied on this replica too, so reads on
/// this handle see them at once. A `validate_only` write is checked as the
/// real one would be and answers what it would make, changing nothing.
/// Reads come from the local replica, possibly stale by
/// [`Metastore::staleness`]. A topic is handed out shared
/// (`Arc<TopicInfo>`): a later change replaces it, never alters a copy
/// already handed out.
#[expect(
    async_fn_in_trait,
    reason = "implemented by Metastore only; callers hold the concrete type, whose futures are Send"
)]
pub trait Topics {
    async fn create_topic(
        &self,
        req: CreateTopic,
        validate_only: bool,
    ) -> Result<TopicInfo, MetaError>;

    /// CreateTopics with several topics: one Raft entry, one result per topic.
    async fn create_topics(
        &self,
        reqs: Vec<CreateTopic>,
        validate_only: bool,
    ) -> Result<Vec<Result<TopicInfo, MetaError>>, MetaError>;

    async fn delete_topic(&self, name: &str) -> Result<TopicInfo, MetaError>;

    async fn create_partitions(
        &self,
        name: &str,
        total: i32,
        validate_only: bool,
    ) -> Result<TopicInfo, MetaError>;

    async fn alter_topic_configs(
        &self,
        name: &str,
        ops: Vec<ConfigOp>,
        replace_all: bool,
        validate_only: bool,
    ) -> Result<TopicInfo, MetaError>;

    /// Every topic. Each is shared, not copied: the read lock is held only
    /// for one pointer copy per topic, and a later change never alters a
    /// `TopicInfo` already handed out (it replaces it).
    fn topics(&self) -> Vec<Arc<TopicInfo>>;

    /// The topic called `name`, shared (a pointer copy under the read lock).
    fn topic(&self, name: &str) -> Option<Arc<TopicInfo>>;

    /// The topic with this id, shared (a pointer copy under the read lock).
    fn topic_by_id(&self, id: Uuid) -> Option<Arc<TopicInfo>>;
}

impl Metastore {
    async fn topic_command(&self, command: Command) -> Result<TopicInfo, MetaError> {
        match self.submit_one(command).await? {
            CommandOutput::Topic(t) => Ok(t),
            other => Err(unexpected(other)),
        }
    }
}

impl Topics for Metastore {
    async fn create_topic(
        &self,
        req: CreateTopic,
        validate_only: bool,
    ) -> Result<TopicInfo, MetaError> {
        self.topic_command(Command::CreateTopic {
            id: Uuid::new_v4(),
            spec: req,
            validate_only,
        })
        .await
    }

    async fn create_topics(
        &self,
        reqs: Vec<CreateTopic>,
        validate_only: bool,
    ) -> Result<Vec<Result<TopicInfo, MetaError>>, MetaError> {
        let cmds = reqs
            .into_iter()
            .map(|spec| Command::CreateTopic {
                id: Uuid::new_v4(),
                spec,
                validate_only,
            })
            .collect();
        let results = self.submit(cmds).await?;
        Ok(results
            .into_iter()
            .map(|r| match r? {
                CommandOutput::Topic(t) => Ok(t),
                other => Err(unexpected(other)),
            })
            .collect())
    }

    async fn delete_topic(&self, name: &str) -> Result<TopicInfo, MetaError> {
        self.topic_command(Command::DeleteTopic {
            name: name.to_owned(),
        })
        .await
    }

    async fn create_partitions(
        &self,
        name: &str,
        total: i32,
        validate_only: bool,
    ) -> Result<TopicInfo, MetaError> {
        self.topic_command(Command::CreatePartitions {
            name: name.to_owned(),
            total,
            validate_only,
        })
        .await
    }

    async fn alter_topic_configs(
        &self,
        name: &str,
        ops: Vec<ConfigOp>,
        replace_all: bool,
        validate_only: bool,
    ) -> Result<TopicInfo, MetaError> {
        self.topic_command(Command::AlterTopicConfigs {
            name: name.to_owned(),
            ops,
            replace_all,
            validate_only,
        })
        .await
    }

    fn topics(&self) -> Vec<Arc<TopicInfo>> {
        self.read(|s| s.topics().cloned().collect())
    }

    fn topic(&self, name: &str) -> Option<Arc<TopicInfo>> {
        self.read(|s| s.topic(name).cloned())
    }

    fn topic_by_id(&self, id: Uuid) -> Option<Arc<TopicInfo>> {
        self.read(|s| s.topic_by_id(id).cloned())
    }
}
