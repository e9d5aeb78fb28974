use super::*;

use axum::routing::post;
use axum::Json;

fn pipeline(url: &str) -> Pipeline {
    Pipeline::parse(&format!(
        r#"
name: counts
source: {{bootstrap: "127.0.0.1:9092", topic: events, format: json, event_time: ts, key: k}}
window: {{type: tumbling, size: 1s}}
aggregates: [{{op: count, as: n}}]
sink: {{type: parquet, url: "{url}"}}
distribution: {{coordinators: ["http://127.0.0.1:1"], worker: w1, lease_ttl: 3s}}
"#
    ))
    .unwrap()
}

#[test]
fn a_partition_runs_under_its_own_prefix_and_transactional_id() {
    let p = scoped(&pipeline("s3://out/counts/"), 3);
    assert_eq!(p.sink.url, "s3://out/counts/partitions/3");
    assert_eq!(p.instance.as_deref(), Some("p3"));
    assert!(p.distribution.is_none());
    assert_eq!(
        crate::topic_sink::transactional_id_of(&p),
        "aerostream-process-counts-p3"
    );
    assert_eq!(crate::topic_sink::group_of(&p), "aerostream-process-counts");
}

#[test]
fn bad_distribution_settings_are_refused_naming_the_key() {
    let base = pipeline("s3://out/counts");
    let mut d = base.distribution.clone().unwrap();
    d.coordinators = vec!["127.0.0.1:9001".into()];
    let mut p = base.clone();
    p.distribution = Some(d);
    let e = p.validate().unwrap_err().to_string();
    assert!(e.contains("distribution.coordinators"), "{e}");
    let mut d = base.distribution.clone().unwrap();
    d.lease_ttl = Duration::from_millis(100);
    let mut p = base;
    p.distribution = Some(d);
    let e = p.validate().unwrap_err().to_string();
    assert!(e.contains("distribution.lease_ttl"), "{e}");
}

/// A coordinator that cannot be reached is skipped for the next one, and
/// an error answer's message is passed on.
#[tokio::test]
async fn heartbeats_go_to_the_next_coordinator_when_one_is_down() {
    let app = axum::Router::new()
        .route(
            "/v1/processors/counts/heartbeat",
            post(|Json(body): Json<serde_json::Value>| async move {
                assert_eq!(body["worker"], "w1");
                assert_eq!(body["ttl_ms"], 3000);
                assert_eq!(body["release"], serde_json::json!([2]));
                Json(
                    serde_json::json!({"held": {"0": 7, "1": 8}, "revoke": [1], "workers": ["w1"]}),
                )
            }),
        )
        .route(
            "/v1/processors/counts/leave",
            post(|| async {
                (
                    axum::http::StatusCode::FORBIDDEN,
                    Json(
                        serde_json::json!({"code": "forbidden", "message": "no READ on the group"}),
                    ),
                )
            }),
        );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    // a port nothing listens on first
    let down = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let down_addr = down.local_addr().unwrap();
    drop(down);
    let d = Distribution {
        coordinators: vec![format!("http://{down_addr}"), format!("http://{addr}")],
        worker: Some("w1".into()),
        lease_ttl: Duration::from_secs(3),
    };
    let mut c = Coordinator::new(&d, "counts", "w1", None).unwrap();
    let a = c.heartbeat(&[0, 1, 2], &[2]).await.unwrap();
    assert_eq!(a.held, BTreeMap::from([(0, 7), (1, 8)]));
    assert_eq!(a.revoke, vec![1]);
    assert_eq!(
        c.current, 1,
        "the one that answered is asked first next time"
    );
    let e = format!("{:#}", c.leave().await.unwrap_err());
    assert!(e.contains("no READ on the group"), "{e}");
}
