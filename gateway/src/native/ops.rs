//! Each native operation, served on the Kafka handlers.

use std::sync::Arc;
use std::time::Instant;

use bytes::{BufMut, Bytes, BytesMut};
use kafka_protocol::messages::create_topics_request::{CreatableTopic, CreatableTopicConfig};
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::{
    BrokerId, CreateTopicsRequest, DeleteTopicsRequest, FetchRequest, GroupId,
    InitProducerIdRequest, ListOffsetsRequest, OffsetCommitRequest, ProduceRequest, ProducerId,
    TopicName,
};
use metastore::acl::{AclOperation as Op, ResourceType as Rt};
use sdk::proto::{self, ErrorCode, ErrorFrame, Message, Request};
use sdk::wire::WireWrite;

use super::codes::{from_kafka, from_kafka_for_member};
use super::{frame_of, groups, Answer, Session, StreamCtx};
use crate::broker::{Broker, Metrics};
use crate::kafka::api::{bridge, s, Client};
use crate::kafka::response::ResponseFrame;

fn fatal(correlation: u32, error: ErrorCode, message: impl Into<String>) -> ErrorFrame {
    ErrorFrame {
        correlation,
        error,
        message: message.into(),
    }
}

/// What the hello, or a message of the authentication after it, settled.
pub(super) struct Settled {
    /// The answer to write.
    pub answer: ResponseFrame,
    /// The connection's session: complete unless `auth` is set.
    pub session: Session,
    /// The authentication still under way; `None` once the client may
    /// send requests.
    pub auth: Option<crate::sasl::Session>,
}

/// Serves the first frame of a connection, which must be a hello, and the
/// authentication it may carry (a one-message mechanism). On a server that
/// requires authentication (SASL mechanisms configured), a hello without
/// it leaves the authentication to [`authenticate`]. The error frame to
/// close with when refused.
pub(super) fn hello(b: &Broker, op: u8, body: Bytes) -> Result<Settled, ErrorFrame> {
    let correlation = proto::correlation_of(&body).unwrap_or(0);
    if op != proto::op::HELLO {
        return Err(fatal(
            correlation,
            ErrorCode::HELLO_REQUIRED,
            format!("the first frame must be a hello (operation 0x01), not operation {op:#04x}"),
        ));
    }
    let h = proto::Hello::decode_body(body)
        .map_err(|e| fatal(correlation, ErrorCode::INVALID_REQUEST, e.to_string()))?;
    let version = h.max_version.min(proto::MAX_VERSION);
    if version < h.min_version.max(proto::MIN_VERSION) {
        return Err(fatal(
            h.correlation,
            ErrorCode::UNSUPPORTED_VERSION,
            format!(
                "the client speaks versions {}..={}, this server {}..={}",
                h.min_version,
                h.max_version,
                proto::MIN_VERSION,
                proto::MAX_VERSION
            ),
        ));
    }
    let mut session = Session {
        client_id: Arc::from(h.client_id.as_str()),
        version,
        principal: Arc::from(dataplane::policy::authz::ANONYMOUS),
        expires: None,
    };
    let answer = frame_of(&proto::HelloResponse {
        correlation: h.correlation,
        error: ErrorCode::NONE,
        version,
        node_id: u32::try_from(b.config.node_id).unwrap_or(0),
        max_frame_bytes: u32::try_from(b.config.max_request_bytes).unwrap_or(u32::MAX),
        server: format!("aerostream {}", env!("CARGO_PKG_VERSION")),
    });
    if b.config.sasl_mechanisms.is_empty() {
        if !h.auth_mechanism.is_empty() {
            return Err(fatal(
                h.correlation,
                ErrorCode::AUTHENTICATION_FAILED,
                format!(
                    "authentication mechanism {:?} is not enabled on this server (it authenticates no one)",
                    h.auth_mechanism
                ),
            ));
        }
        return Ok(Settled {
            answer,
            session,
            auth: None,
        });
    }
    let mut auth = crate::sasl::Session::default();
    if h.auth_mechanism.is_empty() {
        return Ok(Settled {
            answer,
            session,
            auth: Some(auth),
        });
    }
    let now = Instant::now();
    let step = auth
        .native_message(
            &crate::server::sasl_settings(b),
            &h.auth_mechanism,
            &h.auth_bytes,
            now,
        )
        .map_err(|why| refused(b, h.correlation, why))?;
    if !step.complete {
        return Err(refused(
            b,
            h.correlation,
            format!(
                "{} takes more than one message: authenticate after the hello (operation 0x14)",
                h.auth_mechanism
            ),
        ));
    }
    authenticated(&mut session, &auth, now);
    Ok(Settled {
        answer,
        session,
        auth: None,
    })
}

/// Counts a refused authentication; the error frame that closes the
/// connection.
fn refused(b: &Broker, correlation: u32, why: String) -> ErrorFrame {
    Metrics::add(&b.metrics.sasl_failures, 1);
    tracing::info!(reason = %why, "native authentication failed");
    fatal(correlation, ErrorCode::AUTHENTICATION_FAILED, why)
}

/// The session of a client that completed its authentication.
fn authenticated(session: &mut Session, auth: &crate::sasl::Session, now: Instant) {
    let user = auth.user().unwrap_or_default();
    session.principal = Arc::from(format!("User:{user}"));
    session.expires = auth.expires().filter(|e| *e > now);
}

/// Serves a frame of a connection that said hello but has yet to complete
/// the authentication the server requires: an Authenticate message, or
/// the error frame that closes the connection.
pub(super) fn authenticate(
    b: &Broker,
    session: &mut Session,
    auth: &mut crate::sasl::Session,
    op: u8,
    body: Bytes,
) -> Result<Settled, ErrorFrame> {
    let correlation = proto::correlation_of(&body).unwrap_or(0);
    if op != proto::op::AUTHENTICATE {
        Metrics::add(&b.metrics.sasl_failures, 1);
        return Err(fatal(
            correlation,
            ErrorCode::AUTHENTICATION_REQUIRED,
            format!("operation {op:#04x} before the client authenticated: this server requires authentication (operation 0x14)"),
        ));
    }
    let a = proto::Authenticate::decode_body(body)
        .map_err(|e| fatal(correlation, ErrorCode::INVALID_REQUEST, e.to_string()))?;
    let now = Instant::now();
    let step = auth
        .native_message(
            &crate::server::sasl_settings(b),
            &a.mechanism,
            &a.auth_bytes,
            now,
        )
        .map_err(|why| refused(b, a.correlation, why))?;
    if step.complete {
        authenticated(session, auth, now);
    }
    let answer = frame_of(&proto::AuthenticateResponse {
        correlation: a.correlation,
        error: ErrorCode::NONE,
        auth_bytes: step.answer,
        complete: step.complete,
        session_lifetime_ms: if step.complete { step.lifetime_ms } else { 0 },
    });
    Ok(Settled {
        answer,
        session: session.clone(),
        auth: (!step.complete).then(|| std::mem::take(auth)),
    })
}

/// Serves one request after the hello, made on the stream `s` describes.
pub(super) async fn serve(
    b: &Arc<Broker>,
    c: &Client,
    s: &StreamCtx,
    op: u8,
    body: Bytes,
) -> Answer {
    let client_id: &str = &s.session.client_id;
    let correlation = proto::correlation_of(&body).unwrap_or(0);
    let request = match Request::decode(op, body) {
        Ok(r) => r,
        Err(sdk::wire::DecodeError::UnknownOp(op)) => {
            return Answer::Fatal(fatal(
                correlation,
                ErrorCode::UNKNOWN_OPERATION,
                format!("operation {op:#04x} is not one this server knows"),
            ))
        }
        Err(e) => {
            return Answer::Fatal(fatal(
                correlation,
                ErrorCode::INVALID_REQUEST,
                e.to_string(),
            ))
        }
    };
    match request {
        Request::Hello(h) => Answer::Fatal(fatal(
            h.correlation,
            ErrorCode::INVALID_REQUEST,
            "a connection says hello once",
        )),
        Request::Authenticate(a) => Answer::Fatal(fatal(
            a.correlation,
            ErrorCode::INVALID_REQUEST,
            if b.config.sasl_mechanisms.is_empty() {
                "this server authenticates no one"
            } else {
                "the connection is authenticated already: a session is renewed by connecting again"
            },
        )),
        Request::Ping(p) => Answer::Frame(frame_of(&proto::Pong {
            correlation: p.correlation,
            nonce: p.nonce,
        })),
        Request::Metadata(m) => Answer::Frame(frame_of(&metadata(b, c, m).await)),
        Request::CreateTopic(t) => Answer::Frame(frame_of(&create_topic(b, c, client_id, t).await)),
        Request::DeleteTopic(t) => Answer::Frame(frame_of(&delete_topic(b, c, client_id, t).await)),
        Request::InitProducer(r) => {
            let resp = bridge::init_producer_id(
                b,
                c,
                client_id,
                InitProducerIdRequest::default()
                    .with_transactional_id(None)
                    .with_producer_id(ProducerId(-1))
                    .with_producer_epoch(-1)
                    .with_transaction_timeout_ms(-1),
            )
            .await;
            Answer::Frame(frame_of(&proto::InitProducerResponse {
                correlation: r.correlation,
                error: from_kafka(resp.error_code),
                producer_id: resp.producer_id.0,
                producer_epoch: resp.producer_epoch,
            }))
        }
        Request::Produce(p) => produce(b, c, client_id, p).await,
        Request::Fetch(f) => Answer::Frame(fetch(b, c, client_id, f).await),
        Request::ListOffsets(l) => Answer::Frame(frame_of(&list_offsets(b, c, client_id, l).await)),
        Request::CommitOffsets(o) => {
            Answer::Frame(frame_of(&commit_offsets(b, c, client_id, o).await))
        }
        Request::FetchOffsets(o) => Answer::Frame(frame_of(&fetch_offsets(b, c, o))),
        Request::Subscribe(r) if !bridge::may(b, c, Op::Read, Rt::Topic, &r.topic) => {
            Answer::Frame(frame_of(&proto::SubscribeResponse {
                correlation: r.correlation,
                error: ErrorCode::UNAUTHORIZED,
                subscription: r.subscription,
                offset: -1,
                high_watermark: -1,
                message: format!("{} may not read topic {}", c.principal, r.topic),
            }))
        }
        Request::Subscribe(r) => s.subs.subscribe(b, c, &s.session.client_id, r).await,
        Request::Credit(r) => {
            s.subs.credit(&r);
            Answer::Nothing
        }
        Request::Unsubscribe(r) => s.subs.unsubscribe(&r),
        Request::FindCoordinator(f) if !bridge::may(b, c, Op::Describe, Rt::Group, &f.group) => {
            Answer::Frame(frame_of(&proto::FindCoordinatorResponse {
                correlation: f.correlation,
                error: ErrorCode::UNAUTHORIZED,
                ..Default::default()
            }))
        }
        Request::FindCoordinator(f) => Answer::Frame(frame_of(&groups::find_coordinator(b, f))),
        Request::JoinGroup(j) if !bridge::may(b, c, Op::Read, Rt::Group, &j.group) => {
            Answer::Frame(frame_of(&proto::JoinGroupResponse {
                correlation: j.correlation,
                error: ErrorCode::UNAUTHORIZED,
                generation: -1,
                member_id: j.member_id,
                assignment: Vec::new(),
            }))
        }
        Request::JoinGroup(j) => {
            Answer::Frame(frame_of(&groups::join_group(b, c, client_id, j).await))
        }
        Request::Heartbeat(h) if !bridge::may(b, c, Op::Read, Rt::Group, &h.group) => {
            Answer::Frame(frame_of(&proto::HeartbeatResponse(group_refused(
                h.correlation,
            ))))
        }
        Request::Heartbeat(h) => Answer::Frame(frame_of(&groups::heartbeat(b, h).await)),
        Request::LeaveGroup(l) if !bridge::may(b, c, Op::Read, Rt::Group, &l.group) => {
            Answer::Frame(frame_of(&proto::LeaveGroupResponse(group_refused(
                l.correlation,
            ))))
        }
        Request::LeaveGroup(l) => Answer::Frame(frame_of(&groups::leave_group(b, l).await)),
    }
}

fn group_refused(correlation: u32) -> proto::GroupResponse {
    proto::GroupResponse {
        correlation,
        error: ErrorCode::UNAUTHORIZED,
    }
}

/// UNKNOWN_TOPIC from Kafka's UNKNOWN_TOPIC_OR_PARTITION when the topic
/// exists: then it is the partition that does not.
pub(super) fn refine(b: &Broker, topic: &str, code: i16) -> ErrorCode {
    let e = from_kafka(code);
    if e == ErrorCode::UNKNOWN_TOPIC && b.node.catalog.topic(topic).is_some() {
        ErrorCode::UNKNOWN_PARTITION
    } else {
        e
    }
}

pub(super) fn partition_index(p: u32) -> i32 {
    // an index past i32::MAX names no partition: the handler says so
    i32::try_from(p).unwrap_or(i32::MAX)
}

/// The cluster's nodes and the topics asked for (every topic the client may
/// describe when none are named), as Kafka's Metadata answers them: a
/// named topic the client may not describe is UNAUTHORIZED, and one that
/// does not exist is created only if it may create it.
async fn metadata(b: &Broker, c: &Client, m: proto::Metadata) -> proto::MetadataResponse {
    let describable = |name: &str| bridge::may(b, c, Op::Describe, Rt::Topic, name);
    let nodes = crate::brokers::native_agents(&b.node.catalog, &b.config)
        .into_iter()
        .filter_map(|e| {
            Some(proto::Node {
                id: u32::try_from(e.id).ok()?,
                host: e.host,
                port: u16::try_from(e.port).ok()?,
                rack: e.rack.unwrap_or_default(),
            })
        })
        .collect();
    // answers in the order asked; all topics when none are named
    let wanted: Vec<Result<Arc<metastore::TopicInfo>, (String, ErrorCode)>> = if m.topics.is_empty()
    {
        b.node
            .catalog
            .topics()
            .into_iter()
            .filter(|t| describable(&t.name))
            .map(Ok)
            .collect()
    } else {
        let mut found = Vec::with_capacity(m.topics.len());
        for name in &m.topics {
            let t = match b.node.catalog.topic(name) {
                _ if !describable(name) => {
                    found.push(Err((name.clone(), ErrorCode::UNAUTHORIZED)));
                    continue;
                }
                Some(t) => Ok(t),
                None if b.config.auto_create_topics
                    && (bridge::may(b, c, Op::Create, Rt::Topic, name)
                        || bridge::may(
                            b,
                            c,
                            Op::Create,
                            Rt::Cluster,
                            dataplane::policy::authz::CLUSTER_RESOURCE,
                        )) =>
                {
                    b.node.auto_create(name).await
                }
                None => Err(metastore::MetaError::UnknownTopic { name: name.clone() }),
            };
            found.push(t.map_err(|e| {
                let code = from_kafka(crate::codes::meta_error(&e).code());
                (name.clone(), code)
            }));
        }
        found
    };
    let ids = |v: &[u64]| v.iter().filter_map(|r| u32::try_from(*r).ok()).collect();
    let mut topics = Vec::with_capacity(wanted.len());
    for t in wanted {
        let t = match t {
            Ok(t) => t,
            Err((name, error)) => {
                topics.push(proto::TopicMetadata {
                    name,
                    error,
                    partitions: Vec::new(),
                });
                continue;
            }
        };
        topics.push(proto::TopicMetadata {
            name: t.name.clone(),
            error: ErrorCode::NONE,
            partitions: t
                .partitions
                .iter()
                .map(|p| proto::PartitionMetadata {
                    index: u32::try_from(p.index).unwrap_or(0),
                    leader: p.leader.and_then(|l| i32::try_from(l).ok()).unwrap_or(-1),
                    leader_epoch: p.leader_epoch,
                    replicas: ids(&p.replicas),
                    in_sync: ids(&p.isr),
                })
                .collect(),
        });
    }
    proto::MetadataResponse {
        correlation: m.correlation,
        nodes,
        topics,
    }
}

async fn create_topic(
    b: &Broker,
    c: &Client,
    client_id: &str,
    t: proto::CreateTopic,
) -> proto::CreateTopicResponse {
    let topic = CreatableTopic::default()
        .with_name(TopicName(s(t.name)))
        .with_num_partitions(t.partitions)
        .with_replication_factor(t.replication_factor)
        .with_configs(
            t.configs
                .into_iter()
                .map(|(k, v)| {
                    CreatableTopicConfig::default()
                        .with_name(s(k))
                        .with_value(Some(s(v)))
                })
                .collect(),
        );
    let resp = bridge::create_topics(
        b,
        c,
        client_id,
        CreateTopicsRequest::default()
            .with_topics(vec![topic])
            .with_timeout_ms(30_000),
    )
    .await;
    let (error, message) = resp
        .topics
        .first()
        .map(|r| {
            (
                from_kafka(r.error_code),
                r.error_message.as_ref().map(|m| m.to_string()),
            )
        })
        .unwrap_or((ErrorCode::UNKNOWN_SERVER_ERROR, None));
    proto::CreateTopicResponse(proto::TopicResponse {
        correlation: t.correlation,
        error,
        message: message.unwrap_or_default(),
    })
}

async fn delete_topic(
    b: &Broker,
    c: &Client,
    client_id: &str,
    t: proto::DeleteTopic,
) -> proto::DeleteTopicResponse {
    let resp = bridge::delete_topics(
        b,
        c,
        client_id,
        DeleteTopicsRequest::default()
            .with_topic_names(vec![TopicName(s(t.name))])
            .with_timeout_ms(30_000),
    )
    .await;
    let (error, message) = resp
        .responses
        .first()
        .map(|r| {
            (
                from_kafka(r.error_code),
                r.error_message.as_ref().map(|m| m.to_string()),
            )
        })
        .unwrap_or((ErrorCode::UNKNOWN_SERVER_ERROR, None));
    proto::DeleteTopicResponse(proto::TopicResponse {
        correlation: t.correlation,
        error,
        message: message.unwrap_or_default(),
    })
}

async fn produce(b: &Broker, c: &Client, client_id: &str, p: proto::Produce) -> Answer {
    let Some(acks) = proto::Acks::from_wire(p.acks) else {
        let topics = p
            .topics
            .into_iter()
            .map(|t| proto::TopicProduced {
                partitions: t
                    .partitions
                    .iter()
                    .map(|q| proto::PartitionProduced {
                        partition: q.partition,
                        error: ErrorCode::INVALID_ACKS,
                        base_offset: -1,
                        log_append_time_ms: -1,
                        log_start_offset: -1,
                        message: format!("acks {} is not 0, 1 or -1", p.acks),
                    })
                    .collect(),
                name: t.name,
            })
            .collect();
        return Answer::Frame(frame_of(&proto::ProduceResponse {
            correlation: p.correlation,
            topics,
        }));
    };
    let topic_data = p
        .topics
        .into_iter()
        .map(|t| {
            TopicProduceData::default()
                .with_name(TopicName(s(t.name)))
                .with_partition_data(
                    t.partitions
                        .into_iter()
                        .map(|q| {
                            PartitionProduceData::default()
                                .with_index(partition_index(q.partition))
                                .with_records(Some(q.batch))
                        })
                        .collect(),
                )
        })
        .collect();
    let req = ProduceRequest::default()
        .with_acks(i16::from(acks.to_wire()))
        .with_timeout_ms(i32::try_from(p.timeout_ms).unwrap_or(i32::MAX))
        .with_topic_data(topic_data);
    let Some(resp) = bridge::produce(b, c, client_id, req).await else {
        return Answer::Nothing;
    };
    if acks == proto::Acks::None {
        return Answer::Nothing;
    }
    let topics = resp
        .responses
        .into_iter()
        .map(|t| {
            let name = t.name.to_string();
            proto::TopicProduced {
                partitions: t
                    .partition_responses
                    .into_iter()
                    .map(|r| proto::PartitionProduced {
                        partition: u32::try_from(r.index).unwrap_or(u32::MAX),
                        error: refine(b, &name, r.error_code),
                        base_offset: r.base_offset,
                        log_append_time_ms: r.log_append_time_ms,
                        log_start_offset: r.log_start_offset,
                        message: r.error_message.map(|m| m.to_string()).unwrap_or_default(),
                    })
                    .collect(),
                name,
            }
        })
        .collect();
    Answer::Frame(frame_of(&proto::ProduceResponse {
        correlation: p.correlation,
        topics,
    }))
}

async fn fetch(b: &Broker, c: &Client, client_id: &str, f: proto::Fetch) -> ResponseFrame {
    let topics = f
        .topics
        .into_iter()
        .map(|t| {
            FetchTopic::default()
                .with_topic(TopicName(s(t.name)))
                .with_partitions(
                    t.partitions
                        .into_iter()
                        .map(|q| {
                            FetchPartition::default()
                                .with_partition(partition_index(q.partition))
                                .with_fetch_offset(q.offset)
                                .with_current_leader_epoch(-1)
                                .with_log_start_offset(-1)
                                .with_partition_max_bytes(
                                    i32::try_from(q.max_bytes).unwrap_or(i32::MAX),
                                )
                        })
                        .collect(),
                )
        })
        .collect();
    let req = FetchRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_max_wait_ms(i32::try_from(f.max_wait_ms).unwrap_or(i32::MAX))
        .with_min_bytes(i32::try_from(f.min_bytes).unwrap_or(i32::MAX))
        .with_max_bytes(i32::try_from(f.max_bytes).unwrap_or(i32::MAX))
        .with_session_id(0)
        .with_session_epoch(-1)
        .with_topics(topics);
    let (resp, records, wait) = bridge::fetch(b, c, client_id, req).await;
    // over a consumer quota: the stream stays unread for the wait
    c.throttle
        .fetch_max(wait, std::sync::atomic::Ordering::Relaxed);
    // Everything but the records is encoded here; each partition's records
    // are spliced in after its head, from the log.
    let mut frame = ResponseFrame::native(proto::op::FETCH | proto::RESPONSE);
    let mut head = BytesMut::with_capacity(64);
    head.put_u32(f.correlation);
    head.put_count(resp.responses.len());
    let mut records = records.into_iter();
    for t in &resp.responses {
        let name = t.topic.as_str();
        head.put_string(name);
        head.put_count(t.partitions.len());
        for p in &t.partitions {
            let r = records
                .next()
                .unwrap_or_else(dataplane::backend::Records::empty);
            let part = proto::PartitionFetched {
                partition: u32::try_from(p.partition_index).unwrap_or(u32::MAX),
                error: refine(b, name, p.error_code),
                high_watermark: p.high_watermark,
                log_start_offset: p.log_start_offset,
                records: Bytes::new(),
            };
            proto::FetchResponse::put_partition_head(&mut head, &part, r.len());
            if !r.is_empty() {
                frame.push_bytes(std::mem::take(&mut head).freeze());
                frame.push_records(r);
            }
        }
    }
    frame.push_bytes(head.freeze());
    frame
}

async fn list_offsets(
    b: &Broker,
    c: &Client,
    client_id: &str,
    l: proto::ListOffsets,
) -> proto::ListOffsetsResponse {
    let mut out: Vec<Option<proto::OffsetFound>> = Vec::with_capacity(l.partitions.len());
    let mut topics: Vec<ListOffsetsTopic> = Vec::new();
    for (topic, partition, spec) in &l.partitions {
        if proto::OffsetSpec::from_wire(*spec).is_none() {
            out.push(Some(proto::OffsetFound {
                topic: topic.clone(),
                partition: *partition,
                error: ErrorCode::INVALID_REQUEST,
                offset: -1,
                timestamp: -1,
            }));
            continue;
        }
        out.push(None);
        let p = ListOffsetsPartition::default()
            .with_partition_index(partition_index(*partition))
            .with_current_leader_epoch(-1)
            .with_timestamp(*spec);
        // one request entry per partition asked, in order, so the answers
        // line up with the question
        topics.push(
            ListOffsetsTopic::default()
                .with_name(TopicName(s(topic.clone())))
                .with_partitions(vec![p]),
        );
    }
    let resp = bridge::list_offsets(
        b,
        c,
        client_id,
        ListOffsetsRequest::default()
            .with_replica_id(BrokerId(-1))
            .with_topics(topics),
    )
    .await;
    let mut answers = resp
        .topics
        .into_iter()
        .flat_map(|t| {
            let name = t.name.to_string();
            t.partitions.into_iter().map(move |p| (name.clone(), p))
        })
        .map(|(name, p)| proto::OffsetFound {
            error: refine(b, &name, p.error_code),
            topic: name,
            partition: u32::try_from(p.partition_index).unwrap_or(u32::MAX),
            offset: p.offset,
            timestamp: p.timestamp,
        });
    let partitions = out
        .into_iter()
        .map(|o| {
            o.or_else(|| answers.next()).unwrap_or(proto::OffsetFound {
                error: ErrorCode::UNKNOWN_SERVER_ERROR,
                offset: -1,
                timestamp: -1,
                ..Default::default()
            })
        })
        .collect();
    proto::ListOffsetsResponse {
        correlation: l.correlation,
        partitions,
    }
}

async fn commit_offsets(
    b: &Broker,
    c: &Client,
    client_id: &str,
    o: proto::CommitOffsets,
) -> proto::CommitOffsetsResponse {
    let member = !o.member_id.is_empty() || o.generation >= 0;
    let refused = if o.group.is_empty() {
        Some(ErrorCode::INVALID_GROUP)
    } else if member && !groups::coordinates(b, &o.group) {
        // a member's commit is checked against the group's members, which
        // only its coordinator knows
        Some(ErrorCode::NOT_COORDINATOR)
    } else {
        None
    };
    if let Some(error) = refused {
        return proto::CommitOffsetsResponse {
            correlation: o.correlation,
            partitions: o
                .offsets
                .into_iter()
                .map(|x| (x.topic, x.partition, error))
                .collect(),
        };
    }
    // one topic entry per offset, in order, so answers line up
    let topics = o
        .offsets
        .iter()
        .map(|x| {
            OffsetCommitRequestTopic::default()
                .with_name(TopicName(s(x.topic.clone())))
                .with_partitions(vec![OffsetCommitRequestPartition::default()
                    .with_partition_index(partition_index(x.partition))
                    .with_committed_offset(x.offset)
                    .with_committed_leader_epoch(-1)
                    .with_committed_metadata(Some(s(x.metadata.clone())))])
        })
        .collect();
    let resp = bridge::offset_commit(
        b,
        c,
        client_id,
        OffsetCommitRequest::default()
            .with_group_id(GroupId(s(o.group)))
            .with_generation_id_or_member_epoch(o.generation)
            .with_member_id(s(o.member_id))
            .with_topics(topics),
    )
    .await;
    let mut answers = resp
        .topics
        .into_iter()
        .flat_map(|t| t.partitions.into_iter().map(|p| p.error_code));
    proto::CommitOffsetsResponse {
        correlation: o.correlation,
        partitions: o
            .offsets
            .into_iter()
            .map(|x| {
                let code = answers.next().map(|c| {
                    if member {
                        match from_kafka_for_member(c) {
                            ErrorCode::UNKNOWN_TOPIC => refine(b, &x.topic, c),
                            other => other,
                        }
                    } else {
                        refine(b, &x.topic, c)
                    }
                });
                (
                    x.topic,
                    x.partition,
                    code.unwrap_or(ErrorCode::UNKNOWN_SERVER_ERROR),
                )
            })
            .collect(),
    }
}

fn fetch_offsets(b: &Broker, c: &Client, o: proto::FetchOffsets) -> proto::FetchOffsetsResponse {
    let error = if o.group.is_empty() {
        ErrorCode::INVALID_GROUP
    } else if !bridge::may(b, c, Op::Describe, Rt::Group, &o.group) {
        ErrorCode::UNAUTHORIZED
    } else {
        ErrorCode::NONE
    };
    let committed = b.node.catalog.committed_offsets(&o.group);
    let offsets = o
        .partitions
        .into_iter()
        .map(|(topic, partition)| {
            let error = if error == ErrorCode::NONE
                && !bridge::may(b, c, Op::Describe, Rt::Topic, &topic)
            {
                ErrorCode::UNAUTHORIZED
            } else {
                error
            };
            let found = (error == ErrorCode::NONE)
                .then(|| committed.get(&(topic.clone(), partition_index(partition))))
                .flatten();
            (
                proto::CommittedOffset {
                    offset: found.map(|c| c.offset).unwrap_or(-1),
                    metadata: found.and_then(|c| c.metadata.clone()).unwrap_or_default(),
                    topic,
                    partition,
                },
                error,
            )
        })
        .collect();
    proto::FetchOffsetsResponse {
        correlation: o.correlation,
        offsets,
    }
}
