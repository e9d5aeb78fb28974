//! The floor: librdkafka's built-in mock cluster as a stand-in Kafka
//! broker that does the least possible work (one event-loop thread keeps
//! each partition's recent record batches in memory and answers from
//! there). Running a workload against it shows what the load generator
//! and the clients cost on their own; a real broker's figures read as a
//! multiple of that.
//!
//! The mock implements Produce, Fetch, Metadata, ListOffsets, the classic
//! consumer-group protocol (FindCoordinator, JoinGroup, SyncGroup,
//! Heartbeat, LeaveGroup, OffsetCommit, OffsetFetch) and InitProducerId,
//! but not CreateTopics or DeleteTopics, so topics are made when it starts
//! (`loadtest mock-broker --topic NAME --workload FILE`) and runs use
//! them with `loadtest run --topic NAME --no-create`.
//!
//! What the mock does not do, and so what the floor leaves out: it writes
//! nothing to disk; it keeps only the newest 5 MiB (or 100 000 batches) of
//! each partition, so a consumer further behind than that finds its offset
//! gone and the ledger counts the skipped messages as lost; and a fetch that
//! finds no data is answered after the client's whole `fetch.wait.max.ms`,
//! even if records arrive meanwhile (a real broker answers as soon as they
//! do), so floor runs set a short wait (`loadtest run --consumer-config
//! fetch.wait.max.ms=1`) or consumers that catch up stall for 500 ms.

use rdkafka::mocking::MockCluster;
use rdkafka::producer::DefaultProducerContext;

use crate::error::LoadError;

/// One topic to create at start.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MockTopic {
    pub name: String,
    pub partitions: u32,
}

/// A running mock cluster of one broker, in this process; it stops when
/// dropped.
pub struct MockBroker {
    cluster: MockCluster<'static, DefaultProducerContext>,
    topics: Vec<MockTopic>,
}

impl std::fmt::Debug for MockBroker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MockBroker")
            .field("bootstrap", &self.bootstrap())
            .field("topics", &self.topics)
            .finish()
    }
}

fn mock_err(reason: impl std::fmt::Display) -> LoadError {
    LoadError::MockBroker(reason.to_string())
}

impl MockBroker {
    /// Starts the mock broker on a free port of 127.0.0.1 and creates the
    /// topics, each with replication factor 1 (the mock replicates nothing
    /// either way, and acknowledges acks=all after its in-memory append).
    pub fn start(topics: &[MockTopic]) -> Result<MockBroker, LoadError> {
        for t in topics {
            if t.name.is_empty() {
                return Err(mock_err("a topic name is empty"));
            }
            if t.partitions == 0 || i32::try_from(t.partitions).is_err() {
                return Err(mock_err(format!(
                    "topic {}: {} is not a partition count",
                    t.name, t.partitions
                )));
            }
        }
        let cluster = MockCluster::new(1)
            .map_err(|e| mock_err(format!("librdkafka's mock cluster did not start: {e}")))?;
        for t in topics {
            let partitions = i32::try_from(t.partitions).map_err(mock_err)?;
            cluster
                .create_topic(&t.name, partitions, 1)
                .map_err(|e| mock_err(format!("creating topic {}: {e}", t.name)))?;
        }
        Ok(MockBroker {
            cluster,
            topics: topics.to_vec(),
        })
    }

    /// `HOST:PORT` of the mock's Kafka listener.
    pub fn bootstrap(&self) -> String {
        self.cluster.bootstrap_servers()
    }

    pub fn topics(&self) -> &[MockTopic] {
        &self.topics
    }

    /// The line scripts wait for, in the style of the agent's
    /// `aerostream listening kafka=…` line, with the librdkafka version
    /// whose mock this is.
    pub fn ready_line(&self) -> String {
        let topics: Vec<String> = self
            .topics
            .iter()
            .map(|t| format!("{}:{}", t.name, t.partitions))
            .collect();
        format!(
            "loadtest mock-broker listening kafka={} topics={} librdkafka={}",
            self.bootstrap(),
            topics.join(","),
            rdkafka::util::get_rdkafka_version().1
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refuses_topics_the_mock_cannot_hold() {
        let zero = MockBroker::start(&[MockTopic {
            name: "t".into(),
            partitions: 0,
        }]);
        assert!(matches!(zero, Err(LoadError::MockBroker(_))), "{zero:?}");
        let unnamed = MockBroker::start(&[MockTopic {
            name: String::new(),
            partitions: 1,
        }]);
        assert!(
            matches!(unnamed, Err(LoadError::MockBroker(_))),
            "{unnamed:?}"
        );
        let huge = MockBroker::start(&[MockTopic {
            name: "t".into(),
            partitions: u32::MAX,
        }]);
        assert!(matches!(huge, Err(LoadError::MockBroker(_))), "{huge:?}");
    }

    #[test]
    fn ready_line_names_the_listener_and_the_topics() {
        let b = MockBroker::start(&[
            MockTopic {
                name: "a".into(),
                partitions: 8,
            },
            MockTopic {
                name: "b".into(),
                partitions: 2,
            },
        ])
        .unwrap();
        let line = b.ready_line();
        let addr = b.bootstrap();
        assert!(addr.starts_with("127.0.0.1:"), "{addr}");
        assert_eq!(
            line,
            format!(
                "loadtest mock-broker listening kafka={addr} topics=a:8,b:2 librdkafka={}",
                rdkafka::util::get_rdkafka_version().1
            )
        );
    }
}
