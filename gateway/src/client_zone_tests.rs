use super::*;

#[test]
fn a_client_id_names_its_zone_with_the_tag_anywhere_in_it() {
    assert_eq!(
        zone_in_client_id("aerostream_az=use1-az1"),
        Some("use1-az1")
    );
    assert_eq!(
        zone_in_client_id("orders,aerostream_az=zone-b,v2"),
        Some("zone-b")
    );
    assert_eq!(zone_in_client_id("x;aerostream_az=b;y"), Some("b"));
    assert_eq!(zone_in_client_id("orders aerostream_az=c"), Some("c"));
    assert_eq!(zone_in_client_id("orders"), None);
    assert_eq!(zone_in_client_id("orders,aerostream_az="), None);
    assert_eq!(zone_in_client_id("aerostream_az=,x"), None);
}

#[test]
fn bytes_are_classed_by_the_client_zone_against_the_agent_zone() {
    let c = ClientZoneCounters::default();
    c.count(Some("a"), Some("b"), 100, 10); // another zone
    c.count(Some("a"), Some("a"), 50, 5); // the agent's zone
    c.count(Some("a"), None, 7, 3); // the client named none
    c.count(None, Some("b"), 2, 0); // the agent has no --rack
    assert_eq!(
        c.snapshot(),
        ClientUsage {
            cross_zone_sent_bytes: 10,
            cross_zone_received_bytes: 100,
            same_zone_bytes: 55,
            unknown_zone_bytes: 12,
        }
    );
}

#[test]
fn a_connection_keeps_the_zone_its_client_named_last() {
    let z = ClientZone::default();
    assert_eq!(z.get(), None);
    z.note("a");
    z.note("b");
    assert_eq!(z.get().as_deref(), Some("b"));
}
