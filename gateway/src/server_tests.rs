use super::*;

#[test]
fn a_port_another_listener_holds_is_refused_not_shared() {
    // another process's agent, as the kernel sees it: SO_REUSEPORT, same user
    let other = reuseport_listener("127.0.0.1:0".parse().expect("address")).expect("bind");
    let taken = other.local_addr().expect("bound");
    let err = first_reuseport_listener(taken).expect_err("the port is taken");
    assert_eq!(err.kind(), std::io::ErrorKind::AddrInUse, "{err}");
    assert!(err.to_string().contains(&taken.to_string()), "{err}");

    // this agent's own shards still share the port it took
    let first = first_reuseport_listener("127.0.0.1:0".parse().expect("address")).expect("bind");
    let addr = first.local_addr().expect("bound");
    reuseport_listener(addr).expect("a second shard joins the first");
}
