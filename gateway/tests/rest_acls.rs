//! The REST API under the ACLs, over real HTTP on a real gateway with
//! security on: a login sees and changes only what the same principal
//! could over Kafka (a topic it may not describe is absent from the list
//! and refused the same way whether it exists or not, records need READ,
//! groups and their offsets DESCRIBE, changes CREATE or DELETE), and pages
//! of other sites cannot make a browser change anything.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::collections::BTreeSet;

use bytes::Bytes;
use gateway::broker::BrokerConfig;
use gateway::testing::{record_batch, Backends, Logs};
use gateway::{Gateway, GatewayOptions};
use kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::records::Compression;
use metastore::acl::{AclBinding, AclOperation, AclPermission, PatternType, ResourceType};
use metastore::Security;
use serde_json::Value;
use tokio::net::TcpStream;

use common::roundtrip;

struct Secured {
    gw: Gateway,
    backends: Backends,
    base: String,
    http: reqwest::Client,
}

/// A gateway with SASL/PLAIN and ACLs on, `admin` its superuser; `users`
/// get the password `pw` too.
async fn start(users: &[&str]) -> Secured {
    let backends = Backends::start(Logs::Disk, 1).await;
    let opts = GatewayOptions {
        http_addr: Some("127.0.0.1:0".parse().unwrap()),
        broker: BrokerConfig {
            sasl_mechanisms: vec![gateway::sasl::Mechanism::Plain],
            authz: security::authz::AuthzConfig {
                enabled: true,
                superusers: vec!["User:admin".into()],
                allow_if_no_acl: false,
            },
            ..BrokerConfig::default()
        },
        ..GatewayOptions::default()
    };
    let gw = Gateway::start(opts, backends.meta.clone(), backends.logs.clone())
        .await
        .unwrap();
    let mut all = vec!["admin"];
    all.extend_from_slice(users);
    common::add_users(&backends.meta, &all, "pw").await;
    Secured {
        base: format!("http://{}", gw.http_addr().unwrap()),
        gw,
        backends,
        http: reqwest::Client::new(),
    }
}

impl Secured {
    async fn send(&self, req: reqwest::RequestBuilder) -> (u16, Value) {
        let resp = req.send().await.unwrap();
        let status = resp.status().as_u16();
        let text = resp.text().await.unwrap();
        let body = if text.is_empty() {
            Value::Null
        } else {
            serde_json::from_str(&text).unwrap()
        };
        (status, body)
    }

    async fn get(&self, user: &str, path: &str) -> (u16, Value) {
        let req = self.http.get(format!("{}{path}", self.base));
        self.send(req.basic_auth(user, Some("pw"))).await
    }

    async fn post(&self, user: &str, path: &str, body: &str) -> (u16, Value) {
        let req = self
            .http
            .post(format!("{}{path}", self.base))
            .header("content-type", "application/json")
            .body(body.to_string());
        self.send(req.basic_auth(user, Some("pw"))).await
    }

    async fn delete(&self, user: &str, path: &str) -> (u16, Value) {
        let req = self.http.delete(format!("{}{path}", self.base));
        self.send(req.basic_auth(user, Some("pw"))).await
    }

    async fn grant(
        &self,
        permission: AclPermission,
        user: &str,
        operation: AclOperation,
        resource_type: ResourceType,
        name: &str,
    ) {
        let binding = AclBinding {
            resource_type,
            resource_name: name.into(),
            pattern: PatternType::Literal,
            principal: format!("User:{user}"),
            host: "*".into(),
            operation,
            permission,
        };
        let made = self.backends.meta.create_acls(vec![binding]).await.unwrap();
        assert!(made.iter().all(Result::is_ok));
    }

    async fn allow(&self, user: &str, op: AclOperation, rt: ResourceType, name: &str) {
        self.grant(AclPermission::Allow, user, op, rt, name).await;
    }

    /// A Kafka connection logged in as the superuser.
    async fn admin_kafka(&self) -> TcpStream {
        let mut s = TcpStream::connect(self.gw.kafka_addr()).await.unwrap();
        let hs: SaslHandshakeResponse = roundtrip(
            &mut s,
            ApiKey::SaslHandshake,
            1,
            &SaslHandshakeRequest::default().with_mechanism(StrBytes::from_static_str("PLAIN")),
        )
        .await;
        assert_eq!(hs.error_code, 0);
        let done: SaslAuthenticateResponse = roundtrip(
            &mut s,
            ApiKey::SaslAuthenticate,
            2,
            &SaslAuthenticateRequest::default().with_auth_bytes(Bytes::from("\0admin\0pw")),
        )
        .await;
        assert_eq!(done.error_code, 0);
        s
    }
}

fn name(n: &str) -> TopicName {
    TopicName(StrBytes::from_string(n.to_string()))
}

async fn produce(s: &mut TcpStream, topic: &str, value: &str) {
    let produced: ProduceResponse = roundtrip(
        s,
        ApiKey::Produce,
        9,
        &ProduceRequest::default()
            .with_acks(-1)
            .with_topic_data(vec![TopicProduceData::default()
                .with_name(name(topic))
                .with_partition_data(vec![PartitionProduceData::default()
                    .with_index(0)
                    .with_records(Some(record_batch(
                        &[value.as_bytes()],
                        false,
                        None,
                        Compression::None,
                    )))])]),
    )
    .await;
    assert_eq!(produced.responses[0].partition_responses[0].error_code, 0);
}

/// Commits offset `offset` of partition 0 of each topic for `group`, as a
/// consumer that assigns its own partitions does.
async fn commit(s: &mut TcpStream, group: &str, topics: &[&str], offset: i64) {
    let committed: OffsetCommitResponse = roundtrip(
        s,
        ApiKey::OffsetCommit,
        8,
        &OffsetCommitRequest::default()
            .with_group_id(GroupId(StrBytes::from_string(group.to_string())))
            .with_generation_id_or_member_epoch(-1)
            .with_topics(
                topics
                    .iter()
                    .map(|t| {
                        OffsetCommitRequestTopic::default()
                            .with_name(name(t))
                            .with_partitions(vec![OffsetCommitRequestPartition::default()
                                .with_partition_index(0)
                                .with_committed_offset(offset)])
                    })
                    .collect(),
            ),
    )
    .await;
    for t in &committed.topics {
        assert!(t.partitions.iter().all(|p| p.error_code == 0), "{t:?}");
    }
}

fn names(list: &Value, field: &str) -> BTreeSet<String> {
    list.as_array()
        .unwrap()
        .iter()
        .map(|t| t[field].as_str().unwrap().to_string())
        .collect()
}

/// A monitoring user with DESCRIBE on the cluster (which Kafka's
/// DescribeAcls needs) and a DENY of READ on `payroll` cannot read payroll's
/// records over REST, nor see the topic: it is left out of the list, and a
/// request for it is refused exactly as one for a topic that does not exist.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_topic_the_user_may_not_read_is_neither_read_nor_listed() {
    let c = start(&["mon"]).await;
    for topic in ["payroll", "orders"] {
        let body = format!(r#"{{"name": "{topic}", "partitions": 1}}"#);
        assert_eq!(c.post("admin", "/v1/topics", &body).await.0, 201);
    }
    let mut s = c.admin_kafka().await;
    produce(&mut s, "payroll", "salary").await;
    produce(&mut s, "orders", "order").await;
    c.allow(
        "mon",
        AclOperation::Describe,
        ResourceType::Cluster,
        "kafka-cluster",
    )
    .await;
    c.grant(
        AclPermission::Deny,
        "mon",
        AclOperation::Read,
        ResourceType::Topic,
        "payroll",
    )
    .await;
    c.allow("mon", AclOperation::Read, ResourceType::Topic, "orders")
        .await;

    let (status, records) = c.get("mon", "/v1/topics/payroll/records?limit=1000").await;
    assert!(matches!(status, 403 | 404), "{status} {records}");
    assert!(!records.to_string().contains("salary"));
    // the same answer for a topic that does not exist
    for path in ["/v1/topics/{}/records", "/v1/topics/{}"] {
        let (a, a_body) = c.get("mon", &path.replace("{}", "payroll")).await;
        let (b, b_body) = c.get("mon", &path.replace("{}", "no-such-topic")).await;
        assert_eq!((a, &a_body["code"]), (b, &b_body["code"]), "{path}");
        assert!(matches!(a, 403 | 404), "{path}: {a}");
    }
    let (status, list) = c.get("mon", "/v1/topics").await;
    assert_eq!(status, 200);
    assert_eq!(names(&list, "name"), BTreeSet::from(["orders".to_string()]));
    let (status, m) = c.get("mon", "/v1/metrics").await;
    assert_eq!(status, 200);
    assert_eq!(
        names(&m["storage"]["topics"], "topic"),
        BTreeSet::from(["orders".to_string()])
    );

    // READ on orders reads it; its configs need DESCRIBE_CONFIGS
    let (status, page) = c.get("mon", "/v1/topics/orders/records").await;
    assert_eq!(status, 200, "{page}");
    assert_eq!(page["records"][0]["value"]["data"], "order");
    let (status, t) = c.get("mon", "/v1/topics/orders").await;
    assert_eq!(status, 200);
    assert_eq!(t["configs"], Value::Array(Vec::new()));
    c.allow(
        "mon",
        AclOperation::DescribeConfigs,
        ResourceType::Topic,
        "orders",
    )
    .await;
    let (_, t) = c.get("mon", "/v1/topics/orders").await;
    assert!(!t["configs"].as_array().unwrap().is_empty());

    // the superuser still sees and reads everything
    let (_, list) = c.get("admin", "/v1/topics").await;
    assert_eq!(names(&list, "name").len(), 2);
    let (status, page) = c.get("admin", "/v1/topics/payroll/records").await;
    assert_eq!(status, 200);
    assert_eq!(page["records"][0]["value"]["data"], "salary");
    c.gw.shutdown().await;
}

/// Creating and deleting over REST need what CreateTopics and DeleteTopics
/// need: CREATE on the cluster or the topic, DELETE on the topic. Reading
/// allows neither, and a refused delete reads the same for a topic that
/// does not exist.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn changes_need_the_permission_the_kafka_api_needs() {
    let c = start(&["dev"]).await;
    c.allow("dev", AclOperation::Read, ResourceType::Topic, "*")
        .await;
    let create = |topic: &'static str| {
        let c = &c;
        async move {
            let body = format!(r#"{{"name": "{topic}", "partitions": 1}}"#);
            c.post("dev", "/v1/topics", &body).await
        }
    };
    let (status, body) = create("scratch").await;
    assert_eq!((status, body["code"].as_str()), (403, Some("forbidden")));
    c.allow("dev", AclOperation::Create, ResourceType::Topic, "scratch")
        .await;
    assert_eq!(create("scratch").await.0, 201);
    assert_eq!(create("other").await.0, 403, "CREATE names one topic");

    let refused = c.delete("dev", "/v1/topics/scratch").await;
    assert_eq!(refused.0, 403);
    let missing = c.delete("dev", "/v1/topics/no-such-topic").await;
    assert_eq!(
        (missing.0, &missing.1["code"]),
        (refused.0, &refused.1["code"])
    );
    c.allow("dev", AclOperation::Delete, ResourceType::Topic, "scratch")
        .await;
    assert_eq!(c.delete("dev", "/v1/topics/scratch").await.0, 204);
    // with DELETE, a missing topic is simply not found, as in Kafka
    assert_eq!(c.delete("dev", "/v1/topics/scratch").await.0, 404);

    // CREATE on the cluster creates any topic
    c.allow(
        "dev",
        AclOperation::Create,
        ResourceType::Cluster,
        "kafka-cluster",
    )
    .await;
    assert_eq!(create("other").await.0, 201);
    c.gw.shutdown().await;
}

/// Groups as ListGroups, DescribeGroups and OffsetFetch show them: a user
/// without DESCRIBE on the cluster lists only the groups it may describe,
/// a group's detail needs DESCRIBE on it (refused alike whether it exists
/// or not), and its offsets leave out topics the user may not describe.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn groups_and_their_offsets_show_only_what_the_user_may_describe() {
    let c = start(&["auditor", "mon"]).await;
    for topic in ["payroll", "orders"] {
        let body = format!(r#"{{"name": "{topic}", "partitions": 1}}"#);
        assert_eq!(c.post("admin", "/v1/topics", &body).await.0, 201);
    }
    let mut s = c.admin_kafka().await;
    commit(&mut s, "billing", &["orders", "payroll"], 0).await;
    commit(&mut s, "payroll-audit", &["payroll"], 0).await;
    let (_, all) = c.get("admin", "/v1/groups").await;
    assert_eq!(names(&all, "group_id").len(), 2, "{all}");

    c.allow(
        "auditor",
        AclOperation::Describe,
        ResourceType::Group,
        "billing",
    )
    .await;
    c.allow(
        "auditor",
        AclOperation::Describe,
        ResourceType::Topic,
        "orders",
    )
    .await;
    let (status, groups) = c.get("auditor", "/v1/groups").await;
    assert_eq!(status, 200);
    assert_eq!(
        names(&groups, "group_id"),
        BTreeSet::from(["billing".to_string()])
    );
    let (status, g) = c.get("auditor", "/v1/groups/billing").await;
    assert_eq!(status, 200, "{g}");
    assert_eq!(
        names(&g["offsets"], "topic"),
        BTreeSet::from(["orders".into()])
    );
    let (a, a_body) = c.get("auditor", "/v1/groups/payroll-audit").await;
    let (b, b_body) = c.get("auditor", "/v1/groups/no-such-group").await;
    assert_eq!(a, 403);
    assert_eq!((a, &a_body["code"]), (b, &b_body["code"]));
    assert_eq!(c.get("auditor", "/v1/cluster").await.0, 403);

    // DESCRIBE on the cluster lists every group, as Kafka's ListGroups
    // does, but describes none of them
    c.allow(
        "mon",
        AclOperation::Describe,
        ResourceType::Cluster,
        "kafka-cluster",
    )
    .await;
    let (_, groups) = c.get("mon", "/v1/groups").await;
    assert_eq!(names(&groups, "group_id").len(), 2);
    assert_eq!(c.get("mon", "/v1/groups/payroll-audit").await.0, 403);
    c.gw.shutdown().await;
}

/// Every route of the API, asked by a logged-in user no ACL names: nothing
/// but the API's own description is shown (a list comes back empty).
/// The table covers every documented route, so a new one must say here
/// what it answers such a user.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_user_without_acls_is_shown_nothing() {
    let c = start(&["nobody"]).await;
    assert_eq!(
        c.post("admin", "/v1/topics", r#"{"name": "t", "partitions": 1}"#)
            .await
            .0,
        201
    );
    let mut s = c.admin_kafka().await;
    commit(&mut s, "g", &["t"], 0).await;
    let expected: Vec<(&str, &str, u16)> = vec![
        ("get", "/v1/cluster", 403),
        ("get", "/v1/topics", 200),
        ("post", "/v1/topics", 403),
        ("get", "/v1/topics/{name}", 403),
        ("delete", "/v1/topics/{name}", 403),
        ("get", "/v1/topics/{name}/records", 403),
        ("get", "/v1/groups", 200),
        ("get", "/v1/groups/{id}", 403),
        ("get", "/v1/tiering", 403),
        ("get", "/v1/metrics", 403),
        ("get", "/v1/cost", 403),
        ("get", "/v1/processors", 200),
        ("post", "/v1/processors/{pipeline}/heartbeat", 403),
        ("post", "/v1/processors/{pipeline}/leave", 403),
        ("get", "/v1/openapi.json", 200),
    ];
    let (_, doc) = c.get("admin", "/v1/openapi.json").await;
    let documented: BTreeSet<(String, String)> = doc["paths"]
        .as_object()
        .unwrap()
        .iter()
        .flat_map(|(path, item)| {
            item.as_object()
                .unwrap()
                .keys()
                .map(move |m| (m.clone(), path.clone()))
        })
        .collect();
    let covered: BTreeSet<(String, String)> = expected
        .iter()
        .map(|(m, p, _)| (m.to_string(), p.to_string()))
        .collect();
    assert_eq!(covered, documented);
    for (method, path, want) in expected {
        let path = path
            .replace("{name}", "t")
            .replace("{id}", "g")
            .replace("{pipeline}", "p");
        let (status, body) = match method {
            "get" => c.get("nobody", &path).await,
            "post" => c.post("nobody", &path, r#"{"name": "u"}"#).await,
            _ => c.delete("nobody", &path).await,
        };
        assert_eq!(status, want, "{method} {path}: {body}");
        if want == 200 && ["/v1/topics", "/v1/groups", "/v1/processors"].contains(&path.as_str()) {
            assert_eq!(body, Value::Array(Vec::new()), "{path}");
        }
    }
    c.gw.shutdown().await;
}

/// Cross-site request forgery: with security off no login stands in the
/// way, so a page elsewhere could have a browser create or delete topics
/// with a request that needs no preflight (`text/plain`). A body that is
/// not JSON is refused with 415, and a change from another origin with
/// 403; the console's own requests (JSON, its own origin) and programs'
/// (no Origin) go through.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_page_of_another_site_cannot_change_anything() {
    let backends = Backends::start(Logs::Disk, 1).await;
    let opts = GatewayOptions {
        http_addr: Some("127.0.0.1:0".parse().unwrap()),
        ..GatewayOptions::default()
    };
    let gw = Gateway::start(opts, backends.meta.clone(), backends.logs.clone())
        .await
        .unwrap();
    let addr = gw.http_addr().unwrap();
    let base = format!("http://{addr}");
    let http = reqwest::Client::new();
    let topics = || async {
        let list: Value = http
            .get(format!("{base}/v1/topics"))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        names(&list, "name")
    };
    let post = |content_type: &'static str, origin: Option<String>, topic: &'static str| {
        let mut req = http
            .post(format!("{base}/v1/topics"))
            .header("content-type", content_type)
            .body(format!(r#"{{"name": "{topic}", "partitions": 1}}"#));
        if let Some(o) = origin {
            req = req.header("origin", o);
        }
        async move { req.send().await.unwrap().status().as_u16() }
    };
    let evil = || Some("https://evil.example".to_string());
    let status = post("text/plain", evil(), "forged").await;
    assert!(matches!(status, 403 | 415), "{status}");
    assert_eq!(post("text/plain", None, "forged").await, 415);
    assert_eq!(post("application/json", evil(), "forged").await, 403);
    assert!(topics().await.is_empty(), "nothing was created");

    // the console: JSON from the listener's own origin; curl: no Origin
    assert_eq!(
        post("application/json", Some(format!("http://{addr}")), "mine").await,
        201
    );
    assert_eq!(post("application/json", None, "scripted").await, 201);
    let delete = |origin: &'static str| {
        http.delete(format!("{base}/v1/topics/mine"))
            .header("origin", origin)
            .send()
    };
    assert_eq!(delete("null").await.unwrap().status().as_u16(), 403);
    assert_eq!(
        topics().await,
        BTreeSet::from(["mine".to_string(), "scripted".to_string()])
    );
    gw.shutdown().await;
    backends.stop().await;
}
