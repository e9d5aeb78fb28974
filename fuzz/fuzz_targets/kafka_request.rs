//! Any bytes as a Kafka request frame: the gateway decodes and dispatches
//! them (against in-memory backends) without panicking or over-allocating;
//! anything malformed is an error that closes the connection.
#![no_main]

use std::sync::{Arc, OnceLock};

use bytes::Bytes;
use gateway::backend::memory::{MemoryCatalog, MemoryLogFactory};
use gateway::broker::{Broker, BrokerConfig};
use gateway::group::coordinator::Coordinator;
use gateway::kafka::api::dispatch;
use gateway::partition::Partitions;
use libfuzzer_sys::fuzz_target;

// The allocator the broker runs with: wire-declared reservations cost
// address space only (see `gateway::alloc`).
#[global_allocator]
static ALLOC: gateway::alloc::WireSafeAlloc = gateway::alloc::WireSafeAlloc;

struct Fixture {
    rt: tokio::runtime::Runtime,
    broker: Broker,
}

fn fixture() -> &'static Fixture {
    static F: OnceLock<Fixture> = OnceLock::new();
    F.get_or_init(|| {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        let broker = rt.block_on(async {
            let partitions = Arc::new(Partitions::new(
                vec![tokio::runtime::Handle::current()],
                Arc::new(MemoryLogFactory),
            ));
            let config = BrokerConfig::default();
            let groups = Coordinator::start(config.group.clone(), "fuzz".into());
            Broker::new(config, Arc::new(MemoryCatalog::new(1)), partitions, groups)
        });
        Fixture { rt, broker }
    })
}

fuzz_target!(|data: &[u8]| {
    let f = fixture();
    let frame = Bytes::copy_from_slice(data);
    f.rt.block_on(async {
        // Long polls and group joins wait; a short bound keeps each run quick.
        let _ = tokio::time::timeout(
            std::time::Duration::from_millis(50),
            dispatch(&f.broker, "/127.0.0.1", frame),
        )
        .await;
    });
});
