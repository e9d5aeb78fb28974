//! The transaction coordinator's requests against the real logs and
//! metastore: a transactional producer's whole round (InitProducerId,
//! AddPartitionsToTxn, Produce, AddOffsetsToTxn, TxnOffsetCommit, EndTxn),
//! KIP-890's check that a transactional batch was added, fencing, and
//! Describe/ListTransactions; and transaction version 2 (KIP-890 part 2):
//! partitions and groups added implicitly, an epoch bump at every end, its
//! retries and an exhausted epoch, while older versions stay as they were.

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::add_partitions_to_txn_request::AddPartitionsToTxnTopic;
use kafka_protocol::messages::txn_offset_commit_request::{
    TxnOffsetCommitRequestPartition, TxnOffsetCommitRequestTopic,
};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::records::Compression;
use metastore::{Groups, Transactions};

use super::test_support::*;
use crate::broker::Broker;
use crate::testing::{Logs, TestBroker};

on_every_backend!(
    a_transaction_commits_its_records_and_offsets_together,
    a_batch_of_a_partition_not_added_is_refused_and_a_fenced_producer_told_so,
    describe_producers_names_each_producer_and_where_its_transaction_starts,
    a_version_2_write_adds_its_partition_and_each_end_bumps_the_epoch,
    an_end_txn_retried_with_the_previous_epoch_is_answered_as_it_stands,
    an_exhausted_epoch_ends_with_a_new_producer_id,
    txn_offset_commit_v5_adds_its_group,
    clients_before_version_2_add_partitions_and_keep_their_epoch,
    list_transactions_names_the_transactions_this_agent_coordinates,
    a_stable_offset_fetch_is_refused_while_a_transaction_holds_offsets,
    a_completion_of_an_outdated_record_writes_no_marker_into_the_next_transaction,
);

fn id(s: &str) -> TransactionalId {
    TransactionalId(StrBytes::from_string(s.into()))
}

async fn init(b: &Broker, tid: &str) -> InitProducerIdResponse {
    let req = InitProducerIdRequest::default()
        .with_transactional_id(Some(id(tid)))
        .with_transaction_timeout_ms(60_000)
        .with_producer_id(ProducerId(-1))
        .with_producer_epoch(-1);
    call(b, ApiKey::InitProducerId, 4, &req).await
}

async fn add(b: &Broker, tid: &str, pid: i64, epoch: i16, topic: &str) -> i16 {
    let req = AddPartitionsToTxnRequest::default()
        .with_v3_and_below_transactional_id(id(tid))
        .with_v3_and_below_producer_id(ProducerId(pid))
        .with_v3_and_below_producer_epoch(epoch)
        .with_v3_and_below_topics(vec![AddPartitionsToTxnTopic::default()
            .with_name(TopicName(StrBytes::from_string(topic.into())))
            .with_partitions(vec![0])]);
    let resp: AddPartitionsToTxnResponse = call(b, ApiKey::AddPartitionsToTxn, 3, &req).await;
    resp.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code
}

/// A transactional batch of `values` from producer `pid` at `epoch`.
fn txn_batch(values: &[&str], pid: i64, epoch: i16, seq: i32) -> Bytes {
    let mut b = BytesMut::from(&batch(values, Some((pid, epoch, seq)), Compression::None)[..]);
    let attrs = i16::from_be_bytes([b[21], b[22]]) | 0x10;
    b[21..23].copy_from_slice(&attrs.to_be_bytes());
    let crc = storage::batch::compute_crc(&b);
    b[17..21].copy_from_slice(&crc.to_be_bytes());
    b.freeze()
}

async fn produce_txn(b: &Broker, tid: &str, topic: &str, records: Bytes) -> (i16, Option<String>) {
    produce_txn_v(b, 9, tid, topic, records).await
}

/// Produce at `version`: from v12 the leader adds the partition itself.
async fn produce_txn_v(
    b: &Broker,
    version: i16,
    tid: &str,
    topic: &str,
    records: Bytes,
) -> (i16, Option<String>) {
    let req = produce_req(topic, 0, records, -1).with_transactional_id(Some(id(tid)));
    let resp: ProduceResponse = call(b, ApiKey::Produce, version, &req).await;
    let p = &resp.responses[0].partition_responses[0];
    (
        p.error_code,
        p.error_message.as_ref().map(|m| m.to_string()),
    )
}

async fn end(b: &Broker, tid: &str, pid: i64, epoch: i16, commit: bool) -> i16 {
    end_v(b, 3, tid, (pid, epoch), commit).await.0
}

/// EndTxn at `version`: the error, and the producer id and epoch the answer
/// names (from v5).
async fn end_v(
    b: &Broker,
    version: i16,
    tid: &str,
    (pid, epoch): (i64, i16),
    commit: bool,
) -> (i16, (i64, i16)) {
    let req = EndTxnRequest::default()
        .with_transactional_id(id(tid))
        .with_producer_id(ProducerId(pid))
        .with_producer_epoch(epoch)
        .with_committed(commit);
    let resp: EndTxnResponse = call(b, ApiKey::EndTxn, version, &req).await;
    (resp.error_code, (resp.producer_id.0, resp.producer_epoch))
}

async fn committed_values(b: &Broker, topic: &str) -> Vec<String> {
    let req = fetch_req(topic, 0, 0, 1).with_isolation_level(1);
    let resp: FetchResponse = call(b, ApiKey::Fetch, 12, &req).await;
    let p = &resp.responses[0].partitions[0];
    let aborted: Vec<i64> = p
        .aborted_transactions
        .iter()
        .flatten()
        .map(|t| t.producer_id.0)
        .collect();
    assert!(aborted.is_empty(), "nothing aborted here: {aborted:?}");
    values_of(p.records.clone())
        .into_iter()
        .map(|(_, v)| v)
        .collect()
}

async fn a_transaction_commits_its_records_and_offsets_together(logs: Logs) {
    let t = TestBroker::start(logs).await;
    let b = &t.broker;
    create(b, "out", 1).await;
    create(b, "in", 1).await;
    let r = init(b, "app").await;
    assert_eq!(r.error_code, 0);
    let (pid, epoch) = (r.producer_id.0, r.producer_epoch);
    assert_eq!(add(b, "app", pid, epoch, "out").await, 0);
    let (code, why) = produce_txn(b, "app", "out", txn_batch(&["x", "y"], pid, epoch, 0)).await;
    assert_eq!(code, 0, "{why:?}");
    assert!(committed_values(b, "out").await.is_empty(), "open");

    let offsets = AddOffsetsToTxnRequest::default()
        .with_transactional_id(id("app"))
        .with_producer_id(ProducerId(pid))
        .with_producer_epoch(epoch)
        .with_group_id(GroupId(StrBytes::from_static_str("g")));
    let added: AddOffsetsToTxnResponse = call(b, ApiKey::AddOffsetsToTxn, 3, &offsets).await;
    assert_eq!(added.error_code, 0);
    let commit = TxnOffsetCommitRequest::default()
        .with_transactional_id(id("app"))
        .with_group_id(GroupId(StrBytes::from_static_str("g")))
        .with_producer_id(ProducerId(pid))
        .with_producer_epoch(epoch)
        .with_generation_id(-1)
        .with_topics(vec![TxnOffsetCommitRequestTopic::default()
            .with_name(TopicName(StrBytes::from_static_str("in")))
            .with_partitions(vec![TxnOffsetCommitRequestPartition::default()
                .with_partition_index(0)
                .with_committed_offset(17)
                .with_committed_leader_epoch(-1)])]);
    let held: TxnOffsetCommitResponse = call(b, ApiKey::TxnOffsetCommit, 3, &commit).await;
    assert_eq!(held.topics[0].partitions[0].error_code, 0);
    assert!(
        b.node.catalog.committed_offsets("g").is_empty(),
        "held until the transaction commits"
    );

    let described = DescribeTransactionsRequest::default().with_transactional_ids(vec![id("app")]);
    let d: DescribeTransactionsResponse =
        call(b, ApiKey::DescribeTransactions, 0, &described).await;
    assert_eq!(
        d.transaction_states[0].transaction_state.as_str(),
        "Ongoing"
    );
    assert_eq!(d.transaction_states[0].topics[0].partitions, vec![0]);

    assert_eq!(end(b, "app", pid, epoch, true).await, 0);
    let values = committed_values(b, "out").await;
    // and the COMMIT marker's control record, which clients skip
    assert_eq!(values.len(), 3, "{values:?}");
    assert_eq!(values[..2], ["x", "y"]);
    let g = b.node.catalog.committed_offsets("g");
    assert_eq!(g[&("in".to_string(), 0)].offset, 17, "committed with it");

    let listed: ListTransactionsResponse = call(
        b,
        ApiKey::ListTransactions,
        0,
        &ListTransactionsRequest::default()
            .with_state_filters(vec![StrBytes::from_static_str("CompleteCommit")]),
    )
    .await;
    assert_eq!(listed.transaction_states.len(), 1);
    assert_eq!(listed.transaction_states[0].producer_id.0, pid);
    let unknown: DescribeTransactionsResponse = call(
        b,
        ApiKey::DescribeTransactions,
        0,
        &DescribeTransactionsRequest::default().with_transactional_ids(vec![id("nope")]),
    )
    .await;
    assert_eq!(
        unknown.transaction_states[0].error_code, 105,
        "TRANSACTIONAL_ID_NOT_FOUND"
    );
}

/// OffsetFetch of group `g`, partition 0 of `in` (or every partition the
/// group has offsets for): (error, offset) of that partition, or `None` when
/// it is not listed.
async fn fetch_offset(b: &Broker, v: i16, require_stable: bool, all: bool) -> Option<(i16, i64)> {
    let topics = (!all).then(|| {
        vec![offset_fetch_request::OffsetFetchRequestTopics::default()
            .with_name(TopicName(StrBytes::from_static_str("in")))
            .with_partition_indexes(vec![0])]
    });
    if v >= 8 {
        let req = OffsetFetchRequest::default()
            .with_require_stable(require_stable)
            .with_groups(vec![
                offset_fetch_request::OffsetFetchRequestGroup::default()
                    .with_group_id(GroupId(StrBytes::from_static_str("g")))
                    .with_topics(topics),
            ]);
        let resp: OffsetFetchResponse = call(b, ApiKey::OffsetFetch, v, &req).await;
        let g = &resp.groups[0];
        assert_eq!(g.error_code, 0);
        let t = g.topics.iter().find(|t| t.name.as_str() == "in")?;
        let p = t.partitions.iter().find(|p| p.partition_index == 0)?;
        return Some((p.error_code, p.committed_offset));
    }
    let req = OffsetFetchRequest::default()
        .with_require_stable(require_stable)
        .with_group_id(GroupId(StrBytes::from_static_str("g")))
        .with_topics(topics.map(|ts| {
            ts.into_iter()
                .map(|t| {
                    offset_fetch_request::OffsetFetchRequestTopic::default()
                        .with_name(t.name)
                        .with_partition_indexes(t.partition_indexes)
                })
                .collect()
        }));
    let resp: OffsetFetchResponse = call(b, ApiKey::OffsetFetch, v, &req).await;
    assert_eq!(resp.error_code, 0);
    let t = resp.topics.iter().find(|t| t.name.as_str() == "in")?;
    let p = t.partitions.iter().find(|p| p.partition_index == 0)?;
    Some((p.error_code, p.committed_offset))
}

/// KIP-447: while a transaction holds offsets for a partition, a stable
/// OffsetFetch answers UNSTABLE_OFFSET_COMMIT for it (the client retries)
/// rather than the offset the transaction is about to replace, whether the
/// partition is asked for or every partition is; an OffsetFetch that does
/// not ask for stability answers the committed offset. Once the
/// transaction commits, the stable fetch answers its offset.
async fn a_stable_offset_fetch_is_refused_while_a_transaction_holds_offsets(logs: Logs) {
    let t = TestBroker::start(logs).await;
    let b = &t.broker;
    create(b, "in", 1).await;
    let r = init(b, "stable").await;
    assert_eq!(r.error_code, 0);
    let (pid, epoch) = (r.producer_id.0, r.producer_epoch);
    let offsets = AddOffsetsToTxnRequest::default()
        .with_transactional_id(id("stable"))
        .with_producer_id(ProducerId(pid))
        .with_producer_epoch(epoch)
        .with_group_id(GroupId(StrBytes::from_static_str("g")));
    let added: AddOffsetsToTxnResponse = call(b, ApiKey::AddOffsetsToTxn, 3, &offsets).await;
    assert_eq!(added.error_code, 0);
    let commit = TxnOffsetCommitRequest::default()
        .with_transactional_id(id("stable"))
        .with_group_id(GroupId(StrBytes::from_static_str("g")))
        .with_producer_id(ProducerId(pid))
        .with_producer_epoch(epoch)
        .with_generation_id(-1)
        .with_topics(vec![TxnOffsetCommitRequestTopic::default()
            .with_name(TopicName(StrBytes::from_static_str("in")))
            .with_partitions(vec![TxnOffsetCommitRequestPartition::default()
                .with_partition_index(0)
                .with_committed_offset(17)
                .with_committed_leader_epoch(-1)])]);
    let held: TxnOffsetCommitResponse = call(b, ApiKey::TxnOffsetCommit, 3, &commit).await;
    assert_eq!(held.topics[0].partitions[0].error_code, 0);

    for v in [7, 8] {
        assert_eq!(
            fetch_offset(b, v, true, false).await,
            Some((88, -1)),
            "v{v}: UNSTABLE_OFFSET_COMMIT"
        );
        assert_eq!(
            fetch_offset(b, v, true, true).await,
            Some((88, -1)),
            "v{v}: listed unstable when fetching every partition"
        );
        assert_eq!(
            fetch_offset(b, v, false, false).await,
            Some((0, -1)),
            "v{v}: without require_stable, what is committed (nothing)"
        );
    }

    assert_eq!(end(b, "stable", pid, epoch, true).await, 0);
    let mut answer = None;
    for _ in 0..100 {
        answer = fetch_offset(b, 8, true, false).await;
        if answer != Some((88, -1)) {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert_eq!(answer, Some((0, 17)), "committed with the transaction");
    assert_eq!(fetch_offset(b, 7, true, true).await, Some((0, 17)));
}

async fn a_batch_of_a_partition_not_added_is_refused_and_a_fenced_producer_told_so(logs: Logs) {
    let t = TestBroker::start(logs).await;
    let b = &t.broker;
    create(b, "out", 1).await;
    let r = init(b, "app").await;
    let (pid, epoch) = (r.producer_id.0, r.producer_epoch);
    let (code, why) = produce_txn(b, "app", "out", txn_batch(&["early"], pid, epoch, 0)).await;
    assert_eq!(code, 48, "INVALID_TXN_STATE: not added yet ({why:?})");
    let (code, _) = produce_txn(b, "", "out", txn_batch(&["anon"], pid, epoch, 0)).await;
    assert_eq!(
        code, 53,
        "TRANSACTIONAL_ID_AUTHORIZATION_FAILED without an id"
    );

    assert_eq!(add(b, "app", pid, epoch, "out").await, 0);
    let (code, why) = produce_txn(b, "app", "out", txn_batch(&["kept"], pid, epoch, 0)).await;
    assert_eq!(code, 0, "{why:?}");
    // a second instance takes the id over: the first is fenced, its
    // transaction aborted
    let second = init(b, "app").await;
    assert_eq!(second.error_code, 0);
    assert_eq!(second.producer_id.0, pid);
    assert!(second.producer_epoch > epoch);
    let (code, _) = produce_txn(b, "app", "out", txn_batch(&["zombie"], pid, epoch, 1)).await;
    assert_eq!(code, 47, "INVALID_PRODUCER_EPOCH for the fenced producer");
    assert_eq!(end(b, "app", pid, epoch, true).await, 90, "PRODUCER_FENCED");
    let req = fetch_req("out", 0, 0, 1).with_isolation_level(1);
    let resp: FetchResponse = call(b, ApiKey::Fetch, 12, &req).await;
    let p = &resp.responses[0].partitions[0];
    assert_eq!(p.last_stable_offset, p.high_watermark, "nothing left open");
    let aborted = p.aborted_transactions.as_ref().expect("named");
    assert_eq!(aborted.len(), 1);
    assert_eq!(aborted[0].producer_id.0, pid);
}

/// (producer id, epoch, last sequence, last timestamp, coordinator epoch,
/// transaction start) of each producer DescribeProducers names.
type Described = Vec<(i64, i32, i32, i64, i32, i64)>;

async fn describe_producers(
    b: &Broker,
    topic: &str,
    partitions: Vec<i32>,
) -> Vec<(i16, Described)> {
    let req = DescribeProducersRequest::default().with_topics(vec![
        describe_producers_request::TopicRequest::default()
            .with_name(TopicName(StrBytes::from_string(topic.into())))
            .with_partition_indexes(partitions),
    ]);
    let resp: DescribeProducersResponse = call(b, ApiKey::DescribeProducers, 0, &req).await;
    resp.topics[0]
        .partitions
        .iter()
        .map(|p| {
            let producers = p
                .active_producers
                .iter()
                .map(|s| {
                    (
                        s.producer_id.0,
                        s.producer_epoch,
                        s.last_sequence,
                        s.last_timestamp,
                        s.coordinator_epoch,
                        s.current_txn_start_offset,
                    )
                })
                .collect();
            (p.error_code, producers)
        })
        .collect()
}

/// DescribeProducers (the Java admin's describeProducers, and
/// kafka-transactions.sh's find-hanging) as Kafka's broker answers it.
async fn describe_producers_names_each_producer_and_where_its_transaction_starts(logs: Logs) {
    let t = TestBroker::start(logs).await;
    let b = &t.broker;
    create(b, "p", 1).await;
    assert_eq!(describe_producers(b, "p", vec![0]).await, vec![(0, vec![])]);

    // an idempotent producer writes two records (timestamps 1_700_000_000_000 + i)
    let idem: InitProducerIdResponse = call(
        b,
        ApiKey::InitProducerId,
        4,
        &InitProducerIdRequest::default()
            .with_transaction_timeout_ms(60_000)
            .with_producer_id(ProducerId(-1))
            .with_producer_epoch(-1),
    )
    .await;
    let (ip, ie) = (idem.producer_id.0, idem.producer_epoch);
    let written = produce(
        b,
        "p",
        batch(&["a", "b"], Some((ip, ie, 0)), Compression::None),
    )
    .await;
    assert_eq!(written.error_code, 0);
    // a transactional one opens a transaction at offset 2
    let r = init(b, "describe").await;
    let (tp, te) = (r.producer_id.0, r.producer_epoch);
    assert_eq!(add(b, "describe", tp, te, "p").await, 0);
    let (code, why) = produce_txn(b, "describe", "p", txn_batch(&["t"], tp, te, 0)).await;
    assert_eq!(code, 0, "{why:?}");

    let mut open = vec![
        (ip, i32::from(ie), 1, 1_700_000_000_001, -1, -1),
        (tp, i32::from(te), 0, 1_700_000_000_000, -1, 2),
    ];
    open.sort_unstable();
    assert_eq!(describe_producers(b, "p", vec![0]).await, vec![(0, open)]);

    assert_eq!(end(b, "describe", tp, te, true).await, 0);
    let described = describe_producers(b, "p", vec![0]).await;
    let txn = described[0]
        .1
        .iter()
        .find(|p| p.0 == tp)
        .expect("still remembered");
    assert_eq!(txn.5, -1, "no transaction open after the commit");
    assert!(txn.4 >= 0, "the marker's coordinator epoch: {txn:?}");

    assert_eq!(
        describe_producers(b, "p", vec![7]).await,
        vec![(3, vec![])],
        "UNKNOWN_TOPIC_OR_PARTITION"
    );
    assert_eq!(
        describe_producers(b, "nope", vec![0]).await,
        vec![(3, vec![])],
        "UNKNOWN_TOPIC_OR_PARTITION"
    );
}

/// The records a read_committed consumer gets (control records included:
/// clients skip them) and the producers of the aborted transactions listed.
async fn read_committed(b: &Broker, topic: &str) -> (Vec<String>, Vec<i64>) {
    let req = fetch_req(topic, 0, 0, 1).with_isolation_level(1);
    let resp: FetchResponse = call(b, ApiKey::Fetch, 12, &req).await;
    let p = &resp.responses[0].partitions[0];
    let aborted = p
        .aborted_transactions
        .iter()
        .flatten()
        .map(|t| t.producer_id.0)
        .collect();
    let values = values_of(p.records.clone())
        .into_iter()
        .map(|(_, v)| v)
        .collect();
    (values, aborted)
}

/// The epoch partition 0 of `topic` holds for producer `pid`.
async fn partition_epoch(b: &Broker, topic: &str, pid: i64) -> Option<i32> {
    describe_producers(b, topic, vec![0]).await[0]
        .1
        .iter()
        .find(|p| p.0 == pid)
        .map(|p| p.1)
}

/// Transaction version 2: the producer never adds a partition; its first
/// write adds it. Each EndTxn v5 (commit or abort) answers the next epoch,
/// the markers carry it, and the ended transaction's epoch is fenced.
async fn a_version_2_write_adds_its_partition_and_each_end_bumps_the_epoch(logs: Logs) {
    let t = TestBroker::start(logs).await;
    let b = &t.broker;
    create(b, "out", 1).await;
    create(b, "other", 1).await;
    let r = init(b, "app").await;
    let pid = r.producer_id.0;
    assert_eq!(r.producer_epoch, 0);

    let (code, why) = produce_txn_v(b, 12, "app", "out", txn_batch(&["x", "y"], pid, 0, 0)).await;
    assert_eq!(code, 0, "added by the write itself: {why:?}");
    let record = b.node.catalog.transaction("app").expect("known");
    assert_eq!(record.state.name(), "Ongoing");
    assert_eq!(record.partitions.len(), 1, "{:?}", record.partitions);
    // a request of an older version is still verified, not added
    let (code, _) = produce_txn_v(b, 11, "app", "other", txn_batch(&["z"], pid, 0, 0)).await;
    assert_eq!(code, 48, "INVALID_TXN_STATE: Produce v11 adds nothing");

    assert_eq!(
        end_v(b, 5, "app", (pid, 0), true).await,
        (0, (pid, 1)),
        "the commit answers the next epoch"
    );
    let (values, aborted) = read_committed(b, "out").await;
    assert_eq!(values.len(), 3, "x, y and the COMMIT marker: {values:?}");
    assert!(aborted.is_empty());
    assert_eq!(
        partition_epoch(b, "out", pid).await,
        Some(1),
        "the marker carries the bumped epoch"
    );
    let (code, _) = produce_txn_v(b, 12, "app", "out", txn_batch(&["late"], pid, 0, 2)).await;
    assert_eq!(
        code, 47,
        "INVALID_PRODUCER_EPOCH: the ended transaction's epoch"
    );

    let (code, why) = produce_txn_v(b, 12, "app", "out", txn_batch(&["gone"], pid, 1, 0)).await;
    assert_eq!(code, 0, "the next transaction, at the new epoch: {why:?}");
    assert_eq!(
        end_v(b, 5, "app", (pid, 1), false).await,
        (0, (pid, 2)),
        "an abort bumps the epoch too"
    );
    let (values, aborted) = read_committed(b, "out").await;
    assert_eq!(aborted, vec![pid], "the second transaction is aborted");
    assert_eq!(values[..2], ["x", "y"]);
    assert_eq!(partition_epoch(b, "out", pid).await, Some(2));
    let record = b.node.catalog.transaction("app").expect("known");
    assert_eq!(
        (record.state.name(), record.producer_epoch),
        ("CompleteAbort", 2)
    );
}

/// A client that lost EndTxn's answer asks again with the epoch it had: it
/// gets the answer it missed (once, and no second marker), while the other
/// outcome, a commit with nothing open and a stranger's epoch are refused.
async fn an_end_txn_retried_with_the_previous_epoch_is_answered_as_it_stands(logs: Logs) {
    let t = TestBroker::start(logs).await;
    let b = &t.broker;
    create(b, "out", 1).await;
    let pid = init(b, "app").await.producer_id.0;
    let (code, why) = produce_txn_v(b, 12, "app", "out", txn_batch(&["x"], pid, 0, 0)).await;
    assert_eq!(code, 0, "{why:?}");
    assert_eq!(end_v(b, 5, "app", (pid, 0), true).await, (0, (pid, 1)));

    assert_eq!(
        end_v(b, 5, "app", (pid, 0), true).await,
        (0, (pid, 1)),
        "the retry is answered as the commit was"
    );
    assert_eq!(
        end_v(b, 5, "app", (pid, 0), false).await.0,
        48,
        "INVALID_TXN_STATE: an abort of what was committed"
    );
    assert_eq!(
        end_v(b, 5, "app", (pid, 1), true).await.0,
        48,
        "INVALID_TXN_STATE: the new epoch has nothing to commit"
    );
    assert_eq!(
        end_v(b, 5, "app", (pid, 3), true).await.0,
        90,
        "PRODUCER_FENCED: an epoch that is neither"
    );
    let (values, _) = read_committed(b, "out").await;
    assert_eq!(values.len(), 2, "one record and one marker: {values:?}");
    let record = b.node.catalog.transaction("app").expect("known");
    assert_eq!(
        (record.state.name(), record.producer_epoch),
        ("CompleteCommit", 1),
        "nothing moved"
    );
    // the new epoch may abort with nothing open (a write it sent may or
    // may not have reached its leader), and moves on once more
    assert_eq!(end_v(b, 5, "app", (pid, 1), false).await, (0, (pid, 2)));
}

/// The epoch is exhausted after 32 766 transactions: the last end takes a
/// new producer id, which the answer names at epoch 0 once the markers
/// (written with the old id) are in; a retry of that end gets the same.
async fn an_exhausted_epoch_ends_with_a_new_producer_id(logs: Logs) {
    let t = TestBroker::start(logs).await;
    let b = &t.broker;
    create(b, "out", 1).await;
    let pid = init(b, "app").await.producer_id.0;
    let last = i16::MAX - 1;
    assert!(b.node.catalog.set_producer_epoch_locally("app", last));
    let (code, why) = produce_txn_v(b, 12, "app", "out", txn_batch(&["x"], pid, last, 0)).await;
    assert_eq!(code, 0, "{why:?}");
    let (code, (next, epoch)) = end_v(b, 5, "app", (pid, last), true).await;
    assert_eq!(code, 0);
    assert_ne!(next, pid, "a new producer id");
    assert_eq!(epoch, 0);
    assert_eq!(
        partition_epoch(b, "out", pid).await,
        Some(i32::from(i16::MAX)),
        "the old id's marker, at the epoch kept for it"
    );
    assert_eq!(
        end_v(b, 5, "app", (pid, last), true).await,
        (0, (next, 0)),
        "a retry by the old id"
    );
    let (code, why) = produce_txn_v(b, 12, "app", "out", txn_batch(&["y"], next, 0, 0)).await;
    assert_eq!(code, 0, "the new id writes: {why:?}");
    assert_eq!(end_v(b, 5, "app", (next, 0), true).await, (0, (next, 1)));
    let (values, aborted) = read_committed(b, "out").await;
    assert_eq!(values.len(), 4, "{values:?}");
    assert!(aborted.is_empty());
}

fn txn_offsets(pid: i64, epoch: i16, offset: i64) -> TxnOffsetCommitRequest {
    TxnOffsetCommitRequest::default()
        .with_transactional_id(id("app"))
        .with_group_id(GroupId(StrBytes::from_static_str("g")))
        .with_producer_id(ProducerId(pid))
        .with_producer_epoch(epoch)
        .with_generation_id(-1)
        .with_topics(vec![TxnOffsetCommitRequestTopic::default()
            .with_name(TopicName(StrBytes::from_static_str("in")))
            .with_partitions(vec![TxnOffsetCommitRequestPartition::default()
                .with_partition_index(0)
                .with_committed_offset(offset)
                .with_committed_leader_epoch(-1)])])
}

/// TxnOffsetCommit v5 adds its group to the transaction (there is no
/// AddOffsetsToTxn in transaction version 2), opening it if need be; the
/// offsets become the group's with the commit. Before v5 the group must
/// have been added.
async fn txn_offset_commit_v5_adds_its_group(logs: Logs) {
    let t = TestBroker::start(logs).await;
    let b = &t.broker;
    create(b, "in", 1).await;
    let pid = init(b, "app").await.producer_id.0;
    let old: TxnOffsetCommitResponse =
        call(b, ApiKey::TxnOffsetCommit, 4, &txn_offsets(pid, 0, 5)).await;
    assert_eq!(
        old.topics[0].partitions[0].error_code, 48,
        "INVALID_TXN_STATE: v4 without AddOffsetsToTxn"
    );
    let held: TxnOffsetCommitResponse =
        call(b, ApiKey::TxnOffsetCommit, 5, &txn_offsets(pid, 0, 17)).await;
    assert_eq!(held.topics[0].partitions[0].error_code, 0);
    let record = b.node.catalog.transaction("app").expect("known");
    assert_eq!(record.state.name(), "Ongoing", "opened by the offsets");
    assert!(record.groups.contains("g"));
    assert!(b.node.catalog.committed_offsets("g").is_empty(), "held");

    assert_eq!(end_v(b, 5, "app", (pid, 0), true).await, (0, (pid, 1)));
    let g = b.node.catalog.committed_offsets("g");
    assert_eq!(g[&("in".to_string(), 0)].offset, 17, "committed with it");
}

/// Clients before transaction version 2 (librdkafka, older Java clients)
/// see the feature and the newer versions advertised, use neither, and are
/// served as before: they add partitions, and their epoch stays.
async fn clients_before_version_2_add_partitions_and_keep_their_epoch(logs: Logs) {
    let t = TestBroker::start(logs).await;
    let b = &t.broker;
    let versions: ApiVersionsResponse =
        call(b, ApiKey::ApiVersions, 3, &ApiVersionsRequest::default()).await;
    let feature = versions
        .finalized_features
        .iter()
        .find(|f| f.name.as_str() == "transaction.version")
        .expect("finalized");
    assert_eq!(
        (feature.min_version_level, feature.max_version_level),
        (2, 2)
    );
    assert!(
        versions.finalized_features_epoch >= 0,
        "clients ignore a negative epoch"
    );
    let supported = versions
        .supported_features
        .iter()
        .find(|f| f.name.as_str() == "transaction.version")
        .expect("supported");
    assert_eq!((supported.min_version, supported.max_version), (0, 2));
    let max = |key: ApiKey| {
        versions
            .api_keys
            .iter()
            .find(|k| k.api_key == key as i16)
            .map(|k| k.max_version)
    };
    assert_eq!(max(ApiKey::EndTxn), Some(5));
    assert_eq!(max(ApiKey::Produce), Some(12));
    assert_eq!(max(ApiKey::TxnOffsetCommit), Some(5));

    create(b, "out", 1).await;
    let pid = init(b, "app").await.producer_id.0;
    for (round, value) in ["a", "b"].into_iter().enumerate() {
        let (code, _) = produce_txn(b, "app", "out", txn_batch(&[value], pid, 0, 0)).await;
        assert_eq!(code, 48, "INVALID_TXN_STATE: not added yet");
        assert_eq!(add(b, "app", pid, 0, "out").await, 0);
        let seq = i32::try_from(round).expect("small");
        let (code, why) = produce_txn(b, "app", "out", txn_batch(&[value], pid, 0, seq)).await;
        assert_eq!(code, 0, "{why:?}");
        let (code, _) = end_v(b, 4, "app", (pid, 0), true).await;
        assert_eq!(code, 0);
        assert_eq!(
            b.node.catalog.transaction("app").map(|r| r.producer_epoch),
            Some(0),
            "EndTxn v4 keeps the epoch"
        );
        assert_eq!(partition_epoch(b, "out", pid).await, Some(0));
    }
    let (values, _) = read_committed(b, "out").await;
    assert_eq!(values.len(), 4, "two records, two markers: {values:?}");
}

/// The transactional ids ListTransactions names, sorted.
async fn listed(b: &Broker) -> Vec<String> {
    let resp: ListTransactionsResponse = call(
        b,
        ApiKey::ListTransactions,
        1,
        &ListTransactionsRequest::default(),
    )
    .await;
    assert_eq!(resp.error_code, 0);
    let mut ids: Vec<String> = resp
        .transaction_states
        .iter()
        .map(|t| t.transactional_id.0.to_string())
        .collect();
    ids.sort();
    ids
}

/// Kafka's admin client asks every broker for its transactions and merges
/// the answers: an agent lists only the transactions whose coordinator slot
/// it holds, else a cluster of three agents lists each one three times.
async fn list_transactions_names_the_transactions_this_agent_coordinates(logs: Logs) {
    use metastore::{AgentAddrs, AgentRegistration, ClusterControl};
    let t = TestBroker::start(logs).await;
    let b = &t.broker;
    // the slots agent 1 hands over when a second agent joins: its highest
    let moving: Vec<u32> = (32..64).collect();
    let id_in = |taken: bool| {
        (0..1000)
            .map(|i| format!("txn-{i}"))
            .find(|k| {
                let slot = b.node.catalog.coordinator(k).map(|p| p.slot);
                slot.is_some_and(|s| moving.contains(&s) == taken)
            })
            .expect("a transactional id in such a slot")
    };
    let (leaving, staying) = (id_in(true), id_in(false));
    assert_eq!(init(b, &leaving).await.error_code, 0);
    assert_eq!(init(b, &staying).await.error_code, 0);
    let mut both = vec![leaving.clone(), staying.clone()];
    both.sort();
    assert_eq!(listed(b).await, both, "agent 1 coordinates both");

    let registration = AgentRegistration {
        id: 2,
        addrs: AgentAddrs {
            kafka: Some("10.0.0.2:9092".into()),
            ..Default::default()
        },
        rack: None,
        instance: None,
    };
    b.node
        .catalog
        .register_agent(registration.clone())
        .await
        .expect("agent 2 registers");
    let _alive = b
        .node
        .catalog
        .keep_agent_alive(registration, std::time::Duration::from_millis(200));
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(30);
    while b.node.catalog.coordinator(&leaving).map(|p| p.holder.agent) != Some(2) {
        assert!(
            tokio::time::Instant::now() < deadline,
            "agent 2 never took its share of the slots"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    assert_eq!(
        listed(b).await,
        vec![staying],
        "agent 1 no longer lists the transaction whose slot agent 2 took"
    );
}

/// The aborted transactions a read_committed fetch of partition 0 of
/// `topic` names, as (producer id, first offset), and the offset of each
/// record it returns.
async fn aborted_and_offsets(b: &Broker, topic: &str) -> (Vec<(i64, i64)>, Vec<(i64, String)>) {
    let req = fetch_req(topic, 0, 0, 1).with_isolation_level(1);
    let resp: FetchResponse = call(b, ApiKey::Fetch, 12, &req).await;
    let p = &resp.responses[0].partitions[0];
    let aborted = p
        .aborted_transactions
        .iter()
        .flatten()
        .map(|t| (t.producer_id.0, t.first_offset))
        .collect();
    (aborted, values_of(p.records.clone()))
}

/// The sweep completes prepared transactions from a copy of the records it
/// took when it began, one after the other, each for as long as its
/// markers take (up to half a minute while a leader is cut off). Meanwhile
/// the transaction's own EndTxn (or its retry) may complete it, and a
/// producer before transaction version 2 (librdkafka) goes on with the
/// same producer id and epoch: its next transaction writes to the same
/// partitions. A completion of the outdated copy then wrote the old
/// outcome's marker again, into the next transaction, which no partition
/// can tell from that transaction's own end: an ABORT there hid the
/// records the next transaction wrote before it, though that one
/// committed. A completion goes by the record as the metastore holds it
/// now, and writes nothing for a transaction no longer prepared.
async fn a_completion_of_an_outdated_record_writes_no_marker_into_the_next_transaction(logs: Logs) {
    let t = TestBroker::start(logs).await;
    let b = &t.broker;
    create(b, "out", 1).await;
    let pid = init(b, "app").await.producer_id.0;
    assert_eq!(add(b, "app", pid, 0, "out").await, 0);
    let (code, why) = produce_txn(b, "app", "out", txn_batch(&["aborted"], pid, 0, 0)).await;
    assert_eq!(code, 0, "{why:?}");
    // the abort is prepared, and the sweep copies the record as it stands
    let prepared = b
        .node
        .catalog
        .end_transaction("app", (pid, 0), false, None, false)
        .await
        .expect("prepared");
    let outdated = prepared.clone();
    // the transaction's own EndTxn completes it
    let done = super::txn_coordinator::complete(b, prepared)
        .await
        .expect("completed");
    assert_eq!(done.state, metastore::transactions::TxnState::CompleteAbort);
    // the producer's next transaction, at the same epoch
    assert_eq!(add(b, "app", pid, 0, "out").await, 0);
    let (code, why) = produce_txn(b, "app", "out", txn_batch(&["committed"], pid, 0, 1)).await;
    assert_eq!(code, 0, "{why:?}");
    let started = describe_producers(b, "out", vec![0]).await[0]
        .1
        .iter()
        .find(|p| p.0 == pid)
        .map(|p| p.5);
    assert_eq!(
        started,
        Some(2),
        "open at the record after the first marker"
    );

    // the sweep gets to its copy
    let _ = super::txn_coordinator::complete(b, outdated).await;
    let still = describe_producers(b, "out", vec![0]).await[0]
        .1
        .iter()
        .find(|p| p.0 == pid)
        .map(|p| p.5);
    assert_eq!(
        b.node.catalog.transaction("app").map(|r| r.state),
        Some(metastore::transactions::TxnState::Ongoing)
    );

    assert_eq!(end(b, "app", pid, 0, true).await, 0);
    let (aborted, records) = aborted_and_offsets(b, "out").await;
    // a read_committed client skips this producer's batches from each
    // first offset named to the next ABORT marker: an entry at 2 would
    // hide the committed record
    assert_eq!(
        aborted,
        vec![(pid, 0)],
        "only the first transaction is aborted; records: {records:?}"
    );
    assert_eq!(
        still,
        Some(2),
        "the next transaction stayed open: no marker of the last one ended it"
    );
    assert!(
        records.iter().any(|(o, v)| *o == 2 && v == "committed"),
        "{records:?}"
    );
}
