use kafka_protocol::messages::*;
use metastore::ClusterControl;

use super::super::test_support::*;
use crate::testing::{Logs, TestBroker};

async fn unregister(b: &crate::broker::Broker, id: i32) -> UnregisterBrokerResponse {
    call(
        b,
        ApiKey::UnregisterBroker,
        0,
        &UnregisterBrokerRequest::default().with_broker_id(BrokerId(id)),
    )
    .await
}

#[tokio::test]
async fn only_an_agent_that_stopped_can_be_unregistered() {
    let t = TestBroker::start(Logs::Disk).await;
    let b = &t.broker;
    b.node
        .catalog
        .register_agent(metastore::AgentRegistration {
            id: 2,
            ..Default::default()
        })
        .await
        .expect("agent 2 registers");
    assert_eq!(
        unregister(b, 2).await.error_code,
        42,
        "INVALID_REQUEST: alive"
    );
    assert_eq!(
        unregister(b, 9).await.error_code,
        102,
        "BROKER_ID_NOT_REGISTERED"
    );
    assert_eq!(unregister(b, -1).await.error_code, 102);
    b.node.catalog.shutdown_agent(2).await.expect("2 stops");
    let done = unregister(b, 2).await;
    assert_eq!(done.error_code, 0, "{:?}", done.error_message);
    assert!(b.node.catalog.agents().iter().all(|a| a.id != 2));
}
