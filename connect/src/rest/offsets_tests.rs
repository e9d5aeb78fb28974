use std::time::Duration;

use metastore::{AgentAddrs, AgentRegistration, ClusterControl, CreateTopic, Groups, Topics};
use serde_json::json;

use super::super::testkit::Api;
use super::sink_group;

const ALTERED: &str = "The offsets for this connector have been altered successfully";
const RESET: &str = "The offsets for this connector have been reset successfully";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn source_offsets_change_only_while_stopped() {
    let api = Api::start().await;
    api.datagen("gen", 2).await;
    let (status, body) = api.get("/connectors/gen/offsets").await;
    assert_eq!((status, body), (200, json!({"offsets": []})));

    let patch = json!({"offsets": [
        {"partition": {"task": 0}, "offset": {"seq": 10}},
        {"partition": {"task": 1}, "offset": {"seq": 11}},
    ]});
    let (status, body) = api
        .call("PATCH", "/connectors/gen/offsets", Some(patch.clone()))
        .await;
    assert_eq!(status, 400, "{body}");
    assert!(body["message"]
        .as_str()
        .is_some_and(|m| m.contains("STOPPED")));
    let (status, _) = api.call("DELETE", "/connectors/gen/offsets", None).await;
    assert_eq!(status, 400);

    let (status, _) = api.call("PUT", "/connectors/gen/stop", None).await;
    assert_eq!(status, 202);
    let (status, body) = api
        .call("PATCH", "/connectors/gen/offsets", Some(patch))
        .await;
    assert_eq!((status, body), (200, json!({ "message": ALTERED })));
    // stored as the tasks write them
    assert_eq!(
        api.connector("gen")
            .offsets
            .get(r#"{"task":0}"#)
            .map(String::as_str),
        Some(r#"{"seq":10}"#)
    );
    let (_, body) = api.get("/connectors/gen/offsets").await;
    assert_eq!(
        body,
        json!({"offsets": [
            {"partition": {"task": 0}, "offset": {"seq": 10}},
            {"partition": {"task": 1}, "offset": {"seq": 11}},
        ]})
    );

    // a null offset removes the partition's
    let (status, _) = api
        .call(
            "PATCH",
            "/connectors/gen/offsets",
            Some(json!({"offsets": [{"partition": {"task": 0}, "offset": null}]})),
        )
        .await;
    assert_eq!(status, 200);
    let (_, body) = api.get("/connectors/gen/offsets").await;
    assert_eq!(body["offsets"].as_array().map(Vec::len), Some(1));

    for bad in [
        json!({}),
        json!({"offsets": []}),
        json!({"offsets": [{"partition": null, "offset": {"seq": 1}}]}),
        json!({"offsets": [{"partition": {"task": 0}, "offset": 5}]}),
    ] {
        let (status, body) = api
            .call("PATCH", "/connectors/gen/offsets", Some(bad.clone()))
            .await;
        assert_eq!(status, 400, "{bad}: {body}");
    }

    let (status, body) = api.call("DELETE", "/connectors/gen/offsets", None).await;
    assert_eq!((status, body), (200, json!({ "message": RESET })));
    let (_, body) = api.get("/connectors/gen/offsets").await;
    assert_eq!(body, json!({"offsets": []}));
    api.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sink_offsets_are_the_groups() {
    let api = Api::start().await;
    let registration = AgentRegistration {
        id: 1,
        addrs: AgentAddrs {
            connect: None,
            kafka: Some("127.0.0.1:9092".into()),
            native: None,
            quic: None,
        },
        rack: None,
        instance: None,
    };
    api.meta
        .register_agent(registration.clone())
        .await
        .expect("the agent registers");
    let keep_alive = api
        .meta
        .keep_agent_alive(registration, Duration::from_millis(100));
    api.meta
        .create_topic(
            CreateTopic {
                name: "events".into(),
                partitions: 2,
                replication_factor: 1,
                ..CreateTopic::default()
            },
            false,
        )
        .await
        .expect("the topic is created");
    let (status, body) = api
        .call(
            "POST",
            "/connectors",
            Some(json!({"name": "s3", "config": {
                "connector.class": "ObjectStoreSink",
                "topics": "events",
                "store.url": "memory:///",
            }})),
        )
        .await;
    assert_eq!(status, 201, "{body}");

    let (status, body) = api.get("/connectors/s3/offsets").await;
    assert_eq!((status, body), (200, json!({"offsets": []})));
    let patch = json!({"offsets": [
        {"partition": {"kafka_topic": "events", "kafka_partition": 0}, "offset": {"kafka_offset": 5}},
        {"partition": {"kafka_topic": "events", "kafka_partition": "1"}, "offset": {"kafka_offset": "7"}},
    ]});
    let (status, body) = api
        .call("PATCH", "/connectors/s3/offsets", Some(patch.clone()))
        .await;
    assert_eq!(status, 400, "{body}");
    assert!(body["message"]
        .as_str()
        .is_some_and(|m| m.contains("STOPPED")));
    assert!(api.meta.committed_offsets(&sink_group("s3")).is_empty());

    let (status, _) = api.call("PUT", "/connectors/s3/stop", None).await;
    assert_eq!(status, 202);
    let (status, body) = api
        .call("PATCH", "/connectors/s3/offsets", Some(patch))
        .await;
    assert_eq!((status, body), (200, json!({ "message": ALTERED })));
    let committed = api.meta.committed_offsets("connect-s3");
    assert_eq!(
        committed.get(&("events".to_owned(), 1)).map(|c| c.offset),
        Some(7)
    );
    let (_, body) = api.get("/connectors/s3/offsets").await;
    assert_eq!(
        body,
        json!({"offsets": [
            {"partition": {"kafka_topic": "events", "kafka_partition": 0}, "offset": {"kafka_offset": 5}},
            {"partition": {"kafka_topic": "events", "kafka_partition": 1}, "offset": {"kafka_offset": 7}},
        ]})
    );

    // a partition that does not exist changes nothing
    let (status, body) = api
        .call(
            "PATCH",
            "/connectors/s3/offsets",
            Some(json!({"offsets": [
                {"partition": {"kafka_topic": "events", "kafka_partition": 0}, "offset": {"kafka_offset": 9}},
                {"partition": {"kafka_topic": "events", "kafka_partition": 2}, "offset": {"kafka_offset": 1}},
            ]})),
        )
        .await;
    assert_eq!(status, 400, "{body}");
    let committed = api.meta.committed_offsets("connect-s3");
    assert_eq!(
        committed.get(&("events".to_owned(), 0)).map(|c| c.offset),
        Some(5)
    );
    for bad in [
        json!({"offsets": [{"partition": {"kafka_partition": 0}, "offset": {"kafka_offset": 1}}]}),
        json!({"offsets": [{"partition": {"kafka_topic": "events", "kafka_partition": -1}, "offset": {"kafka_offset": 1}}]}),
        json!({"offsets": [{"partition": {"kafka_topic": "events", "kafka_partition": 0}, "offset": {"kafka_offset": -2}}]}),
        json!({"offsets": [{"partition": {"kafka_topic": "events", "kafka_partition": 0}, "offset": {}}]}),
    ] {
        let (status, body) = api
            .call("PATCH", "/connectors/s3/offsets", Some(bad.clone()))
            .await;
        assert_eq!(status, 400, "{bad}: {body}");
    }

    // null removes one partition's offset
    let (status, _) = api
        .call(
            "PATCH",
            "/connectors/s3/offsets",
            Some(json!({"offsets": [
                {"partition": {"kafka_topic": "events", "kafka_partition": 0}, "offset": null},
            ]})),
        )
        .await;
    assert_eq!(status, 200);
    assert_eq!(api.meta.committed_offsets("connect-s3").len(), 1);

    let (status, body) = api.call("DELETE", "/connectors/s3/offsets", None).await;
    assert_eq!((status, body), (200, json!({ "message": RESET })));
    assert!(api.meta.committed_offsets("connect-s3").is_empty());
    // again: nothing to reset is not an error
    let (status, _) = api.call("DELETE", "/connectors/s3/offsets", None).await;
    assert_eq!(status, 200);
    keep_alive.stop();
    api.stop().await;
}
