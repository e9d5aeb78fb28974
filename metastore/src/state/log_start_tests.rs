use super::super::testkit::*;
use super::*;
use crate::command::Command;

fn set(
    s: &mut MetaState,
    topic_id: Uuid,
    partition: i32,
    offset: i64,
) -> (CommandResult, Vec<MetaEvent>) {
    apply_at(
        s,
        T0,
        Command::SetLogStart {
            topic_id,
            partition,
            offset,
        },
    )
}

#[test]
fn the_log_start_floor_only_rises() {
    let mut s = with_agents(1);
    let t = create(&mut s, "t", 2, 1);
    assert_eq!(s.log_start(t.id, 0), None);
    let (r, ev) = set(&mut s, t.id, 0, 150);
    assert_eq!(r, Ok(CommandOutput::LogStart(150)));
    assert_eq!(
        ev,
        vec![MetaEvent::LogStartRaised {
            topic_id: t.id,
            partition: 0,
            log_start: 150
        }]
    );
    let (r, ev) = set(&mut s, t.id, 0, 100);
    assert_eq!(
        r,
        Ok(CommandOutput::LogStart(150)),
        "a lower offset is a no-op"
    );
    assert!(ev.is_empty());
    let (r, _) = set(&mut s, t.id, 0, 150);
    assert_eq!(r, Ok(CommandOutput::LogStart(150)), "so is the same one");
    set(&mut s, t.id, 0, 200).0.unwrap();
    assert_eq!(s.log_start(t.id, 0), Some(200));
    assert_eq!(s.log_start(t.id, 1), None, "floors are per partition");
}

#[test]
fn a_log_start_floor_needs_an_existing_partition_and_a_non_negative_offset() {
    let mut s = with_agents(1);
    let t = create(&mut s, "t", 1, 1);
    assert!(matches!(
        set(&mut s, t.id, 1, 5).0,
        Err(MetaError::UnknownPartition { .. })
    ));
    assert!(matches!(
        set(&mut s, Uuid::new_v4(), 0, 5).0,
        Err(MetaError::UnknownTopicId { .. })
    ));
    assert!(matches!(
        set(&mut s, t.id, 0, -1).0,
        Err(MetaError::InvalidRequest { .. })
    ));
    assert_eq!(s.log_start(t.id, 0), None);
}

#[test]
fn deleting_a_topic_drops_its_log_start_floors() {
    let mut s = with_agents(1);
    let t = create(&mut s, "t", 1, 1);
    set(&mut s, t.id, 0, 42).0.unwrap();
    apply(&mut s, Command::DeleteTopic { name: "t".into() }).unwrap();
    assert_eq!(s.log_start(t.id, 0), None);
    assert!(s.log_starts.is_empty());
    let again = create(&mut s, "t", 1, 1);
    assert_eq!(s.log_start(again.id, 0), None, "a new topic starts afresh");
}

#[test]
fn log_start_floors_are_kept_in_snapshots_and_old_snapshots_still_load() {
    let mut s = with_agents(1);
    let t = create(&mut s, "t", 1, 1);
    set(&mut s, t.id, 0, 42).0.unwrap();
    let bytes = serde_json::to_vec(&s).unwrap();
    let back: MetaState = serde_json::from_slice(&bytes).unwrap();
    assert_eq!(back.log_start(t.id, 0), Some(42));

    let mut old = serde_json::to_value(&s).unwrap();
    old.as_object_mut().unwrap().remove("log_starts");
    let back: MetaState = serde_json::from_value(old).unwrap();
    assert_eq!(back.log_start(t.id, 0), None);
}
