//! KIP-890 part 2: a client on transaction version 2 adds no partitions to
//! its transaction. The partition's leader adds one on the producer's first
//! transactional write to it (Produce v12), before the write.
//!
//! In Kafka the leader asks the coordinator, which owns the transaction's
//! log. Here every transaction's record is in the metastore, which every
//! agent writes through the same Raft log and whose every change is checked
//! against the producer (id and epoch) and the transaction's state when it
//! applies. So the leader writes the add itself, unfenced as in
//! load-balancer mode, on whatever agent coordinates the id: the
//! coordinator's decisions (EndTxn, a timeout) are later writes to the same
//! record and see the partition, and a producer a newer epoch fenced is
//! refused. The group of a TxnOffsetCommit v5 is added by the same command
//! that holds its offsets (`txn.rs`).

use kafka_protocol::ResponseError;
use metastore::transactions::TxnPartition;
use metastore::Transactions;

use crate::broker::Broker;
use crate::codes;

/// Adds `part` to the transaction of `id` run by `producer`.
pub(super) async fn add_partition(
    b: &Broker,
    id: &str,
    producer: (i64, i16),
    part: TxnPartition,
) -> Result<(), (ResponseError, String)> {
    let added = b
        .node
        .catalog
        .add_txn_partitions(id, producer, vec![part.clone()], None, true)
        .await;
    match added {
        Ok(r) if r.admits(producer.0, producer.1, &part) => Ok(()),
        Ok(r) => Err((
            ResponseError::InvalidTxnState,
            format!(
                "the transaction of '{id}' is {} after adding {}-{}",
                r.state.name(),
                part.topic,
                part.partition
            ),
        )),
        Err(e) => Err((produce_error(codes::meta_error(&e)), e.to_string())),
    }
}

/// The answer to a write whose partition could not be added: a fenced
/// producer is told so as a late write of an ended transaction is
/// (INVALID_PRODUCER_EPOCH); a transaction still being completed or a
/// metastore that cannot order writes right now is NOT_ENOUGH_REPLICAS, as
/// Kafka answers, which every client retries without refreshing metadata.
pub(super) fn produce_error(e: ResponseError) -> ResponseError {
    match e {
        ResponseError::ProducerFenced | ResponseError::InvalidProducerEpoch => {
            ResponseError::InvalidProducerEpoch
        }
        ResponseError::ConcurrentTransactions
        | ResponseError::RequestTimedOut
        | ResponseError::NotCoordinator
        | ResponseError::CoordinatorNotAvailable => ResponseError::NotEnoughReplicas,
        other => other,
    }
}
