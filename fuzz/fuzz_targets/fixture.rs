//! The broker every gateway fuzz target serves its inputs on: the real
//! backends (disk logs and an embedded metastore in a scratch directory),
//! started once per process.

use std::sync::OnceLock;

use gateway::kafka::api::Client;
use gateway::testing::{Logs, TestBroker};
use metastore::Security;

pub struct Fixture {
    pub rt: tokio::runtime::Runtime,
    pub broker: TestBroker,
    pub client: Client,
}

pub fn fixture() -> &'static Fixture {
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
        // a SCRAM user for the SASL inputs of kafka_request
        for m in gateway::sasl::ScramMechanism::ALL {
            let c = security::scram::credential(m, "fuzz-password", 4096).expect("salt");
            rt.block_on(broker.broker.node.catalog.upsert_scram_credential("fuzz", m, c))
                .expect("credential");
        }
        let client = Client::direct("/127.0.0.1".into(), 1);
        Fixture { rt, broker, client }
    })
}
