use std::collections::BTreeSet;

use metastore::{AgentAddrs, AgentInfo};

use super::*;

fn agent(id: u64, connect: &str, fenced: bool) -> AgentInfo {
    AgentInfo {
        id,
        addrs: AgentAddrs {
            connect: Some(connect.to_owned()),
            ..AgentAddrs::default()
        },
        rack: None,
        registered_ms: 0,
        last_heartbeat_ms: 0,
        fenced,
        incarnation: 1,
        draining: false,
        instance: None,
        lease_generation: 0,
        shut_down: false,
    }
}

#[test]
fn work_reported_by_a_gone_worker_shows_unassigned_but_a_failure_stays() {
    let agents = [
        agent(1, "h:1", false),
        agent(2, "h:2", true),
        agent(3, "h:3", false),
    ];
    let gone = gone_workers(&agents);
    assert_eq!(gone, BTreeSet::from(["h:2".to_owned()]));
    let task = |id, state: &str, worker: &str| TaskState {
        id,
        state: state.into(),
        worker_id: worker.into(),
        trace: None,
    };
    let info = StateInfo {
        name: "c".into(),
        connector: State {
            state: "RUNNING".into(),
            worker_id: "h:2".into(),
            trace: None,
        },
        tasks: vec![
            task(0, "RUNNING", "h:2"),
            task(1, "FAILED", "h:2"),
            task(2, "RUNNING", "h:1"),
        ],
        kind: "sink",
    }
    .unassign_gone(&gone);
    assert_eq!(info.connector.state, "UNASSIGNED");
    let states: Vec<&str> = info.tasks.iter().map(|t| t.state.as_str()).collect();
    assert_eq!(states, ["UNASSIGNED", "FAILED", "RUNNING"]);
}
