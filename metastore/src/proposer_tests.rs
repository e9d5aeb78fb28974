use super::*;

fn pending(group_bytes: usize) -> (Pending, oneshot::Receiver<Result<Written, ProposeError>>) {
    let commands = vec![Command::DeleteGroup {
        group: "g".repeat(group_bytes),
        coordinator: None,
    }];
    let bytes = check_write_size(&commands).expect("within the limit");
    let (reply, answer) = oneshot::channel();
    let p = Pending {
        request: None,
        commands,
        bytes,
        reply,
    };
    (p, answer)
}

#[test]
fn a_batch_stops_before_it_would_outgrow_one_replication_message() {
    let (tx, mut rx) = mpsc::channel(8);
    let big = MAX_WRITE_BYTES / 2 + 1;
    let (first, _a) = pending(big);
    let (second, _b) = pending(big);
    let (third, _c) = pending(10);
    tx.try_send(second).expect("queue");
    tx.try_send(third).expect("queue");
    let (batch, count, carried) = fill_batch(first, &mut rx, 512);
    assert_eq!(
        (batch.len(), count),
        (1, 1),
        "two halves do not share an entry"
    );
    let next = carried.expect("the write that did not fit opens the next batch");
    assert!(next.bytes >= big);
    let (batch, count, carried) = fill_batch(next, &mut rx, 512);
    assert_eq!((batch.len(), count), (2, 2), "small writes still join");
    assert!(carried.is_none());
}

#[test]
fn small_writes_batch_up_to_the_command_limit() {
    let (tx, mut rx) = mpsc::channel(8);
    let (first, _a) = pending(10);
    let mut answers = Vec::new();
    for _ in 0..4 {
        let (p, a) = pending(10);
        answers.push(a);
        tx.try_send(p).expect("queue");
    }
    let (batch, count, carried) = fill_batch(first, &mut rx, 3);
    assert_eq!((batch.len(), count), (3, 3));
    assert!(carried.is_none());
}

#[tokio::test]
async fn a_write_over_the_size_limit_is_refused_before_it_is_queued() {
    let (tx, mut rx) = mpsc::channel(1);
    let proposer = Proposer { tx };
    let commands = vec![Command::DeleteGroup {
        group: "g".repeat(MAX_WRITE_BYTES),
        coordinator: None,
    }];
    match proposer.propose(None, commands).await {
        Err(ProposeError::Failed(MetaError::InvalidRequest { reason })) => {
            assert!(reason.contains("exceeds the limit"), "{reason}")
        }
        other => panic!("expected a refusal, got {other:?}"),
    }
    assert!(rx.try_recv().is_err(), "nothing was queued");
}
