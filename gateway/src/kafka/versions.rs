//! The API versions AeroStream answers, advertised through ApiVersions.
//!
//! Each range is what the handlers implement, clipped to what the
//! `kafka-protocol` codec can decode (it is generated from Kafka 4.1 schemas, so
//! versions Kafka 4 removed, such as Produce v0-v2, are absent).

use kafka_protocol::messages::ApiKey;

/// (API, lowest version, highest version) that the handlers implement.
const IMPLEMENTED: &[(ApiKey, i16, i16)] = &[
    // v12: a transactional write of a client on transaction version 2 adds
    // its partition to the transaction (KIP-890 part 2)
    (ApiKey::Produce, 3, 12),
    (ApiKey::Fetch, 4, 16),
    (ApiKey::ListOffsets, 1, 9),
    (ApiKey::Metadata, 0, 12),
    (ApiKey::OffsetCommit, 2, 9),
    (ApiKey::OffsetFetch, 1, 9),
    (ApiKey::FindCoordinator, 0, 5),
    (ApiKey::JoinGroup, 0, 9),
    (ApiKey::Heartbeat, 0, 4),
    (ApiKey::LeaveGroup, 0, 5),
    (ApiKey::SyncGroup, 0, 5),
    (ApiKey::DescribeGroups, 0, 5),
    (ApiKey::ListGroups, 0, 5),
    (ApiKey::ApiVersions, 0, 4),
    (ApiKey::CreateTopics, 2, 7),
    (ApiKey::DeleteTopics, 1, 6),
    (ApiKey::DeleteRecords, 0, 2),
    (ApiKey::InitProducerId, 0, 5),
    (ApiKey::WriteTxnMarkers, 0, 1),
    // v4 and later are the brokers' batched form (KIP-890); EndTxn v5 bumps
    // the epoch at each end and TxnOffsetCommit v5 adds its group, as the
    // transaction.version feature at level 2 tells clients (KIP-890 part 2;
    // `kafka::features`)
    (ApiKey::AddPartitionsToTxn, 0, 5),
    (ApiKey::AddOffsetsToTxn, 0, 4),
    (ApiKey::EndTxn, 0, 5),
    (ApiKey::TxnOffsetCommit, 0, 5),
    (ApiKey::DescribeTransactions, 0, 0),
    (ApiKey::ListTransactions, 0, 1),
    (ApiKey::DescribeProducers, 0, 0),
    (ApiKey::OffsetForLeaderEpoch, 2, 4),
    (ApiKey::DescribeConfigs, 1, 4),
    (ApiKey::AlterConfigs, 0, 2),
    (ApiKey::CreatePartitions, 0, 3),
    (ApiKey::DeleteGroups, 0, 2),
    (ApiKey::IncrementalAlterConfigs, 0, 1),
    (ApiKey::OffsetDelete, 0, 0),
    (ApiKey::DescribeCluster, 0, 1),
    // KIP-848 consumer groups (`group.protocol=consumer`)
    (ApiKey::ConsumerGroupHeartbeat, 0, 1),
    (ApiKey::ConsumerGroupDescribe, 0, 1),
    (ApiKey::AlterPartitionReassignments, 0, 1),
    (ApiKey::ListPartitionReassignments, 0, 0),
    // v0 handshakes are followed by raw SASL tokens outside Kafka framing,
    // which no client needs any more: v1 only
    (ApiKey::SaslHandshake, 1, 1),
    (ApiKey::SaslAuthenticate, 0, 2),
    (ApiKey::DescribeUserScramCredentials, 0, 0),
    (ApiKey::AlterUserScramCredentials, 0, 0),
    (ApiKey::CreateAcls, 1, 3),
    (ApiKey::DescribeAcls, 1, 3),
    (ApiKey::DeleteAcls, 1, 3),
    (ApiKey::DescribeClientQuotas, 0, 1),
    (ApiKey::AlterClientQuotas, 0, 1),
    (ApiKey::UnregisterBroker, 0, 0),
];

/// The features (KIP-584) ApiVersions v3+ advertises as supported, and
/// finalized at their highest level: `transaction.version` 2 turns on
/// KIP-890 part 2 in clients that know it (Kafka's 4.x Java client). Clients
/// that do not (librdkafka) ignore it and keep the older versions, which
/// are served as before.
pub const FEATURES: &[(&str, i16, i16)] = &[("transaction.version", 0, 2)];

/// The epoch of the finalized features: they are the same on every agent
/// and never change, and clients take the finalized set only from an epoch
/// at or above 0.
pub const FINALIZED_FEATURES_EPOCH: i64 = 1;

/// The advertised (api, min, max) list, clipped to the codec's range.
pub fn supported() -> Vec<(ApiKey, i16, i16)> {
    IMPLEMENTED
        .iter()
        .filter_map(|&(key, min, max)| {
            let codec = key.valid_versions();
            let lo = min.max(codec.min);
            let hi = max.min(codec.max);
            (lo <= hi).then_some((key, lo, hi))
        })
        .collect()
}

/// The advertised range of one API, if it is implemented at all.
pub fn range(key: ApiKey) -> Option<(i16, i16)> {
    supported()
        .into_iter()
        .find(|(k, _, _)| *k == key)
        .map(|(_, lo, hi)| (lo, hi))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_advertised_range_is_decodable_by_the_codec() {
        for (key, lo, hi) in supported() {
            let codec = key.valid_versions();
            assert!(codec.min <= lo && hi <= codec.max, "{key:?} {lo}..={hi}");
        }
        assert_eq!(supported().len(), IMPLEMENTED.len(), "no API clipped away");
    }

    #[test]
    fn api_versions_v3_is_advertised_for_old_librdkafka() {
        let (lo, hi) = range(ApiKey::ApiVersions).expect("advertised");
        assert!(lo == 0 && hi >= 3);
    }
}
