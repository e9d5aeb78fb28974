use bytes::Bytes;
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::TopicName;

use super::*;
use crate::kafka::api::s;

fn request(topics: &[(&str, &[i32])]) -> ProduceRequest {
    ProduceRequest::default().with_topic_data(
        topics
            .iter()
            .map(|(name, parts)| {
                TopicProduceData::default()
                    .with_name(TopicName(s(*name)))
                    .with_partition_data(
                        parts
                            .iter()
                            .map(|&i| {
                                PartitionProduceData::default()
                                    .with_index(i)
                                    .with_records(Some(Bytes::from(format!("{name}-{i}"))))
                            })
                            .collect(),
                    )
            })
            .collect(),
    )
}

/// (partition, error code, base offset)
type Answered = (i32, i16, i64);

fn answer(topics: &[(&str, &[Answered])]) -> Vec<TopicProduceResponse> {
    topics
        .iter()
        .map(|(name, parts)| {
            TopicProduceResponse::default()
                .with_name(TopicName(s(*name)))
                .with_partition_responses(
                    parts
                        .iter()
                        .map(|&(i, code, offset)| {
                            PartitionProduceResponse::default()
                                .with_index(i)
                                .with_error_code(code)
                                .with_base_offset(offset)
                        })
                        .collect(),
                )
        })
        .collect()
}

fn flat(topics: &[TopicProduceResponse]) -> Vec<(String, i32, i16, i64)> {
    topics
        .iter()
        .flat_map(|t| {
            t.partition_responses
                .iter()
                .map(|p| (t.name.to_string(), p.index, p.error_code, p.base_offset))
        })
        .collect()
}

#[test]
fn only_partitions_refused_for_leadership_are_sent_again_and_their_answers_replace_the_refusals() {
    let original = request(&[("a", &[0, 1, 2]), ("b", &[0])]);
    let mut first = answer(&[
        ("a", &[(0, 0, 10), (1, 6, -1), (2, 7, -1)]),
        ("b", &[(0, 6, -1)]),
    ]);
    let again = refused(false, &first);
    assert_eq!(
        again.iter().cloned().collect::<Vec<_>>(),
        vec![
            (("a".to_owned(), Uuid::nil()), 1),
            (("b".to_owned(), Uuid::nil()), 0)
        ],
        "NOT_LEADER_OR_FOLLOWER only: a timeout (7) may have been written"
    );
    let retry = subset(false, &original, &again);
    let sent: Vec<(String, Vec<i32>)> = retry
        .topic_data
        .iter()
        .map(|t| {
            (
                t.name.to_string(),
                t.partition_data.iter().map(|p| p.index).collect(),
            )
        })
        .collect();
    assert_eq!(sent, vec![("a".into(), vec![1]), ("b".into(), vec![0])]);
    assert_eq!(
        retry.topic_data[0].partition_data[0].records,
        Some(Bytes::from("a-1")),
        "the same batch"
    );
    // the new leader took b-0, a-1's leader still refuses
    replace(
        false,
        &mut first,
        answer(&[("b", &[(0, 0, 40)]), ("a", &[(1, 6, -1)])]),
    );
    assert_eq!(
        flat(&first),
        vec![
            ("a".into(), 0, 0, 10),
            ("a".into(), 1, 6, -1),
            ("a".into(), 2, 7, -1),
            ("b".into(), 0, 0, 40)
        ]
    );
    assert_eq!(refused(false, &first).len(), 1);
}
