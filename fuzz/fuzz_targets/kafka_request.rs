//! Any bytes as a Kafka request frame: the gateway decodes and dispatches
//! them (against the real backends: disk logs and an embedded metastore in a
//! scratch directory) without panicking or over-allocating; anything
//! malformed is an error that closes the connection.
#![no_main]

use bytes::Bytes;
use gateway::kafka::api::dispatch;
use libfuzzer_sys::fuzz_target;

#[path = "fixture.rs"]
mod fixture;
use fixture::fixture;

// The allocator the broker runs with: wire-declared reservations cost
// address space only (see `gateway::alloc`).
#[global_allocator]
static ALLOC: gateway::alloc::WireSafeAlloc = gateway::alloc::WireSafeAlloc;

fuzz_target!(|data: &[u8]| {
    let f = fixture();
    let frame = Bytes::copy_from_slice(data);
    f.rt.block_on(async {
        // Long polls and group joins wait; a short bound keeps each run quick.
        let _ = tokio::time::timeout(
            std::time::Duration::from_millis(50),
            dispatch(&f.broker.broker, &f.client, frame),
        )
        .await;
    });
});
