use std::net::Ipv4Addr;
use std::time::Duration;

use super::*;

#[test]
fn the_addresses_remembered_are_bounded() {
    let limit = FailedLoginLimit {
        burst: 1,
        per_minute: 1.0,
    };
    let mut f = FailedLogins::new(limit);
    let now = Instant::now();
    let addr = |i: u32| IpAddr::V4(Ipv4Addr::from(0x0a00_0000 + i));
    for i in 0..MAX_TRACKED as u32 {
        assert!(f.take(addr(i), now));
    }
    assert!(!f.take(addr(0), now), "an address out of tries stays so");
    assert!(
        f.take(addr(u32::MAX >> 1), now),
        "a new address when every bucket is in use is let through, untracked"
    );
    assert_eq!(f.buckets.len(), MAX_TRACKED);
    // once the old buckets refilled, they make room
    let later = now + Duration::from_secs(120);
    assert!(f.take(addr(u32::MAX >> 1), later));
    assert_eq!(f.buckets.len(), 1);
}
