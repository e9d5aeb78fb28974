//! Framing and versions: every advertised API answers in every advertised
//! version, and hostile or malformed frames fail without panicking or
//! aborting the process.

use std::sync::OnceLock;

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::{Decodable, StrBytes};
use kafka_protocol::records::Compression;
use proptest::prelude::*;

use super::test_support::*;
use super::{dispatch, DispatchError};
use crate::testing::{Logs, TestBroker};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn api_versions_advertises_every_api_and_answers_unknown_versions_in_v0() {
    let t = TestBroker::start(Logs::Disk).await;
    let b = &t.broker;
    let resp: ApiVersionsResponse =
        call(b, ApiKey::ApiVersions, 3, &ApiVersionsRequest::default()).await;
    assert_eq!(resp.error_code, 0);
    assert_eq!(
        resp.api_keys.len(),
        crate::kafka::versions::supported().len()
    );
    // A client newer than us: the answer is v0-shaped with UNSUPPORTED_VERSION and our ranges.
    let mut f = BytesMut::new();
    f.extend_from_slice(&[0, 18, 0, 99, 0, 0, 0, 7, 0, 0]);
    let resp = dispatch(b, &client(), f.freeze())
        .await
        .expect("served")
        .expect("response");
    let mut bytes = resp.to_bytes().expect("bytes").slice(4..);
    let _ = ResponseHeader::decode(&mut bytes, 0).expect("header");
    let v0 = ApiVersionsResponse::decode(&mut bytes, 0).expect("v0 body");
    assert_eq!(v0.error_code, 35, "UNSUPPORTED_VERSION");
    assert!(!v0.api_keys.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_advertised_version_of_every_api_answers_a_default_request() {
    let t = TestBroker::start(Logs::Disk).await;
    let b = &t.broker;
    create(b, "t", 1).await;
    macro_rules! each_version {
        ($api:expr, $req:expr) => {{
            let (lo, hi) = crate::kafka::versions::range($api).expect("advertised");
            for v in lo..=hi {
                let Some(f) = frame($api, v, &$req) else {
                    continue;
                };
                match dispatch(b, &client(), f).await {
                    Ok(_) => {}
                    Err(DispatchError::Malformed { .. }) => {}
                    Err(e) => panic!("{:?} v{v}: {e}", $api),
                }
            }
        }};
    }
    each_version!(ApiKey::Metadata, MetadataRequest::default());
    each_version!(
        ApiKey::Produce,
        produce_req("t", 0, batch(&["a"], None, Compression::None), 1)
    );
    each_version!(ApiKey::Fetch, fetch_req("t", 0, 0, 1));
    each_version!(
        ApiKey::ListOffsets,
        ListOffsetsRequest::default().with_topics(vec![
            list_offsets_request::ListOffsetsTopic::default()
                .with_name(TopicName(StrBytes::from_static_str("t")))
                .with_partitions(vec![
                    list_offsets_request::ListOffsetsPartition::default().with_timestamp(-1)
                ])
        ])
    );
    each_version!(ApiKey::FindCoordinator, FindCoordinatorRequest::default());
    each_version!(ApiKey::DescribeGroups, DescribeGroupsRequest::default());
    each_version!(ApiKey::ListGroups, ListGroupsRequest::default());
    each_version!(ApiKey::OffsetFetch, OffsetFetchRequest::default());
    each_version!(ApiKey::OffsetCommit, OffsetCommitRequest::default());
    each_version!(ApiKey::Heartbeat, HeartbeatRequest::default());
    each_version!(ApiKey::LeaveGroup, LeaveGroupRequest::default());
    each_version!(ApiKey::SyncGroup, SyncGroupRequest::default());
    each_version!(ApiKey::InitProducerId, InitProducerIdRequest::default());
    each_version!(ApiKey::DescribeConfigs, DescribeConfigsRequest::default());
    each_version!(ApiKey::DescribeCluster, DescribeClusterRequest::default());
    each_version!(ApiKey::DeleteRecords, DeleteRecordsRequest::default());
    each_version!(
        ApiKey::OffsetForLeaderEpoch,
        OffsetForLeaderEpochRequest::default()
    );
    each_version!(ApiKey::CreatePartitions, CreatePartitionsRequest::default());
    each_version!(ApiKey::DeleteTopics, DeleteTopicsRequest::default());
    each_version!(ApiKey::DeleteGroups, DeleteGroupsRequest::default());
    each_version!(ApiKey::OffsetDelete, OffsetDeleteRequest::default());
    each_version!(ApiKey::AlterConfigs, AlterConfigsRequest::default());
    each_version!(
        ApiKey::IncrementalAlterConfigs,
        IncrementalAlterConfigsRequest::default()
    );
    each_version!(ApiKey::CreateTopics, CreateTopicsRequest::default());
    each_version!(
        ApiKey::DescribeProducers,
        DescribeProducersRequest::default()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_frames_close_the_connection_without_panicking() {
    let t = TestBroker::start(Logs::Disk).await;
    for bad in [
        vec![0u8, 1],
        vec![0x7f, 0x7f, 0, 0, 0, 0, 0, 1],
        vec![0, 3, 0, 9, 0, 0, 0, 1, 0xff, 0xff, 0x7f, 0xff, 0xff, 0xff],
        vec![0, 0, 0, 9, 0, 0, 0, 1, 0, 0, 0x7f, 0xff, 0xff, 0xff, 0, 0],
    ] {
        assert!(dispatch(&t.broker, &client(), Bytes::from(bad))
            .await
            .is_err());
    }
}

/// Kafka ignores bytes after a request's last field, and librdkafka 2.16
/// sends three after its Metadata v12 requests: they must be served.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_with_bytes_after_its_last_field_is_served_as_kafka_does() {
    let t = TestBroker::start(Logs::Disk).await;
    let b = &t.broker;
    let good = frame(ApiKey::Metadata, 12, &MetadataRequest::default()).expect("frame");
    let padded = Bytes::from([&good[..], &[0u8; 3][..]].concat());
    let resp = dispatch(b, &client(), padded)
        .await
        .expect("served")
        .expect("a response");
    let mut bytes = resp.to_bytes().expect("bytes").slice(4..);
    ResponseHeader::decode(&mut bytes, ApiKey::Metadata.response_header_version(12))
        .expect("header");
    let m = MetadataResponse::decode(&mut bytes, 12).expect("body");
    assert_eq!(m.brokers.len(), 1);
    assert_eq!(
        b.metrics
            .trailing_bytes_requests
            .load(std::sync::atomic::Ordering::Relaxed),
        1
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn frames_declaring_billions_of_array_elements_fail_without_aborting() {
    // A few bytes that claim i32::MAX topics: the decoder reserves for the
    // claim before it reads an element (see `crate::alloc`), then fails on
    // the short buffer. The process must survive and the broker keep serving.
    let t = TestBroker::start(Logs::Disk).await;
    let b = &t.broker;
    let classic = [
        &[0u8, 3, 0, 0, 0, 0, 0, 1, 0, 0][..],
        &[0x7f, 0xff, 0xff, 0xff, 0, 0, 0, 1],
    ]
    .concat();
    // Flexible versions use a compact array: unsigned varint of count + 1.
    let compact = [
        &[0u8, 3, 0, 12, 0, 0, 0, 2, 0, 0, 0][..],
        &[0xff, 0xff, 0xff, 0xff, 0x07, 0, 0],
    ]
    .concat();
    for bad in [classic, compact] {
        assert!(dispatch(b, &client(), Bytes::from(bad)).await.is_err());
    }
    let ok: MetadataResponse = call(b, ApiKey::Metadata, 12, &MetadataRequest::default()).await;
    assert_eq!(
        ok.brokers.len(),
        1,
        "the broker still answers after the hostile frames"
    );
}

/// One broker for every generated case: its runtime keeps the metastore and
/// the agent's lease going between cases.
fn shared_broker() -> &'static (tokio::runtime::Runtime, TestBroker) {
    static SHARED: OnceLock<(tokio::runtime::Runtime, TestBroker)> = OnceLock::new();
    SHARED.get_or_init(|| {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .expect("runtime");
        let t = rt.block_on(TestBroker::start(Logs::Disk));
        (rt, t)
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(
        std::env::var("PROPTEST_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(512)
    ))]

    #[test]
    fn random_frames_never_panic_the_dispatcher(
        api in 0i16..80,
        version in 0i16..20,
        body in proptest::collection::vec(any::<u8>(), 0..256),
    ) {
        let (rt, t) = shared_broker();
        rt.block_on(async {
            let mut f = BytesMut::new();
            f.extend_from_slice(&api.to_be_bytes());
            f.extend_from_slice(&version.to_be_bytes());
            f.extend_from_slice(&1i32.to_be_bytes());
            f.extend_from_slice(&body);
            // Any outcome but a panic is fine; bounded waits keep fetches short.
            let _ = tokio::time::timeout(
                std::time::Duration::from_secs(5),
                dispatch(&t.broker, &client(), f.freeze()),
            )
            .await;
        });
    }
}
