use super::*;

#[test]
fn tasks_spread_over_the_live_agents_and_move_when_one_goes() {
    let live = [1, 2, 3];
    let owners: Vec<_> = (0..3)
        .map(|t| owner("sink", Some(t), &live).unwrap())
        .collect();
    let mut sorted = owners.clone();
    sorted.sort_unstable();
    assert_eq!(sorted, [1, 2, 3], "three tasks on three agents: one each");
    let without = [1, 3];
    for t in 0..3 {
        let o = owner("sink", Some(t), &without).unwrap();
        assert!(without.contains(&o));
    }
    assert_eq!(owner("sink", Some(0), &[]), None);
}

#[test]
fn connectors_start_on_different_agents() {
    let live = [1, 2, 3];
    let mut seen: Vec<_> = (0..30)
        .map(|i| owner(&format!("connector-{i}"), Some(0), &live).unwrap())
        .collect();
    seen.sort_unstable();
    seen.dedup();
    assert_eq!(
        seen,
        [1, 2, 3],
        "single-task connectors do not all land on one agent"
    );
}
