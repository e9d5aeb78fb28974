use super::*;

#[test]
fn errors_survive_a_trip_through_the_replicated_log() {
    let err = MetaError::InvalidConfig {
        key: "retention.ms".into(),
        reason: "not a number".into(),
    };
    let bytes = serde_json::to_vec(&err).unwrap();
    let back: MetaError = serde_json::from_slice(&bytes).unwrap();
    assert_eq!(back, err);
    assert_eq!(
        back.to_string(),
        "invalid topic config 'retention.ms': not a number"
    );
}

#[test]
fn timeouts_say_when_the_write_may_still_land() {
    let maybe = MetaError::Timeout {
        what: "write".into(),
        maybe_applied: true,
    };
    assert!(maybe.to_string().contains("may still take effect"));
    let not = MetaError::Timeout {
        what: "write".into(),
        maybe_applied: false,
    };
    assert!(!not.to_string().contains("may still"));
    assert!(maybe.is_retriable());
    assert!(!MetaError::TopicAlreadyExists { name: "t".into() }.is_retriable());
}

#[test]
fn only_unanswered_writes_have_an_unknown_outcome() {
    let timeout = |maybe_applied| MetaError::Timeout {
        what: "write".into(),
        maybe_applied,
    };
    assert!(timeout(true).outcome_unknown());
    assert!(MetaError::ShuttingDown.outcome_unknown());
    assert!(!timeout(false).outcome_unknown());
    assert!(!MetaError::NotLeader {
        node_id: 1,
        leader: None
    }
    .outcome_unknown());
    assert!(
        !MetaError::StaleRequest { reason: "r".into() }.outcome_unknown(),
        "the state machine refused it"
    );
}
