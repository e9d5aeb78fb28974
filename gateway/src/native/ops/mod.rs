//! Each native operation, served on the Kafka handlers: one file per
//! operation (or family), as `kafka/api/` has one per API, and [`serve`]
//! to dispatch a decoded request to them.

mod fetch;
mod handshake;
mod metadata;
mod offsets;
mod produce;
mod shared;
mod topics;
mod txn;

use std::sync::Arc;

use bytes::Bytes;
use kafka_protocol::messages::{InitProducerIdRequest, ProducerId};
use metastore::acl::{AclOperation as Op, ResourceType as Rt};
use sdk::proto::{self, ErrorCode, Request};

use super::codes::from_kafka;
use super::{frame_of, groups, Answer, StreamCtx};
use crate::broker::Broker;
use crate::kafka::api::{bridge, Client};

pub(super) use handshake::{authenticate, hello, Settled};
use shared::{fatal, group_refused};
pub(super) use shared::{partition_index, refine};

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
        Request::Metadata(m) => Answer::Frame(frame_of(&metadata::metadata(b, c, m).await)),
        Request::CreateTopic(t) => {
            Answer::Frame(frame_of(&topics::create_topic(b, c, client_id, t).await))
        }
        Request::DeleteTopic(t) => {
            Answer::Frame(frame_of(&topics::delete_topic(b, c, client_id, t).await))
        }
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
        Request::Produce(p) => produce::produce(b, c, client_id, p, None).await,
        Request::TxnProduce(p) => {
            produce::produce(b, c, client_id, p.produce, Some(p.transactional_id)).await
        }
        Request::Fetch(f) => Answer::Frame(fetch::fetch(b, c, client_id, f).await),
        Request::FetchIsolated(f) => Answer::Frame(fetch::fetch_isolated(b, c, client_id, f).await),
        Request::FindTxnCoordinator(f) => Answer::Frame(frame_of(&txn::find_coordinator(b, c, f))),
        Request::InitTxn(r) => Answer::Frame(frame_of(&txn::init(b, c, client_id, r).await)),
        Request::AddTxnPartitions(r) => {
            Answer::Frame(frame_of(&txn::add_partitions(b, c, client_id, r).await))
        }
        Request::AddTxnOffsets(r) => {
            Answer::Frame(frame_of(&txn::add_offsets(b, c, client_id, r).await))
        }
        Request::TxnOffsetCommit(r) => {
            Answer::Frame(frame_of(&txn::offset_commit(b, c, client_id, r).await))
        }
        Request::EndTxn(r) => Answer::Frame(frame_of(&txn::end(b, c, client_id, r).await)),
        Request::ListOffsets(l) => {
            Answer::Frame(frame_of(&offsets::list_offsets(b, c, client_id, l).await))
        }
        Request::CommitOffsets(o) => {
            Answer::Frame(frame_of(&offsets::commit_offsets(b, c, client_id, o).await))
        }
        Request::FetchOffsets(o) => Answer::Frame(frame_of(&offsets::fetch_offsets(b, c, o))),
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
