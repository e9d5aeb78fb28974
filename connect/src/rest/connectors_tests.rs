use serde_json::json;

use super::super::testkit::Api;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn create_get_list_and_expand() {
    let api = Api::start().await;
    let (status, body) = api.get("/connectors").await;
    assert_eq!((status, body), (200, json!([])));

    let created = api.datagen("gen", 2).await;
    assert_eq!(
        created,
        json!({
            "name": "gen",
            "config": {
                "connector.class": "DatagenSource",
                "kafka.topic": "events",
                "tasks.max": "2",
                "name": "gen",
            },
            "tasks": [{"connector": "gen", "task": 0}, {"connector": "gen", "task": 1}],
            "type": "source",
        })
    );
    let (status, body) = api.get("/connectors/gen").await;
    assert_eq!((status, &body), (200, &created));
    let (status, body) = api.get("/connectors/gen/config").await;
    assert_eq!((status, &body), (200, &created["config"]));

    // the name may be given in the config only
    let (status, body) = api
        .call(
            "POST",
            "/connectors/",
            Some(json!({"config": {
                "name": "sink",
                "connector.class": "io.aerostream.connect.storage.ObjectStoreSink",
                "topics": "events",
                "store.url": "memory:///",
            }})),
        )
        .await;
    assert_eq!(status, 201, "{body}");
    assert_eq!(body["type"], "sink");

    let (status, body) = api.get("/connectors").await;
    assert_eq!((status, body), (200, json!(["gen", "sink"])));

    let (status, body) = api.get("/connectors?expand=status").await;
    assert_eq!(status, 200);
    assert_eq!(body["gen"]["status"]["name"], "gen");
    assert_eq!(body["gen"]["status"]["type"], "source");
    assert!(body["gen"].get("info").is_none(), "{body}");
    assert_eq!(body["sink"]["status"]["connector"]["state"], "UNASSIGNED");

    let (status, body) = api.get("/connectors?expand=info&expand=status").await;
    assert_eq!(status, 200);
    assert_eq!(body["gen"]["info"], created);
    assert_eq!(
        body["gen"]["status"]["tasks"].as_array().map(Vec::len),
        Some(2)
    );
    assert_eq!(body["sink"]["info"]["type"], "sink");
    api.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn create_refusals() {
    let api = Api::start().await;
    api.datagen("gen", 1).await;
    let (status, body) = api
        .call(
            "POST",
            "/connectors",
            Some(json!({"name": "gen", "config": {
                "connector.class": "DatagenSource", "kafka.topic": "other"
            }})),
        )
        .await;
    assert_eq!(status, 409);
    assert_eq!(
        body,
        json!({"error_code": 409, "message": "Connector gen already exists"})
    );

    // every error at once, one a line
    let (status, body) = api
        .call(
            "POST",
            "/connectors",
            Some(json!({"name": "bad", "config": {
                "connector.class": "DatagenSource",
                "tasks.max": "0",
                "max.interval": "-1",
            }})),
        )
        .await;
    assert_eq!(status, 400);
    assert_eq!(body["error_code"], 400);
    let message = body["message"].as_str().unwrap_or_default();
    let lines: Vec<&str> = message.lines().collect();
    assert_eq!(
        lines.first().copied(),
        Some("Connector configuration is invalid and contains the following 3 error(s):"),
        "{message}"
    );
    assert_eq!(lines.len(), 5, "{message}");
    assert!(
        lines[1..4].iter().any(|l| l.contains("tasks.max")),
        "{message}"
    );
    assert!(
        lines[1..4].iter().any(|l| l.contains("kafka.topic")),
        "{message}"
    );
    assert!(
        lines[1..4].iter().any(|l| l.contains("max.interval")),
        "{message}"
    );
    assert_eq!(
        lines[4],
        "You can also find the above list of errors at the endpoint \
         `/connector-plugins/{connectorType}/config/validate`"
    );

    let (status, body) = api
        .call(
            "POST",
            "/connectors",
            Some(json!({"name": "x", "config": {"connector.class": "NoSuchConnector"}})),
        )
        .await;
    assert_eq!(status, 400);
    let message = body["message"].as_str().unwrap_or_default();
    assert!(message.contains("NoSuchConnector"), "{message}");
    assert!(message.contains("DatagenSource") && message.contains("ObjectStoreSink"));

    let (status, body) = api
        .call(
            "POST",
            "/connectors",
            Some(json!({"name": "x", "config": {}})),
        )
        .await;
    assert_eq!(status, 400);
    assert!(body["message"]
        .as_str()
        .is_some_and(|m| m.contains("contains no connector type")));

    let (status, _) = api
        .call(
            "POST",
            "/connectors",
            Some(json!({"name": "x", "config": {
                "name": "y", "connector.class": "DatagenSource", "kafka.topic": "t"
            }})),
        )
        .await;
    assert_eq!(status, 400);
    let (status, _) = api
        .call("POST", "/connectors", Some(json!({"name": "x"})))
        .await;
    assert_eq!(status, 400);
    let (status, _) = api
        .call(
            "POST",
            "/connectors",
            Some(json!({"name": "x", "initial_state": "SLEEPING", "config": {
                "connector.class": "DatagenSource", "kafka.topic": "t"
            }})),
        )
        .await;
    assert_eq!(status, 400);
    // nothing was created by the refusals
    let (_, body) = api.get("/connectors").await;
    assert_eq!(body, json!(["gen"]));
    api.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn put_patch_delete_and_not_found() {
    let api = Api::start().await;
    let config = json!({"connector.class": "DatagenSource", "kafka.topic": "t", "tasks.max": 1});
    let (status, body) = api
        .call("PUT", "/connectors/gen/config", Some(config.clone()))
        .await;
    assert_eq!(status, 201, "{body}");
    assert_eq!(body["config"]["name"], "gen");
    assert_eq!(body["tasks"].as_array().map(Vec::len), Some(1));
    let generation = api.connector("gen").generation;

    let mut bigger = config.clone();
    bigger["tasks.max"] = json!("3");
    let (status, body) = api
        .call("PUT", "/connectors/gen/config", Some(bigger))
        .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["tasks"].as_array().map(Vec::len), Some(3));
    assert!(api.connector("gen").generation > generation);

    let (status, _) = api
        .call(
            "PUT",
            "/connectors/gen/config",
            Some(json!({"name": "other", "connector.class": "DatagenSource", "kafka.topic": "t"})),
        )
        .await;
    assert_eq!(status, 400);

    // KIP-477: what is given replaces, null removes
    let (status, body) = api
        .call(
            "PATCH",
            "/connectors/gen/config",
            Some(json!({"kafka.topic": "u", "tasks.max": null})),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["config"]["kafka.topic"], "u");
    assert!(body["config"].get("tasks.max").is_none(), "{body}");
    assert_eq!(body["tasks"].as_array().map(Vec::len), Some(1));

    let (status, body) = api.call("DELETE", "/connectors/gen", None).await;
    assert_eq!((status, body), (204, serde_json::Value::Null));

    let not_found = json!({"error_code": 404, "message": "Connector gen not found"});
    for (method, path) in [
        ("GET", "/connectors/gen"),
        ("GET", "/connectors/gen/config"),
        ("GET", "/connectors/gen/status"),
        ("GET", "/connectors/gen/tasks"),
        ("GET", "/connectors/gen/offsets"),
        ("DELETE", "/connectors/gen"),
        ("DELETE", "/connectors/gen/offsets"),
        ("PUT", "/connectors/gen/pause"),
        ("PUT", "/connectors/gen/resume"),
        ("PUT", "/connectors/gen/stop"),
        ("POST", "/connectors/gen/restart"),
        ("POST", "/connectors/gen/restart?includeTasks=true"),
    ] {
        let (status, body) = api.call(method, path, None).await;
        assert_eq!((status, &body), (404, &not_found), "{method} {path}");
    }
    let (status, body) = api
        .call("PATCH", "/connectors/gen/config", Some(json!({"a": "b"})))
        .await;
    assert_eq!((status, &body), (404, &not_found));
    api.stop().await;
}
