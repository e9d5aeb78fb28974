use super::*;

#[test]
fn long_lists_are_cut_into_runs_that_each_fit_one_write() {
    let items: Vec<String> = (0..40).map(|_| "x".repeat(200_000)).collect();
    let runs = runs_within_write_limit(items.clone());
    assert!(runs.len() > 1);
    for run in &runs {
        assert!(
            encoded_len(run) <= MAX_WRITE_BYTES / 2 + 16,
            "{}",
            encoded_len(run)
        );
    }
    assert_eq!(runs.concat(), items, "every item, in order");
}

#[test]
fn an_item_too_large_on_its_own_gets_a_run_of_its_own() {
    let items = vec!["a".to_owned(), "x".repeat(MAX_WRITE_BYTES), "b".to_owned()];
    let runs = runs_within_write_limit(items);
    assert_eq!(runs.len(), 3);
    assert!(runs_within_write_limit(Vec::<String>::new()).is_empty());
}

#[test]
fn commands_logged_before_epochs_were_carried_still_read() {
    let old = r#"{"AlterIsr":{"topic_id":"00000000-0000-0000-0000-000000000000","partition":0,"leader":1,"leader_epoch":3,"isr":[1]}}"#;
    let cmd: Command = serde_json::from_str(old).expect("an old AlterIsr entry");
    assert!(matches!(
        cmd,
        Command::AlterIsr {
            expected_partition_epoch: None,
            ..
        }
    ));
}
