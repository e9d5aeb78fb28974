//! Any bytes as a native-protocol frame after a connection's hello: the
//! first byte is the operation, the rest the body. The gateway decodes and
//! serves them (against the real backends: disk logs and an embedded
//! metastore in a scratch directory) without panicking or over-allocating;
//! what does not decode is answered with an error frame.
#![no_main]

use std::sync::OnceLock;

use bytes::Bytes;
use gateway::kafka::api::Client;
use gateway::testing::{Logs, TestBroker};
use libfuzzer_sys::fuzz_target;

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
