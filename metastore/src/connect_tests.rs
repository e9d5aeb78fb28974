use std::collections::BTreeMap;

use super::*;

fn config(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

fn put(
    s: &mut ConnectState,
    name: &str,
    tasks: usize,
    create_only: bool,
) -> Result<ConnectOutput, MetaError> {
    s.apply(
        1,
        ConnectCommand::Put {
            name: name.into(),
            config: config(&[("connector.class", "DatagenSource")]),
            tasks: vec![config(&[("task", "x")]); tasks],
            create_only,
            initial: TargetState::Running,
        },
    )
}

fn status_code(e: MetaError) -> u16 {
    match e {
        MetaError::Connect { status, .. } => status,
        other => panic!("not a Connect error: {other:?}"),
    }
}

fn report(generation: u64, state: &str) -> Status {
    Status {
        state: state.into(),
        worker_id: "127.0.0.1:8083".into(),
        trace: None,
        generation,
    }
}

#[test]
fn create_only_refuses_an_existing_name_and_an_update_starts_a_new_generation() {
    let mut s = ConnectState::default();
    assert_eq!(
        put(&mut s, "a", 2, true).unwrap(),
        ConnectOutput::Put { created: true }
    );
    assert_eq!(
        status_code(put(&mut s, "a", 2, true).unwrap_err()),
        code::CONFLICT
    );
    assert_eq!(
        put(&mut s, "a", 1, false).unwrap(),
        ConnectOutput::Put { created: false }
    );
    let c = s.connector("a").unwrap();
    assert_eq!((c.generation, c.tasks.len()), (2, 1));
    assert_eq!(
        status_code(put(&mut s, "", 1, false).unwrap_err()),
        code::BAD_REQUEST
    );
}

#[test]
fn a_report_about_an_older_generation_is_dropped() {
    let mut s = ConnectState::default();
    put(&mut s, "a", 2, true).unwrap();
    let r = |s: &mut ConnectState, g, task| {
        s.apply(
            2,
            ConnectCommand::ReportStatus {
                name: "a".into(),
                task,
                status: report(g, "RUNNING"),
            },
        )
        .unwrap()
    };
    assert_eq!(r(&mut s, 1, Some(1)), ConnectOutput::Done);
    put(&mut s, "a", 2, false).unwrap();
    assert_eq!(r(&mut s, 1, Some(0)), ConnectOutput::Stale);
    assert_eq!(r(&mut s, 2, Some(7)), ConnectOutput::Stale, "no task 7");
    assert_eq!(r(&mut s, 2, None), ConnectOutput::Done);
    let c = s.connector("a").unwrap();
    assert!(c.task_status.contains_key(&1) && !c.task_status.contains_key(&0));
    assert_eq!(c.status.as_ref().map(|s| s.generation), Some(2));
}

#[test]
fn offsets_are_committed_by_the_current_generation_and_altered_only_when_stopped() {
    let mut s = ConnectState::default();
    put(&mut s, "a", 1, true).unwrap();
    let commit = |s: &mut ConnectState, generation, offset: Option<&str>| {
        s.apply(
            3,
            ConnectCommand::CommitOffsets {
                name: "a".into(),
                generation,
                offsets: vec![("{\"task\":0}".into(), offset.map(str::to_owned))],
            },
        )
    };
    assert_eq!(
        commit(&mut s, Some(1), Some("{\"seq\":9}")).unwrap(),
        ConnectOutput::Done
    );
    assert_eq!(
        commit(&mut s, Some(0), Some("{\"seq\":1}")).unwrap(),
        ConnectOutput::Stale
    );
    assert_eq!(
        status_code(commit(&mut s, None, Some("{\"seq\":0}")).unwrap_err()),
        code::BAD_REQUEST,
        "the REST API alters offsets of a stopped connector only"
    );
    let reset = ConnectCommand::ResetOffsets { name: "a".into() };
    assert_eq!(
        status_code(s.apply(3, reset.clone()).unwrap_err()),
        code::BAD_REQUEST
    );
    s.apply(
        3,
        ConnectCommand::SetTarget {
            name: "a".into(),
            target: TargetState::Stopped,
        },
    )
    .unwrap();
    assert_eq!(
        commit(&mut s, Some(2), Some("{\"seq\":20}")).unwrap(),
        ConnectOutput::Stale,
        "a stopped connector's tasks commit nothing"
    );
    assert_eq!(
        s.connector("a").unwrap().offsets["{\"task\":0}"],
        "{\"seq\":9}"
    );
    commit(&mut s, None, Some("{\"seq\":0}")).unwrap();
    assert_eq!(
        s.connector("a").unwrap().offsets["{\"task\":0}"],
        "{\"seq\":0}"
    );
    s.apply(3, reset).unwrap();
    assert!(s.connector("a").unwrap().offsets.is_empty());
}

#[test]
fn restarts_count_per_task_and_unknown_tasks_are_not_found() {
    let mut s = ConnectState::default();
    put(&mut s, "a", 2, true).unwrap();
    let restart = |s: &mut ConnectState, connector, tasks: Vec<u32>| {
        s.apply(
            4,
            ConnectCommand::Restart {
                name: "a".into(),
                connector,
                tasks,
            },
        )
    };
    restart(&mut s, true, vec![1]).unwrap();
    restart(&mut s, false, vec![1]).unwrap();
    let c = s.connector("a").unwrap();
    assert_eq!(
        (c.generation, c.restarts_of(0), c.restarts_of(1)),
        (2, 0, 2)
    );
    assert_eq!(
        status_code(restart(&mut s, false, vec![2]).unwrap_err()),
        code::NOT_FOUND
    );
    assert_eq!(
        status_code(
            s.apply(4, ConnectCommand::Delete { name: "b".into() })
                .unwrap_err()
        ),
        code::NOT_FOUND
    );
    s.apply(4, ConnectCommand::Delete { name: "a".into() })
        .unwrap();
    assert!(s.connector("a").is_none());
}
