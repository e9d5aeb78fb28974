use serde_json::json;

use super::testkit::Api;
use super::MAX_BODY_BYTES;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn root_names_version_commit_and_cluster() {
    let api = Api::start().await;
    let (status, body) = api.get("/").await;
    assert_eq!(status, 200);
    assert_eq!(body["version"], crate::plugins::VERSION);
    assert!(body["commit"].is_string(), "{body}");
    let cluster = api.meta.read(|s| s.cluster_id().map(str::to_owned));
    assert!(cluster.is_some());
    assert_eq!(body["kafka_cluster_id"], json!(cluster));

    let (status, body) = api.get("/health").await;
    assert_eq!(status, 200);
    assert_eq!(body["status"], "healthy");
    api.stop().await;
}

/// Every refusal is Connect's JSON error, whatever refused it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refusals_are_json_errors() {
    let api = Api::start().await;
    let error = |status: u16, body: &serde_json::Value| {
        assert_eq!(body["error_code"], status, "{body}");
        assert!(body["message"].is_string(), "{body}");
    };

    let (status, body) = api
        .raw(
            "POST",
            "/connectors",
            Some("application/json"),
            b"{\"name\": ".to_vec(),
        )
        .await;
    assert_eq!(status, 400);
    error(400, &body);

    let (status, body) = api
        .raw(
            "POST",
            "/connectors",
            Some("application/json"),
            b"[1, 2]".to_vec(),
        )
        .await;
    assert_eq!(status, 400);
    error(400, &body);

    // curl -d without a content type, as Connect (Jersey) refuses it
    let (status, body) = api
        .raw(
            "POST",
            "/connectors",
            Some("application/x-www-form-urlencoded"),
            b"{}".to_vec(),
        )
        .await;
    assert_eq!(status, 415);
    error(415, &body);
    let (status, body) = api.raw("POST", "/connectors", None, b"{}".to_vec()).await;
    assert_eq!(status, 415);
    error(415, &body);

    let big = vec![b' '; MAX_BODY_BYTES + 1];
    let (status, body) = api
        .raw("POST", "/connectors", Some("application/json"), big)
        .await;
    assert_eq!(status, 413);
    error(413, &body);

    let (status, body) = api.get("/no/such/path").await;
    assert_eq!(status, 404);
    error(404, &body);

    let (status, body) = api.call("DELETE", "/connectors", None).await;
    assert_eq!(status, 405);
    error(405, &body);

    // a task id that is not a number names no task
    let (status, body) = api.get("/connectors/x/tasks/one/status").await;
    assert_eq!(status, 404);
    error(404, &body);

    // a config value that is neither a string nor a scalar
    let (status, body) = api
        .call(
            "PUT",
            "/connectors/x/config",
            Some(json!({"connector.class": "DatagenSource", "kafka.topic": ["a"]})),
        )
        .await;
    assert_eq!(status, 400);
    error(400, &body);
    api.stop().await;
}
