//! The server's side of decoding: any request body from its operation code.

use bytes::Bytes;

use super::codec::Message;
use super::connection::{Authenticate, Hello, Ping};
use super::fetch::{Fetch, ListOffsets};
use super::group::{
    CommitOffsets, FetchOffsets, FindCoordinator, Heartbeat, JoinGroup, LeaveGroup,
};
use super::metadata::{CreateTopic, DeleteTopic, Metadata};
use super::op;
use super::produce::{InitProducer, Produce};
use super::subscribe::{Credit, Subscribe, Unsubscribe};
use super::txn::{
    AddTxnOffsets, AddTxnPartitions, EndTxn, FetchIsolated, FindTxnCoordinator, InitTxn,
    TxnOffsetCommit, TxnProduce,
};
use crate::wire::DecodeError;

/// Any request a server may receive, decoded from its operation code and body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Request {
    Hello(Hello),
    Authenticate(Authenticate),
    Ping(Ping),
    Metadata(Metadata),
    CreateTopic(CreateTopic),
    DeleteTopic(DeleteTopic),
    InitProducer(InitProducer),
    Produce(Produce),
    Fetch(Fetch),
    ListOffsets(ListOffsets),
    CommitOffsets(CommitOffsets),
    FetchOffsets(FetchOffsets),
    Subscribe(Subscribe),
    Credit(Credit),
    Unsubscribe(Unsubscribe),
    FindCoordinator(FindCoordinator),
    JoinGroup(JoinGroup),
    Heartbeat(Heartbeat),
    LeaveGroup(LeaveGroup),
    FindTxnCoordinator(FindTxnCoordinator),
    InitTxn(InitTxn),
    AddTxnPartitions(AddTxnPartitions),
    AddTxnOffsets(AddTxnOffsets),
    TxnOffsetCommit(TxnOffsetCommit),
    EndTxn(EndTxn),
    TxnProduce(TxnProduce),
    FetchIsolated(FetchIsolated),
}

impl Request {
    pub fn decode(op: u8, body: Bytes) -> Result<Request, DecodeError> {
        Ok(match op {
            op::HELLO => Request::Hello(Hello::decode_body(body)?),
            op::AUTHENTICATE => Request::Authenticate(Authenticate::decode_body(body)?),
            op::PING => Request::Ping(Ping::decode_body(body)?),
            op::METADATA => Request::Metadata(Metadata::decode_body(body)?),
            op::CREATE_TOPIC => Request::CreateTopic(CreateTopic::decode_body(body)?),
            op::DELETE_TOPIC => Request::DeleteTopic(DeleteTopic::decode_body(body)?),
            op::INIT_PRODUCER => Request::InitProducer(InitProducer::decode_body(body)?),
            op::PRODUCE => Request::Produce(Produce::decode_body(body)?),
            op::FETCH => Request::Fetch(Fetch::decode_body(body)?),
            op::LIST_OFFSETS => Request::ListOffsets(ListOffsets::decode_body(body)?),
            op::COMMIT_OFFSETS => Request::CommitOffsets(CommitOffsets::decode_body(body)?),
            op::FETCH_OFFSETS => Request::FetchOffsets(FetchOffsets::decode_body(body)?),
            op::SUBSCRIBE => Request::Subscribe(Subscribe::decode_body(body)?),
            op::CREDIT => Request::Credit(Credit::decode_body(body)?),
            op::UNSUBSCRIBE => Request::Unsubscribe(Unsubscribe::decode_body(body)?),
            op::FIND_COORDINATOR => Request::FindCoordinator(FindCoordinator::decode_body(body)?),
            op::JOIN_GROUP => Request::JoinGroup(JoinGroup::decode_body(body)?),
            op::HEARTBEAT => Request::Heartbeat(Heartbeat::decode_body(body)?),
            op::LEAVE_GROUP => Request::LeaveGroup(LeaveGroup::decode_body(body)?),
            op::FIND_TXN_COORDINATOR => {
                Request::FindTxnCoordinator(FindTxnCoordinator::decode_body(body)?)
            }
            op::INIT_TXN => Request::InitTxn(InitTxn::decode_body(body)?),
            op::ADD_TXN_PARTITIONS => {
                Request::AddTxnPartitions(AddTxnPartitions::decode_body(body)?)
            }
            op::ADD_TXN_OFFSETS => Request::AddTxnOffsets(AddTxnOffsets::decode_body(body)?),
            op::TXN_OFFSET_COMMIT => Request::TxnOffsetCommit(TxnOffsetCommit::decode_body(body)?),
            op::END_TXN => Request::EndTxn(EndTxn::decode_body(body)?),
            op::TXN_PRODUCE => Request::TxnProduce(TxnProduce::decode_body(body)?),
            op::FETCH_ISOLATED => Request::FetchIsolated(FetchIsolated::decode_body(body)?),
            other => return Err(DecodeError::UnknownOp(other)),
        })
    }
}
