use super::*;

#[test]
fn snapshots_travel_in_chunks_that_fit_in_one_request() {
    let config = raft_config(&MetastoreConfig::default()).expect("valid");
    assert_eq!(
        config.snapshot_max_chunk_size,
        crate::network::SNAPSHOT_CHUNK_BYTES
    );
}
