//! Helpers shared by the state machine's unit tests.
use super::*;
use crate::types::{AgentAddrs, AgentRegistration, CreateTopic};

pub const T0: i64 = 1_700_000_000_000;

pub fn apply(state: &mut MetaState, cmd: Command) -> CommandResult {
    let mut events = Vec::new();
    state.apply(T0, cmd, &mut events)
}

pub fn apply_at(state: &mut MetaState, now: i64, cmd: Command) -> (CommandResult, Vec<MetaEvent>) {
    let mut events = Vec::new();
    let r = state.apply(now, cmd, &mut events);
    (r, events)
}

pub fn register(state: &mut MetaState, id: AgentId) {
    let registration = AgentRegistration {
        id,
        addrs: AgentAddrs {
            connect: None,
            kafka: Some(format!("127.0.0.1:{}", 9000 + id)),
            ..AgentAddrs::default()
        },
        rack: None,
        instance: None,
    };
    apply(state, Command::RegisterAgent { registration }).expect("register");
}

pub fn with_agents(n: u64) -> MetaState {
    let mut s = MetaState::default();
    for id in 1..=n {
        register(&mut s, id);
    }
    s
}

pub fn create(state: &mut MetaState, name: &str, partitions: i32, rf: i16) -> TopicInfo {
    let cmd = Command::CreateTopic {
        id: Uuid::new_v4(),
        spec: CreateTopic::new(name, partitions, rf),
        validate_only: false,
    };
    match apply(state, cmd) {
        Ok(CommandOutput::Topic(t)) => t,
        other => panic!("create {name}: {other:?}"),
    }
}
