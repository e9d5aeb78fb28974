use serde_json::{json, Value};

use super::super::testkit::Api;
use crate::plugins::VERSION;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plugins_and_their_keys() {
    let api = Api::start().await;
    let (status, body) = api.get("/connector-plugins").await;
    assert_eq!(status, 200);
    assert_eq!(
        body,
        json!([
            {"class": "io.aerostream.connect.datagen.DatagenSource", "type": "source", "version": VERSION},
            {"class": "io.aerostream.connect.storage.ObjectStoreSink", "type": "sink", "version": VERSION},
            {"class": "io.aerostream.connect.http.HttpSink", "type": "sink", "version": VERSION},
            {"class": "io.aerostream.connect.http.HttpSource", "type": "source", "version": VERSION},
            {"class": "io.aerostream.connect.postgres.PostgresSink", "type": "sink", "version": VERSION},
            {"class": "io.aerostream.connect.postgres.PostgresSource", "type": "source", "version": VERSION},
        ])
    );
    let (_, body) = api.get("/connector-plugins?connectorsOnly=false").await;
    let converters: Vec<&Value> = body
        .as_array()
        .map(|a| a.iter().filter(|p| p["type"] == "converter").collect())
        .unwrap_or_default();
    let classes: Vec<&str> = converters
        .iter()
        .filter_map(|c| c["class"].as_str())
        .collect();
    assert_eq!(
        classes,
        [
            "org.apache.kafka.connect.json.JsonConverter",
            "org.apache.kafka.connect.storage.StringConverter",
            "org.apache.kafka.connect.converters.ByteArrayConverter",
            "io.confluent.connect.avro.AvroConverter",
            "io.confluent.connect.protobuf.ProtobufConverter",
            "io.confluent.connect.json.JsonSchemaConverter",
        ],
        "{body}"
    );

    let (status, body) = api.get("/connector-plugins/DatagenSource/config").await;
    assert_eq!(status, 200);
    let keys = body.as_array().cloned().unwrap_or_default();
    let topic = keys
        .iter()
        .find(|k| k["name"] == "kafka.topic")
        .cloned()
        .unwrap_or_default();
    assert_eq!(
        topic,
        json!({
            "name": "kafka.topic",
            "type": "STRING",
            "required": true,
            "default_value": null,
            "importance": "HIGH",
            "documentation": "The topic records are written to.",
            "group": "Datagen",
            "order": 1,
            "width": "NONE",
            "display_name": "kafka.topic",
            "dependents": [],
        })
    );
    assert!(keys.iter().any(|k| k["name"] == "tasks.max"));
    let (status, _) = api
        .get("/connector-plugins/io.aerostream.connect.storage.ObjectStoreSink/config")
        .await;
    assert_eq!(status, 200);
    let (status, body) = api.get("/connector-plugins/Nope/config").await;
    assert_eq!(status, 404);
    assert_eq!(body["error_code"], 404);
    api.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn validate_shows_every_key_and_error() {
    let api = Api::start().await;
    let (status, body) = api
        .call(
            "PUT",
            "/connector-plugins/DatagenSource/config/validate",
            Some(json!({"connector.class": "DatagenSource", "tasks.max": "zero"})),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["name"], "DatagenSource");
    // name, tasks.max and kafka.topic
    assert_eq!(body["error_count"], 3, "{body}");
    assert_eq!(
        body["groups"],
        json!(["Common", "Error Handling", "Datagen"])
    );
    let configs = body["configs"].as_array().cloned().unwrap_or_default();
    let errors: usize = configs
        .iter()
        .map(|c| c["value"]["errors"].as_array().map_or(0, Vec::len))
        .sum();
    assert_eq!(errors, 3);
    let tasks = configs
        .iter()
        .find(|c| c["definition"]["name"] == "tasks.max")
        .cloned()
        .unwrap_or_default();
    assert_eq!(tasks["value"]["name"], "tasks.max");
    assert_eq!(tasks["value"]["value"], "zero");
    assert_eq!(tasks["value"]["recommended_values"], json!([]));
    assert_eq!(tasks["value"]["visible"], true);
    assert_eq!(tasks["value"]["errors"].as_array().map(Vec::len), Some(1));
    let interval = configs
        .iter()
        .find(|c| c["definition"]["name"] == "max.interval")
        .cloned()
        .unwrap_or_default();
    assert_eq!(interval["value"]["value"], "500", "defaults are shown");
    assert_eq!(interval["value"]["errors"], json!([]));

    let (status, body) = api
        .call(
            "PUT",
            "/connector-plugins/io.aerostream.connect.datagen.DatagenSource/config/validate",
            Some(json!({"name": "g", "connector.class": "DatagenSource", "kafka.topic": "t"})),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["error_count"], 0);

    // the body's class must be the path's
    let (status, body) = api
        .call(
            "PUT",
            "/connector-plugins/ObjectStoreSink/config/validate",
            Some(json!({"connector.class": "DatagenSource"})),
        )
        .await;
    assert_eq!(status, 400, "{body}");
    assert_eq!(body["error_code"], 400);
    let (status, _) = api
        .call(
            "PUT",
            "/connector-plugins/DatagenSource/config/validate",
            Some(json!({"kafka.topic": "t"})),
        )
        .await;
    assert_eq!(status, 400);
    let (status, _) = api
        .call(
            "PUT",
            "/connector-plugins/Nope/config/validate",
            Some(json!({"connector.class": "Nope"})),
        )
        .await;
    assert_eq!(status, 400);
    api.stop().await;
}
