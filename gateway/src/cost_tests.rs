use super::*;

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() < 1e-9 * b.abs().max(1.0)
}

/// One hour of an agent that did 10,000 PUT-class and 100,000 GET-class
/// requests, holds 100 GB in the bucket and sent and received 1 GB each
/// across zones.
fn an_hour() -> CostReport {
    CostReport {
        node_id: 1,
        uptime_seconds: 3600.0,
        object_store: ObjectStoreUsage::of(RequestCounts {
            put: 4_000,
            create_multipart: 1_000,
            put_part: 3_000,
            complete_multipart: 1_000,
            list: 1_000,
            get: 90_000,
            head: 10_000,
            delete: 500,
            ..RequestCounts::default()
        }),
        storage: StorageUsage {
            local_bytes: 50 << 30,
            object_bytes: 100 << 30,
        },
        cross_zone: CrossZoneUsage {
            sent_bytes: 1 << 30,
            received_bytes: 1 << 30,
            ..CrossZoneUsage::default()
        },
        ..CostReport::default()
    }
}

#[test]
fn default_prices_are_aws_list_prices_and_say_when_they_were_checked() {
    let p = Prices::default();
    assert_eq!(
        (
            p.put_per_1000,
            p.get_per_1000,
            p.storage_per_gb_month,
            p.cross_zone_per_gb
        ),
        (0.005, 0.0004, 0.023, 0.01)
    );
    assert!(p.source.contains("checked 2026-12"), "{}", p.source);
}

#[test]
fn the_estimate_scales_an_hour_to_730_hours_at_list_prices() {
    let r = an_hour().valued(Prices::default());
    let e = &r.monthly_estimate_usd;
    assert_eq!(r.object_store.put_class, 10_000);
    assert_eq!(r.object_store.get_class, 100_000);
    assert!(close(r.per_hour.put_class_requests, 10_000.0));
    // 10,000/h * 730 h = 7.3 M PUTs at $0.005 per 1,000
    assert!(close(e.put_requests, 36.5), "{e:?}");
    // 73 M GETs at $0.0004 per 1,000
    assert!(close(e.get_requests, 29.2), "{e:?}");
    assert!(close(e.delete_requests, 0.0), "{e:?}");
    // 100 GB held for the month
    assert!(close(e.object_storage, 2.3), "{e:?}");
    assert!(close(e.local_storage, 0.0), "{e:?}");
    // 2 GB/h both ways * 730 h at $0.01 per GB
    assert!(close(e.cross_zone_transfer, 14.6), "{e:?}");
    assert!(close(e.total, 36.5 + 29.2 + 2.3 + 14.6), "{e:?}");
}

#[test]
fn rates_are_per_hour_of_uptime() {
    let mut r = an_hour();
    r.uptime_seconds = 7200.0;
    let r = r.valued(Prices::default());
    assert!(close(r.per_hour.put_class_requests, 5_000.0));
    assert!(close(r.monthly_estimate_usd.put_requests, 18.25));
    // storage is what is held now, however long it took to get there
    assert!(close(r.monthly_estimate_usd.object_storage, 2.3));
    let mut fresh = an_hour();
    fresh.uptime_seconds = 0.0;
    let fresh = fresh.valued(Prices::default());
    assert_eq!(fresh.per_hour.put_class_requests, 0.0);
}

#[test]
fn overridden_prices_are_used_and_named() {
    let mut p = Prices::default();
    p.apply(&["put_per_1000=0.01", "local_storage_per_gb_month = 0.08"])
        .unwrap();
    let r = an_hour().valued(p);
    assert!(close(r.monthly_estimate_usd.put_requests, 73.0));
    assert!(close(r.monthly_estimate_usd.local_storage, 4.0));
    assert!(r
        .prices
        .source
        .contains("overridden: put_per_1000 local_storage_per_gb_month"));
}

#[test]
fn bad_prices_are_refused_with_their_name() {
    let mut p = Prices::default();
    assert_eq!(p.apply(&["put=1"]), Err(PriceError::Unknown("put".into())));
    assert!(matches!(
        p.apply(&["get_per_1000=-1"]),
        Err(PriceError::NotAPrice { .. })
    ));
    assert!(matches!(
        p.apply(&["get_per_1000=cheap"]),
        Err(PriceError::NotAPrice { .. })
    ));
    assert_eq!(p.apply(&["x"]), Err(PriceError::Malformed("x".into())));
    let file: Result<Prices, _> = serde_json::from_str(r#"{"put_per_1000": 0.004, "typo": 1}"#);
    assert!(file.is_err());
    let file: Prices = serde_json::from_str(r#"{"put_per_1000": -2}"#).unwrap();
    assert!(file.validate().is_err());
}

#[test]
fn peers_are_cross_zone_only_when_both_racks_are_known_and_differ() {
    let peer = |agent, rack: Option<&str>| PeerUsage {
        agent,
        rack: rack.map(str::to_string),
        replication_sent_bytes: 100,
        forwarding_received_bytes: 10,
        ..PeerUsage::default()
    };
    let z = CrossZoneUsage::of(
        Some("a"),
        vec![peer(2, Some("a")), peer(3, Some("b")), peer(4, None)],
    );
    assert_eq!(
        (z.sent_bytes, z.received_bytes, z.unknown_zone_bytes),
        (100, 10, 110)
    );
    let classes: Vec<_> = z.peers.iter().map(|p| p.cross_zone).collect();
    assert_eq!(classes, [Some(false), Some(true), None]);
    let unknown_self = CrossZoneUsage::of(None, vec![peer(3, Some("b"))]);
    assert_eq!(
        (unknown_self.sent_bytes, unknown_self.unknown_zone_bytes),
        (0, 110)
    );
}

#[test]
fn summing_agents_adds_counts_and_takes_the_clusters_bucket_once() {
    let mut two = an_hour();
    two.node_id = 2;
    two.uptime_seconds = 7200.0;
    let s = sum(&[an_hour(), two], Prices::default());
    assert_eq!(s.object_store.put_class, 20_000);
    assert_eq!(s.storage.local_bytes, 100 << 30);
    assert_eq!(s.storage.object_bytes, 100 << 30);
    // each agent's rate over its own uptime: 10,000/h and 5,000/h
    assert!(close(s.per_hour.put_class_requests, 15_000.0));
    assert!(close(s.monthly_estimate_usd.put_requests, 36.5 + 18.25));
    assert!(close(s.monthly_estimate_usd.object_storage, 2.3));
    let e = &s.monthly_estimate_usd;
    assert!(close(
        e.total,
        e.put_requests + e.get_requests + e.object_storage + e.cross_zone_transfer
    ));
}
