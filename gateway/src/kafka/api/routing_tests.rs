use kafka_protocol::messages::list_offsets_response::{
    ListOffsetsPartitionResponse, ListOffsetsTopicResponse,
};
use kafka_protocol::messages::produce_response::{PartitionProduceResponse, TopicProduceResponse};
use kafka_protocol::messages::TopicName;
use uuid::Uuid;

use super::{layout, merge, Topic};
use crate::kafka::api::s;

fn offsets(name: &str, parts: &[(i32, i64)]) -> ListOffsetsTopicResponse {
    ListOffsetsTopicResponse::default()
        .with_name(TopicName(s(name)))
        .with_partitions(
            parts
                .iter()
                .map(|&(i, o)| {
                    ListOffsetsPartitionResponse::default()
                        .with_partition_index(i)
                        .with_offset(o)
                })
                .collect(),
        )
}

#[test]
fn answers_from_several_owners_come_back_in_the_order_the_client_asked() {
    let mut asked = vec![
        offsets("a", &[(2, 0), (0, 0), (1, 0)]),
        offsets("b", &[(0, 0)]),
    ];
    let order = layout(&mut asked);
    // two owners answered, each in its own order; partition a-1's owner did not
    let answers = vec![offsets("b", &[(0, 40)]), offsets("a", &[(0, 10), (2, 30)])];
    let merged = merge(false, &order, answers, |i| {
        ListOffsetsPartitionResponse::default()
            .with_partition_index(i)
            .with_error_code(6)
    });
    let got: Vec<(String, i32, i64, i16)> = merged
        .into_iter()
        .flat_map(|t| {
            let name = t.name.to_string();
            t.partitions
                .into_iter()
                .map(move |p| (name.clone(), p.partition_index, p.offset, p.error_code))
        })
        .collect();
    assert_eq!(
        got,
        vec![
            ("a".into(), 2, 30, 0),
            ("a".into(), 0, 10, 0),
            ("a".into(), 1, -1, 6),
            ("b".into(), 0, 40, 0),
        ]
    );
}

#[test]
fn topics_named_by_id_are_matched_by_id() {
    let id = Uuid::from_u128(7);
    let mut asked = vec![TopicProduceResponse::named(&TopicName(s("")), id)];
    asked[0]
        .parts()
        .push(PartitionProduceResponse::default().with_index(3));
    let order = layout(&mut asked);
    let answer = TopicProduceResponse::default()
        .with_topic_id(id)
        .with_partition_responses(vec![PartitionProduceResponse::default()
            .with_index(3)
            .with_base_offset(99)]);
    let merged = merge(true, &order, vec![answer], |i| {
        PartitionProduceResponse::default()
            .with_index(i)
            .with_error_code(6)
    });
    assert_eq!(merged.len(), 1);
    assert_eq!(merged[0].topic_id, id);
    assert_eq!(merged[0].partition_responses[0].base_offset, 99);
    assert_eq!(merged[0].partition_responses[0].error_code, 0);
}
