//! The transaction coordinator's work beyond answering requests: writing a
//! prepared transaction's markers to the leaders of its partitions and
//! completing it, and the sweep that aborts transactions past their timeout
//! and finishes what a failed coordinator left prepared.
//!
//! Transactions live in the metastore (`metastore::transactions`), so any
//! agent can finish any of them; the sweep runs on the agent holding a
//! transactional id's coordinator slot, which after a failure is a
//! survivor. A marker goes to the partition's leader: written here where
//! this agent leads, otherwise sent as WriteTxnMarkers over the cluster
//! endpoint (mutual TLS between members), under the coordinator principal
//! only agents use.

use std::sync::Arc;
use std::time::Duration;

use bytes::BytesMut;
use kafka_protocol::messages::write_txn_markers_request::{
    WritableTxnMarker, WritableTxnMarkerTopic,
};
use kafka_protocol::messages::{
    ApiKey, ProducerId, RequestHeader, TopicName, WriteTxnMarkersRequest, WriteTxnMarkersResponse,
};
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};
use kafka_protocol::ResponseError;
use metastore::transactions::{TxnPartition, TxnRecord, TxnState};
use metastore::{Groups, Topics, Transactions};

use dataplane::backend::Marker;
use storage::ControlType;

use crate::broker::Broker;

/// How long one completion keeps retrying markers before leaving the
/// transaction prepared for the sweep.
const COMPLETE_WITHIN: Duration = Duration::from_secs(30);

/// Pause between marker rounds while some partition has no leader.
const RETRY_EVERY: Duration = Duration::from_millis(100);

/// How often the sweep looks for expired and stranded transactions.
const SWEEP_EVERY: Duration = Duration::from_millis(500);

/// A prepared transaction nobody completed for this long is completed by
/// the sweep (its coordinator died, or its markers failed).
const STRANDED_AFTER_MS: i64 = 3_000;

/// Writes the markers of a prepared transaction and completes it; answers
/// the completed record. `Err` leaves it prepared (the sweep retries).
///
/// `record` says which transactional id to complete, and may be outdated:
/// the sweep completes the records as it found them when it began, one
/// after the other, each for as long as its markers take; by the time it
/// gets to one, the EndTxn that prepared it may have completed it, and its
/// producer begun the next transaction. On transaction version 1 that one
/// has the same producer id and epoch, so no partition can tell a marker
/// of the old outcome from the end of the new transaction: written again
/// then, an ABORT would end the new transaction wherever it had written,
/// and a read_committed reader would skip those records though it
/// commits. So, under the claim and with this agent's replica of the
/// metastore caught up, the transaction is completed as the metastore
/// holds it now, and nothing is written once it is no longer prepared;
/// each round of markers checks that again.
pub(crate) async fn complete(b: &Broker, record: TxnRecord) -> Result<TxnRecord, ResponseError> {
    if record.state.preparing().is_none() {
        return Ok(record);
    }
    let Some(_claim) = b.txn_completing.claim(&record.transactional_id) else {
        return Err(ResponseError::ConcurrentTransactions);
    };
    b.node
        .catalog
        .linearizable_barrier()
        .await
        .map_err(|e| crate::codes::meta_error(&e))?;
    let (record, commit) = match b.node.catalog.transaction(&record.transactional_id) {
        Some(now) => match now.state.preparing() {
            Some(commit) => (now, commit),
            None => {
                tracing::debug!(
                    transactional_id = %now.transactional_id,
                    state = now.state.name(),
                    "no marker written: the transaction is no longer prepared"
                );
                return Ok(now);
            }
        },
        None => return Ok(record),
    };
    let coordinator_epoch = b
        .node
        .catalog
        .coordinator(&record.transactional_id)
        .map_or(0, |p| p.holder.epoch);
    let marker = Marker {
        producer_id: record.producer_id,
        producer_epoch: record.producer_epoch,
        control: if commit {
            ControlType::Commit
        } else {
            ControlType::Abort
        },
        coordinator_epoch,
    };
    let deadline = tokio::time::Instant::now() + COMPLETE_WITHIN;
    let mut left: Vec<TxnPartition> = record.partitions.iter().cloned().collect();
    while !left.is_empty() {
        let round =
            futures::future::join_all(left.iter().map(|p| write_marker(b, p, marker))).await;
        let mut still = Vec::new();
        for (p, error) in left.into_iter().zip(round) {
            match error {
                None => {}
                // a partition deleted since: nothing left to end there
                Some(ResponseError::UnknownTopicOrPartition) => {}
                Some(e) => {
                    tracing::debug!(topic = %p.topic, partition = p.partition, error = ?e, "transaction marker not written yet");
                    still.push(p);
                }
            }
        }
        left = still;
        if !left.is_empty() {
            if tokio::time::Instant::now() >= deadline {
                tracing::warn!(
                    transactional_id = %record.transactional_id,
                    partitions = left.len(),
                    "transaction markers not written within {COMPLETE_WITHIN:?}; left prepared for a retry"
                );
                return Err(ResponseError::ConcurrentTransactions);
            }
            tokio::time::sleep(RETRY_EVERY).await;
            // completed meanwhile elsewhere (the coordinator slot moved):
            // a marker written now could land in the next transaction
            match b.node.catalog.transaction(&record.transactional_id) {
                Some(now) if same_transaction(&now, &record) => {}
                now => return Ok(now.unwrap_or(record)),
            }
        }
    }
    b.node
        .catalog
        .complete_transaction(
            &record.transactional_id,
            (record.producer_id, record.producer_epoch),
            commit,
        )
        .await
        .map_err(|e| {
            tracing::warn!(transactional_id = %record.transactional_id, error = %e, "completing a transaction failed");
            crate::codes::meta_error(&e)
        })
}

/// Whether `now` is still the prepared transaction `was` (the same
/// producer, outcome and start).
fn same_transaction(now: &TxnRecord, was: &TxnRecord) -> bool {
    now.producer_id == was.producer_id
        && now.producer_epoch == was.producer_epoch
        && now.state == was.state
        && now.started_ms == was.started_ms
}

/// Writes one marker at the partition's leader; the error, if any.
async fn write_marker(b: &Broker, p: &TxnPartition, marker: Marker) -> Option<ResponseError> {
    let Some(topic) = b.node.catalog.topic(&p.topic) else {
        return Some(ResponseError::UnknownTopicOrPartition);
    };
    let Some(leader) = usize::try_from(p.partition)
        .ok()
        .and_then(|i| topic.partitions.get(i))
        .map(|part| part.leader)
    else {
        return Some(ResponseError::UnknownTopicOrPartition);
    };
    let Some(leader) = leader else {
        return Some(ResponseError::LeaderNotAvailable);
    };
    if i64::try_from(leader).ok() == Some(i64::from(b.config.node_id)) {
        return super::txn_markers::write(b, &p.topic, p.partition, marker).await;
    }
    let Some(fwd) = b.cluster_forwarder() else {
        return Some(ResponseError::NotLeaderOrFollower);
    };
    let request =
        WriteTxnMarkersRequest::default().with_markers(vec![WritableTxnMarker::default()
            .with_producer_id(ProducerId(marker.producer_id))
            .with_producer_epoch(marker.producer_epoch)
            .with_transaction_result(marker.control == ControlType::Commit)
            .with_coordinator_epoch(marker.coordinator_epoch)
            .with_topics(vec![WritableTxnMarkerTopic::default()
                .with_name(TopicName(StrBytes::from_string(p.topic.clone())))
                .with_partition_indexes(vec![p.partition])])]);
    const VERSION: i16 = 1;
    let header = RequestHeader::default()
        .with_request_api_key(ApiKey::WriteTxnMarkers as i16)
        .with_request_api_version(VERSION)
        .with_client_id(Some(StrBytes::from_static_str("aerostream-coordinator")));
    let mut frame = BytesMut::new();
    if header
        .encode(
            &mut frame,
            ApiKey::WriteTxnMarkers.request_header_version(VERSION),
        )
        .and_then(|()| request.encode(&mut frame, VERSION))
        .is_err()
    {
        return Some(ResponseError::UnknownServerError);
    }
    let origin = crate::forward::Origin {
        host: "",
        principal: super::txn_markers::COORDINATOR_PRINCIPAL,
    };
    let answer = fwd
        .call(leader, origin, &frame, None, Duration::from_secs(35))
        .await;
    let Ok(Some(mut resp)) = answer else {
        return Some(ResponseError::NotLeaderOrFollower);
    };
    let decoded = kafka_protocol::messages::ResponseHeader::decode(
        &mut resp,
        ApiKey::WriteTxnMarkers.response_header_version(VERSION),
    )
    .and_then(|_| WriteTxnMarkersResponse::decode(&mut resp, VERSION));
    let Ok(decoded) = decoded else {
        return Some(ResponseError::UnknownServerError);
    };
    let code = decoded
        .markers
        .iter()
        .flat_map(|m| &m.topics)
        .flat_map(|t| &t.partitions)
        .map(|r| r.error_code)
        .find(|c| *c != 0);
    code.map(|c| ResponseError::try_from_code(c).unwrap_or(ResponseError::UnknownServerError))
}

/// Runs the sweep until the broker shuts down: on the agent holding each
/// transactional id's coordinator slot, aborts ongoing transactions past
/// their timeout and completes prepared ones nobody is completing.
pub(crate) fn spawn_sweeper(b: Arc<Broker>) {
    let mut stop = b.shutdown_signal();
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(SWEEP_EVERY);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = tick.tick() => {}
                _ = stop.changed() => return,
            }
            if *stop.borrow() {
                return;
            }
            sweep(&b).await;
        }
    });
}

async fn sweep(b: &Broker) {
    let me = u64::try_from(b.config.node_id).ok();
    let now = dataplane::partition::now_ms();
    for record in b.node.catalog.transactions() {
        let mine = b
            .node
            .catalog
            .coordinator(&record.transactional_id)
            .is_some_and(|p| Some(p.holder.agent) == me);
        if !mine {
            continue;
        }
        let record = match record.state {
            TxnState::Ongoing
                if now.saturating_sub(record.started_ms) >= i64::from(record.timeout_ms) =>
            {
                match b
                    .node
                    .catalog
                    .expire_transaction(
                        &record.transactional_id,
                        (record.producer_id, record.producer_epoch),
                    )
                    .await
                {
                    Ok(r) => {
                        tracing::info!(
                            transactional_id = %r.transactional_id,
                            producer_id = r.producer_id,
                            timeout_ms = r.timeout_ms,
                            "aborting a transaction past its timeout"
                        );
                        r
                    }
                    // the producer moved on, or the leader's clock says not yet
                    Err(e) => {
                        tracing::debug!(transactional_id = %record.transactional_id, error = %e, "not expired");
                        continue;
                    }
                }
            }
            TxnState::PrepareCommit | TxnState::PrepareAbort
                if now.saturating_sub(record.updated_ms) >= STRANDED_AFTER_MS =>
            {
                record
            }
            _ => continue,
        };
        let _ = complete(b, record).await;
    }
}
