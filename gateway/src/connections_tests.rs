use std::net::{IpAddr, Ipv4Addr};

use super::*;

fn ip(last: u8) -> IpAddr {
    IpAddr::V4(Ipv4Addr::new(10, 0, 0, last))
}

fn limits(total: usize, per_ip: usize) -> ConnectionLimits {
    ConnectionLimits {
        max_connections: total,
        max_connections_per_ip: per_ip,
        ..ConnectionLimits::default()
    }
}

#[test]
fn connections_past_the_cap_are_refused_and_counted() {
    let c = Connections::new(limits(2, 10));
    let a = c.admit(ip(1)).expect("first");
    let b = c.admit(ip(2)).expect("second");
    assert_eq!(c.admit(ip(3)).err(), Some(Refused::TooManyConnections));
    assert_eq!(c.counters.refused_total.load(Ordering::Relaxed), 1);
    assert_ne!(a.id, b.id, "connection ids are unique");
    drop(a);
    assert!(
        c.admit(ip(3)).is_ok(),
        "a closed connection frees its place"
    );
    assert!(c
        .render()
        .contains("aerostream_connections_refused_total{limit=\"max.connections\"} 1"));
}

#[test]
fn one_address_cannot_take_every_connection() {
    let c = Connections::new(limits(10, 2));
    let _a = c.admit(ip(1)).expect("first");
    let _b = c.admit(ip(1)).expect("second");
    assert_eq!(c.admit(ip(1)).err(), Some(Refused::TooManyFromAddress));
    let _c = c.admit(ip(2)).expect("other addresses still get in");
    assert_eq!(c.open_count(), 3);
}

#[tokio::test]
async fn request_bytes_wait_for_room_across_connections() {
    let c = Connections::new(ConnectionLimits {
        queued_max_request_bytes: 4 << 20,
        ..ConnectionLimits::default()
    });
    let big = c.room_for(3 << 20).await;
    let blocked = tokio::time::timeout(Duration::from_millis(20), c.room_for(2 << 20)).await;
    assert!(
        blocked.is_err(),
        "no room until the first request is answered"
    );
    drop(big);
    let _two = c.room_for(2 << 20).await;
    // A request larger than the whole budget still gets served, alone.
    drop(_two);
    let _huge = c.room_for(64 << 20).await;
}
