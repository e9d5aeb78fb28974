use super::*;

fn configs(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

#[test]
fn topic_names_follow_kafka_rules() {
    for ok in ["orders", "a.b-c_D9", &"x".repeat(249)] {
        validate_topic_name(ok).unwrap();
    }
    for bad in [
        "",
        ".",
        "..",
        "has space",
        "slash/no",
        "ünï",
        &"x".repeat(250),
    ] {
        assert!(
            matches!(
                validate_topic_name(bad),
                Err(MetaError::InvalidTopicName { .. })
            ),
            "{bad:?}"
        );
    }
}

#[test]
fn defaults_match_what_kafka_clients_expect() {
    let empty = BTreeMap::new();
    assert_eq!(effective(&empty, "retention.ms"), Some("604800000"));
    assert_eq!(effective(&empty, "retention.bytes"), Some("-1"));
    assert_eq!(
        effective_i64(&empty, "segment.bytes"),
        Some(DEFAULT_SEGMENT_BYTES)
    );
    assert_eq!(effective(&empty, "segment.ms"), Some("604800000"));
    assert_eq!(effective(&empty, "cleanup.policy"), Some("delete"));
    assert_eq!(effective(&empty, "min.insync.replicas"), Some("1"));
    assert_eq!(effective(&empty, "max.message.bytes"), Some("1048588"));
    assert_eq!(
        effective(&empty, "message.timestamp.type"),
        Some("CreateTime")
    );
    assert_eq!(effective(&empty, "local.retention.bytes"), Some("-2"));
    assert_eq!(effective(&empty, "local.retention.ms"), Some("-2"));
    assert_eq!(effective_i64(&empty, "flush.messages"), Some(i64::MAX));
    assert_eq!(effective_i64(&empty, "flush.ms"), Some(i64::MAX));
    assert_eq!(effective(&empty, "compression.type"), Some("producer"));
    assert_eq!(
        effective_bool(&empty, "unclean.leader.election.enable"),
        Some(false)
    );
    assert_eq!(effective(&empty, "no.such.key"), None);
}

#[test]
fn every_default_passes_its_own_validation() {
    for d in catalogue() {
        validate(d.name, d.default)
            .unwrap_or_else(|e| panic!("default of {} rejected: {e}", d.name));
    }
    let names: Vec<_> = catalogue().iter().map(|d| d.name).collect();
    let mut sorted = names.clone();
    sorted.sort_unstable();
    assert_eq!(
        names, sorted,
        "catalogue must stay sorted for DescribeConfigs"
    );
}

#[test]
fn describe_lists_every_key_and_marks_explicit_ones() {
    let rows = describe(&configs(&[("retention.ms", "1000")]));
    assert_eq!(rows.len(), catalogue().len());
    let r = rows.iter().find(|r| r.name == "retention.ms").unwrap();
    assert_eq!((r.value.as_str(), r.is_default), ("1000", false));
    let s = rows.iter().find(|r| r.name == "segment.ms").unwrap();
    assert!(s.is_default);
    assert_eq!(s.kind.kafka_code(), 5);
}

#[test]
fn bad_values_are_rejected_with_the_key_and_a_reason() {
    let cases = [
        ("retention.ms", "forever"),
        ("retention.ms", "-2"),
        ("segment.bytes", "1000"),
        ("segment.bytes", "99999999999"),
        ("min.insync.replicas", "0"),
        ("cleanup.policy", "shred"),
        ("cleanup.policy", ""),
        ("message.timestamp.type", "logappendtime"),
        ("compression.type", "brotli"),
        ("preallocate", "yes"),
        ("min.cleanable.dirty.ratio", "1.5"),
        ("compression.gzip.level", "0"),
        ("leader.replication.throttled.replicas", "0-1"),
        ("unknown.key", "1"),
    ];
    for (k, v) in cases {
        match validate(k, v) {
            Err(MetaError::InvalidConfig { key, reason }) => {
                assert_eq!(key, k);
                assert!(!reason.is_empty());
            }
            other => panic!("{k}={v} gave {other:?}"),
        }
    }
}

#[test]
fn good_values_are_accepted() {
    for (k, v) in [
        ("retention.ms", "-1"),
        ("retention.bytes", "-1"),
        ("cleanup.policy", "compact, delete"),
        ("preallocate", "TRUE"),
        ("segment.bytes", " 1048576 "),
        ("compression.gzip.level", "-1"),
        ("leader.replication.throttled.replicas", "*"),
        ("follower.replication.throttled.replicas", "0:1,1:2"),
        ("message.timestamp.type", "LogAppendTime"),
    ] {
        validate(k, v).unwrap_or_else(|e| panic!("{k}={v}: {e}"));
    }
}

#[test]
fn local_retention_may_not_exceed_total_retention() {
    let err = validate_all(&configs(&[
        ("retention.ms", "1000"),
        ("local.retention.ms", "2000"),
    ]))
    .unwrap_err();
    assert!(matches!(err, MetaError::InvalidConfig { ref key, .. } if key == "local.retention.ms"));
    validate_all(&configs(&[
        ("retention.ms", "-1"),
        ("local.retention.ms", "2000"),
    ]))
    .unwrap();
    validate_all(&configs(&[
        ("retention.bytes", "100"),
        ("local.retention.bytes", "-2"),
    ]))
    .unwrap();
    assert!(validate_all(&configs(&[
        ("retention.bytes", "100"),
        ("local.retention.bytes", "200")
    ]))
    .is_err());
    assert!(validate_all(&configs(&[
        ("min.compaction.lag.ms", "10"),
        ("max.compaction.lag.ms", "5")
    ]))
    .is_err());
}

#[test]
fn incremental_ops_set_delete_append_and_subtract() {
    let current = configs(&[("retention.ms", "1000"), ("segment.ms", "5000")]);
    let ops = [
        ConfigOp::Set("retention.ms".into(), "2000".into()),
        ConfigOp::Delete("segment.ms".into()),
        ConfigOp::Append("cleanup.policy".into(), "compact".into()),
    ];
    let next = apply_ops(&current, &ops, false).unwrap();
    assert_eq!(
        next,
        configs(&[
            ("retention.ms", "2000"),
            ("cleanup.policy", "delete,compact")
        ])
    );
    let next = apply_ops(
        &next,
        &[ConfigOp::Subtract("cleanup.policy".into(), "delete".into())],
        false,
    )
    .unwrap();
    assert_eq!(
        next.get("cleanup.policy").map(String::as_str),
        Some("compact")
    );
    // subtracting the last item leaves an empty list, which is invalid
    let err = apply_ops(
        &next,
        &[ConfigOp::Subtract(
            "cleanup.policy".into(),
            "compact".into(),
        )],
        false,
    );
    assert!(err.is_err());
    let err = apply_ops(
        &next,
        &[ConfigOp::Append("retention.ms".into(), "1".into())],
        false,
    )
    .unwrap_err();
    assert!(matches!(err, MetaError::InvalidConfig { .. }));
}

#[test]
fn replace_all_drops_keys_not_named() {
    let current = configs(&[("retention.ms", "1000"), ("segment.ms", "5000")]);
    let next = apply_ops(
        &current,
        &[ConfigOp::Set("segment.ms".into(), "6000".into())],
        true,
    )
    .unwrap();
    assert_eq!(next, configs(&[("segment.ms", "6000")]));
}

#[test]
fn schema_validation_keys_are_booleans_off_by_default() {
    let empty = BTreeMap::new();
    for key in [KEY_SCHEMA_VALIDATION, VALUE_SCHEMA_VALIDATION] {
        let d = lookup(key).unwrap_or_else(|| panic!("{key} is not in the catalogue"));
        assert_eq!(d.kind, ConfigType::Boolean);
        assert_eq!(effective_bool(&empty, key), Some(false));
        validate(key, "true").unwrap_or_else(|e| panic!("{key}=true: {e}"));
        validate(key, " FALSE ").unwrap_or_else(|e| panic!("{key}=FALSE: {e}"));
        assert!(
            matches!(validate(key, "on"), Err(MetaError::InvalidConfig { .. })),
            "{key}=on must be refused"
        );
        let row = describe(&configs(&[(key, "true")]))
            .into_iter()
            .find(|r| r.name == key)
            .unwrap_or_else(|| panic!("DescribeConfigs does not list {key}"));
        assert_eq!(row.value, "true");
        assert!(!row.is_default);
        assert_eq!(row.kind.kafka_code(), 1);
    }
    assert_eq!(
        effective_bool(
            &configs(&[(VALUE_SCHEMA_VALIDATION, "true")]),
            VALUE_SCHEMA_VALIDATION
        ),
        Some(true)
    );
}
