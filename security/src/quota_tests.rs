use super::*;
use metastore::quota::QuotaValue;

fn secs(s: f64) -> Duration {
    Duration::from_secs_f64(s)
}

#[test]
fn within_the_rate_nobody_waits_and_over_it_the_wait_brings_the_rate_back() {
    let mut w = Window::default();
    // 1000 B/s allowed: 500 B twice in the first second is fine
    assert_eq!(w.record(secs(0.1), 500.0, 1000.0), Duration::ZERO);
    assert_eq!(w.record(secs(0.5), 500.0, 1000.0), Duration::ZERO);
    // 3000 B more at 0.9 s: 4000 B over one second, so wait 3 s
    let wait = w.record(secs(0.9), 3000.0, 1000.0);
    assert!((wait.as_secs_f64() - 3.0).abs() < 0.01, "{wait:?}");
    // after waiting the rate is back at the limit
    assert_eq!(w.record(secs(4.0), 0.0, 1000.0), Duration::ZERO);
}

#[test]
fn old_seconds_leave_the_window() {
    let mut w = Window::default();
    assert!(!w.record(secs(0.0), 20_000.0, 1000.0).is_zero());
    // 30 s later the burst is out of the window
    assert_eq!(w.record(secs(30.0), 900.0, 1000.0), Duration::ZERO);
    assert_eq!(w.seconds.len(), 1);
}

#[test]
fn the_most_specific_quota_applies_and_a_default_is_each_clients_own() {
    let mut table = QuotaTable::new();
    let named = |n: &str| Some(EntityName::Named(n.into()));
    let set = |t: &mut QuotaTable, e: QuotaEntity, v: f64| {
        t.entry(e)
            .or_default()
            .insert(metastore::quota::PRODUCER_BYTE_RATE.into(), QuotaValue(v));
    };
    set(
        &mut table,
        QuotaEntity {
            user: Some(EntityName::Default),
            client_id: None,
        },
        100.0,
    );
    set(
        &mut table,
        QuotaEntity {
            user: named("alice"),
            client_id: None,
        },
        500.0,
    );
    let (whose, limit) = applicable(&table, Traffic::Produce, "alice", "app").unwrap();
    assert_eq!((whose.user, limit), (named("alice"), 500.0));
    let (whose, limit) = applicable(&table, Traffic::Produce, "bob", "app").unwrap();
    assert_eq!(
        (whose.user, limit),
        (named("bob"), 100.0),
        "bob's own window"
    );
    assert_eq!(applicable(&table, Traffic::Fetch, "bob", "app"), None);
}

#[test]
fn a_request_percentage_is_microseconds_of_request_time_per_second() {
    let mut table = QuotaTable::new();
    table.insert(
        QuotaEntity {
            user: None,
            client_id: Some(EntityName::Named("app".into())),
        },
        [(
            metastore::quota::REQUEST_PERCENTAGE.to_string(),
            QuotaValue(2.5),
        )]
        .into(),
    );
    let (_, limit) = applicable(&table, Traffic::Request, "alice", "app").unwrap();
    assert_eq!(limit, 25_000.0, "2.5% of a thread is 25 ms each second");
    assert_eq!(applicable(&table, Traffic::Produce, "alice", "app"), None);
}
