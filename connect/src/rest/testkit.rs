//! The REST API's test bench: a one-node metastore in a scratch directory
//! and the router on a real listener on 127.0.0.1, called over HTTP.

use std::time::Duration;

use metastore::connect::{ConnectCommand, Connector, Status};
use metastore::{Metastore, MetastoreConfig};
use serde_json::{json, Value};
use tempfile::TempDir;
use tokio::task::JoinHandle;

use super::{router, RestInfo};

pub(crate) struct Api {
    base: String,
    /// The listener's `host:port`, this worker's id.
    pub(crate) worker: String,
    pub(crate) meta: Metastore,
    http: reqwest::Client,
    server: JoinHandle<()>,
    _dir: TempDir,
}

impl Api {
    pub(crate) async fn start() -> Api {
        let dir = tempfile::tempdir().expect("a scratch directory");
        let meta = Metastore::start(MetastoreConfig::embedded(dir.path().join("meta")))
            .await
            .expect("the metastore starts");
        meta.wait_ready(Duration::from_secs(30))
            .await
            .expect("the metastore leads");
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("a port");
        let worker = listener.local_addr().expect("its address").to_string();
        let app = router(
            meta.clone(),
            RestInfo {
                worker_id: worker.clone(),
                cluster_id: None,
                schema_registry: crate::convert::DefaultRegistry::default(),
            },
        );
        let server = tokio::spawn(async move {
            axum::serve(listener, app)
                .await
                .expect("the listener serves");
        });
        Api {
            base: format!("http://{worker}"),
            worker,
            meta,
            http: reqwest::Client::new(),
            server,
            _dir: dir,
        }
    }

    /// A request with a JSON body (or none); the status and the JSON
    /// answer (null when empty). An answer that is not JSON fails the test.
    pub(crate) async fn call(&self, method: &str, path: &str, body: Option<Value>) -> (u16, Value) {
        match body {
            Some(b) => {
                let bytes = serde_json::to_vec(&b).expect("JSON");
                self.raw(method, path, Some("application/json"), bytes)
                    .await
            }
            None => self.raw(method, path, None, Vec::new()).await,
        }
    }

    pub(crate) async fn raw(
        &self,
        method: &str,
        path: &str,
        content_type: Option<&str>,
        body: Vec<u8>,
    ) -> (u16, Value) {
        let method = reqwest::Method::from_bytes(method.as_bytes()).expect("a method");
        let mut req = self.http.request(method, format!("{}{path}", self.base));
        if let Some(ct) = content_type {
            req = req.header("content-type", ct);
        }
        if !body.is_empty() {
            req = req.body(body);
        }
        let resp = req.send().await.expect("an answer");
        let status = resp.status().as_u16();
        let bytes = resp.bytes().await.expect("its body");
        if bytes.is_empty() {
            return (status, Value::Null);
        }
        let value = serde_json::from_slice(&bytes).unwrap_or_else(|e| {
            panic!(
                "{path} answered {status} with a body that is not JSON ({e}): {}",
                String::from_utf8_lossy(&bytes)
            )
        });
        (status, value)
    }

    pub(crate) async fn get(&self, path: &str) -> (u16, Value) {
        self.call("GET", path, None).await
    }

    /// Creates a Datagen connector with `tasks` tasks writing to `events`.
    pub(crate) async fn datagen(&self, name: &str, tasks: u32) -> Value {
        let (status, body) = self
            .call(
                "POST",
                "/connectors",
                Some(json!({
                    "name": name,
                    "config": {
                        "connector.class": "DatagenSource",
                        "kafka.topic": "events",
                        "tasks.max": tasks,
                    }
                })),
            )
            .await;
        assert_eq!(status, 201, "{body}");
        body
    }

    /// The connector as the metastore holds it.
    pub(crate) fn connector(&self, name: &str) -> Connector {
        self.meta
            .read(|s| s.connect().connector(name).cloned())
            .expect("the connector exists")
    }

    /// A worker's report about the connector (`task` None) or a task, for
    /// the current generation.
    pub(crate) async fn report(&self, name: &str, task: Option<u32>, state: &str, worker: &str) {
        let generation = self.connector(name).generation;
        self.meta
            .connect_command(ConnectCommand::ReportStatus {
                name: name.to_owned(),
                task,
                status: Status {
                    state: state.to_owned(),
                    worker_id: worker.to_owned(),
                    trace: (state == "FAILED").then(|| "boom".to_owned()),
                    generation,
                },
            })
            .await
            .expect("the report is stored");
    }

    pub(crate) async fn stop(self) {
        self.server.abort();
        self.meta.shutdown().await.expect("the metastore stops");
    }
}
