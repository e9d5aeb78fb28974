//! Helpers shared by the gateway's socket-level tests.
#![allow(clippy::unwrap_used, clippy::expect_used, dead_code)]

use bytes::{Buf, BufMut, Bytes, BytesMut};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};
use metastore::Security;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Sends one request on `s` and reads its response.
pub async fn roundtrip<Req: Encodable, Resp: Decodable>(
    s: &mut TcpStream,
    api: ApiKey,
    version: i16,
    req: &Req,
) -> Resp {
    let mut body = BytesMut::new();
    RequestHeader::default()
        .with_request_api_key(api as i16)
        .with_request_api_version(version)
        .with_correlation_id(42)
        .with_client_id(Some(StrBytes::from_static_str("it")))
        .encode(&mut body, api.request_header_version(version))
        .unwrap();
    req.encode(&mut body, version).unwrap();
    let mut frame = BytesMut::new();
    frame.put_i32(body.len() as i32);
    frame.extend_from_slice(&body);
    s.write_all(&frame).await.unwrap();
    let len = s.read_i32().await.unwrap();
    let mut buf = vec![0u8; len as usize];
    s.read_exact(&mut buf).await.unwrap();
    let mut buf = Bytes::from(buf);
    let header = ResponseHeader::decode(&mut buf, api.response_header_version(version)).unwrap();
    assert_eq!(header.correlation_id, 42);
    let resp = Resp::decode(&mut buf, version).unwrap();
    assert!(!buf.has_remaining(), "the size prefix matches the body");
    resp
}

/// Sends a Metadata v12 request and returns whether the broker closed the
/// connection instead of answering.
pub async fn metadata_closes(s: &mut TcpStream) -> bool {
    let mut frame = Vec::new();
    RequestHeader::default()
        .with_request_api_key(ApiKey::Metadata as i16)
        .with_request_api_version(12)
        .with_correlation_id(9)
        .encode(&mut frame, ApiKey::Metadata.request_header_version(12))
        .unwrap();
    MetadataRequest::default().encode(&mut frame, 12).unwrap();
    s.write_all(&(frame.len() as i32).to_be_bytes())
        .await
        .unwrap();
    s.write_all(&frame).await.unwrap();
    let mut buf = [0u8; 1];
    s.read(&mut buf).await.unwrap() == 0
}

/// ApiVersions' error code on `s`.
pub async fn api_versions_code(s: &mut TcpStream) -> i16 {
    let v: ApiVersionsResponse =
        roundtrip(s, ApiKey::ApiVersions, 3, &ApiVersionsRequest::default()).await;
    v.error_code
}

/// Gives each user a SCRAM-SHA-512 credential for `password`.
pub async fn add_users(meta: &metastore::Metastore, users: &[&str], password: &str) {
    for user in users {
        let m = gateway::sasl::ScramMechanism::Sha512;
        let c = security::scram::credential(m, password, 4096).unwrap();
        meta.upsert_scram_credential(user, m, c).await.unwrap();
    }
}
