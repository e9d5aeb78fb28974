//! A broker double for the client's unit tests: speaks the native frames
//! over real TCP on one or more ports (one per node), keeps a tiny log in
//! memory, and lets a test inject the failures the client must survive.
//!
//! It is only as faithful as the client needs to be exercised; the
//! behaviour against the real broker is tested with the gateway.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use tokio::io::{AsyncWriteExt, BufReader};
use tokio::net::TcpListener;
use tokio::sync::{broadcast, Notify};

use crate::bootstrap::Address;
use crate::conn::read_frame;
use crate::proto::{self, ErrorCode, Message, Request};
use crate::record::decode_batches;

#[derive(Default)]
struct Log {
    /// (base offset, batch with its base offset set)
    batches: Vec<(i64, Bytes)>,
    next: i64,
    /// producer id → (base sequence, base offset) of its last batch.
    last_batch: HashMap<i64, (i32, i64)>,
}

#[derive(Default)]
struct State {
    nodes: Vec<Address>,
    topics: HashMap<String, Vec<(u32, Log)>>,
    committed: HashMap<(String, String, u32), i64>,
    next_producer_id: i64,
    /// Errors answered to the next produced partitions, in order.
    produce_errors: Vec<ErrorCode>,
    /// Produces whose answer is lost: appended, then the connection drops.
    lose_answers: usize,
    produces_seen: usize,
    fetches_seen: usize,
    /// Consumer groups: one member at a time, given every partition.
    groups: HashMap<String, DoubleGroup>,
    /// Errors answered to the next heartbeats, in order.
    heartbeat_errors: Vec<ErrorCode>,
}

#[derive(Default, Clone, Debug)]
pub(crate) struct DoubleGroup {
    pub generation: i32,
    /// The member, while one is joined.
    pub member: Option<String>,
    pub joins: usize,
    pub leaves: usize,
    /// Commits made as a member: (generation, topic, partition, offset).
    pub member_commits: Vec<(i32, String, u32, i64)>,
}

/// A running double; dropping it leaves the tasks to end with the test.
#[derive(Clone)]
pub(crate) struct Double {
    state: Arc<Mutex<State>>,
    appended: Arc<Notify>,
    kill: broadcast::Sender<()>,
}

impl Double {
    /// Starts `nodes` nodes sharing one state.
    pub(crate) async fn start(nodes: usize) -> Double {
        let (kill, _) = broadcast::channel(4);
        let double = Double {
            state: Arc::default(),
            appended: Arc::new(Notify::new()),
            kill,
        };
        for id in 0..nodes {
            let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
            let port = listener.local_addr().unwrap().port();
            double.lock().nodes.push(Address {
                host: "127.0.0.1".into(),
                port,
            });
            let d = double.clone();
            tokio::spawn(async move {
                while let Ok((stream, _)) = listener.accept().await {
                    let d = d.clone();
                    tokio::spawn(async move { d.serve(id as u32, stream).await });
                }
            });
        }
        double
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap()
    }

    pub(crate) fn url(&self) -> String {
        format!("aero://{}", self.lock().nodes[0])
    }

    /// Creates a topic whose partition `p` is led by node `p % nodes`.
    pub(crate) fn create(&self, topic: &str, partitions: u32) {
        let mut s = self.lock();
        let nodes = s.nodes.len() as u32;
        let parts = (0..partitions)
            .map(|p| (p % nodes, Log::default()))
            .collect();
        s.topics.insert(topic.into(), parts);
    }

    pub(crate) fn set_leader(&self, topic: &str, partition: u32, node: u32) {
        self.lock().topics.get_mut(topic).unwrap()[partition as usize].0 = node;
    }

    /// The next produced partitions get these errors, one each.
    pub(crate) fn fail_produces(&self, errors: &[ErrorCode]) {
        self.lock().produce_errors.extend_from_slice(errors);
    }

    /// The next `n` produces are appended but their answer never comes:
    /// the connection closes instead.
    pub(crate) fn lose_answers(&self, n: usize) {
        self.lock().lose_answers += n;
    }

    pub(crate) fn produces_seen(&self) -> usize {
        self.lock().produces_seen
    }

    pub(crate) fn fetches_seen(&self) -> usize {
        self.lock().fetches_seen
    }

    /// The next heartbeats are answered with these errors, one each.
    pub(crate) fn fail_heartbeats(&self, errors: &[ErrorCode]) {
        self.lock().heartbeat_errors.extend_from_slice(errors);
    }

    /// What the double knows of a group.
    pub(crate) fn group(&self, name: &str) -> DoubleGroup {
        self.lock().groups.get(name).cloned().unwrap_or_default()
    }

    /// Starts a new generation behind the member's back (as another
    /// member joining would).
    pub(crate) fn bump_generation(&self, name: &str) {
        self.lock()
            .groups
            .entry(name.into())
            .or_default()
            .generation += 1;
    }

    /// Closes every open connection.
    pub(crate) fn kill_connections(&self) {
        let _ = self.kill.send(());
    }

    /// Appends records as a producer would (for consumer tests).
    pub(crate) fn append(&self, topic: &str, partition: u32, batch: Bytes) -> i64 {
        let mut s = self.lock();
        let log = &mut s.topics.get_mut(topic).unwrap()[partition as usize].1;
        let base = append(log, batch);
        self.appended.notify_waiters();
        base
    }

    /// The (offset, value) of every record of a partition.
    pub(crate) fn values(&self, topic: &str, partition: u32) -> Vec<(i64, String)> {
        let s = self.lock();
        let log = &s.topics[topic][partition as usize].1;
        let mut bytes = BytesMut::new();
        for (_, b) in &log.batches {
            bytes.extend_from_slice(b);
        }
        decode_batches(&Arc::from(topic), partition, bytes.freeze(), 0)
            .unwrap()
            .records
            .into_iter()
            .map(|r| {
                let v = r.value.map(|v| String::from_utf8_lossy(&v).into_owned());
                (r.offset, v.unwrap_or_default())
            })
            .collect()
    }

    pub(crate) fn committed(&self, group: &str, topic: &str, partition: u32) -> Option<i64> {
        self.lock()
            .committed
            .get(&(group.into(), topic.into(), partition))
            .copied()
    }

    async fn serve(self, node: u32, stream: tokio::net::TcpStream) {
        let mut kill = self.kill.subscribe();
        let (read, mut write) = stream.into_split();
        let mut read = BufReader::new(read);
        loop {
            let frame = tokio::select! {
                f = read_frame(&mut read, u32::MAX) => f,
                _ = kill.recv() => return,
            };
            let Ok(Some(frame)) = frame else { return };
            let request = Request::decode(frame.op, frame.body).unwrap();
            let answer = match request {
                Request::Fetch(f) => {
                    let wait = Duration::from_millis(u64::from(f.max_wait_ms));
                    let deadline = tokio::time::Instant::now() + wait;
                    loop {
                        let notified = self.appended.notified();
                        let answer = self.fetch(node, &f);
                        if has_records(&answer) || tokio::time::Instant::now() >= deadline {
                            break Some(answer.to_frame());
                        }
                        tokio::select! {
                            () = notified => {}
                            () = tokio::time::sleep_until(deadline) => {}
                        }
                    }
                }
                other => match self.answer(node, other) {
                    Answer::Frame(f) => Some(f),
                    Answer::Nothing => None,
                    Answer::Lost => return,
                },
            };
            if let Some(a) = answer {
                if write.write_all(&a).await.is_err() {
                    return;
                }
            }
        }
    }

    fn answer(&self, node: u32, request: Request) -> Answer {
        let mut s = self.lock();
        let frame = match request {
            Request::Hello(h) => proto::HelloResponse {
                correlation: h.correlation,
                error: ErrorCode::NONE,
                version: 1,
                node_id: node,
                max_frame_bytes: 1 << 20,
                server: "double".into(),
            }
            .to_frame(),
            Request::Ping(p) => proto::Pong {
                correlation: p.correlation,
                nonce: p.nonce,
            }
            .to_frame(),
            Request::Metadata(m) => {
                let names: Vec<String> = if m.topics.is_empty() {
                    s.topics.keys().cloned().collect()
                } else {
                    m.topics.clone()
                };
                let topics = names
                    .into_iter()
                    .map(|name| match s.topics.get(&name) {
                        Some(parts) => proto::TopicMetadata {
                            name,
                            error: ErrorCode::NONE,
                            partitions: parts
                                .iter()
                                .enumerate()
                                .map(|(i, (leader, _))| proto::PartitionMetadata {
                                    index: i as u32,
                                    leader: *leader as i32,
                                    ..Default::default()
                                })
                                .collect(),
                        },
                        None => proto::TopicMetadata {
                            name,
                            error: ErrorCode::UNKNOWN_TOPIC,
                            partitions: Vec::new(),
                        },
                    })
                    .collect();
                proto::MetadataResponse {
                    correlation: m.correlation,
                    nodes: s
                        .nodes
                        .iter()
                        .enumerate()
                        .map(|(i, a)| proto::Node {
                            id: i as u32,
                            host: a.host.clone(),
                            port: a.port,
                            rack: String::new(),
                        })
                        .collect(),
                    topics,
                }
                .to_frame()
            }
            Request::CreateTopic(c) => {
                let error = if s.topics.contains_key(&c.name) {
                    ErrorCode::TOPIC_ALREADY_EXISTS
                } else {
                    let nodes = s.nodes.len() as u32;
                    let parts = (0..c.partitions.max(1) as u32)
                        .map(|p| (p % nodes, Log::default()))
                        .collect();
                    s.topics.insert(c.name.clone(), parts);
                    ErrorCode::NONE
                };
                proto::CreateTopicResponse(proto::TopicResponse {
                    correlation: c.correlation,
                    error,
                    message: String::new(),
                })
                .to_frame()
            }
            Request::DeleteTopic(d) => {
                let error = match s.topics.remove(&d.name) {
                    Some(_) => ErrorCode::NONE,
                    None => ErrorCode::UNKNOWN_TOPIC,
                };
                proto::DeleteTopicResponse(proto::TopicResponse {
                    correlation: d.correlation,
                    error,
                    message: String::new(),
                })
                .to_frame()
            }
            Request::InitProducer(i) => {
                s.next_producer_id += 1;
                proto::InitProducerResponse {
                    correlation: i.correlation,
                    error: ErrorCode::NONE,
                    producer_id: s.next_producer_id,
                    producer_epoch: 0,
                }
                .to_frame()
            }
            Request::Produce(p) => {
                s.produces_seen += 1;
                let lose = s.lose_answers > 0;
                if lose {
                    s.lose_answers -= 1;
                }
                let mut topics = Vec::new();
                for t in p.topics {
                    let mut partitions = Vec::new();
                    for part in t.partitions {
                        let injected = if s.produce_errors.is_empty() {
                            None
                        } else {
                            Some(s.produce_errors.remove(0))
                        };
                        let (error, base_offset) = match injected {
                            Some(code) => (code, -1),
                            None => produce(&mut s, node, &t.name, part.partition, part.batch),
                        };
                        partitions.push(proto::PartitionProduced {
                            partition: part.partition,
                            error,
                            base_offset,
                            log_append_time_ms: -1,
                            log_start_offset: 0,
                            message: String::new(),
                        });
                    }
                    topics.push(proto::TopicProduced {
                        name: t.name,
                        partitions,
                    });
                }
                self.appended.notify_waiters();
                if lose {
                    return Answer::Lost;
                }
                if p.acks == 0 {
                    return Answer::Nothing;
                }
                proto::ProduceResponse {
                    correlation: p.correlation,
                    topics,
                }
                .to_frame()
            }
            Request::ListOffsets(l) => proto::ListOffsetsResponse {
                correlation: l.correlation,
                partitions: l
                    .partitions
                    .into_iter()
                    .map(|(topic, partition, spec)| {
                        let log = s
                            .topics
                            .get(&topic)
                            .and_then(|ps| ps.get(partition as usize));
                        let (error, offset) = match log {
                            None => (ErrorCode::UNKNOWN_TOPIC, -1),
                            Some((leader, _)) if *leader != node => (ErrorCode::NOT_LEADER, -1),
                            Some((_, log)) => match spec {
                                -2 => (ErrorCode::NONE, 0),
                                -1 => (ErrorCode::NONE, log.next),
                                // Timestamps: every record of the double is
                                // older than any time asked (test records
                                // carry small timestamps) unless 0.
                                0 => (ErrorCode::NONE, 0),
                                _ => (ErrorCode::NONE, -1),
                            },
                        };
                        proto::OffsetFound {
                            topic,
                            partition,
                            error,
                            offset,
                            timestamp: -1,
                        }
                    })
                    .collect(),
            }
            .to_frame(),
            Request::CommitOffsets(c) => {
                let member = !c.member_id.is_empty();
                let group = s.groups.get(&c.group).cloned().unwrap_or_default();
                let refused = if !member {
                    None
                } else if group.member.as_deref() != Some(c.member_id.as_str()) {
                    Some(ErrorCode::UNKNOWN_MEMBER)
                } else if group.generation != c.generation {
                    Some(ErrorCode::ILLEGAL_GENERATION)
                } else {
                    None
                };
                let mut partitions = Vec::new();
                for o in c.offsets {
                    if refused.is_none() {
                        s.committed
                            .insert((c.group.clone(), o.topic.clone(), o.partition), o.offset);
                        if member {
                            s.groups
                                .entry(c.group.clone())
                                .or_default()
                                .member_commits
                                .push((c.generation, o.topic.clone(), o.partition, o.offset));
                        }
                    }
                    partitions.push((o.topic, o.partition, refused.unwrap_or(ErrorCode::NONE)));
                }
                proto::CommitOffsetsResponse {
                    correlation: c.correlation,
                    partitions,
                }
                .to_frame()
            }
            Request::FindCoordinator(f) => {
                let a = &s.nodes[0];
                proto::FindCoordinatorResponse {
                    correlation: f.correlation,
                    error: ErrorCode::NONE,
                    node_id: 0,
                    host: a.host.clone(),
                    port: a.port,
                }
                .to_frame()
            }
            Request::JoinGroup(j) => {
                let assignment = j
                    .topics
                    .iter()
                    .filter_map(|t| {
                        let parts = s.topics.get(t)?;
                        Some(proto::TopicAssignment {
                            topic: t.clone(),
                            partitions: (0..parts.len() as u32).collect(),
                        })
                    })
                    .collect();
                let g = s.groups.entry(j.group.clone()).or_default();
                g.generation += 1;
                g.joins += 1;
                let member_id = if j.member_id.is_empty() {
                    format!("member-{}", g.joins)
                } else {
                    j.member_id.clone()
                };
                g.member = Some(member_id.clone());
                proto::JoinGroupResponse {
                    correlation: j.correlation,
                    error: ErrorCode::NONE,
                    generation: g.generation,
                    member_id,
                    assignment,
                }
                .to_frame()
            }
            Request::Heartbeat(h) => {
                let injected = if s.heartbeat_errors.is_empty() {
                    None
                } else {
                    Some(s.heartbeat_errors.remove(0))
                };
                let g = s.groups.get(&h.group).cloned().unwrap_or_default();
                let error =
                    injected.unwrap_or(if g.member.as_deref() != Some(h.member_id.as_str()) {
                        ErrorCode::UNKNOWN_MEMBER
                    } else if g.generation != h.generation {
                        ErrorCode::REBALANCE_IN_PROGRESS
                    } else {
                        ErrorCode::NONE
                    });
                proto::HeartbeatResponse(proto::GroupResponse {
                    correlation: h.correlation,
                    error,
                })
                .to_frame()
            }
            Request::LeaveGroup(l) => {
                let g = s.groups.entry(l.group.clone()).or_default();
                let error = if g.member.as_deref() == Some(l.member_id.as_str()) {
                    g.member = None;
                    g.leaves += 1;
                    ErrorCode::NONE
                } else {
                    ErrorCode::UNKNOWN_MEMBER
                };
                proto::LeaveGroupResponse(proto::GroupResponse {
                    correlation: l.correlation,
                    error,
                })
                .to_frame()
            }
            Request::FetchOffsets(f) => proto::FetchOffsetsResponse {
                correlation: f.correlation,
                offsets: f
                    .partitions
                    .into_iter()
                    .map(|(topic, partition)| {
                        let offset = s
                            .committed
                            .get(&(f.group.clone(), topic.clone(), partition))
                            .copied()
                            .unwrap_or(-1);
                        let o = proto::CommittedOffset {
                            topic,
                            partition,
                            offset,
                            metadata: String::new(),
                        };
                        (o, ErrorCode::NONE)
                    })
                    .collect(),
            }
            .to_frame(),
            Request::Fetch(_) => unreachable!("fetches are answered by serve"),
            // Subscriptions and authentication are exercised against the
            // real broker (the gateway's tests), not this double.
            Request::Subscribe(_)
            | Request::Credit(_)
            | Request::Unsubscribe(_)
            | Request::Authenticate(_)
            | Request::FindTxnCoordinator(_)
            | Request::InitTxn(_)
            | Request::AddTxnPartitions(_)
            | Request::AddTxnOffsets(_)
            | Request::TxnOffsetCommit(_)
            | Request::EndTxn(_)
            | Request::TxnProduce(_)
            | Request::FetchIsolated(_) => proto::ErrorFrame {
                correlation: 0,
                error: ErrorCode::UNKNOWN_OPERATION,
                message:
                    "the test double has no subscriptions or transactions and authenticates no one"
                        .into(),
            }
            .to_frame(),
        };
        Answer::Frame(frame)
    }

    fn fetch(&self, node: u32, f: &proto::Fetch) -> proto::FetchResponse {
        let mut s = self.lock();
        s.fetches_seen += 1;
        let topics = f
            .topics
            .iter()
            .map(|t| proto::TopicFetched {
                name: t.name.clone(),
                partitions: t
                    .partitions
                    .iter()
                    .map(|p| {
                        let log = s
                            .topics
                            .get(&t.name)
                            .and_then(|ps| ps.get(p.partition as usize));
                        let (error, records, hw) = match log {
                            None => (ErrorCode::UNKNOWN_TOPIC, Bytes::new(), -1),
                            Some((leader, _)) if *leader != node => {
                                (ErrorCode::NOT_LEADER, Bytes::new(), -1)
                            }
                            Some((_, log)) if p.offset > log.next || p.offset < 0 => {
                                (ErrorCode::OFFSET_OUT_OF_RANGE, Bytes::new(), log.next)
                            }
                            Some((_, log)) => {
                                let mut out = BytesMut::new();
                                for (base, batch) in &log.batches {
                                    let next = base + last_offset_delta(batch) + 1;
                                    if next <= p.offset {
                                        continue;
                                    }
                                    if !out.is_empty()
                                        && out.len() + batch.len() > p.max_bytes as usize
                                    {
                                        break;
                                    }
                                    out.extend_from_slice(batch);
                                }
                                (ErrorCode::NONE, out.freeze(), log.next)
                            }
                        };
                        proto::PartitionFetched {
                            partition: p.partition,
                            error,
                            high_watermark: hw,
                            log_start_offset: 0,
                            records,
                        }
                    })
                    .collect(),
            })
            .collect();
        proto::FetchResponse {
            correlation: f.correlation,
            topics,
        }
    }
}

enum Answer {
    Frame(Bytes),
    /// acks 0: no answer at all.
    Nothing,
    /// The answer is lost: the connection closes.
    Lost,
}

fn has_records(answer: &proto::FetchResponse) -> bool {
    answer
        .topics
        .iter()
        .flat_map(|t| &t.partitions)
        .any(|p| !p.records.is_empty() || p.error != ErrorCode::NONE)
}

fn last_offset_delta(batch: &[u8]) -> i64 {
    i64::from(i32::from_be_bytes(batch[23..27].try_into().unwrap()))
}

fn append(log: &mut Log, batch: Bytes) -> i64 {
    let mut b = BytesMut::from(&batch[..]);
    let base = log.next;
    b[..8].copy_from_slice(&base.to_be_bytes());
    log.next = base + last_offset_delta(&batch) + 1;
    log.batches.push((base, b.freeze()));
    base
}

fn produce(
    s: &mut State,
    node: u32,
    topic: &str,
    partition: u32,
    batch: Bytes,
) -> (ErrorCode, i64) {
    let Some((leader, log)) = s
        .topics
        .get_mut(topic)
        .and_then(|ps| ps.get_mut(partition as usize))
    else {
        return (ErrorCode::UNKNOWN_TOPIC, -1);
    };
    if *leader != node {
        return (ErrorCode::NOT_LEADER, -1);
    }
    let producer_id = i64::from_be_bytes(batch[43..51].try_into().unwrap());
    let sequence = i32::from_be_bytes(batch[53..57].try_into().unwrap());
    if producer_id >= 0 {
        if let Some(&(last, base)) = log.last_batch.get(&producer_id) {
            if last == sequence {
                return (ErrorCode::DUPLICATE_SEQUENCE, base);
            }
        }
    }
    let base = append(log, batch);
    if producer_id >= 0 {
        log.last_batch.insert(producer_id, (sequence, base));
    }
    (ErrorCode::NONE, base)
}
