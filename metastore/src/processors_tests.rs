use super::*;

const TTL: i64 = 6_000;

fn beat(
    s: &mut ProcessorState,
    now: i64,
    worker: &str,
    partitions: &[i32],
    release: &[i32],
) -> Assignment {
    let out = s
        .apply(
            now,
            ProcessorCommand::Heartbeat {
                pipeline: "counts".into(),
                worker: worker.into(),
                ttl_ms: TTL,
                partitions: partitions.to_vec(),
                release: release.to_vec(),
            },
        )
        .unwrap();
    match out {
        ProcessorOutput::Assignment(a) => a,
        ProcessorOutput::Left => panic!("a heartbeat answered Left"),
    }
}

fn held(a: &Assignment) -> Vec<i32> {
    a.held.keys().copied().collect()
}

const FOUR: [i32; 4] = [0, 1, 2, 3];

#[test]
fn a_lone_worker_holds_every_partition() {
    let mut s = ProcessorState::default();
    let a = beat(&mut s, 0, "w1", &FOUR, &[]);
    assert_eq!(held(&a), FOUR);
    assert!(a.revoke.is_empty());
    // generations are distinct and grow
    let gens: BTreeSet<u64> = a.held.values().copied().collect();
    assert_eq!(gens.len(), 4);
}

#[test]
fn a_joining_worker_gets_partitions_only_once_they_are_released() {
    let mut s = ProcessorState::default();
    beat(&mut s, 0, "w1", &FOUR, &[]);
    let b = beat(&mut s, 100, "w2", &FOUR, &[]);
    assert!(b.held.is_empty(), "nothing is shared: {b:?}");
    let a = beat(&mut s, 200, "w1", &FOUR, &[]);
    assert_eq!(a.revoke.len(), 2, "{a:?}");
    let revoked = a.revoke.clone();
    // still held until released
    let b = beat(&mut s, 300, "w2", &FOUR, &[]);
    assert!(b.held.is_empty());
    let a = beat(&mut s, 400, "w1", &FOUR, &revoked);
    assert_eq!(a.held.len(), 2);
    assert!(a.revoke.is_empty());
    let b = beat(&mut s, 500, "w2", &FOUR, &[]);
    assert_eq!(held(&b), revoked);
    // granted after the first four
    assert!(b.held.values().all(|g| *g > 4), "{b:?}");
}

#[test]
fn a_silent_worker_loses_its_partitions_when_its_ttl_runs_out() {
    let mut s = ProcessorState::default();
    beat(&mut s, 0, "w1", &FOUR, &[]);
    let old: u64 = s.pipelines["counts"].generation;
    beat(&mut s, 10, "w2", &FOUR, &[]);
    // w1 never comes back; before its ttl w2 waits
    let b = beat(&mut s, TTL - 1, "w2", &FOUR, &[]);
    assert!(b.held.is_empty());
    let b = beat(&mut s, TTL, "w2", &FOUR, &[]);
    assert_eq!(held(&b), FOUR);
    assert!(
        b.held.values().all(|g| *g > old),
        "regranted with newer generations"
    );
    assert_eq!(b.workers, vec!["w2".to_string()]);
}

#[test]
fn a_leaving_worker_frees_its_partitions_at_once() {
    let mut s = ProcessorState::default();
    beat(&mut s, 0, "w1", &FOUR, &[]);
    beat(&mut s, 1, "w2", &FOUR, &[]);
    s.apply(
        2,
        ProcessorCommand::Leave {
            pipeline: "counts".into(),
            worker: "w1".into(),
        },
    )
    .unwrap();
    assert_eq!(held(&beat(&mut s, 3, "w2", &FOUR, &[])), FOUR);
    s.apply(
        4,
        ProcessorCommand::Leave {
            pipeline: "counts".into(),
            worker: "w2".into(),
        },
    )
    .unwrap();
    assert!(s.pipelines.is_empty());
}

#[test]
fn shares_are_even_and_sticky() {
    let mut s = ProcessorState::default();
    let parts: Vec<i32> = (0..10).collect();
    for w in ["a", "b", "c"] {
        beat(&mut s, 0, w, &parts, &[]);
    }
    // settle: each releases what it is told to, then the others take it
    for round in 1..5 {
        for w in ["a", "b", "c"] {
            let a = beat(&mut s, round, w, &parts, &[]);
            let revoke = a.revoke.clone();
            beat(&mut s, round, w, &parts, &revoke);
        }
    }
    let sizes: Vec<usize> = ["a", "b", "c"]
        .iter()
        .map(|w| beat(&mut s, 10, w, &parts, &[]).held.len())
        .collect();
    assert_eq!(sizes, vec![4, 3, 3]);
    // a steady membership moves nothing
    let before = s.pipelines["counts"].leases.clone();
    for w in ["a", "b", "c"] {
        assert!(beat(&mut s, 11, w, &parts, &[]).revoke.is_empty());
    }
    assert_eq!(s.pipelines["counts"].leases, before);
}

#[test]
fn a_release_of_a_partition_held_by_another_worker_changes_nothing() {
    let mut s = ProcessorState::default();
    beat(&mut s, 0, "w1", &FOUR, &[]);
    let b = beat(&mut s, 1, "w2", &FOUR, &[0, 1, 2, 3]);
    assert!(b.held.is_empty());
    assert_eq!(s.pipelines["counts"].leases.len(), 4);
}

#[test]
fn partitions_that_disappear_lose_their_leases_and_new_ones_are_granted() {
    let mut s = ProcessorState::default();
    beat(&mut s, 0, "w1", &FOUR, &[]);
    let a = beat(&mut s, 1, "w1", &[0, 1, 2, 3, 4, 5], &[]);
    assert_eq!(held(&a), vec![0, 1, 2, 3, 4, 5]);
    let a = beat(&mut s, 2, "w1", &[0, 1], &[]);
    assert_eq!(held(&a), vec![0, 1]);
    // an empty list keeps what is known
    let a = beat(&mut s, 3, "w1", &[], &[]);
    assert_eq!(held(&a), vec![0, 1]);
}

#[test]
fn bad_heartbeats_are_refused_with_the_reason() {
    let mut s = ProcessorState::default();
    let cases = [
        ("", "w", TTL, vec![0], "pipeline name"),
        ("p", "", TTL, vec![0], "worker id"),
        ("p", "w", 10, vec![0], "time to live"),
        ("p", "w", TTL, vec![-1], "partitions"),
    ];
    for (pipeline, worker, ttl_ms, partitions, what) in cases {
        let e = s
            .apply(
                0,
                ProcessorCommand::Heartbeat {
                    pipeline: pipeline.into(),
                    worker: worker.into(),
                    ttl_ms,
                    partitions,
                    release: vec![],
                },
            )
            .unwrap_err();
        assert!(e.to_string().contains(what), "{e} should name {what}");
    }
    assert!(s.pipelines.is_empty());
}
