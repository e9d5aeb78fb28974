use serde_json::{json, Value};

use super::super::testkit::Api;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_follows_reports_and_targets() {
    let api = Api::start().await;
    api.datagen("gen", 2).await;
    let me = api.worker.clone();

    // nobody has reported: unassigned, on this worker
    let (status, body) = api.get("/connectors/gen/status").await;
    assert_eq!(status, 200);
    assert_eq!(
        body,
        json!({
            "name": "gen",
            "connector": {"state": "UNASSIGNED", "worker_id": me},
            "tasks": [
                {"id": 0, "state": "UNASSIGNED", "worker_id": me},
                {"id": 1, "state": "UNASSIGNED", "worker_id": me},
            ],
            "type": "source",
        })
    );

    api.report("gen", None, "RUNNING", "w1:8083").await;
    api.report("gen", Some(0), "RUNNING", "w1:8083").await;
    api.report("gen", Some(1), "FAILED", "w2:8083").await;
    let (_, body) = api.get("/connectors/gen/status").await;
    assert_eq!(
        body["connector"],
        json!({"state": "RUNNING", "worker_id": "w1:8083"})
    );
    assert_eq!(
        body["tasks"][0],
        json!({"id": 0, "state": "RUNNING", "worker_id": "w1:8083"})
    );
    assert_eq!(
        body["tasks"][1],
        json!({"id": 1, "state": "FAILED", "worker_id": "w2:8083", "trace": "boom"})
    );
    let (status, body) = api.get("/connectors/gen/tasks/1/status").await;
    assert_eq!(status, 200);
    assert_eq!(body["state"], "FAILED");
    let (status, body) = api.get("/connectors/gen/tasks/2/status").await;
    assert_eq!(status, 404, "{body}");
    assert_eq!(body["error_code"], 404);

    let (status, body) = api.get("/connectors/gen/tasks").await;
    assert_eq!(status, 200);
    assert_eq!(body[1]["id"], json!({"connector": "gen", "task": 1}));
    assert_eq!(body[1]["config"]["task.index"], "1");

    // paused: the reports are of the old generation until workers report
    let (status, body) = api.call("PUT", "/connectors/gen/pause", None).await;
    assert_eq!((status, body), (202, Value::Null));
    let (_, body) = api.get("/connectors/gen/status").await;
    assert_eq!(
        body["connector"],
        json!({"state": "PAUSED", "worker_id": "w1:8083"})
    );
    assert_eq!(body["tasks"][1]["state"], "PAUSED");

    let (status, _) = api.call("PUT", "/connectors/gen/resume", None).await;
    assert_eq!(status, 202);
    let (_, body) = api.get("/connectors/gen/status").await;
    assert_eq!(body["connector"]["state"], "UNASSIGNED");
    assert_eq!(body["tasks"][0]["state"], "UNASSIGNED");

    // stopped: no tasks, as in Connect
    let (status, _) = api.call("PUT", "/connectors/gen/stop", None).await;
    assert_eq!(status, 202);
    let (_, body) = api.get("/connectors/gen/status").await;
    assert_eq!(body["connector"]["state"], "STOPPED");
    assert_eq!(body["tasks"], json!([]));
    let (_, body) = api.get("/connectors/gen").await;
    assert_eq!(body["tasks"], json!([]));
    let (_, body) = api.get("/connectors/gen/tasks").await;
    assert_eq!(body, json!([]));
    let (status, _) = api.get("/connectors/gen/tasks/0/status").await;
    assert_eq!(status, 404);
    let (status, body) = api
        .call("POST", "/connectors/gen/tasks/0/restart", None)
        .await;
    assert_eq!(status, 404, "{body}");

    // a connector created stopped (KIP-980)
    let (status, body) = api
        .call(
            "POST",
            "/connectors",
            Some(
                json!({"name": "later", "initial_state": "stopped", "config": {
                    "connector.class": "DatagenSource", "kafka.topic": "t"
                }}),
            ),
        )
        .await;
    assert_eq!(status, 201, "{body}");
    assert_eq!(body["tasks"], json!([]));
    let (_, body) = api.get("/connectors/later/status").await;
    assert_eq!(body["connector"]["state"], "STOPPED");
    api.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn restarts() {
    let api = Api::start().await;
    api.datagen("gen", 2).await;
    api.report("gen", None, "RUNNING", "w1:8083").await;
    api.report("gen", Some(0), "RUNNING", "w1:8083").await;
    api.report("gen", Some(1), "FAILED", "w1:8083").await;
    let before = api.connector("gen");

    // only failed tasks: the connector is running, task 1 failed
    let (status, body) = api
        .call(
            "POST",
            "/connectors/gen/restart?includeTasks=true&onlyFailed=true",
            None,
        )
        .await;
    assert_eq!(status, 202, "{body}");
    assert_eq!(body["connector"]["state"], "RUNNING");
    assert_eq!(body["tasks"][0]["state"], "RUNNING");
    assert_eq!(body["tasks"][1]["state"], "RESTARTING");
    let after = api.connector("gen");
    assert_eq!(after.generation, before.generation);
    assert_eq!(after.restarts_of(1), before.restarts_of(1) + 1);
    assert_eq!(after.restarts_of(0), before.restarts_of(0));

    // everything
    let (status, body) = api
        .call("POST", "/connectors/gen/restart?includeTasks=TRUE", None)
        .await;
    assert_eq!(status, 202, "{body}");
    assert_eq!(body["connector"]["state"], "RESTARTING");
    assert_eq!(body["tasks"][0]["state"], "RESTARTING");
    assert_eq!(body["tasks"][1]["state"], "RESTARTING");
    assert!(api.connector("gen").generation > after.generation);

    // the connector instance alone: no body
    let generation = api.connector("gen").generation;
    let (status, body) = api.call("POST", "/connectors/gen/restart", None).await;
    assert_eq!((status, body), (204, Value::Null));
    assert!(api.connector("gen").generation > generation);
    let (status, _) = api
        .call(
            "POST",
            "/connectors/gen/restart?includeTasks=false&onlyFailed=false",
            None,
        )
        .await;
    assert_eq!(status, 204);

    let restarts = api.connector("gen").restarts_of(0);
    let (status, body) = api
        .call("POST", "/connectors/gen/tasks/0/restart", None)
        .await;
    assert_eq!((status, body), (204, Value::Null));
    assert_eq!(api.connector("gen").restarts_of(0), restarts + 1);
    let (status, body) = api
        .call("POST", "/connectors/gen/tasks/7/restart", None)
        .await;
    assert_eq!(status, 404, "{body}");
    assert_eq!(body["error_code"], 404);
    api.stop().await;
}
