use super::*;

fn config(pairs: &[(&str, &str)]) -> Config {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

fn seqs(records: &[Generated]) -> Vec<u64> {
    records
        .iter()
        .map(|r| {
            let v: serde_json::Value = serde_json::from_slice(&r.value).unwrap();
            v["seq"].as_u64().unwrap()
        })
        .collect()
}

#[test]
fn two_tasks_make_every_seq_once_and_stop_at_max_records() {
    let c = config(&[
        ("kafka.topic", "t"),
        ("max.records", "1001"),
        ("max.interval", "0"),
    ]);
    let mut all = Vec::new();
    for tc in task_configs(&c, 2) {
        let mut d = Datagen::new(&tc).unwrap();
        while !d.done() {
            all.extend(seqs(&d.poll(0)));
        }
        assert!(d.poll(0).is_empty());
    }
    all.sort_unstable();
    assert_eq!(all, (0..1001).collect::<Vec<_>>());
}

#[test]
fn a_task_resumes_after_the_acknowledged_offset() {
    let c = config(&[("kafka.topic", "t"), ("max.interval", "0")]);
    let tc = &task_configs(&c, 3)[1];
    let mut d = Datagen::new(tc).unwrap();
    let first = d.poll(0);
    assert_eq!(seqs(&first)[..3], [1, 4, 7]);
    let offset = Datagen::offset(first[1].next);
    let mut again = Datagen::new(tc).unwrap();
    again.resume(&offset).unwrap();
    assert_eq!(seqs(&again.poll(0))[0], 7);
    // an offset of another split moves on to this task's own numbers
    again.resume(&Datagen::offset(8)).unwrap();
    assert_eq!(seqs(&again.poll(0))[0], 10);
    assert!(again.resume("{\"nope\":1}").is_err());
}

#[test]
fn every_problem_is_reported() {
    let problems = validate(&config(&[("max.records", "x"), ("max.interval", "-5")]));
    let keys: Vec<&str> = problems.iter().map(|(k, _)| k.as_str()).collect();
    assert_eq!(keys, ["kafka.topic", "max.records", "max.interval"]);
}
