use super::*;

fn config(pairs: &[(&str, &str)]) -> Config {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

#[test]
fn every_problem_is_reported() {
    let problems = validate(&config(&[
        ("http.api.url", "ftp://x"),
        ("http.method", "GET"),
        ("http.headers", "no colon"),
        ("batch.max.size", "0"),
    ]));
    let keys: Vec<&str> = problems.iter().map(|(k, _)| k.as_str()).collect();
    assert_eq!(
        keys,
        [
            "http.api.url",
            "http.method",
            "http.headers",
            "batch.max.size"
        ]
    );
    assert_eq!(
        validate(&config(&[])).first().map(|(k, _)| k.as_str()),
        Some("http.api.url")
    );
    let ok = HttpSinkConfig::parse(&config(&[
        ("http.api.url", "http://127.0.0.1:1/hook"),
        ("http.headers", "Authorization: Bearer x|X-Team: data"),
        ("value.converter", "string"),
    ]))
    .unwrap();
    assert_eq!(ok.headers.len(), 2);
    assert_eq!(ok.value_converter, Converter::String);
}

fn record(offset: i64) -> SinkRecord {
    SinkRecord {
        topic: "t".into(),
        partition: 0,
        offset,
        timestamp_ms: 0,
        key: None,
        value: Some(bytes::Bytes::from(format!("{{\"seq\":{offset}}}"))),
        headers: Vec::new(),
    }
}

#[tokio::test]
async fn an_unreachable_endpoint_fails_the_batch_after_its_retries_and_commits_nothing() {
    // a port nothing listens on
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .unwrap();
    let mut sink = HttpSink::new(
        HttpSinkConfig::parse(&config(&[
            ("http.api.url", &format!("http://127.0.0.1:{port}/hook")),
            ("batch.max.size", "2"),
            ("max.retries", "2"),
            ("retry.backoff.ms", "1"),
        ]))
        .unwrap(),
    )
    .unwrap();
    for o in 0..3 {
        sink.put(record(o));
    }
    let (offsets, failed) = sink.flush_due(Instant::now()).await;
    assert!(offsets.is_empty(), "{offsets:?}");
    let failed = failed.unwrap();
    assert!(
        failed.message.contains("after 2 retries"),
        "{}",
        failed.message
    );
    assert_eq!(failed.records.len(), 2);
}
