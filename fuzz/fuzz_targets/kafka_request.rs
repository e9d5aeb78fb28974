//! Any bytes as a Kafka request frame: the gateway decodes and dispatches
//! them (against the real backends: disk logs and an embedded metastore in a
//! scratch directory) without panicking or over-allocating; anything
//! malformed is an error that closes the connection.
#![no_main]

use std::sync::OnceLock;

use bytes::Bytes;
use gateway::kafka::api::{dispatch, Client};
use gateway::testing::{Logs, TestBroker};
use libfuzzer_sys::fuzz_target;

// The allocator the broker runs with: wire-declared reservations cost
// address space only (see `gateway::alloc`).
#[global_allocator]
static ALLOC: gateway::alloc::WireSafeAlloc = gateway::alloc::WireSafeAlloc;

struct Fixture {
    rt: tokio::runtime::Runtime,
    broker: TestBroker,
    client: Client,
}

fn fixture() -> &'static Fixture {
    static F: OnceLock<Fixture> = OnceLock::new();
    F.get_or_init(|| {
        // A worker thread keeps the metastore and the agent's lease going
        // between inputs.
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .expect("runtime");
        let broker = rt.block_on(TestBroker::start(Logs::Disk));
        let client = Client::direct("/127.0.0.1".into(), 1);
        Fixture { rt, broker, client }
    })
}

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
