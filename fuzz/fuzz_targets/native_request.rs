//! Any bytes as a native-protocol frame after a connection's hello: the
//! first byte is the operation, the rest the body. The gateway decodes and
//! serves them (against the real backends: disk logs and an embedded
//! metastore in a scratch directory) without panicking or over-allocating;
//! what does not decode is answered with an error frame.
#![no_main]

use bytes::Bytes;
use libfuzzer_sys::fuzz_target;

#[path = "fixture.rs"]
mod fixture;
use fixture::fixture;

// The allocator the broker runs with: wire-declared reservations cost
// address space only (see `gateway::alloc`).
#[global_allocator]
static ALLOC: gateway::alloc::WireSafeAlloc = gateway::alloc::WireSafeAlloc;

fuzz_target!(|data: &[u8]| {
    let Some((&op, body)) = data.split_first() else {
        return;
    };
    let f = fixture();
    let body = Bytes::copy_from_slice(body);
    f.rt.block_on(async {
        // fetches long-poll; a short bound keeps each run quick
        let _ = tokio::time::timeout(
            std::time::Duration::from_millis(50),
            gateway::native::serve_frame(&f.broker.broker, &f.client, "fuzz", op, body),
        )
        .await;
    });
});
