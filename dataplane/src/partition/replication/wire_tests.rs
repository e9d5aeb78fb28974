use super::*;

fn body(frame: &Bytes) -> Bytes {
    let len = body_len(frame[..4].try_into().unwrap(), usize::MAX).unwrap();
    assert_eq!(len, frame.len() - 4, "the prefix is the body's length");
    frame.slice(4..)
}

fn request() -> FetchRequest {
    FetchRequest {
        follower: 3,
        max_wait_ms: 500,
        partitions: (0..3)
            .map(|i| FetchPartition {
                topic_id: Uuid::from_u128(0xabc + i),
                partition: i as i32,
                leader_epoch: 7,
                fetch_offset: 1_000 * i as i64,
                last_fetched_epoch: if i == 0 { -1 } else { 6 },
                max_bytes: 1 << 20,
            })
            .collect(),
    }
}

fn response() -> FetchResponse {
    FetchResponse {
        partitions: vec![
            FetchedPartition {
                topic_id: Uuid::from_u128(1),
                partition: 0,
                error: 0,
                high_watermark: 42,
                log_start_offset: 0,
                diverging: None,
                records: Bytes::from_static(b"batch bytes as the leader holds them"),
            },
            FetchedPartition {
                topic_id: Uuid::from_u128(2),
                partition: 4,
                error: 74,
                high_watermark: -1,
                log_start_offset: -1,
                diverging: Some(Diverging {
                    epoch: 3,
                    end_offset: 900,
                }),
                records: Bytes::new(),
            },
        ],
    }
}

#[test]
fn requests_and_responses_come_back_as_they_were_sent() {
    let r = request();
    assert_eq!(FetchRequest::decode(body(&r.encode())).unwrap(), r);
    let a = response();
    assert_eq!(FetchResponse::decode(body(&a.encode())).unwrap(), a);
}

#[test]
fn a_frame_over_the_limit_is_refused_before_it_is_read() {
    let prefix = (MAX_REQUEST_BYTES as u32 + 1).to_be_bytes();
    assert!(matches!(
        body_len(prefix, MAX_REQUEST_BYTES),
        Err(WireError::TooLarge { .. })
    ));
}

#[test]
fn a_hostile_partition_count_is_refused_without_allocating() {
    let mut b = BytesMut::new();
    b.put_u8(KIND_FETCH);
    b.put_u64(1);
    b.put_u32(0);
    b.put_u32(u32::MAX);
    assert_eq!(
        FetchRequest::decode(b.freeze()),
        Err(WireError::Truncated { what: "partitions" })
    );
    let mut b = BytesMut::new();
    b.put_u8(KIND_FETCH_RESPONSE);
    b.put_u32(u32::MAX);
    assert!(FetchResponse::decode(b.freeze()).is_err());
}

#[test]
fn records_longer_than_the_frame_are_refused() {
    let full = body(&response().encode());
    // cut inside the first partition's records
    let cut = full.slice(..full.len() - 10);
    assert!(matches!(
        FetchResponse::decode(cut),
        Err(WireError::Truncated { .. })
    ));
}

#[test]
fn every_truncation_of_a_frame_is_an_error_not_a_panic() {
    let req = body(&request().encode());
    for n in 0..req.len() {
        assert!(FetchRequest::decode(req.slice(..n)).is_err(), "{n} bytes");
    }
    let resp = body(&response().encode());
    for n in 0..resp.len() {
        assert!(FetchResponse::decode(resp.slice(..n)).is_err(), "{n} bytes");
    }
}

#[test]
fn trailing_bytes_and_unknown_kinds_are_refused() {
    let mut b = BytesMut::from(&body(&request().encode())[..]);
    b.put_u8(0);
    assert_eq!(
        FetchRequest::decode(b.freeze()),
        Err(WireError::Trailing(1))
    );
    let resp = body(&response().encode());
    assert_eq!(FetchRequest::decode(resp), Err(WireError::UnknownKind(2)));
}
