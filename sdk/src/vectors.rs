//! The conformance corpus of the native protocol (`sdk/vectors/`): every
//! message as a frame in hex next to its decoded form in JSON, frames a
//! decoder must refuse with the class of the refusal, scripted
//! conversations, the error-code table, partitioner and record-batch
//! vectors. The files are written from this crate's codecs by
//! `write_vectors` (an ignored test) and checked against them by
//! `the_corpus_holds`, so a change of the protocol changes the corpus first.
//!
//! Regenerate with:
//! `cargo test -p sdk --lib vectors::tests::write_vectors -- --ignored`

use std::path::PathBuf;

use bytes::Bytes;
use serde_json::Value;

use crate::frame::{FrameError, FrameHeader, HEADER_LEN};
use crate::proto::hex_serde::{from_hex, to_hex};
use crate::proto::{self, Message};
use crate::wire::DecodeError;

/// Where the corpus lives.
pub(crate) fn corpus_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("vectors")
}

/// The class of a refusal, as the corpus names it.
pub(crate) fn frame_error_class(e: &FrameError) -> &'static str {
    match e {
        FrameError::Short(_) => "short_header",
        FrameError::BadMagic(_) => "bad_magic",
        FrameError::UnsupportedVersion(_) => "bad_version",
        FrameError::TooLarge { .. } => "too_large",
    }
}

pub(crate) fn decode_error_class(e: &DecodeError) -> &'static str {
    match e {
        DecodeError::Truncated(_) => "truncated",
        DecodeError::NotUtf8(_) => "not_utf8",
        DecodeError::Count { .. } => "count",
        DecodeError::Trailing(_) => "trailing",
        DecodeError::Invalid { .. } => "invalid",
        DecodeError::UnknownOp(_) => "unknown_op",
    }
}

/// Every message of the protocol: its name in the corpus and its type.
/// `$m!(NAME, Type)` is called once per message.
macro_rules! for_each_message {
    ($m:ident) => {
        $m!("Hello", proto::Hello);
        $m!("HelloResponse", proto::HelloResponse);
        $m!("Authenticate", proto::Authenticate);
        $m!("AuthenticateResponse", proto::AuthenticateResponse);
        $m!("Ping", proto::Ping);
        $m!("Pong", proto::Pong);
        $m!("ErrorFrame", proto::ErrorFrame);
        $m!("Metadata", proto::Metadata);
        $m!("MetadataResponse", proto::MetadataResponse);
        $m!("CreateTopic", proto::CreateTopic);
        $m!("CreateTopicResponse", proto::CreateTopicResponse);
        $m!("DeleteTopic", proto::DeleteTopic);
        $m!("DeleteTopicResponse", proto::DeleteTopicResponse);
        $m!("InitProducer", proto::InitProducer);
        $m!("InitProducerResponse", proto::InitProducerResponse);
        $m!("Produce", proto::Produce);
        $m!("ProduceResponse", proto::ProduceResponse);
        $m!("Fetch", proto::Fetch);
        $m!("FetchResponse", proto::FetchResponse);
        $m!("ListOffsets", proto::ListOffsets);
        $m!("ListOffsetsResponse", proto::ListOffsetsResponse);
        $m!("CommitOffsets", proto::CommitOffsets);
        $m!("CommitOffsetsResponse", proto::CommitOffsetsResponse);
        $m!("FetchOffsets", proto::FetchOffsets);
        $m!("FetchOffsetsResponse", proto::FetchOffsetsResponse);
        $m!("Subscribe", proto::Subscribe);
        $m!("SubscribeResponse", proto::SubscribeResponse);
        $m!("Push", proto::Push);
        $m!("Credit", proto::Credit);
        $m!("Unsubscribe", proto::Unsubscribe);
        $m!("UnsubscribeResponse", proto::UnsubscribeResponse);
        $m!("FindCoordinator", proto::FindCoordinator);
        $m!("FindCoordinatorResponse", proto::FindCoordinatorResponse);
        $m!("JoinGroup", proto::JoinGroup);
        $m!("JoinGroupResponse", proto::JoinGroupResponse);
        $m!("Heartbeat", proto::Heartbeat);
        $m!("HeartbeatResponse", proto::HeartbeatResponse);
        $m!("LeaveGroup", proto::LeaveGroup);
        $m!("LeaveGroupResponse", proto::LeaveGroupResponse);
        $m!("FindTxnCoordinator", proto::FindTxnCoordinator);
        $m!(
            "FindTxnCoordinatorResponse",
            proto::FindTxnCoordinatorResponse
        );
        $m!("InitTxn", proto::InitTxn);
        $m!("InitTxnResponse", proto::InitTxnResponse);
        $m!("AddTxnPartitions", proto::AddTxnPartitions);
        $m!("AddTxnPartitionsResponse", proto::AddTxnPartitionsResponse);
        $m!("AddTxnOffsets", proto::AddTxnOffsets);
        $m!("AddTxnOffsetsResponse", proto::AddTxnOffsetsResponse);
        $m!("TxnOffsetCommit", proto::TxnOffsetCommit);
        $m!("TxnOffsetCommitResponse", proto::TxnOffsetCommitResponse);
        $m!("EndTxn", proto::EndTxn);
        $m!("EndTxnResponse", proto::EndTxnResponse);
        $m!("TxnProduce", proto::TxnProduce);
        $m!("TxnProduceResponse", proto::TxnProduceResponse);
        $m!("FetchIsolated", proto::FetchIsolated);
        $m!("FetchIsolatedResponse", proto::FetchIsolatedResponse);
    };
}

/// The message name of an operation code (requests, responses, push and
/// error frame), or `None` for a code the protocol does not define.
pub(crate) fn message_of_op(code: u8) -> Option<&'static str> {
    macro_rules! check {
        ($name:literal, $ty:ty) => {
            if <$ty as Message>::OP == code {
                return Some($name);
            }
        };
    }
    for_each_message!(check);
    None
}

/// Decodes a body as the named message and gives its JSON form.
pub(crate) fn decode_named(name: &str, body: Bytes) -> Result<Value, DecodeError> {
    macro_rules! check {
        ($name:literal, $ty:ty) => {
            if name == $name {
                let m = <$ty as Message>::decode_body(body)?;
                return Ok(serde_json::to_value(&m).expect("messages serialize"));
            }
        };
    }
    for_each_message!(check);
    panic!("no message is named {name}")
}

/// Encodes the JSON form of the named message as a whole frame.
pub(crate) fn encode_named(name: &str, value: &Value) -> Result<Bytes, String> {
    macro_rules! check {
        ($name:literal, $ty:ty) => {
            if name == $name {
                let m: $ty = serde_json::from_value(value.clone()).map_err(|e| e.to_string())?;
                return Ok(m.to_frame());
            }
        };
    }
    for_each_message!(check);
    Err(format!("no message is named {name}"))
}

/// Decodes one whole frame (exactly one, nothing after it) the way the
/// corpus specifies: header (refusing bodies over `max_body`), the body of
/// the length it announces, then the body by the operation code. Gives the
/// message name and its JSON form, or the class of the refusal.
pub(crate) fn decode_frame(frame: &[u8], max_body: u32) -> Result<(&'static str, Value), String> {
    let header = FrameHeader::decode(frame, max_body).map_err(|e| frame_error_class(&e))?;
    let body = &frame[HEADER_LEN..];
    let len = header.len as usize;
    if body.len() < len {
        return Err("truncated".into());
    }
    if body.len() > len {
        return Err("trailing".into());
    }
    let name = message_of_op(header.op).ok_or("unknown_op")?;
    let value = decode_named(name, Bytes::copy_from_slice(body))
        .map_err(|e| decode_error_class(&e).to_string())?;
    Ok((name, value))
}

#[cfg(test)]
mod tests;
